;; Sleeps 600 s in one poll_oneoff call (a relative clock subscription):
;; a task blocked in the kernel, for kill latency and idle footprint.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    ;; subscription at 0 (48 bytes): userdata u64, tag u8 = 0 (clock),
    ;; clock id u32 at 16 = 1 (monotonic), timeout u64 at 24, precision at 32,
    ;; flags u16 at 40 = 0 (relative). Event written at 64, count at 128.
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 600000000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))))

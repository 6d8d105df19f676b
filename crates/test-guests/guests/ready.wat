;; Prints "ready", then sleeps 600 s in poll_oneoff: one copy of a resident
;; program, for footprint and start-up over many copies.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 256) "ready\n")
  (func (export "_start")
    (i32.store (i32.const 272) (i32.const 256))
    (i32.store (i32.const 276) (i32.const 6))
    (drop (call $write (i32.const 1) (i32.const 272) (i32.const 1) (i32.const 280)))
    ;; subscription at 0: clock (tag 0), monotonic (id 1), 600 s, relative
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 600000000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))))

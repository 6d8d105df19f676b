;; Grows its memory to 64 MiB, touches every page, prints "ready", then
;; spins: a running task holding memory, for kill-to-reclaim latency.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "ready\n")
  (func (export "_start")
    (drop (memory.grow (i32.const 1023)))
    (memory.fill (i32.const 64) (i32.const 1) (i32.const 67108800))
    ;; iovec at 16: base 0, len 6; bytes written at 24
    (i32.store (i32.const 16) (i32.const 0))
    (i32.store (i32.const 20) (i32.const 6))
    (drop (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))
    (loop $l (br $l))))

;; Sleeps 300 ms (holding no worker thread while it does), then says so.
(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 200) "woke up after 300 ms\n")
  (func (export "_start")
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 300000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))
    (i32.store (i32.const 144) (i32.const 200))
    (i32.store (i32.const 148) (i32.const 21))
    (drop (call $fd_write (i32.const 1) (i32.const 144) (i32.const 1) (i32.const 152)))))

;; Host calls see memory the task grew after an earlier host call: copies
;; 8 bytes into a memory object from its first page (a host call that
;; learns the memory's size), grows the memory by a page, then copies 8
;; bytes from the new page into the object, reads them back into the
;; first page, and prints "grown" from the new page with fd_write.
;; Exit codes: 0 all well, 2 the copy from the new page was refused,
;; 3 the bytes read back differ, 4 the print from the new page failed.
(module
  (import "warden" "mem_create" (func $create (param i64) (result i32)))
  (import "warden" "mem_write" (func $write (param i32 i64 i32 i32) (result i64)))
  (import "warden" "mem_read" (func $read (param i32 i64 i32 i32) (result i64)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (local $h i32)
    (local.set $h (call $create (i64.const 16)))
    (if (i32.lt_s (local.get $h) (i32.const 0)) (then unreachable))
    (if (i64.ne (call $write (local.get $h) (i64.const 0) (i32.const 0) (i32.const 8))
                (i64.const 8))
      (then unreachable))
    (if (i32.ne (memory.grow (i32.const 1)) (i32.const 1)) (then unreachable))
    ;; The new page starts at 65536.
    (i64.store (i32.const 65552) (i64.const 0x1122334455667788))
    (if (i64.ne (call $write (local.get $h) (i64.const 8) (i32.const 65552) (i32.const 8))
                (i64.const 8))
      (then (call $exit (i32.const 2))))
    (drop (call $read (local.get $h) (i64.const 8) (i32.const 32) (i32.const 8)))
    (if (i64.ne (i64.load (i32.const 32)) (i64.const 0x1122334455667788))
      (then (call $exit (i32.const 3))))
    ;; "grown\n" at 65600, its iovec at 65568, the count written at 65576.
    (i64.store (i32.const 65600) (i64.const 0x0a6e776f7267))
    (i32.store (i32.const 65568) (i32.const 65600))
    (i32.store (i32.const 65572) (i32.const 6))
    (if (call $fd_write (i32.const 1) (i32.const 65568) (i32.const 1) (i32.const 65576))
      (then (call $exit (i32.const 4))))
    (call $exit (i32.const 0))))

;; Moves its stdout onto descriptor 2 (fd_renumber(1, 2), which closes
;; its stderr), then writes "moved" to 2, which must reach its stdout,
;; and tries 1, which must answer EBADF (8): exits with that answer.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_renumber"
    (func $renumber (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 256) "moved\n")
  (func (export "_start")
    (i32.store (i32.const 16) (i32.const 256))
    (i32.store (i32.const 20) (i32.const 6))
    (if (call $renumber (i32.const 1) (i32.const 2)) (then unreachable))
    (if (call $write (i32.const 2) (i32.const 16) (i32.const 1) (i32.const 24))
      (then unreachable))
    (call $exit (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))))

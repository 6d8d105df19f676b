;; Asks for 4 GiB of linear memory at start (65,536 pages).
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 65536)
  (func (export "_start") (call $exit (i32.const 0))))

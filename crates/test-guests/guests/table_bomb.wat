;; Grows its table by a million entries at a time until refused, then
;; exits 0 (refused, as it should be) — or traps if never refused.
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "_start")
    (loop $grow
      (br_if $grow
        (i32.ne (table.grow $t (ref.null func) (i32.const 1000000)) (i32.const -1))))
    (call $exit (i32.const 0))))

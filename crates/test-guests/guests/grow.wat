;; Grows its memory one page at a time until memory.grow returns -1, then
;; prints the number of pages it has and exits 0 (it keeps running after
;; the refusal). No table, so the budget is memory alone.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; digits are written backwards ending at offset 100; iovec at 0.
  (func $print_u32 (param $n i32)
    (local $p i32)
    (local.set $p (i32.const 100))
    (i32.store8 (local.get $p) (i32.const 10))
    (loop $d
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $d (local.get $n)))
    (i32.store (i32.const 0) (local.get $p))
    (i32.store (i32.const 4) (i32.sub (i32.const 101) (local.get $p)))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func (export "_start")
    (block $done
      (loop $grow
        (br_if $done (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow)))
    (call $print_u32 (memory.size))))

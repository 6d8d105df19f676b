;; Counts the primes below 2,000,000 with a sieve and prints the count
;; (148933): a CPU-bound task that is preempted and shares the workers.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 32)
  (data (i32.const 16) "primes below 2000000: ")
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
    (local $i i32) (local $j i32) (local $c i32) (local $n i32) (local $base i32)
    (local.set $n (i32.const 2000000))
    (local.set $base (i32.const 65536))
    (memory.fill (local.get $base) (i32.const 1) (local.get $n))
    (local.set $i (i32.const 2))
    (loop $outer
      (if (i32.load8_u (i32.add (local.get $base) (local.get $i)))
        (then
          (local.set $c (i32.add (local.get $c) (i32.const 1)))
          (local.set $j (i32.mul (local.get $i) (local.get $i)))
          (block $done
            (br_if $done (i32.gt_u (local.get $i) (i32.const 46340)))
            (loop $inner
              (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
              (i32.store8 (i32.add (local.get $base) (local.get $j)) (i32.const 0))
              (local.set $j (i32.add (local.get $j) (local.get $i)))
              (br $inner)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (local.get $n))))
    ;; message at 16 (22 bytes), then the number
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 22))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (call $print_u32 (local.get $c))))

;; Sieve of Eratosthenes over 0..4,000,000 (one byte per number), 10 rounds.
;; Loop-heavy: epoch checks sit only at loop headers.
(module
  (memory (export "memory") 62)
  (global $count (mut i32) (i32.const 0))
  (func $sieve (result i32)
    (local $i i32) (local $j i32) (local $n i32) (local $c i32)
    (local.set $n (i32.const 4000000))
    (memory.fill (i32.const 0) (i32.const 1) (local.get $n))
    (local.set $i (i32.const 2))
    (block $outer_done
      (loop $outer
        (br_if $outer_done (i32.gt_u (i32.mul (local.get $i) (local.get $i)) (local.get $n)))
        (if (i32.load8_u (local.get $i))
          (then
            (local.set $j (i32.mul (local.get $i) (local.get $i)))
            (block $inner_done
              (loop $inner
                (br_if $inner_done (i32.ge_u (local.get $j) (local.get $n)))
                (i32.store8 (local.get $j) (i32.const 0))
                (local.set $j (i32.add (local.get $j) (local.get $i)))
                (br $inner)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (local.set $i (i32.const 2))
    (block $count_done
      (loop $count
        (br_if $count_done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.add (local.get $c) (i32.load8_u (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $count)))
    (local.get $c))
  (func (export "_start")
    (local $r i32)
    (loop $rounds
      (global.set $count (call $sieve))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br_if $rounds (i32.lt_u (local.get $r) (i32.const 10)))))
  (func (export "result") (result i32) (global.get $count)))

;; Recursive fib(N), N from the exit-code-free path: fib(30), result dropped
;; into a global so the work cannot be optimised away. Call-heavy: the worst
;; case for epoch checks, which sit at every function entry.
(module
  (memory (export "memory") 1)
  (global $out (mut i32) (i32.const 0))
  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func (export "_start") (global.set $out (call $fib (i32.const 30))))
  (func (export "result") (result i32) (global.get $out)))

;; Unbounded recursion: a stack overflow.
(module
  (memory (export "memory") 1)
  (func $down (param i32) (result i32)
    (i32.add (call $down (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
  (func (export "_start") (drop (call $down (i32.const 0)))))

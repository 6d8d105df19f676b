;; Loads far outside its one page of memory.
(module
  (memory (export "memory") 1)
  (func (export "_start") (drop (i32.load (i32.const 1000000)))))

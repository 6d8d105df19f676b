;; Grows its memory a page at a time, forever: it asks for more than its
;; budget allows.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $grow
      (drop (memory.grow (i32.const 1)))
      (br $grow))))

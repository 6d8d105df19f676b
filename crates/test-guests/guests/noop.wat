;; The smallest WASI command: _start returns at once.
(module
  (memory (export "memory") 1)
  (func (export "_start")))

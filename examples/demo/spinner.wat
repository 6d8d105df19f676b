;; Spins forever: only its CPU limit stops it.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $spin (br $spin))))

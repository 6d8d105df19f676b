;; Spins forever: for CPU limits, preemption and kills of running tasks.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $l (br $l))))

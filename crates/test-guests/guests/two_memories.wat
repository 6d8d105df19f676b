;; Two linear memories: more than a task may have.
(module
  (memory 1)
  (memory 1)
  (func (export "_start")))

;; A hostile wasi:cli/command component (hand-written): the start function
;; of its core instance loops for ever, so it never finishes instantiating.
;; Its task must still be killable, and its CPU limit must hold.
(component
  (core module $m
    (func $start (loop $l (br $l)))
    (func (export "run") (result i32) i32.const 0)
    (start $start))
  (core instance $i (instantiate $m))
  (func $run (result (result)) (canon lift (core func $i "run")))
  (instance $cli (export "run" (func $run)))
  (export "wasi:cli/run@0.2.0" (instance $cli)))

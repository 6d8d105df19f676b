;; A hostile wasi:cli/command component (hand-written): it asks the host
;; for three million pollables (wasi:clocks' subscribe-duration) and drops
;; none, so every one is a host object its handle keeps alive. Its task
;; must be stopped at its resource cap, not grow the host.
(component
  (import "wasi:io/poll@0.2.0" (instance $poll
    (export "pollable" (type (sub resource)))))
  (alias export $poll "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (export "pollable" (type $p (eq $pollable)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $p))))))
  (core func $sub (canon lower (func $clock "subscribe-duration")))
  (core module $m
    (import "c" "sub" (func $sub (param i64) (result i32)))
    (func (export "run") (result i32)
      (local $i i32)
      (loop $l
        (drop (call $sub (i64.const 1000000000)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $l (i32.lt_u (local.get $i) (i32.const 3000000))))
      i32.const 0))
  (core instance $c (export "sub" (func $sub)))
  (core instance $i (instantiate $m (with "c" (instance $c))))
  (func $run (result (result)) (canon lift (core func $i "run")))
  (instance $cli (export "run" (func $run)))
  (export "wasi:cli/run@0.2.0" (instance $cli)))

;; A library module: no _start.
(module (func (export "helper")))

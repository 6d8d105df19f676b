;; Imports a function Warden does not provide.
(module
  (import "env" "launch_missiles" (func))
  (func (export "_start")))

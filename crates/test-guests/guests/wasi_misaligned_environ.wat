;; Asks WASI for its environment's sizes with a misaligned pointer: a
;; trap, as WASI preview 1 says.
(module
  (import "wasi_snapshot_preview1" "environ_sizes_get"
    (func $sizes (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $sizes (i32.const 2) (i32.const 8)))))

;; Asks WASI for its arguments' sizes (answered), then for the arguments
;; themselves with the pointer array far outside its one page: a trap,
;; as WASI preview 1 says a wild pointer is.
(module
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get"
    (func $get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (if (call $sizes (i32.const 0) (i32.const 4)) (then unreachable))
    ;; argv[0] is the module's file name: at least one argument.
    (if (i32.eqz (i32.load (i32.const 0))) (then unreachable))
    (drop (call $get (i32.const 0xfffffff0) (i32.const 64)))))

;; Prints "hello from <argv[0]>:" followed by each argument on its own line.
(module
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get"
    (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "hello from ")
  (data (i32.const 32) "\n")
  ;; write(ptr, len) to stdout through an iovec at 0.
  (func $write (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func $strlen (param $p i32) (result i32)
    (local $n i32)
    (block $end
      (loop $l
        (br_if $end (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $l)))
    (local.get $n))
  (func (export "_start")
    (local $argc i32) (local $i i32) (local $arg i32)
    ;; argc at 40, buffer size at 44; argv pointers at 1024, strings at 4096.
    (drop (call $args_sizes_get (i32.const 40) (i32.const 44)))
    (local.set $argc (i32.load (i32.const 40)))
    (if (i32.gt_u (local.get $argc) (i32.const 64)) (then (local.set $argc (i32.const 64))))
    (drop (call $args_get (i32.const 1024) (i32.const 4096)))
    (call $write (i32.const 16) (i32.const 11))
    (loop $each
      (local.set $arg (i32.load (i32.add (i32.const 1024) (i32.mul (local.get $i) (i32.const 4)))))
      (call $write (local.get $arg) (call $strlen (local.get $arg)))
      (call $write (i32.const 32) (i32.const 1))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $each (i32.lt_u (local.get $i) (local.get $argc))))))

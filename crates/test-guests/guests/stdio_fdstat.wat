;; Compares Warden's answer to fd_fdstat_get on stdout and stderr with
;; Wasmtime's for the same descriptors: asks on 1 and 2 while they are
;; in place, then moves stderr onto 1 (fd_renumber(2, 1), after which
;; Wasmtime's table answers) and asks on 1 again. Every answer lands on
;; bytes filled with 0xAA first, so padding written or left differs too.
;; Exits 0 if all three answers are byte for byte the same, 10-12 if a
;; call failed, 20 or 21 if an answer differs.
(module
  (import "wasi_snapshot_preview1" "fd_fdstat_get"
    (func $fdstat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_renumber"
    (func $renumber (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  ;; Whether the 24 bytes at $a and $b are the same.
  (func $same (param $a i32) (param $b i32) (result i32)
    (i32.and
      (i32.and
        (i64.eq (i64.load (local.get $a)) (i64.load (local.get $b)))
        (i64.eq (i64.load offset=8 (local.get $a)) (i64.load offset=8 (local.get $b))))
      (i64.eq (i64.load offset=16 (local.get $a)) (i64.load offset=16 (local.get $b)))))
  (func (export "_start")
    (memory.fill (i32.const 64) (i32.const 0xaa) (i32.const 96))
    (if (call $fdstat (i32.const 1) (i32.const 64)) (then (call $exit (i32.const 10))))
    (if (call $fdstat (i32.const 2) (i32.const 96)) (then (call $exit (i32.const 11))))
    (if (call $renumber (i32.const 2) (i32.const 1)) (then unreachable))
    (if (call $fdstat (i32.const 1) (i32.const 128)) (then (call $exit (i32.const 12))))
    (if (i32.eqz (call $same (i32.const 96) (i32.const 128))) (then (call $exit (i32.const 20))))
    (if (i32.eqz (call $same (i32.const 64) (i32.const 128))) (then (call $exit (i32.const 21))))
    (call $exit (i32.const 0))))

//! A table grown a million entries at a time, then a thousand at a time:
//! growth is charged to the task's memory budget and refused at it
//! (`table.grow` returns -1), well before the 100,000 elements the
//! instance pool allows a table.

use super::*;

/// Elements added per growth after the first, refused, million.
const STEP: u64 = 1000;

/// The guest: grows its table by a million (which must be refused), then
/// by [`STEP`] until refused, prints the table's size and exits 0 (exit 2
/// if the million was granted).
fn guest() -> String {
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "_start")
    (local $n i32) (local $at i32)
    (if (i32.ne (table.grow $t (ref.null func) (i32.const 1000000)) (i32.const -1))
      (then (call $exit (i32.const 2))))
    (loop $grow
      (br_if $grow (i32.ne (table.grow $t (ref.null func) (i32.const {STEP})) (i32.const -1))))
    ;; The size in decimal, written backwards from byte 63 ("\n").
    (local.set $n (table.size $t))
    (local.set $at (i32.const 63))
    (i32.store8 (i32.const 63) (i32.const 10))
    (loop $digit
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $digit (local.get $n)))
    (i32.store (i32.const 0) (local.get $at))
    (i32.store (i32.const 4) (i32.sub (i32.const 64) (local.get $at)))
    (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (call $exit (i32.const 0))))
"#
    )
}

#[test]
fn table_growth_is_refused_at_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("table_bomb.wat");
    std::fs::write(&path, guest()).unwrap();
    // Room for some 24,000 elements beside the one page of memory.
    let limit: u64 = 256 << 10;
    let bomb = task(
        "bomb",
        path.to_str().unwrap(),
        &[],
        "memory_limit = '256KiB'",
    );
    let run = attack("", &bomb);
    let r = run.report("bomb");
    assert_eq!(
        (&r["status"], &r["exit_code"]),
        (&"exited".into(), &0.into()),
        "{r}"
    );
    let size: u64 = run.out("bomb").trim().parse().unwrap();
    let peak = r["peak_memory_bytes"].as_u64().unwrap();
    // Refused at the budget: within it, and the next step did not fit.
    assert!(
        size * warden::TABLE_ELEMENT_BYTES + (64 << 10) <= limit,
        "{size} elements"
    );
    assert!(
        peak <= limit && peak + STEP * warden::TABLE_ELEMENT_BYTES > limit,
        "peak {peak} of {limit}, {size} elements: {r}"
    );
}

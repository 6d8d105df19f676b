use crate::util::*;
use std::time::{Duration, Instant};
use warden::Output;

/// 2,000 tasks in sequence, each touching 4 MiB: the memory of each returns
/// when it dies, so the process stays far below the 8 GiB they touched.
/// The runtime runs in a process of its own (this test binary, running
/// only [`sequence_in_its_own_process`]), whose RSS no other test moves.
#[test]
fn memory_returns_after_death() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "reclaim::sequence_in_its_own_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("RSS grew by"),
        "the sequence did not run: {text}"
    );
}

/// Set for the process that runs [`sequence_in_its_own_process`].
const ALONE: &str = "WARDEN_TEST_RECLAIM_ALONE";

/// The body of [`memory_returns_after_death`]; does nothing unless run
/// by it.
#[test]
fn sequence_in_its_own_process() {
    if std::env::var_os(ALONE).is_none() {
        return;
    }
    let rt = runtime(1);
    let mut s = warden::TaskSpec::new("touch", guests::TOUCH);
    s.stdio.stdout = Output::Null;
    s.args = vec!["4".into()];
    let before = rss_bytes();
    let mut max_rss = before;
    for i in 0..2000 {
        s.name = format!("touch.{i}");
        let r = run_one(&rt, &s, Duration::from_secs(20));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        assert!(r.peak_memory_bytes >= 4 << 20);
        if i % 50 == 0 {
            max_rss = max_rss.max(rss_bytes());
        }
    }
    let grown = max_rss.saturating_sub(before);
    println!("RSS grew by {} MiB", grown >> 20);
    // Touched in total: 2,000 x 4 MiB = 8,000 MiB.
    assert!(grown < 512 << 20, "RSS grew by {} MiB", grown >> 20);
}

/// A running task holding 64 MiB is killed on a system with nothing else
/// dying: its pages leave the process's resident set at once, not with some
/// later batch of freed pool slots.
#[test]
fn killed_tasks_memory_leaves_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = \"hold\"\nmodule = {:?}\n\n[[task]]\nname = \"keeper\"\nmodule = {:?}\n",
            guests::HOLD,
            guests::SLEEP
        ),
    );
    let system = Launch::new(&m).args(["--no-cache"]).start();
    let pid = system.pid().to_string();
    let t = Instant::now();
    let mut held = rss_of(&pid);
    while held < 80 << 20 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "RSS only {} MiB",
            held >> 20
        );
        std::thread::sleep(Duration::from_millis(20));
        held = rss_of(&pid);
    }
    std::thread::sleep(Duration::from_millis(100));
    held = rss_of(&pid);
    let out = warden()
        .args(["kill", "--control", system.control(), "hold"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let t = Instant::now();
    while rss_of(&pid) > held - (56 << 20) {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "RSS {} MiB two seconds after the kill, {} MiB before",
            rss_of(&pid) >> 20,
            held >> 20
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A guest that writes 16 pages (64 KiB) of its memory, then sleeps in
/// `poll_oneoff` until killed.
const WRITE_AND_SLEEP: &str = r#"(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start") (local $page i32)
    (loop $pages
      (i32.store (i32.mul (local.get $page) (i32.const 4096)) (i32.const 1))
      (local.set $page (i32.add (local.get $page) (i32.const 1)))
      (br_if $pages (i32.lt_u (local.get $page) (i32.const 16))))
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 600000000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))))"#;

/// 400 tasks, alive at once in 400 slots, each having written 64 KiB,
/// are killed together: their slots keep some pages warm for the next
/// tasks, but not 400 tasks' worth (25 MiB) — the runtime bounds what
/// free slots keep resident (8 MiB).
#[test]
fn warm_slots_are_bounded_after_mass_death() {
    const TASKS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("write_and_sleep.wasm");
    std::fs::write(&module, wat::parse_str(WRITE_AND_SLEEP).unwrap()).unwrap();
    let rt = runtime(2);
    let mut s = warden::TaskSpec::new("w", module.to_str().unwrap());
    s.stdio.stdout = Output::Null;
    let ids: Vec<_> = (0..TASKS)
        .map(|i| {
            s.name = format!("w.{i}");
            rt.spawn(&s).expect("spawn")
        })
        .collect();
    let t = Instant::now();
    while rt
        .task_views()
        .iter()
        .filter(|v| v.state == "blocked")
        .count()
        < TASKS
    {
        assert!(t.elapsed() < Duration::from_secs(60), "not all tasks slept");
        std::thread::sleep(Duration::from_millis(10));
    }
    for &id in &ids {
        rt.kill(id, "mass death").unwrap();
    }
    for &id in &ids {
        wait(&rt, id, Duration::from_secs(20));
    }
    let warm = rt.root_memory().warm_slot_bytes;
    println!("warm after {TASKS} deaths: {} KiB", warm >> 10);
    assert!(
        warm <= 8 << 20,
        "free slots keep {} KiB resident",
        warm >> 10
    );
    assert!(
        warm >= 4 << 20,
        "free slots keep only {} KiB warm",
        warm >> 10
    );
}

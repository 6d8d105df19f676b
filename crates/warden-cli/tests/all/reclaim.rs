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

use crate::util::*;
use std::time::Duration;
use warden::MemoryPolicy;

const PAGE: u64 = 64 * 1024;

/// A guest growing page by page gets exactly limit / 64 KiB pages, and keeps
/// running after `memory.grow` returns -1.
#[test]
fn memory_limit_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    for (limit, pages) in [
        (PAGE, 1),
        (16 * PAGE, 16),
        (16 * PAGE + PAGE / 2, 16),
        (100 * PAGE, 100),
    ] {
        let name = format!("grow{limit}");
        let mut s = spec(dir.path(), &name, guests::GROW);
        s.limits.memory_limit = Some(limit);
        let r = run_one(&rt, &s, Duration::from_secs(20));
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}");
        assert_eq!(
            stdout_of(dir.path(), &name).trim(),
            pages.to_string(),
            "limit {limit}"
        );
        assert_eq!(r.peak_memory_bytes, pages * PAGE);
        assert!(r.memory_denials >= 1);
    }
}

/// C's malloc returns NULL at the limit and the program carries on.
#[test]
fn malloc_returns_null_and_task_continues() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "m", guests::MALLOC_LIMIT);
    s.limits.memory_limit = Some(8 << 20);
    let r = run_one(&rt, &s, Duration::from_secs(20));
    let out = stdout_of(dir.path(), "m");
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?} {out}");
    assert!(out.contains("before malloc returned NULL"), "{out}");
    assert!(out.contains("still running: malloc works again"), "{out}");
    let blocks: u64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        blocks > 100 && blocks < 128,
        "{blocks} blocks of 64 KiB in 8 MiB"
    );
    assert!(r.peak_memory_bytes <= 8 << 20);
}

#[test]
fn kill_policy_ends_the_task_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "grow", guests::GROW);
    s.limits.memory_limit = Some(4 * PAGE);
    s.limits.on_memory_limit = MemoryPolicy::Kill;
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(r.status, "killed", "{r:?}");
    assert_eq!(r.exit_code, None);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .contains("memory limit exceeded"),
        "{r:?}"
    );
    assert_eq!(stdout_of(dir.path(), "grow"), "", "killed before printing");
    assert_eq!(r.peak_memory_bytes, 4 * PAGE);
}

/// A module whose initial memory is over the limit never runs.
#[test]
fn initial_memory_over_limit_fails_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "sieve", guests::SIEVE); // 62 initial pages
    s.limits.memory_limit = Some(10 * PAGE);
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(r.status, "trapped", "{r:?}");
    assert!(
        r.reason.as_deref().unwrap().starts_with("cannot start"),
        "{r:?}"
    );
}

/// Host calls keep a task's memory length from one call to the next
/// until the memory grows: one made after a `memory.grow` reaches the new
/// page (a copy into a memory object and a print from it).
#[test]
fn host_calls_see_memory_grown_since_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let s = spec(dir.path(), "grow", guests::GROW_THEN_COPY);
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "grow"), "grown\n");
}

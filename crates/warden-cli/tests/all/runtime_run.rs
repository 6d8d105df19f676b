//! `Runtime::run`: spawn and wait in one call, the task run on the
//! caller's thread while a worker is idle; and `Runtime::wait`, which
//! runs a task still queued the same way.

use crate::util::*;
use std::time::Duration;
use warden::{Runtime, RuntimeConfig, TaskReport, TaskSpec};

/// `rt.run(spec)` on a thread of its own, failing the test (instead of
/// hanging) after `limit`.
fn run_within(rt: &Runtime, spec: &TaskSpec, limit: Duration) -> TaskReport {
    let (rt, spec) = (rt.clone(), spec.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(rt.run(&spec).map_err(|e| e.to_string()));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("run still waiting after {limit:?}"))
        .expect("run")
}

/// A short task ends inside `run`, on the calling thread, once the worker
/// idles; its report comes back even from a runtime that keeps none.
#[test]
fn a_short_task_runs_on_the_caller_and_its_report_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 16,
        max_reports: 0,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut s = spec(dir.path(), "hello", guests::HELLO);
    s.args = vec!["exit=3".into()];
    // The worker counts as idle from the moment it finds no work; until
    // then (a worker thread not yet started, one still ending the last
    // task) a run goes to the queue, as a spawn would.
    let mut here = false;
    for _ in 0..1000 {
        let before = rt.stats().host_polls;
        let r = rt.run(&s).expect("run");
        assert_eq!((r.status, r.exit_code), ("exited", Some(3)), "{r:?}");
        if rt.stats().host_polls > before {
            here = true;
            break;
        }
    }
    assert!(here, "no run ran its task on the calling thread");
    assert!(stdout_of(dir.path(), "hello").contains("hello from hello.wasm"));
    assert!(rt.reports().is_empty(), "the runtime keeps no reports");
    let trapped = rt
        .run(&spec(dir.path(), "trap", guests::UNREACHABLE))
        .unwrap();
    assert_eq!(trapped.status, "trapped", "{trapped:?}");
}

/// A task spawned and waited for at once, while the worker idles, runs
/// on the waiting thread; its report is the one a worker's run gives.
#[test]
fn a_task_waited_for_at_once_runs_on_the_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 16,
        // The worker sleeps as soon as it finds no work, so the waiter
        // usually finds the task still queued.
        idle_spin: Duration::ZERO,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut s = spec(dir.path(), "hello", guests::HELLO);
    s.args = vec!["exit=3".into()];
    let mut here = 0;
    for _ in 0..200 {
        let before = rt.stats().host_polls;
        let id = rt.spawn(&s).expect("spawn");
        let r = rt.wait(id).expect("wait");
        assert_eq!((r.status, r.exit_code), ("exited", Some(3)), "{r:?}");
        here += usize::from(rt.stats().host_polls > before);
    }
    assert!(here > 0, "no wait ran its task on the waiting thread");
    assert!(stdout_of(dir.path(), "hello").contains("hello from hello.wasm"));
}

/// A task that blocks is left to the workers, and `run` still returns its
/// end.
#[test]
fn a_task_that_blocks_ends_on_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let r = run_within(
        &rt,
        &spec(dir.path(), "sleeps", guests::CLOCK_SLEEP),
        Duration::from_secs(60),
    );
    let out = stdout_of(dir.path(), "sleeps");
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}\n{out}");
    assert!(out.contains("sleeps ok"), "{out}");
}

/// Slices run on the caller's thread count against the task's CPU limit
/// like any others: a spinner is killed at it.
#[test]
fn the_cpu_limit_holds_for_a_task_run_by_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "spin", guests::SPIN);
    s.limits.cpu_limit = Some(Duration::from_millis(100));
    let r = run_within(&rt, &s, Duration::from_secs(60));
    assert_eq!(r.status, "killed", "{r:?}");
    assert!(
        r.reason.as_deref().unwrap().contains("cpu limit exceeded"),
        "{r:?}"
    );
    assert!(r.cpu_ms >= 100.0, "{}", r.cpu_ms);
}

/// A spawn that fails fails `run` alike, with nothing left behind.
#[test]
fn a_bad_spec_is_an_error() {
    let rt = runtime(1);
    let missing = TaskSpec::new("missing", "/nonexistent/module.wasm");
    assert!(rt.run(&missing).is_err());
    assert_eq!(rt.stats().live, 0);
}

/// Runs from two threads while a third kills, suspends and resumes
/// whatever is live: every run returns its task's end (it exited, or was
/// killed), none hangs, and nothing is left live.
#[test]
fn runs_race_kills_and_suspends() {
    race_kills_and_suspends(|rt, s| rt.run(s));
}

/// The same race for tasks spawned and then waited for (which a waiter
/// may run itself).
#[test]
fn waits_race_kills_and_suspends() {
    race_kills_and_suspends(|rt, s| rt.spawn(s).and_then(|id| rt.wait(id)));
}

type Start = fn(&Runtime, &TaskSpec) -> Result<TaskReport, warden::Error>;

fn race_kills_and_suspends(start: Start) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    for r in 0..2 {
        let (rt, tx) = (rt.clone(), tx.clone());
        let mut s = spec(dir.path(), &format!("run{r}"), guests::HELLO);
        s.stdio.stdout = warden::Output::Null;
        std::thread::spawn(move || {
            let mut ends = (0, 0);
            for _ in 0..1000 {
                match start(&rt, &s).map(|r| r.status) {
                    Ok("exited") => ends.0 += 1,
                    Ok("killed") => ends.1 += 1,
                    other => panic!("{other:?}"),
                }
            }
            tx.send(ends).unwrap();
        });
    }
    let meddler = {
        let (rt, stop) = (rt.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for t in rt.live_tasks() {
                    n += 1;
                    if n.is_multiple_of(3) {
                        let _ = rt.kill(t.id, "meddled");
                    } else {
                        let _ = rt.suspend(t.id);
                        let _ = rt.resume(t.id);
                    }
                }
                std::thread::yield_now();
            }
            n
        })
    };
    let mut total = (0, 0);
    for _ in 0..2 {
        let ends = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("a run hung or panicked");
        total = (total.0 + ends.0, total.1 + ends.1);
    }
    stop.store(true, Ordering::Relaxed);
    let meddled = meddler.join().unwrap();
    assert_eq!(total.0 + total.1, 2000);
    assert!(meddled > 0, "the meddler never saw a live task");
    assert_eq!(rt.stats().live, 0);
}

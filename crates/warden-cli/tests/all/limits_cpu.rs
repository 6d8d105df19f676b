use crate::util::*;
use std::time::Duration;
use warden::TaskReport;

#[test]
fn cpu_limit_kills() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "spin", guests::SPIN);
    s.limits.cpu_limit = Some(Duration::from_millis(200));
    let r = run_one(&rt, &s, Duration::from_secs(30));
    // Enforced within a tick or two of the limit.
    killed_at_cpu_limit(&r, 200.0, 260.0);
}

/// `r` ended killed at its CPU limit, having used `least..most` ms.
fn killed_at_cpu_limit(r: &TaskReport, least: f64, most: f64) {
    assert_eq!(r.status, "killed", "{r:?}");
    assert!(
        r.reason.as_deref().unwrap().contains("cpu limit exceeded"),
        "{r:?}"
    );
    assert!(r.cpu_ms >= least && r.cpu_ms < most, "cpu_ms {}", r.cpu_ms);
}

/// Two spinning tasks sharing one worker get CPU within ±10% of each other.
/// Judged on their final reports: a running task's CPU is charged when its
/// slice ends, so a snapshot misses the slice under way, which on a busy
/// machine (the timer thread late) can be long. Round robin gives turns,
/// and what a turn holds is up to the host (a busy one takes the worker
/// away in the middle of some): so the tasks run until they have had
/// 4 s of CPU between them (4 s of the clock on an idle machine, 500
/// turns of 4 ms each; more turns on a busy one, whose turns are
/// shorter), over which the turns' differences even out.
#[test]
fn round_robin_is_fair_on_one_worker() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let a = rt.spawn(&spec(dir.path(), "a", guests::SPIN)).unwrap();
    let b = rt.spawn(&spec(dir.path(), "b", guests::SPIN)).unwrap();
    let t = std::time::Instant::now();
    let total = || -> f64 {
        let live = rt.live_tasks();
        live.iter()
            .filter(|v| v.id == a || v.id == b)
            .map(|v| v.cpu_ms)
            .sum()
    };
    while total() < 4000.0 {
        assert!(t.elapsed() < Duration::from_secs(90), "{} ms", total());
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.kill(a, "test over").unwrap();
    rt.kill(b, "test over").unwrap();
    let (ra, rb) = (
        wait(&rt, a, Duration::from_secs(5)),
        wait(&rt, b, Duration::from_secs(5)),
    );
    assert_eq!((ra.status, rb.status), ("killed", "killed"));
    let (ca, cb) = (ra.cpu_ms, rb.cpu_ms);
    let ratio = ca / cb;
    assert!((0.9..=1.1).contains(&ratio), "cpu a {ca} ms, b {cb} ms");
}

/// A C program doing long computations is preempted and still finishes.
#[test]
fn preempted_c_guest_finishes_beside_a_spinner() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let spin = rt.spawn(&spec(dir.path(), "spin", guests::SPIN)).unwrap();
    let mut s = spec(dir.path(), "busy", guests::BUSY_PRINT);
    s.args = vec!["3".into()];
    let r = run_one(&rt, &s, Duration::from_secs(60));
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "busy").lines().count(), 3);
    rt.kill(spin, "done").unwrap();
}

/// One `random_get` filling 512 MiB (several hundred milliseconds of
/// work in the host) is cut off at the task's CPU limit, as guest code
/// is: the call lets its worker go between mebibytes.
#[test]
fn cpu_limit_cuts_a_long_host_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "fill", guests::RANDOM);
    s.args = vec!["fill".into(), "512".into()];
    s.limits.cpu_limit = Some(Duration::from_millis(100));
    let r = run_one(&rt, &s, Duration::from_secs(60));
    killed_at_cpu_limit(&r, 100.0, 160.0);
}

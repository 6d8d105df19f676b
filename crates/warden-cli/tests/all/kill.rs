use crate::util::*;
use std::time::{Duration, Instant};

/// A task blocked in a 600 s sleep is gone as soon as `kill` returns.
#[test]
fn kill_of_blocked_task_is_immediate() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let id = rt
        .spawn(&spec(dir.path(), "sleeper", guests::SLEEP))
        .unwrap();
    // It has reached its sleep.
    wait_blocked(&rt, id);
    rt.kill(id, "operator").unwrap();
    let r = rt
        .wait_timeout(id, Some(Duration::ZERO))
        .unwrap()
        .expect("finished by the time kill returned");
    assert_eq!(
        (r.status, r.reason.as_deref()),
        ("killed", Some("operator"))
    );
    assert!(r.end_ms - r.start_ms < 20_000.0);
}

/// A spinning task stops at its next epoch check after `kill`: it runs
/// on for at most about a millisecond of CPU time (judged by the CPU the
/// task was charged, not by the wall clock, so a busy machine does not
/// matter). Its charge before the kill may lag by up to one slice.
#[test]
fn kill_of_running_task_stops_it_at_next_tick() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let id = rt.spawn(&spec(dir.path(), "spin", guests::SPIN)).unwrap();
    wait_ran(&rt, id, 20.0);
    let before = cpu_ms(&rt, id);
    rt.kill(id, "enough").unwrap();
    let r = wait(&rt, id, Duration::from_secs(20));
    assert_eq!((r.status, r.reason.as_deref()), ("killed", Some("enough")));
    let after_kill = r.cpu_ms - before;
    assert!(
        after_kill < 4.0 + 2.0,
        "ran {after_kill:.2} ms of CPU after the kill (one 4 ms slice of lag allowed)"
    );
    assert!(
        rt.kill(id, "again").is_err(),
        "a finished task is not killable"
    );
}

fn cpu_ms(rt: &warden::Runtime, id: warden::TaskId) -> f64 {
    rt.task_views()
        .iter()
        .find(|v| v.id == id)
        .map_or(0.0, |v| v.cpu_ms)
}

/// Killing tasks that are queued behind a spinner on one worker: they never
/// run, and the spinner is unaffected.
#[test]
fn kill_of_queued_tasks() {
    let dir = tempfile::tempdir().unwrap();
    // Fixed priorities: while the spinner is runnable, nothing of lower
    // priority runs, so the others stay queued until they are killed.
    let rt = runtime_with(1, warden::PolicyKind::Priority, 64);
    let mut spinner = spec(dir.path(), "spin", guests::SPIN);
    spinner.sched.params.priority = 10;
    let spin = rt.spawn(&spinner).unwrap();
    let queued: Vec<_> = (0..20)
        .map(|i| {
            rt.spawn(&spec(dir.path(), &format!("q{i}"), guests::SPIN))
                .unwrap()
        })
        .collect();
    for &id in &queued {
        rt.kill(id, "not needed").unwrap();
    }
    for id in queued {
        let r = wait(&rt, id, Duration::from_secs(5));
        assert_eq!(r.status, "killed");
        assert_eq!(r.cpu_ms, 0.0, "a queued task ran: {r:?}");
    }
    assert_eq!(rt.live_tasks().len(), 1);
    rt.kill(spin, "done").unwrap();
    assert_eq!(wait(&rt, spin, Duration::from_secs(5)).status, "killed");
}

/// Ctrl-C (SIGINT) and SIGTERM kill every task; the report says which,
/// and the run fails.
fn stop_signal_kills_all_tasks(signal: i32, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.out");
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\nworkers = 1\n[[task]]\nname = 'spin'\nmodule = '{}'\n\
             [[task]]\nname = 'ready'\nmodule = '{}'\nstdout = '{}'\n",
            guests::SPIN,
            guests::READY,
            ready.display()
        ),
    );
    let report = dir.path().join("report.json");
    let mut child = warden()
        .args(["run", "--no-cache", "--control", "off"])
        .arg(&m)
        .arg("--report")
        .arg(&report)
        .spawn()
        .map(Reaped)
        .unwrap();
    // Every task has started once the last one has printed.
    let t = Instant::now();
    while !std::fs::read_to_string(&ready)
        .unwrap_or_default()
        .contains("ready")
    {
        assert!(t.elapsed() < Duration::from_secs(30), "tasks never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: a plain kill(2) of the child process.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = wait_child(
        &mut child,
        Duration::from_secs(10),
        &format!("warden did not stop on signal {signal}"),
    );
    assert_eq!(status.code(), Some(1));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let tasks = json.as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{json}");
    for t in tasks {
        assert_eq!(t["status"], "killed", "{t}");
        assert_eq!(t["reason"], reason, "{t}");
    }
}

#[test]
fn ctrl_c_kills_all_tasks() {
    stop_signal_kills_all_tasks(libc::SIGINT, "interrupted (Ctrl-C)");
}

#[test]
fn sigterm_kills_all_tasks() {
    stop_signal_kills_all_tasks(libc::SIGTERM, "terminated (SIGTERM)");
}

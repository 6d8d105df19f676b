//! Supervisors in guests (`warden_supervisor_*`, C SDK): a task restarts
//! its own children by strategy within an intensity, is told of each
//! restart by `warden_poll` and `warden_supervisor_wait`, and pays for
//! them (each run's memory carved from its budget). Judged by what the
//! supervising guest printed and the runtime's reports.

use crate::util::*;
use std::time::Duration;

fn supervising(dir: &std::path::Path, mode: &str) -> warden::TaskSpec {
    let mut s = spec(dir, mode, guests::SUPERVISOR);
    s.args = vec!["supervisor".into(), mode.into()];
    s.ipc.modules = vec![("self".into(), guests::SUPERVISOR.into())];
    s.limits.memory_limit = Some(16 << 20);
    s
}

/// Runs the supervising guest in `mode`: its exit code and output.
fn run(mode: &str) -> (Option<i32>, String, Vec<warden::TaskReport>) {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let r = run_one(&rt, &supervising(dir.path(), mode), Duration::from_secs(60));
    (r.exit_code, stdout_of(dir.path(), mode), rt.reports())
}

/// Each strategy restarts exactly its members: the killed one alone,
/// every one, or it and those spawned after it. The children fill most
/// of the parent's budget, so a restart of several starts only once the
/// runs it stopped have ended and given their memory back.
#[test]
fn a_guests_supervisor_restarts_by_strategy() {
    for (strategy, again) in [
        ("one_for_one", "B"),
        ("one_for_all", "A B C"),
        ("rest_for_one", "B C"),
    ] {
        let (code, out, _) = run(strategy);
        assert_eq!(code, Some(0), "{strategy}: {out}");
        assert!(
            out.contains("restarted member=1 status=-2 restarts=1\n"),
            "{strategy}: {out}"
        );
        assert!(
            out.contains(&format!("again: {again}\n")),
            "{strategy}: {out}"
        );
    }
}

/// A child that fails at once is restarted as often as the intensity
/// allows, then the supervisor gives up; every run was a child of the
/// supervising task, carved from its budget.
#[test]
fn a_crash_loop_in_a_guest_is_bounded_by_its_intensity() {
    let (code, out, reports) = run("crashloop");
    assert_eq!(code, Some(0), "{out}");
    let restarted = out.matches("restarted member=0 status=1").count();
    assert_eq!(restarted, 3, "{out}");
    assert!(
        out.contains("gave up member=0 status=1 restarts=3\n"),
        "{out}"
    );
    let runs = reports
        .iter()
        .filter(|r| r.name.starts_with("crashloop/"))
        .count();
    assert_eq!(runs, 4, "the first run and three restarts: {reports:?}");
    assert!(reports
        .iter()
        .filter(|r| r.name.starts_with("crashloop/"))
        .all(|r| r.memory_limit_bytes == Some(4 << 20)));
}

/// A transient child that exits 0 and a temporary one that fails end
/// for good: reported, not restarted.
#[test]
fn children_that_are_not_restarted_are_reported_ended() {
    let (code, out, _) = run("transient");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ended member=0 status=0 restarts=0\n"),
        "{out}"
    );
    assert!(
        out.contains("ended member=1 status=1 restarts=0\n"),
        "{out}"
    );
}

/// Closing a supervisor kills its children.
#[test]
fn closing_a_supervisor_kills_its_children() {
    let (code, out, _) = run("closed");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("closed: child status -2\n"), "{out}");
}

/// Bad specs, handles, pointers and member indices are refused with
/// their error codes, and a supervisor handle cannot be duplicated.
#[test]
fn a_guests_bad_supervisor_calls_are_refused() {
    let (code, out, _) = run("hostile");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hostile: ok\n"), "{out}");
}

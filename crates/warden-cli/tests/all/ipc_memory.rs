//! Memory objects and permits between real tasks.

use crate::util::*;
use std::time::Duration;

#[test]
fn memory_object_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "m", guests::MEMOBJ);
    s.limits.memory_limit = Some(16 << 20);
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(stdout_of(dir.path(), "m"), "memobj: ok\n");
    assert_eq!(r.exit_code, Some(0));
}

fn reader(dir: &std::path::Path) -> warden::TaskSpec {
    let mut s = spec(dir, "reader", guests::PERMIT);
    s.args = vec!["reader".into()];
    s.ipc.provides = vec!["reader".into()];
    s
}

fn owner(dir: &std::path::Path, mode: &str) -> warden::TaskSpec {
    let mut s = spec(dir, "owner", guests::PERMIT);
    s.args = vec![mode.into()];
    s.ipc.uses = vec!["reader".into()];
    s
}

/// A reader uses a permit to the owner's memory, within its bounds and
/// rights, until the owner revokes it.
#[test]
fn permits_read_write_and_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let rd = rt.spawn(&reader(dir.path())).unwrap();
    let r = run_one(&rt, &owner(dir.path(), "owner"), Duration::from_secs(20));
    assert_eq!(stdout_of(dir.path(), "owner"), "owner: ok\n", "{r:?}");
    assert_eq!(r.exit_code, Some(0));
    assert!(stdout_of(dir.path(), "reader").contains("reader: read past the end: out of range"));
    rt.kill(rd, "done").unwrap();
}

/// The owner's death revokes its permits before its memory is released,
/// and the memory objects it created.
#[test]
fn owner_death_revokes_permits_and_memory_objects() {
    for mode in ["owner-dies", "mem-owner-dies"] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(2);
        let rd = rt.spawn(&reader(dir.path())).unwrap();
        let r = run_one(&rt, &owner(dir.path(), mode), Duration::from_secs(20));
        assert_eq!(r.exit_code, Some(0));
        let t = std::time::Instant::now();
        while !stdout_of(dir.path(), "reader").contains("reader: object now: revoked") {
            let out = stdout_of(dir.path(), "reader");
            assert!(t.elapsed() < Duration::from_secs(10), "{mode}: {out}");
            std::thread::sleep(Duration::from_millis(10));
        }
        rt.kill(rd, "done").unwrap();
    }
}

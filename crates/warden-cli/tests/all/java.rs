//! Java programs, compiled by TeaVM with the Java SDK (`sdk/java`), run
//! as tasks under the same limits as any other, and use services, portals,
//! child tasks and memory objects through the `warden` package.

use crate::util::*;
use std::time::Duration;

fn kit() -> &'static str {
    guests::built(guests::JAVA_KIT)
}

/// Prints, reads its arguments and environment (`warden.Task.env`),
/// computes, allocates, sleeps and catches its own exceptions (a checked
/// one, a cast, an index out of bounds).
#[test]
fn a_java_program_runs_as_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "kit", kit());
    s.args = vec!["basics".into(), "one".into(), "two".into()];
    s.env = vec![("HOME".into(), "/h".into()), ("USER".into(), "jó".into())];
    s.limits.memory_limit = Some(32 << 20);
    let r = run_one(&rt, &s, Duration::from_secs(30));
    let out = stdout_of(dir.path(), "kit");
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{out} {r:?}");
    for want in [
        "args: basics one two",
        "env: USER=jó HOME=/h unset=null prefix=null",
        "primes below 100000: 9592",
        "allocated 64 arrays, sum 2016",
        "slept at least 20 ms",
        "caught 11025",
    ] {
        assert!(out.contains(want), "{want:?} missing from {out}");
    }
}

/// Java's heap lives in the task's linear memory, so the task's budget
/// bounds it: past it the program ends, and the reason names the budget
/// (TeaVM traps on a refused grow instead of throwing OutOfMemoryError).
/// The CPU limit holds too.
#[test]
fn java_runs_out_of_its_budgets_with_a_clear_reason() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut hog = spec(dir.path(), "hog", kit());
    hog.args = vec!["hog".into()];
    hog.limits.memory_limit = Some(24 << 20);
    let mut spin = spec(dir.path(), "spin", kit());
    spin.args = vec!["spin".into()];
    spin.limits.cpu_limit = Some(Duration::from_millis(100));
    let (h, s) = (rt.spawn(&hog).unwrap(), rt.spawn(&spin).unwrap());
    let (h, s) = (
        wait(&rt, h, Duration::from_secs(30)),
        wait(&rt, s, Duration::from_secs(30)),
    );
    let reason = h.reason.clone().unwrap_or_default();
    assert_eq!(h.status, "trapped", "{h:?}");
    assert!(
        reason.contains("after its memory budget of 24.0 MiB refused to grow"),
        "{reason}"
    );
    assert!(h.peak_memory_bytes <= 24 << 20, "{h:?}");
    assert!(stdout_of(dir.path(), "hog").contains("holding 8 MiB"));
    assert_eq!(s.status, "killed", "{s:?}");
    assert!(
        s.reason
            .clone()
            .unwrap_or_default()
            .contains("cpu limit exceeded"),
        "{s:?}"
    );
}

/// A system of Java tasks: a service and its client (errors as
/// WardenException with the kernel's code), a parent spawning, awaiting
/// and killing children, a memory object, and TCP sockets.
#[test]
fn java_services_tasks_and_memory_objects() {
    let dir = tempfile::tempdir().unwrap();
    let kit = kit();
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = 'server'\nmodule = '{kit}'\nargs = ['serve', 'rev', '1']\n\
             provides = ['rev']\n\
             [[task]]\nname = 'client'\nmodule = '{kit}'\nargs = ['call', 'rev', 'hello java']\n\
             uses = ['rev']\n\
             [[task]]\nname = 'family'\nmodule = '{kit}'\nargs = ['family']\n\
             memory_limit = '96MiB'\nmodules = {{ self = '{kit}' }}\n\
             [[task]]\nname = 'memobj'\nmodule = '{kit}'\nargs = ['memobj']\n\
             [[task]]\nname = 'tcp'\nmodule = '{kit}'\nargs = ['tcp']\n\
             listen = ['127.0.0.1:0']\nconnect = ['127.0.0.1:*']\n"
        ),
    );
    let out = warden()
        .args(["run", "--no-cache"])
        .arg(&m)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "[server] serving rev",
        "[server] served 1",
        "[client] reply: avaj olleh",
        "[client] lookup not-granted: denied (-5)",
        "[client] call after close: bad handle (-1)",
        "[family] child exited 0",
        "[family] over its cpu limit: -2",
        "[family] await: timed out (-9)",
        "[family] killed: -2",
        "[family] spawn over budget: out of memory (-7)",
        "[family] spawn unknown: denied (-5)",
        "[memobj] memory object of 4096 bytes: shared bytes",
        "[memobj] read past the end: out of range (-13)",
        "[tcp] server got: ping over tcp; client got: pong",
        "[tcp] connect outside the grant: denied (-5)",
    ] {
        assert!(text.contains(want), "{want:?} missing from {text}");
    }
}

/// The Java SDK's supervisor: a killed child is restarted and the parent
/// told; a child that keeps failing runs the supervisor past its
/// intensity, and it gives up.
#[test]
fn a_java_program_supervises_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = spec(dir.path(), "kit", kit());
    s.args = vec!["supervise".into()];
    s.ipc.modules = vec![("self".into(), kit().into())];
    s.limits.memory_limit = Some(64 << 20);
    let r = run_one(&rt, &s, Duration::from_secs(60));
    let out = stdout_of(dir.path(), "kit");
    assert_eq!(r.exit_code, Some(0), "{out} {r:?}");
    assert!(
        out.contains("supervised: kind 1 status -2 restarts 1\n"),
        "{out}"
    );
    assert!(
        out.contains("supervised: kind 3 member 1 status 3\n"),
        "{out}"
    );
}

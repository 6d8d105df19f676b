//! Passive services (handlers run on the caller's thread) and host
//! services (Rust closures), called by real guests.

use crate::util::*;
use std::time::Duration;
use warden::{Errno, Runtime, TaskReport, TaskSpec};

const LIMIT: Duration = Duration::from_secs(30);

/// A passive server; its calls may take long on a slow or busy machine.
fn passive(dir: &std::path::Path, name: &str, service: &str) -> TaskSpec {
    let mut s = spec(dir, name, guests::PASSIVE);
    s.passive = true;
    s.ipc.provides = vec![service.into()];
    s.call_cpu_limit = Duration::from_secs(20);
    s
}

fn caller(dir: &std::path::Path, name: &str, service: &str, reqs: &[&str]) -> TaskSpec {
    let mut s = spec(dir, name, guests::CALLER);
    s.args = std::iter::once(service.to_string())
        .chain(reqs.iter().map(|r| r.to_string()))
        .collect();
    s.ipc.uses = vec!["*".into()];
    s
}

/// Runs a caller to its end; its report and what it printed.
fn call(
    rt: &Runtime,
    dir: &std::path::Path,
    name: &str,
    service: &str,
    reqs: &[&str],
) -> (TaskReport, String) {
    let r = run_one(rt, &caller(dir, name, service, reqs), LIMIT);
    (r, stdout_of(dir, name))
}

/// Calls return the handler's replies, its state persists between calls
/// from different tasks, and the handler's CPU is charged to the caller
/// (and to the server as served CPU), not to the server's own account.
#[test]
fn handlers_run_on_the_callers_account() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt
        .spawn(&passive(dir.path(), "counter", "counter"))
        .unwrap();
    let (r, out) = call(
        &rt,
        dir.path(),
        "a",
        "counter",
        &["add 5", "add 7", "echo hi"],
    );
    assert_eq!(r.exit_code, Some(0), "{out}");
    assert_eq!(out, "add 5 -> 5\nadd 7 -> 12\necho hi -> hi\n");
    let (r, out) = call(
        &rt,
        dir.path(),
        "b",
        "counter",
        &["add 1", "work 200000000"],
    );
    assert_eq!(out, "add 1 -> 13\nwork 200000000 -> worked\n");
    assert!(r.ipc_calls >= 2, "{r:?}");
    let reports = rt.wait_all();
    let server = reports.iter().find(|r| r.id == srv).unwrap();
    assert_eq!(
        (server.status, server.exit_code),
        ("exited", Some(0)),
        "{server:?}"
    );
    assert!(
        server.served_cpu_ms > 50.0 && r.cpu_ms >= 0.8 * server.served_cpu_ms,
        "the work ran on b's account: b {r:?}, server {server:?}"
    );
    assert!(
        server.cpu_ms < 0.5 * server.served_cpu_ms,
        "the server's own account paid only for its start: {server:?}"
    );
}

/// One call at a time: concurrent callers never overlap inside the
/// handler (it refuses an overlap with EINVAL), and every call is served.
#[test]
fn one_call_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    rt.spawn(&passive(dir.path(), "srv", "svc")).unwrap();
    let reqs = ["work 300000"; 20];
    let ids: Vec<_> = (0..4)
        .map(|i| {
            rt.spawn(&caller(dir.path(), &format!("c{i}"), "svc", &reqs))
                .unwrap()
        })
        .collect();
    for (i, id) in ids.into_iter().enumerate() {
        let r = wait(&rt, id, LIMIT);
        let out = stdout_of(dir.path(), &format!("c{i}"));
        assert_eq!(r.exit_code, Some(0), "{out}");
        assert_eq!(out.matches("-> worked").count(), 20, "{out}");
    }
}

/// The server's memory budget bounds its handler: a refused allocation is
/// the handler's error, and the service goes on.
#[test]
fn the_servers_memory_budget_applies() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = passive(dir.path(), "srv", "svc");
    s.limits.memory_limit = Some(4 << 20);
    rt.spawn(&s).unwrap();
    let (_, out) = call(
        &rt,
        dir.path(),
        "c",
        "svc",
        &["grow 100000", "grow 16000000", "add 1"],
    );
    let nomem = Errno::NoMem.code();
    assert_eq!(
        out,
        format!("grow 100000 -> grew\ngrow 16000000 -> error {nomem}\nadd 1 -> 1\n")
    );
}

/// A handler that runs past its call_cpu_limit, traps or exits ends the
/// service: that caller gets PeerDied, and so does the next call.
#[test]
fn a_failing_handler_ends_the_service() {
    let died = Errno::PeerDied.code();
    for (req, status, reason) in [
        ("spin", "killed", Some("call_cpu_limit")),
        ("trap", "trapped", Some("unreachable")),
        ("exit", "exited", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(2);
        let mut s = passive(dir.path(), "srv", "svc");
        s.call_cpu_limit = Duration::from_millis(50);
        let srv = rt.spawn(&s).unwrap();
        let (r, out) = call(&rt, dir.path(), "c", "svc", &["add 1", req, "add 1"]);
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(
            out,
            format!("add 1 -> 1\n{req} -> error {died}\nadd 1 -> error {died}\n")
        );
        let server = wait(&rt, srv, LIMIT);
        assert_eq!(server.status, status, "{req}: {server:?}");
        if let Some(reason) = reason {
            assert!(
                server.reason.as_deref().unwrap_or("").contains(reason),
                "{server:?}"
            );
        }
    }
}

/// A caller killed inside a handler dies when the handler returns: the
/// server's state is never left half way through a call.
#[test]
fn a_killed_caller_lets_the_handler_finish() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    rt.spawn(&passive(dir.path(), "srv", "svc")).unwrap();
    let victim = rt
        .spawn(&caller(
            dir.path(),
            "victim",
            "svc",
            &["slow 500000000", "slow 500000000"],
        ))
        .unwrap();
    wait_for_output(dir.path(), "srv", "passive: slow started");
    rt.kill(victim, "test").unwrap();
    let r = wait(&rt, victim, LIMIT);
    assert_eq!(r.status, "killed", "{r:?}");
    let (_, out) = call(&rt, dir.path(), "after", "svc", &["check"]);
    // Whichever slow call the kill landed in ran to its end.
    assert!(out.starts_with("check -> in_progress 0 done "), "{out}");
}

/// A handler may call other direct services, but not itself and not an
/// active task's service (it cannot wait); requests with handles are refused.
#[test]
fn nesting_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut front = passive(dir.path(), "front", "front");
    front.ipc.uses = vec!["*".into()];
    rt.spawn(&front).unwrap();
    let mut back = passive(dir.path(), "back", "back");
    back.ipc.uses = vec!["*".into()];
    rt.spawn(&back).unwrap();
    let mut echo = spec(dir.path(), "echo", guests::ECHO);
    echo.args = vec!["server".into(), "active".into()];
    echo.ipc.provides = vec!["active".into()];
    rt.spawn(&echo).unwrap();
    // The active service is registered before the front calls it.
    let (_, out) = call(&rt, dir.path(), "probe", "active", &[]);
    assert_eq!(out, "");
    let deadlock = Errno::Deadlock.code();
    let (_, out) = call(
        &rt,
        dir.path(),
        "c",
        "front",
        &[
            "nest back add 2",
            "nest back nest back add 1",
            "nest front add 1",
            "nest active x",
            "+h add 1",
        ],
    );
    let inval = Errno::Inval.code();
    assert_eq!(
        out,
        format!(
            "nest back add 2 -> 2\n\
             nest back nest back add 1 -> error {deadlock}\n\
             nest front add 1 -> error {deadlock}\n\
             nest active x -> error {deadlock}\n\
             +h add 1 -> error {inval}\n"
        ),
    );
}

/// `wait_all` returns once the tasks that are not passive have ended, and
/// the passive ones end with status 0.
#[test]
fn a_system_ends_with_its_active_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let srv = rt.spawn(&passive(dir.path(), "srv", "svc")).unwrap();
    let c = rt
        .spawn(&caller(dir.path(), "c", "svc", &["add 3"]))
        .unwrap();
    let reports = rt.wait_all();
    assert_eq!(reports.len(), 2);
    for id in [srv, c] {
        let r = reports.iter().find(|r| r.id == id).unwrap();
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}");
    }
    assert_eq!(stdout_of(dir.path(), "c"), "add 3 -> 3\n");
}

/// Spawning refuses what a passive task cannot be, with the reason.
#[test]
fn bad_passive_tasks_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let refused = |s: &TaskSpec| rt.spawn(s).unwrap_err().to_string();
    let mut s = passive(dir.path(), "p", "svc");
    s.ipc.provides.clear();
    assert!(
        refused(&s).contains("needs a `provides` name"),
        "{}",
        refused(&s)
    );
    let mut s = passive(dir.path(), "p", "svc");
    s.dirs = vec![("/d".into(), dir.path().into())];
    assert!(
        refused(&s).contains("cannot have `dirs`"),
        "{}",
        refused(&s)
    );
    let mut s = passive(dir.path(), "p", "svc");
    s.module = guests::HELLO.into();
    assert!(
        refused(&s).contains("warden_passive_call"),
        "{}",
        refused(&s)
    );
    let mut s = spec(dir.path(), "p", guests::PASSIVE);
    s.ipc.provides = vec!["svc".into()];
    assert!(refused(&s).contains("passive = true"), "{}", refused(&s));
    // A module that waits (an active server) cannot be linked as passive.
    let mut s = passive(dir.path(), "p", "svc");
    s.module = guests::ECHO.into();
    assert!(
        refused(&s).contains("warden_passive_call"),
        "{}",
        refused(&s)
    );
}

/// A Rust closure registered as a host service is called by guests like
/// a task's service, sees who calls, and its errors reach the caller.
#[test]
fn host_services() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    rt.register_host_service("host.greet", |call, req, reply| {
        if req == b"fail" {
            return Err(Errno::Denied);
        }
        reply.extend_from_slice(
            format!(
                "hello {} from {}",
                String::from_utf8_lossy(req),
                call.caller_name
            )
            .as_bytes(),
        );
        Ok(())
    })
    .unwrap();
    let again = rt.register_host_service("host.greet", |_, _, _| Ok(()));
    assert!(again.unwrap_err().to_string().contains("already exists"));
    let (r, out) = call(&rt, dir.path(), "guest", "host.greet", &["you", "fail"]);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(
        out,
        format!(
            "you -> hello you from guest\nfail -> error {}\n",
            Errno::Denied.code()
        )
    );
    // Names are granted as usual.
    let mut s = caller(dir.path(), "stranger", "host.greet", &["x"]);
    s.ipc.uses = vec!["other".into()];
    let r = run_one(&rt, &s, LIMIT);
    assert_eq!(r.exit_code, Some(1));
    assert!(stdout_of(dir.path(), "stranger").contains(&format!("error {}", Errno::Denied.code())));
}

/// `warden check` and `warden run` take a manifest with a passive task:
/// the system ends when its callers have, with status 0.
#[test]
fn a_manifest_with_a_passive_service() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            r#"
[[task]]
name = "kv"
module = "{}"
passive = true
provides = ["kv"]
call_cpu_limit = "200ms"
memory_limit = "8MiB"

[[task]]
name = "client"
module = "{}"
args = ["kv", "add 40", "add 2"]
uses = ["kv"]
"#,
            guests::PASSIVE,
            guests::CALLER
        ),
    );
    let check = warden().arg("check").arg(&m).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let run = warden().arg("run").arg(&m).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{:?} {stdout}{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("add 40 -> 40\n[client] add 2 -> 42\n"),
        "{stdout}"
    );
    let bad = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = \"x\"\nmodule = \"{}\"\ncall_cpu_limit = \"1s\"\n",
            guests::CALLER
        ),
    );
    let out = warden().arg("check").arg(&bad).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("line 4: ")
            && err.contains("call_cpu_limit: only a passive task"),
        "{err}"
    );
}

/// Kills of callers and of the server while calls run and wait: every
/// caller ends, each call either answered or PeerDied, nothing hangs.
#[test]
fn stress_kills_during_calls() {
    let died = format!("error {}", Errno::PeerDied.code());
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(2);
        let srv = rt.spawn(&passive(dir.path(), "srv", "svc")).unwrap();
        let reqs = vec!["work 20000"; 300];
        let callers: Vec<_> = (0..6)
            .map(|i| {
                rt.spawn(&caller(dir.path(), &format!("c{i}"), "svc", &reqs))
                    .unwrap()
            })
            .collect();
        for i in 0..callers.len() {
            wait_for_output(dir.path(), &format!("c{i}"), "-> worked");
        }
        // A caller that already finished cannot be killed; one that was
        // must end killed, with its calls cut short.
        let victims = [1, 2].map(|i| (i, rt.kill(callers[i], "stress").is_ok()));
        if round % 2 == 0 {
            rt.kill(srv, "stress").unwrap();
        }
        for (i, id) in callers.iter().enumerate() {
            let r = wait(&rt, *id, LIMIT);
            let out = stdout_of(dir.path(), &format!("c{i}"));
            for line in out.lines() {
                assert!(
                    line.ends_with("-> worked") || line.ends_with(&died),
                    "{line}"
                );
            }
            if victims.contains(&(i, true)) {
                assert_eq!(r.status, "killed", "c{i}: {r:?}");
                assert!(out.lines().count() < 300, "c{i} finished after its kill");
            }
            if i > 2 {
                assert_eq!((r.status, out.lines().count()), ("exited", 300), "{r:?}");
            }
        }
        let server = rt.wait_all().into_iter().find(|r| r.id == srv).unwrap();
        let expected = if round % 2 == 0 { "killed" } else { "exited" };
        assert_eq!(server.status, expected, "{server:?}");
    }
}

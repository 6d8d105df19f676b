//! The papers' termination semantics: no peer ever hangs on a dead task.

use crate::util::*;
use std::time::{Duration, Instant};

fn server(dir: &std::path::Path) -> warden::TaskSpec {
    let mut s = spec(dir, "srv", guests::ECHO);
    s.args = vec!["server".into(), "echo".into()];
    s.ipc.provides = vec!["echo".into()];
    s
}

fn client(dir: &std::path::Path, name: &str, msg: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::ECHO);
    s.args = vec!["client".into(), "echo".into(), "1".into(), msg.into()];
    s.ipc.uses = vec!["echo".into()];
    s
}

/// The server is killed while one client is being served and others are
/// queued: every one of them gets "peer died" at once.
#[test]
fn server_killed_mid_call_fails_served_and_queued_clients() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path())).unwrap();
    wait_for_output(dir.path(), "srv", "server: ready");
    let served = rt.spawn(&client(dir.path(), "served", "hang")).unwrap();
    wait_for_output(dir.path(), "srv", "server: got hang");
    let queued: Vec<_> = (0..3)
        .map(|i| {
            rt.spawn(&client(dir.path(), &format!("q{i}"), "x"))
                .unwrap()
        })
        .collect();
    // Each queued client has looked the name up and waits in its call.
    for &id in &queued {
        wait_blocked(&rt, id);
    }
    let t = Instant::now();
    rt.kill(srv, "operator").unwrap();
    for (name, id) in std::iter::once(("served".to_string(), served)).chain(
        queued
            .into_iter()
            .enumerate()
            .map(|(i, id)| (format!("q{i}"), id)),
    ) {
        let r = wait(&rt, id, Duration::from_secs(20));
        assert_eq!(r.exit_code, Some(2), "{name}: {r:?}");
        assert_eq!(stdout_of(dir.path(), &name), "client: call: peer died\n");
    }
    eprintln!("every client answered {:?} after the kill", t.elapsed());
}

/// A server that traps while holding a call: the client gets "peer died".
#[test]
fn server_trap_mid_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path())).unwrap();
    let r = run_one(
        &rt,
        &client(dir.path(), "c", "crash"),
        Duration::from_secs(20),
    );
    assert_eq!(
        stdout_of(dir.path(), "c"),
        "client: call: peer died\n",
        "{r:?}"
    );
    assert_eq!(wait(&rt, srv, Duration::from_secs(5)).status, "trapped");
}

/// A client killed while its call is being served: the server's reply
/// reports it, and the server carries on serving others.
#[test]
fn client_killed_mid_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path())).unwrap();
    wait_for_output(dir.path(), "srv", "server: ready");
    let c = rt.spawn(&client(dir.path(), "slow", "slow")).unwrap();
    // The server holds the call for 2 s after saying so.
    wait_for_output(dir.path(), "srv", "server: got slow");
    rt.kill(c, "impatient").unwrap();
    wait_for_output(dir.path(), "srv", "server: reply: peer died");
    let r = run_one(
        &rt,
        &client(dir.path(), "next", "still there?"),
        Duration::from_secs(20),
    );
    assert_eq!(r.exit_code, Some(0));
    rt.kill(srv, "done").unwrap();
}

/// A server that exits takes its name with it.
#[test]
fn server_exit_removes_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path())).unwrap();
    let r = run_one(
        &rt,
        &client(dir.path(), "bye", "bye"),
        Duration::from_secs(20),
    );
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(wait(&rt, srv, Duration::from_secs(5)).exit_code, Some(0));
    // The name went with the server: a new client's lookup waits.
    let id = rt.spawn(&client(dir.path(), "late", "x")).unwrap();
    wait_blocked(&rt, id);
    assert!(
        rt.wait_timeout(id, Some(Duration::ZERO)).unwrap().is_none(),
        "lookup waits"
    );
    rt.kill(id, "done").unwrap();
}

/// Waits until task `id` has made at least `n` IPC calls.
fn wait_calls(rt: &warden::Runtime, id: warden::TaskId, n: u64) {
    wait_view(rt, id, Duration::from_micros(200), "called", |v| {
        v.ipc_calls >= n
    });
}

/// Clients killed at random moments of their calls, fifty times over,
/// while others keep calling on two workers: the server and the steady
/// clients never notice.
#[test]
fn stress_random_client_kills() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path())).unwrap();
    wait_for_output(dir.path(), "srv", "server: ready");
    let mut steady_spec = client(dir.path(), "steady", "steady");
    steady_spec.args[2] = "20000".into();
    let steady: Vec<_> = (0..3)
        .map(|i| {
            let mut s = steady_spec.clone();
            s.name = format!("steady{i}");
            s.stdio.stdout = warden::Output::File(dir.path().join(format!("steady{i}.out")));
            rt.spawn(&s).unwrap()
        })
        .collect();
    let mut seed = 12345u64;
    for i in 0..50 {
        let mut victim = client(dir.path(), &format!("v{i}"), "victim");
        victim.args[2] = "1000000".into();
        let id = rt.spawn(&victim).unwrap();
        // It is calling (a kill before its first call would prove
        // nothing), then dies at a random moment of its stream of calls.
        wait_calls(&rt, id, 1);
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_micros(200 + (seed >> 33) % 5000));
        rt.kill(id, "random kill").unwrap();
        assert_eq!(wait(&rt, id, Duration::from_secs(5)).status, "killed");
    }
    for (i, id) in steady.into_iter().enumerate() {
        let r = wait(&rt, id, Duration::from_secs(60));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        assert_eq!(
            stdout_of(dir.path(), &format!("steady{i}")),
            "client: ok 20000\n"
        );
    }
    let r = run_one(
        &rt,
        &client(dir.path(), "last", "still serving?"),
        Duration::from_secs(20),
    );
    assert_eq!(r.exit_code, Some(0));
    assert!(
        rt.wait_timeout(srv, Some(Duration::ZERO))
            .unwrap()
            .is_none(),
        "server alive"
    );
    rt.kill(srv, "done").unwrap();
}

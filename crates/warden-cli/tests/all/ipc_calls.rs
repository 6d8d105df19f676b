//! Services, portals, calls and the name service between real tasks.

use crate::util::*;
use std::time::Duration;

fn server(dir: &std::path::Path, name: &str, service: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::ECHO);
    s.args = vec!["server".into(), service.into()];
    s.ipc.provides = vec![service.into()];
    s
}

fn client(dir: &std::path::Path, name: &str, service: &str, n: u32, msg: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::ECHO);
    s.args = vec!["client".into(), service.into(), n.to_string(), msg.into()];
    s.ipc.uses = vec![service.into()];
    s
}

/// Several clients call one server; every reply is the request.
#[test]
fn echo_server_with_several_clients() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path(), "srv", "echo")).unwrap();
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let msg = format!("message from client {i} ").repeat(i + 1);
            rt.spawn(&client(dir.path(), &format!("c{i}"), "echo", 500, &msg))
                .unwrap()
        })
        .collect();
    for (i, id) in clients.into_iter().enumerate() {
        let r = wait(&rt, id, Duration::from_secs(30));
        assert_eq!(
            r.exit_code,
            Some(0),
            "{r:?}: {}",
            stdout_of(dir.path(), &format!("c{i}"))
        );
        assert_eq!(stdout_of(dir.path(), &format!("c{i}")), "client: ok 500\n");
    }
    rt.kill(srv, "done").unwrap();
}

/// A lookup waits for a name registered later, so start order does not
/// matter; a lookup with a timeout gives up.
#[test]
fn lookup_waits_for_late_registration() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let c = rt
        .spawn(&client(dir.path(), "early", "late", 3, "hi"))
        .unwrap();
    // The client has run and is blocked in its lookup before the name
    // exists.
    wait_blocked(&rt, c);
    assert!(
        rt.wait_timeout(c, Some(Duration::ZERO)).unwrap().is_none(),
        "client waits"
    );
    let srv = rt.spawn(&server(dir.path(), "srv", "late")).unwrap();
    assert_eq!(wait(&rt, c, Duration::from_secs(20)).exit_code, Some(0));
    rt.kill(srv, "done").unwrap();
}

/// The manifest decides which names a task may register and look up.
#[test]
fn names_outside_the_grants_are_denied() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = server(dir.path(), "srv", "echo");
    s.ipc.provides = vec!["other".into()];
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(r.exit_code, Some(1));
    assert_eq!(stdout_of(dir.path(), "srv"), "server: register: denied\n");
    let mut c = client(dir.path(), "c", "echo", 1, "x");
    c.ipc.uses = vec!["ech".into(), "e*x".into()];
    let r = run_one(&rt, &c, Duration::from_secs(20));
    assert_eq!(r.exit_code, Some(1));
    assert_eq!(stdout_of(dir.path(), "c"), "client: lookup: denied\n");
}

/// A message larger than the sender's quota is refused with EQUOTA.
#[test]
fn message_over_quota_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path(), "srv", "echo")).unwrap();
    let mut c = client(dir.path(), "c", "echo", 1, &"x".repeat(200));
    c.ipc.max_message_bytes = 100;
    let r = run_one(&rt, &c, Duration::from_secs(20));
    assert_eq!(r.exit_code, Some(2));
    assert_eq!(stdout_of(dir.path(), "c"), "client: call: quota exceeded\n");
    rt.kill(srv, "done").unwrap();
}

/// A portal moved in a message works for its new holder and is gone from
/// the sender; when its last holder closes it, the server's recv reports
/// that no client is left.
#[test]
fn moved_portal_and_no_clients() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut keeper = spec(dir.path(), "keeper", guests::BROKER);
    keeper.args = vec!["keeper".into()];
    keeper.ipc.provides = vec!["keeper".into()];
    let mut srv = spec(dir.path(), "server", guests::BROKER);
    srv.args = vec!["server".into()];
    srv.ipc.uses = vec!["keeper".into()];
    let k = rt.spawn(&keeper).unwrap();
    let s = rt.spawn(&srv).unwrap();
    assert_eq!(wait(&rt, k, Duration::from_secs(20)).exit_code, Some(0));
    assert_eq!(wait(&rt, s, Duration::from_secs(20)).exit_code, Some(0));
    assert_eq!(
        stdout_of(dir.path(), "keeper"),
        "keeper: got 6 bytes and 1 handles\n\
         keeper: call through passed portal: hi\n\
         keeper: closed the portal\n"
    );
    assert_eq!(
        stdout_of(dir.path(), "server"),
        "server: gave away the portal: ok\n\
         server: own portal now: bad handle\n\
         server: request hello server\n\
         server: recv: no clients\n"
    );
}

/// Direct hand-off: a call to a server waiting in `recv` runs the server
/// inside the caller's poll, so the caller is answered without being
/// suspended and woken. On one worker, N round trips then take about N
/// polls (the server's) rather than 2N (the server's and the caller's).
#[test]
fn a_call_to_a_waiting_server_is_answered_within_the_callers_poll() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let srv = rt.spawn(&server(dir.path(), "srv", "echo")).unwrap();
    wait_for_output(dir.path(), "srv", "server: ready");
    let calls = 2000;
    let before = rt.stats().polls;
    let c = rt
        .spawn(&client(dir.path(), "c", "echo", calls, "ping"))
        .unwrap();
    let r = wait(&rt, c, Duration::from_secs(30));
    let polls = rt.stats().polls - before;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "c"), format!("client: ok {calls}\n"));
    assert!(
        polls < calls as u64 * 3 / 2,
        "{polls} polls for {calls} round trips"
    );
    rt.kill(srv, "done").unwrap();
}

/// `call_fast` leaves an active call it could not finish under way, for
/// `call` to wait for. A guest that ignores that (calls `call_fast` again,
/// then exits) starts no second call, and its call is abandoned when it
/// ends: the server's late reply is refused, and the server goes on.
#[test]
fn a_call_left_under_way_is_abandoned_when_its_caller_ends() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let srv = rt.spawn(&server(dir.path(), "srv", "echo")).unwrap();
    wait_for_output(dir.path(), "srv", "server: ready");
    let mut stray = spec(dir.path(), "stray", guests::ECHO);
    stray.args = vec!["stray".into(), "echo".into()];
    stray.ipc.uses = vec!["echo".into()];
    let r = run_one(&rt, &stray, Duration::from_secs(30));
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        stdout_of(dir.path(), "stray"),
        "stray: would wait, would wait\n"
    );
    wait_for_output(dir.path(), "srv", "server: reply: peer died");
    let c = rt
        .spawn(&client(dir.path(), "c", "echo", 3, "after"))
        .unwrap();
    assert_eq!(wait(&rt, c, Duration::from_secs(30)).exit_code, Some(0));
    assert_eq!(
        stdout_of(dir.path(), "srv")
            .matches("server: got slow")
            .count(),
        1,
        "one call made"
    );
    rt.kill(srv, "done").unwrap();
}

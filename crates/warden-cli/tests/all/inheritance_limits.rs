//! Limits hold whoever's account CPU is charged to, and no client need
//! wait for ever on a server it does not trust.

use crate::util::*;
use std::time::{Duration, Instant};

fn stuck(dir: &std::path::Path, name: &str, mode: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::STUCK);
    s.args = vec![mode.into()];
    s.ipc.provides = vec!["stuck".into(), "gave-up".into()];
    s.ipc.uses = s.ipc.provides.clone();
    s
}

/// A server spinning on its caller's lent CPU is still bound by its own
/// CPU limit: it is killed at it, and its caller hears `peer died`.
#[test]
fn a_server_limit_holds_on_inherited_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut server = stuck(dir.path(), "server", "server");
    server.limits.cpu_limit = Some(Duration::from_millis(300));
    let server = rt.spawn(&server).unwrap();
    let client = rt.spawn(&stuck(dir.path(), "client", "client")).unwrap();
    let s = wait(&rt, server, Duration::from_secs(30));
    let c = wait(&rt, client, Duration::from_secs(5));
    assert_eq!(s.status, "killed", "{s:?}");
    assert!(
        s.reason.as_deref().unwrap_or("").contains("cpu limit"),
        "{s:?}"
    );
    assert_eq!(c.exit_code, Some(0), "{}", stdout_of(dir.path(), "client"));
    assert!(stdout_of(dir.path(), "client").contains("call: peer died"));
    // The spin ran on the client's context: the client's account paid,
    // and the server's report shows it as served.
    assert!(c.cpu_ms >= 250.0, "client charged {} ms", c.cpu_ms);
    assert!(
        s.served_cpu_ms >= 250.0,
        "server served {} ms",
        s.served_cpu_ms
    );
}

/// The client's own limit bounds what is spent on its behalf: a client
/// whose lent CPU runs out is killed, and the server carries on.
#[test]
fn a_client_limit_bounds_cpu_spent_on_its_behalf() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let server = rt.spawn(&stuck(dir.path(), "server", "server")).unwrap();
    let mut client = stuck(dir.path(), "client", "client");
    client.limits.cpu_limit = Some(Duration::from_millis(200));
    let client = rt.spawn(&client).unwrap();
    let c = wait(&rt, client, Duration::from_secs(30));
    assert_eq!(c.status, "killed", "{c:?}");
    assert!(
        c.reason.as_deref().unwrap_or("").contains("cpu limit"),
        "{c:?}"
    );
    assert!(
        rt.live_tasks().iter().any(|t| t.id == server),
        "server lives on"
    );
    rt.kill(server, "test over").unwrap();
    wait(&rt, server, Duration::from_secs(5));
}

/// `warden_call_timeout` returns `timed out`, and the server's late reply
/// then gets `peer died`.
#[test]
fn a_call_times_out_and_the_late_reply_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let server = rt.spawn(&stuck(dir.path(), "server", "late")).unwrap();
    let client = rt
        .spawn(&stuck(dir.path(), "client", "client-timeout"))
        .unwrap();
    let c = wait(&rt, client, Duration::from_secs(30));
    let s = wait(&rt, server, Duration::from_secs(5));
    let (cout, sout) = (
        stdout_of(dir.path(), "client"),
        stdout_of(dir.path(), "server"),
    );
    assert_eq!(c.exit_code, Some(0), "{cout}");
    assert!(cout.contains("call: timed out"), "{cout}");
    assert_eq!(s.exit_code, Some(0), "{sout}");
    assert!(sout.contains("late reply: peer died"), "{sout}");
}

/// The issue's reproduction through the CLI: `warden run` of a caller and
/// a stuck server with a limit ends within well under a second of the
/// limit, the caller told `peer died`.
#[test]
fn warden_run_of_a_stuck_server_ends_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(
        dir.path(),
        &format!(
            r#"
[[task]]
name = "server"
module = "{m}"
args = ["server"]
cpu_limit = "300ms"
provides = ["stuck"]

[[task]]
name = "client"
module = "{m}"
args = ["client"]
uses = ["stuck"]
"#,
            m = guests::STUCK
        ),
    );
    let report = dir.path().join("report.json");
    let start = Instant::now();
    let mut child = warden()
        .args(["run", "--no-cache", "--control", "off", "--report"])
        .arg(&report)
        .arg(&manifest)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map(Reaped)
        .unwrap();
    let status = wait_child(
        &mut child,
        Duration::from_secs(30),
        "warden run still running (the caller hangs)",
    );
    let took = start.elapsed();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("call: peer died"), "{stdout}");
    let reports: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let server = &reports[0];
    assert_eq!(server["status"], "killed", "{reports}");
    // The server ran no more than its limit plus a tick or two of slack,
    // and the client ended with it.
    let cpu = server["cpu_ms"].as_f64().unwrap() + reports[1]["cpu_ms"].as_f64().unwrap();
    assert!(cpu < 400.0, "{reports}");
    let end_gap = reports[1]["end_ms"].as_f64().unwrap() - server["end_ms"].as_f64().unwrap();
    assert!(
        end_gap < 500.0,
        "client ended {end_gap} ms after the server"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

//! Calls, replies and kills racing on every worker: servers and clients
//! killed at random moments of busy call traffic. Nobody hangs, every
//! client ends with its calls answered or `peer died`, and no task ends
//! as `trapped` (a panic in the kernel would show up as one).

use crate::util::*;
use std::time::{Duration, Instant};

const CLIENTS: usize = 4;

fn echo(dir: &std::path::Path, name: &str, args: &[&str], service: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::ECHO);
    s.args = args.iter().map(|a| a.to_string()).collect();
    s.ipc.provides = vec![service.into()];
    s.ipc.uses = vec![service.into()];
    s
}

/// Waits until every task in `ids` has completed at least one call.
fn all_calling(rt: &warden::Runtime, ids: &[warden::TaskId]) {
    let t = Instant::now();
    loop {
        let live = rt.live_tasks();
        let calling = ids
            .iter()
            .all(|id| live.iter().any(|v| v.id == *id && v.ipc_calls > 0));
        if calling {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "clients never called"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn stress_server_and_client_kills_on_all_workers() {
    let dir = tempfile::tempdir().unwrap();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let rt = runtime(workers);
    let mut seed = 0x9E3779B97F4A7C15u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..25 {
        let service = format!("svc{round}");
        let srv = rt
            .spawn(&echo(
                dir.path(),
                &format!("srv{round}"),
                &["server", &service],
                &service,
            ))
            .unwrap();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let name = format!("c{round}.{i}");
                let args = ["client", &service, "100000000", "ping"];
                rt.spawn(&echo(dir.path(), &name, &args, &service)).unwrap()
            })
            .collect();
        all_calling(&rt, &clients);
        // Kill one client, then the server, at random moments of the traffic.
        let victim = clients[rand(CLIENTS as u64) as usize];
        std::thread::sleep(Duration::from_micros(rand(3000)));
        rt.kill(victim, "random kill").unwrap();
        std::thread::sleep(Duration::from_micros(rand(3000)));
        rt.kill(srv, "random kill").unwrap();
        assert_eq!(wait(&rt, srv, Duration::from_secs(10)).status, "killed");
        for (i, id) in clients.into_iter().enumerate() {
            let r = wait(&rt, id, Duration::from_secs(10));
            if id == victim {
                assert_eq!(r.status, "killed", "{r:?}");
                continue;
            }
            let out = stdout_of(dir.path(), &format!("c{round}.{i}"));
            assert_eq!(r.exit_code, Some(2), "{r:?}: {out}");
            assert_eq!(out, "client: call: peer died\n");
        }
    }
    let trapped: Vec<_> = rt
        .reports()
        .into_iter()
        .filter(|r| r.status == "trapped")
        .collect();
    assert!(trapped.is_empty(), "{trapped:?}");
    assert_eq!(rt.reports().len(), 25 * (CLIENTS + 1));
}

//! Scheduling policies, caps, quotas, suspension and CPU inheritance in
//! the running system.

use crate::util::*;
use std::time::{Duration, Instant};
use warden::{GroupSpec, PolicyKind, Runtime, RuntimeConfig, SchedParams as Params, TaskId};

fn rt_with(scheduler: PolicyKind, groups: Vec<GroupSpec>) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 64,
        scheduler,
        groups,
        ..Default::default()
    })
    .unwrap()
}

/// Each task's CPU so far; the tasks must still be alive (a task that
/// ended early would make every share measured after it meaningless).
fn cpu_of(rt: &Runtime, ids: &[TaskId]) -> Vec<f64> {
    let live = rt.live_tasks();
    ids.iter()
        .map(|id| {
            let t = live.iter().find(|t| t.id == *id);
            t.unwrap_or_else(|| panic!("task {id} ended: {:?}", rt.reports()))
                .cpu_ms
        })
        .collect()
}

/// Runs for `d`, returns each task's CPU over that time.
fn measure(rt: &Runtime, ids: &[TaskId], d: Duration) -> Vec<f64> {
    let before = cpu_of(rt, ids);
    std::thread::sleep(d);
    let after = cpu_of(rt, ids);
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

fn fractions(v: &[f64]) -> Vec<f64> {
    let total: f64 = v.iter().sum();
    v.iter().map(|x| x / total).collect()
}

fn spinner(dir: &std::path::Path, name: &str, share: u32, priority: i32) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::SPIN);
    s.sched.params = Params {
        share,
        tickets: share * 100,
        priority,
    };
    s
}

#[test]
fn stride_shares_in_the_running_system() {
    let dir = tempfile::tempdir().unwrap();
    let rt = rt_with(PolicyKind::Stride, vec![]);
    let ids: Vec<_> = (1..=4)
        .map(|i| {
            rt.spawn(&spinner(dir.path(), &format!("s{i}"), i, 0))
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let f = fractions(&measure(&rt, &ids, Duration::from_millis(1500)));
    for (i, x) in f.iter().enumerate() {
        let want = (i + 1) as f64 / 10.0;
        assert!((x - want).abs() < 0.03, "shares {f:?}");
    }
    rt.kill_all("done");
}

#[test]
fn fixed_priority_starves_lower_priorities() {
    let dir = tempfile::tempdir().unwrap();
    let rt = rt_with(PolicyKind::Priority, vec![]);
    let low = rt.spawn(&spinner(dir.path(), "low", 1, 1)).unwrap();
    let high = rt.spawn(&spinner(dir.path(), "high", 1, 9)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let used = measure(&rt, &[low, high], Duration::from_millis(500));
    // Thresholds are loose: other tests share the machine's two cores.
    assert!(used[0] < 1.0 && used[1] > 50.0, "{used:?}");
    rt.kill(high, "done").unwrap();
    let used = measure(&rt, &[low], Duration::from_millis(300));
    assert!(used[0] > 30.0, "low runs once high is gone: {used:?}");
    rt.kill_all("done");
}

#[test]
fn caps_limit_a_task_and_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let group = GroupSpec {
        name: "capped".into(),
        parent: None,
        policy: PolicyKind::RoundRobin,
        params: Params::default(),
        cap: Some(0.2),
        cpu_quota: None,
        bandwidth_share: 1,
        bandwidth_limit: None,
        memory_limit: None,
        memory_guarantee: 0,
    };
    let rt = rt_with(PolicyKind::RoundRobin, vec![group]);
    let mut capped = spinner(dir.path(), "capped", 1, 0);
    capped.sched.cap = Some(0.25);
    let a = rt.spawn(&capped).unwrap();
    let b = rt.spawn(&spinner(dir.path(), "free", 1, 0)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let used = measure(&rt, &[a, b], Duration::from_millis(1500));
    check_cap(0.25, used[0], used[0] + used[1], t.elapsed(), "task");
    rt.kill_all("done");

    // Two members of a group capped at 0.2, beside a free spinner.
    let mut ids: Vec<_> = (0..2)
        .map(|i| {
            let mut s = spinner(dir.path(), &format!("g{i}"), 1, 0);
            s.sched.group = Some("capped".into());
            rt.spawn(&s).unwrap()
        })
        .collect();
    ids.push(rt.spawn(&spinner(dir.path(), "free2", 1, 0)).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let used = measure(&rt, &ids, Duration::from_millis(1500));
    check_cap(
        0.2,
        used[0] + used[1],
        used.iter().sum(),
        t.elapsed(),
        "group",
    );
    rt.kill_all("done");
}

/// A cap holds against the clock: `capped` ms of CPU in `wall` is at most
/// `cap` of a core (plus a window's slack), however idle the machine. And
/// it costs nothing it need not: the capped side gets at least what the
/// cap allows of the time the worker ran, or half of what the worker ran
/// (round robin), which ever is less. On a busy machine the worker itself
/// runs less than a core, and time the cap allows while the host has
/// taken the worker away is lost: the test judges against what the
/// worker got, not against the clock.
fn check_cap(cap: f64, capped: f64, worker: f64, wall: Duration, what: &str) {
    let wall_ms = wall.as_secs_f64() * 1000.0;
    let core = capped / wall_ms;
    assert!(
        core <= cap * 1.25,
        "{what} cap {cap}: used {core:.3} of a core"
    );
    let owed = (cap * worker.min(wall_ms)).min(worker / 2.0);
    assert!(
        capped >= 0.75 * owed,
        "{what} cap {cap}: got {capped:.0} ms, owed {owed:.0} (worker ran {worker:.0} ms in {wall_ms:.0})"
    );
}

#[test]
fn group_quota_kills_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let group = GroupSpec {
        name: "tenant".into(),
        parent: None,
        policy: PolicyKind::RoundRobin,
        params: Params::default(),
        cap: None,
        cpu_quota: Some(Duration::from_millis(200)),
        bandwidth_share: 1,
        bandwidth_limit: None,
        memory_limit: None,
        memory_guarantee: 0,
    };
    let rt = rt_with(PolicyKind::RoundRobin, vec![group]);
    let mut sleeper = spec(dir.path(), "sleeper", guests::SLEEP);
    sleeper.sched.group = Some("tenant".into());
    let mut ids = vec![rt.spawn(&sleeper).unwrap()];
    for i in 0..2 {
        let mut s = spinner(dir.path(), &format!("t{i}"), 1, 0);
        s.sched.group = Some("tenant".into());
        ids.push(rt.spawn(&s).unwrap());
    }
    let outsider = rt.spawn(&spinner(dir.path(), "outsider", 1, 0)).unwrap();
    let mut total = 0.0;
    for id in ids {
        let r = wait(&rt, id, Duration::from_secs(10));
        assert_eq!(r.status, "killed", "{r:?}");
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("group tenant cpu quota exceeded"),
            "{r:?}"
        );
        total += r.cpu_ms;
    }
    assert!((200.0..260.0).contains(&total), "group used {total} ms");
    assert!(rt
        .wait_timeout(outsider, Some(Duration::ZERO))
        .unwrap()
        .is_none());
    rt.kill_all("done");
}

#[test]
fn suspend_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let rt = rt_with(PolicyKind::RoundRobin, vec![]);
    let spin = rt.spawn(&spinner(dir.path(), "spin", 1, 0)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    rt.suspend(spin).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let used = measure(&rt, &[spin], Duration::from_millis(300));
    assert!(used[0] < 1.0, "suspended task ran {used:?}");
    rt.resume(spin).unwrap();
    let used = measure(&rt, &[spin], Duration::from_millis(300));
    assert!(used[0] > 20.0, "resumed task did not run: {used:?}");

    // A task suspended while blocked does not run when its wait ends: it
    // prints, sleeps 200 ms, prints again; suspended after the first line,
    // the second waits for the resume.
    let state = |id| {
        rt.live_tasks()
            .into_iter()
            .find(|t| t.id == id)
            .map(|t| t.state)
    };
    let lines = || stdout_of(dir.path(), "nap").matches("grow:").count();
    // Suspended while blocked in its sleep; a machine too busy to catch it
    // there (the second line already out) tries again with a new one.
    let nap = (0..5)
        .find_map(|_| {
            let mut nap = spec(dir.path(), "nap", guests::NEST);
            nap.args = vec!["grow".into()];
            nap.limits.memory_limit = Some(1 << 20);
            let nap = rt.spawn(&nap).unwrap();
            let t = Instant::now();
            while lines() < 2 {
                if lines() == 1 && state(nap).as_deref() == Some("blocked") {
                    rt.suspend(nap).unwrap();
                    if lines() == 1 {
                        return Some(nap);
                    }
                    rt.resume(nap).unwrap();
                    break;
                }
                assert!(t.elapsed() < Duration::from_secs(10), "never blocked");
                std::thread::sleep(Duration::from_micros(200));
            }
            wait(&rt, nap, Duration::from_secs(10));
            None
        })
        .expect("never caught the task blocked");
    std::thread::sleep(Duration::from_millis(600)); // its 200 ms wait ends meanwhile
    assert_eq!(lines(), 1, "ran while suspended");
    assert_eq!(state(nap).as_deref(), Some("suspended"));
    rt.resume(nap).unwrap();
    assert_eq!(wait(&rt, nap, Duration::from_secs(10)).exit_code, Some(0));
    assert_eq!(lines(), 2);

    // A suspended task can still be killed.
    let napper = rt
        .spawn(&spec(dir.path(), "sleeper", guests::SLEEP))
        .unwrap();
    rt.suspend(napper).unwrap();
    rt.kill(napper, "killed while suspended").unwrap();
    assert_eq!(wait(&rt, napper, Duration::from_secs(5)).status, "killed");
    assert!(rt.suspend(napper).is_err(), "gone");
    rt.kill_all("done");
}

fn work_server(dir: &std::path::Path, priority: i32, inheritance: bool) -> warden::TaskSpec {
    let mut s = spec(dir, "server", guests::WORK);
    s.args = vec!["server".into(), "2000000".into()];
    s.ipc.provides = vec!["work".into()];
    s.sched.params.priority = priority;
    s.sched.inheritance = inheritance;
    s
}

fn work_client(dir: &std::path::Path, calls: u32, priority: i32) -> warden::TaskSpec {
    let mut s = spec(dir, "client", guests::WORK);
    s.args = vec!["client".into(), calls.to_string()];
    s.ipc.uses = vec!["work".into()];
    s.sched.params.priority = priority;
    s
}

/// Priority inheritance: a high-priority client calling a low-priority
/// server is not held up by a medium-priority hog, because the server runs
/// at the client's priority; without inheritance the client waits forever.
/// The server's CPU is charged to the client.
#[test]
fn inheritance_prevents_priority_inversion() {
    for inheritance in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt_with(PolicyKind::Priority, vec![]);
        let server = rt.spawn(&work_server(dir.path(), 1, inheritance)).unwrap();
        // The hog would starve it before it registers: wait for it in
        // `recv`.
        wait_blocked(&rt, server);
        let _hog = rt.spawn(&spinner(dir.path(), "hog", 1, 5)).unwrap();
        let client = rt.spawn(&work_client(dir.path(), 50, 9)).unwrap();
        if inheritance {
            let r = rt
                .wait_timeout(client, Some(Duration::from_secs(20)))
                .unwrap()
                .unwrap_or_else(|| {
                    panic!(
                        "client did not finish: {:?} {}",
                        rt.live_tasks(),
                        stdout_of(dir.path(), "client")
                    )
                });
            assert_served_on_the_clients_account(&rt, &r, server);
        } else {
            // The client has made its first call (the name is registered,
            // so it is blocked in the call, not the lookup) and, the hog
            // starving the server, gets no answer.
            wait_blocked(&rt, client);
            let done = rt
                .wait_timeout(client, Some(Duration::from_secs(1)))
                .unwrap();
            assert!(
                done.is_none(),
                "without inheritance the hog starves the server"
            );
        }
        rt.kill_all("done");
    }
}

/// The same when each call outlasts the server's time slice: the server,
/// handed the call directly, runs out its slice inside the client's call
/// and must then still run on the client's context, not its own.
#[test]
fn inheritance_holds_when_a_call_outlasts_the_servers_slice() {
    let dir = tempfile::tempdir().unwrap();
    let rt = rt_with(PolicyKind::Priority, vec![]);
    let mut server = work_server(dir.path(), 1, true);
    // About 30 ms of work per call here: several 4 ms slices.
    server.args[1] = "200000000".into();
    let server = rt.spawn(&server).unwrap();
    // The hog would starve it before it registers: wait for it in `recv`.
    wait_blocked(&rt, server);
    let _hog = rt.spawn(&spinner(dir.path(), "hog", 1, 5)).unwrap();
    let client = rt.spawn(&work_client(dir.path(), 5, 9)).unwrap();
    let r = rt
        .wait_timeout(client, Some(Duration::from_secs(20)))
        .unwrap()
        .unwrap_or_else(|| panic!("client did not finish: {:?}", rt.live_tasks()));
    assert_served_on_the_clients_account(&rt, &r, server);
    rt.kill_all("done");
}

/// The client ended well, and the server's work for it was charged to
/// the client: the server's own account shows a fraction of it.
fn assert_served_on_the_clients_account(rt: &Runtime, r: &warden::TaskReport, server: TaskId) {
    assert_eq!(r.exit_code, Some(0));
    let server_cpu = cpu_of(rt, &[server])[0];
    assert!(
        r.cpu_ms > 5.0 * server_cpu.max(0.1),
        "client {} ms, server {server_cpu} ms",
        r.cpu_ms
    );
}

/// Stride at equal shares: a client calling a busy server, against a CPU
/// hog. With inheritance the pair is one scheduling context and the
/// server's CPU is on the client's account; the figures are printed.
#[test]
fn inheritance_under_stride() {
    let mut pair_share = vec![];
    for inheritance in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt_with(PolicyKind::Stride, vec![]);
        let server = rt.spawn(&work_server(dir.path(), 0, inheritance)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let hog = rt.spawn(&spinner(dir.path(), "hog", 1, 0)).unwrap();
        let client = rt.spawn(&work_client(dir.path(), 1_000_000, 0)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let used = measure(&rt, &[client, server, hog], Duration::from_millis(1500));
        let f = fractions(&used);
        println!(
            "inheritance {inheritance}: client {:.3} server {:.3} hog {:.3} of the CPU",
            f[0], f[1], f[2]
        );
        if inheritance {
            assert!(
                f[0] > 5.0 * f[1],
                "server CPU is on the client's account: {f:?}"
            );
        } else {
            assert!(f[1] > 5.0 * f[0], "server CPU is its own: {f:?}");
        }
        pair_share.push(f[0] + f[1]);
        rt.kill_all("done");
    }
    // With inheritance the pair is one context beside the hog's: half of
    // the CPU the worker was given (the shares are of what the tasks
    // received, so a busy machine does not move them).
    assert!((pair_share[0] - 0.5).abs() < 0.08, "{pair_share:?}");
}

/// Donation passes along a call chain: a high-priority client calls a
/// low-priority relay, which calls a low-priority server; a medium-priority
/// hog holds up neither while the client waits.
#[test]
fn inheritance_follows_call_chains() {
    for inheritance in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt_with(PolicyKind::Priority, vec![]);
        let back = rt.spawn(&work_server(dir.path(), 1, inheritance)).unwrap();
        let mut relay = spec(dir.path(), "relay", guests::WORK);
        // Enough work per call that the CPU served on the client's behalf
        // dwarfs what the servers spend starting up on their own account.
        relay.args = vec!["relay".into(), "3000000".into()];
        relay.ipc.provides = vec!["front".into()];
        relay.ipc.uses = vec!["work".into()];
        relay.sched.params.priority = 1;
        relay.sched.inheritance = inheritance;
        let relay = rt.spawn(&relay).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let _hog = rt.spawn(&spinner(dir.path(), "hog", 1, 5)).unwrap();
        let mut client = work_client(dir.path(), 30, 9);
        client.args.push("front".into());
        client.ipc.uses = vec!["front".into()];
        let client = rt.spawn(&client).unwrap();
        let done = rt
            .wait_timeout(client, Some(Duration::from_secs(3)))
            .unwrap();
        if inheritance {
            let r = done.unwrap_or_else(|| panic!("client blocked: {:?}", rt.live_tasks()));
            assert_eq!(r.exit_code, Some(0));
            let servers: f64 = cpu_of(&rt, &[back, relay]).iter().sum();
            assert!(
                r.cpu_ms > 5.0 * servers.max(0.1),
                "client {} ms, servers {servers} ms",
                r.cpu_ms
            );
        } else {
            assert!(
                done.is_none(),
                "without inheritance the hog starves the chain"
            );
        }
        rt.kill_all("done");
    }
}

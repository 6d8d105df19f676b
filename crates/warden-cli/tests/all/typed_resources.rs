//! Resources across typed calls: a server's counters (`counter_server.c`)
//! held by clients (`counter_client.c`) as handles of their own, made,
//! used, given back, dropped, released at the holder's death, revoked at
//! the server's, bounded by `max_handles`, and useless when forged.

use crate::components::{component, runtime};
use crate::util::{self, guests};
use std::path::Path;
use std::time::{Duration, Instant};
use warden::{Runtime, TaskReport, TaskSpec};

const IFACE: &str = "warden-test:kv/counters";
const LIMIT: Duration = Duration::from_secs(60);

fn server(dir: &Path, passive: bool) -> TaskSpec {
    let mut s = util::spec(dir, "counters", component(guests::COUNTER_SERVER));
    s.serves = vec![IFACE.into()];
    s.ipc.provides = vec!["counters".into()];
    s.passive = passive;
    s
}

/// A client named `name` running `counter_client ARGS`.
fn client(dir: &Path, name: &str, args: &[&str]) -> TaskSpec {
    let mut s = util::spec(dir, name, component(guests::COUNTER_CLIENT));
    s.args = args.iter().map(|a| a.to_string()).collect();
    s.ipc.uses = vec!["counters".into()];
    s.binds = vec![(IFACE.into(), "counters".into())];
    s
}

fn reason(r: &TaskReport) -> &str {
    r.reason.as_deref().unwrap_or("")
}

/// Runs `live` clients until one reports no counter alive (releases run
/// on the server's task, in their own time): the count last seen.
fn live_reaches_zero(rt: &Runtime, dir: &Path) -> String {
    let until = Instant::now() + LIMIT;
    let mut n = 0;
    loop {
        n += 1;
        let name = format!("live{n}");
        let r = util::run_one(rt, &client(dir, &name, &["live"]), LIMIT);
        let out = util::stdout_of(dir, &name);
        if out.contains("live 0\n") || Instant::now() > until {
            assert_eq!(r.exit_code, Some(0), "{r:?}");
            return out;
        }
    }
}

#[test]
fn a_handle_is_made_used_borrowed_given_back_and_dropped() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        rt.spawn(&server(dir.path(), passive)).unwrap();
        let r = util::run_one(&rt, &client(dir.path(), "client", &["check"]), LIMIT);
        let out = util::stdout_of(dir.path(), "client");
        assert_eq!(r.exit_code, Some(0), "passive {passive}: {r:?}\n{out}");
        assert!(
            out.contains("counter checks passed"),
            "passive {passive}: {out}"
        );
        rt.kill_all("test over");
    }
}

/// A client that ends holding counters gives them all back: the server's
/// destructors run on its own task, and its live count returns to 0.
#[test]
fn a_holder_s_death_releases_what_it_held() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        rt.spawn(&server(dir.path(), passive)).unwrap();
        let r = util::run_one(&rt, &client(dir.path(), "holder", &["hold", "50"]), LIMIT);
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        let out = util::stdout_of(dir.path(), "holder");
        assert_eq!(out, "client ready\nholding 50, live 50\n");
        let out = live_reaches_zero(&rt, dir.path());
        assert!(out.contains("live 0\n"), "passive {passive}: {out}");
        rt.kill_all("test over");
    }
}

/// The server's death revokes the handles it gave: the holder's next
/// call with one fails, naming the server, and harms nothing else.
#[test]
fn a_server_s_death_revokes_its_handles() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let s = rt.spawn(&server(dir.path(), passive)).unwrap();
        let c = rt.spawn(&client(dir.path(), "waiter", &["wait"])).unwrap();
        util::wait_for_output(dir.path(), "waiter", "made\n");
        rt.kill(s, "revoked by the test").unwrap();
        let r = util::wait(&rt, c, LIMIT);
        assert_eq!(r.status, "trapped", "passive {passive}: {r:?}");
        assert!(
            reason(&r).contains("the server counters was killed (revoked by the test)"),
            "passive {passive}: {r:?}"
        );
        rt.kill_all("test over");
    }
}

/// A handle the client was never given, or one it gave back, ends only
/// that client: the server serves the next one as before.
#[test]
fn forged_and_spent_handles_end_only_their_holder() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&server(dir.path(), false)).unwrap();
    for op in ["forged", "reuse"] {
        let r = util::run_one(&rt, &client(dir.path(), op, &[op]), LIMIT);
        assert_eq!(r.status, "trapped", "{op}: {r:?}");
        assert!(!util::stdout_of(dir.path(), op).contains("gave"), "{op}");
    }
    let r = util::run_one(&rt, &client(dir.path(), "client", &["check"]), LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(util::stdout_of(dir.path(), "client").contains("counter checks passed"));
    assert!(live_reaches_zero(&rt, dir.path()).contains("live 0\n"));
}

/// A call whose results would give a client more handles than its
/// `max_handles` fails, and the server gets them back.
#[test]
fn a_client_holds_at_most_max_handles() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&server(dir.path(), false)).unwrap();
    let mut greedy = client(dir.path(), "greedy", &["hold", "40"]);
    greedy.ipc.max_handles = 16;
    let r = util::run_one(&rt, &greedy, LIMIT);
    assert_eq!(r.status, "trapped", "{r:?}");
    assert!(
        reason(&r).contains(
            "typed call warden-test:kv/counters@0.1.0.many: its results hold 40 handles, past \
             the caller's max_handles (16; it holds 0)"
        ),
        "{r:?}"
    );
    assert!(live_reaches_zero(&rt, dir.path()).contains("live 0\n"));
    // Within the bound, the same call succeeds.
    let mut modest = client(dir.path(), "modest", &["hold", "16"]);
    modest.ipc.max_handles = 16;
    let r = util::run_one(&rt, &modest, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
}

/// Resource types are checked at bind as any type is: a client whose
/// `close` borrows where the server's takes the counter is refused,
/// naming both types.
#[test]
fn a_changed_resource_parameter_is_refused_at_bind() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&server(dir.path(), false)).unwrap();
    let mut c = client(dir.path(), "probe", &["check"]);
    c.module = component(guests::COUNTERS_BORROWED).into();
    let r = util::run_one(&rt, &c, LIMIT);
    assert_eq!(
        reason(&r),
        "cannot start: warden-test:kv/counters@0.1.0: function close: the client's type is \
         func(c: borrow<counter>) -> u32 but the server's is func(c: own<counter>) -> u32",
        "{r:?}"
    );
    assert!(!util::stdout_of(dir.path(), "probe").contains("checks"));
}

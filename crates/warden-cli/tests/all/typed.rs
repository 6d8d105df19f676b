//! Typed services: a component serving a WIT interface (`kv_server.c`),
//! components importing it (`kv_client.c`, and `kv_probe.c` against
//! changed copies of the interface), all built by the real toolchains
//! and bound by their specs or a manifest.

use crate::components::{component, runtime};
use crate::util::{self, guests, warden};
use std::path::Path;
use std::time::Duration;
use warden::{Runtime, TaskReport, TaskSpec};

const IFACE: &str = "warden-test:kv/store";
const LIMIT: Duration = Duration::from_secs(60);

/// The server's spec: serving the store as "kv" (passive if `passive`).
fn server(dir: &Path, passive: bool) -> TaskSpec {
    let mut s = util::spec(dir, "kv", component(guests::KV_SERVER));
    s.serves = vec![IFACE.into()];
    s.ipc.provides = vec!["kv".into()];
    s.passive = passive;
    s
}

/// A client's spec, running `kv_client ARGS` bound to "kv".
fn client(dir: &Path, module: &'static str, args: &[&str]) -> TaskSpec {
    let mut s = util::spec(dir, "client", component(module));
    s.args = args.iter().map(|a| a.to_string()).collect();
    s.ipc.uses = vec!["kv".into()];
    s.binds = vec![(IFACE.into(), "kv".into())];
    s
}

/// Starts `server`, runs `client` to its end: the client's report, the
/// server's id.
fn call(rt: &Runtime, server: &TaskSpec, client: &TaskSpec) -> (TaskReport, warden::TaskId) {
    let s = rt.spawn(server).expect("server spawns");
    let report = util::run_one(rt, client, LIMIT);
    (report, s)
}

fn reason(r: &TaskReport) -> &str {
    r.reason.as_deref().unwrap_or("")
}

#[test]
fn values_cross_by_copy_to_an_active_and_a_passive_server() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let (r, _) = call(
            &rt,
            &server(dir.path(), passive),
            &client(dir.path(), guests::KV_CLIENT, &["check"]),
        );
        let out = util::stdout_of(dir.path(), "client");
        assert_eq!(r.exit_code, Some(0), "passive {passive}: {r:?}\n{out}");
        assert!(
            out.contains("typed checks passed"),
            "passive {passive}: {out}"
        );
        // The store lives on in the server's memory: a second client
        // finds the first's keys (its first check fails and says so,
        // printing between its calls).
        let mut again = client(dir.path(), guests::KV_CLIENT, &["check"]);
        again.stdio.stdout = warden::Output::File(dir.path().join("again.out"));
        let r = util::run_one(&rt, &again, LIMIT);
        let out = util::stdout_of(dir.path(), "again");
        assert_eq!(r.exit_code, Some(1), "passive {passive}: {r:?}\n{out}");
        assert!(out.contains("FAIL: set apple\n"), "{out}");
        rt.kill_all("test over");
    }
}

/// A server that imports an interface itself (a relay in front of the
/// store) has its imports bound at its start, as a client's are: its
/// client's calls go through it to the store, active and passive alike.
#[test]
fn a_server_s_own_imports_are_bound_at_its_start() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        rt.spawn(&server(dir.path(), false)).unwrap();
        let mut relay = util::spec(dir.path(), "relay", component(guests::KV_RELAY));
        relay.serves = vec!["warden-test:kv/front".into()];
        relay.ipc.provides = vec!["front".into()];
        relay.passive = passive;
        relay.ipc.uses = vec!["kv".into()];
        relay.binds = vec![(IFACE.into(), "kv".into())];
        let mut front = util::spec(dir.path(), "client", component(guests::KV_FRONT_CLIENT));
        front.args = vec!["4".into()];
        front.ipc.uses = vec!["front".into()];
        front.binds = vec![("warden-test:kv/front".into(), "front".into())];
        let (r, _) = call(&rt, &relay, &front);
        let out = util::stdout_of(dir.path(), "client");
        assert_eq!(r.exit_code, Some(0), "passive {passive}: {r:?}\n{out}");
        assert_eq!(out, "front ok 4\n", "passive {passive}");
        rt.kill_all("test over");
    }
}

#[test]
fn results_are_copied_into_the_caller_within_its_message_bound() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let s = rt.spawn(&server(dir.path(), false)).unwrap();
    let r = util::run_one(
        &rt,
        &client(dir.path(), guests::KV_CLIENT, &["bytes", "60000"]),
        LIMIT,
    );
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(util::stdout_of(dir.path(), "client").contains("got 60000 bytes, checked"));
    // Past the caller's max_message_bytes (64 KiB by default) either way:
    // the call fails, naming the bound; the server lives on.
    let mut big = client(dir.path(), guests::KV_CLIENT, &["bytes", "2000000"]);
    big.name = "big".into();
    let r = util::run_one(&rt, &big, LIMIT);
    assert_eq!(r.status, "trapped", "{r:?}");
    assert!(
        reason(&r).contains("its results take more than the caller's max_message_bytes"),
        "{r:?}"
    );
    let mut send = client(dir.path(), guests::KV_CLIENT, &["send", "100000"]);
    send.name = "send".into();
    let r = util::run_one(&rt, &send, LIMIT);
    assert!(reason(&r).contains("its arguments take more than"), "{r:?}");
    assert!(
        rt.task_views().iter().any(|v| v.id == s),
        "the server still serves"
    );
    rt.kill_all("test over");
}

#[test]
fn a_server_that_traps_mid_call_fails_the_call_naming_it() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let (r, s) = call(
            &rt,
            &server(dir.path(), passive),
            &client(dir.path(), guests::KV_CLIENT, &["crash"]),
        );
        assert_eq!(r.status, "trapped", "{r:?}");
        assert!(
            reason(&r)
                .contains("typed call warden-test:kv/store@0.1.0.crash: the server kv trapped"),
            "{r:?}"
        );
        let server = util::wait(&rt, s, LIMIT);
        assert_eq!(server.status, "trapped", "{server:?}");
        // The service is gone: a later client's start finds no server.
        let mut late = client(dir.path(), guests::KV_CLIENT, &["check"]);
        late.name = "late".into();
        let r = util::run_one(&rt, &late, LIMIT);
        assert!(reason(&r).contains("was not registered"), "{r:?}");
        rt.kill_all("test over");
    }
}

#[test]
fn a_hostile_answer_ends_the_server_not_the_caller_memory() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (r, s) = call(
        &rt,
        &server(dir.path(), false),
        &client(dir.path(), guests::KV_CLIENT, &["lie"]),
    );
    assert!(reason(&r).contains("the server kv trapped"), "{r:?}");
    assert!(reason(&r).contains("out of bounds"), "{r:?}");
    assert!(!util::stdout_of(dir.path(), "client").contains("lie gave"));
    assert_eq!(util::wait(&rt, s, LIMIT).status, "trapped");
}

#[test]
fn call_timeout_and_cpu_limits_end_a_call_that_never_returns() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut c = client(dir.path(), guests::KV_CLIENT, &["spin"]);
    c.call_timeout = Some(Duration::from_millis(200));
    let (r, s) = call(&rt, &server(dir.path(), false), &c);
    assert!(
        reason(&r).contains("did not answer within 200 ms (call_timeout)"),
        "{r:?}"
    );
    // Each server gone (and its name with it) before the next binds.
    rt.kill(s, "test over").unwrap();
    util::wait(&rt, s, LIMIT);
    // An active server killed by its own CPU limit mid-call.
    let mut srv = server(dir.path(), false);
    srv.limits.cpu_limit = Some(Duration::from_millis(200));
    let (r, s) = call(&rt, &srv, &client(dir.path(), guests::KV_CLIENT, &["spin"]));
    assert!(
        reason(&r).contains("the server kv was killed (cpu limit exceeded"),
        "{r:?}"
    );
    util::wait(&rt, s, LIMIT);
    // A passive one, on the caller's thread, by its call_cpu_limit; the
    // caller paid for the time (a share of the 500 ms even on a machine
    // loaded many times over: a client alone takes about 1 ms).
    let mut srv = server(dir.path(), true);
    srv.call_cpu_limit = Duration::from_millis(500);
    let (r, _) = call(&rt, &srv, &client(dir.path(), guests::KV_CLIENT, &["spin"]));
    assert!(
        reason(&r).contains("ran past its call_cpu_limit of 500 ms"),
        "{r:?}"
    );
    assert!(r.cpu_ms >= 50.0, "{r:?}");
}

#[test]
fn an_import_left_unbound_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut c = client(dir.path(), guests::KV_CLIENT, &["check"]);
    c.binds.clear();
    let (r, _) = call(&rt, &server(dir.path(), false), &c);
    assert!(
        reason(&r).contains("imports `warden-test:kv/store@0.1.0`, which no `binds` entry names"),
        "{r:?}"
    );
    assert!(!util::stdout_of(dir.path(), "client").contains("client ready"));
}

#[test]
fn a_binding_outside_uses_or_to_a_byte_service_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut c = client(dir.path(), guests::KV_CLIENT, &["check"]);
    c.ipc.uses.clear();
    let (r, _) = call(&rt, &server(dir.path(), false), &c);
    assert!(
        reason(&r).contains("which its `uses` does not grant"),
        "{r:?}"
    );
}

/// The three changed clients, the function their refusal names, and the
/// line `warden check` and `warden run` print.
const MISMATCHES: &[(&str, &str)] = &[
    (
        guests::KV_RENAMED,
        "warden-test:kv/store@0.1.0: the server has no function fetch (the client imports \
         func(key: string) -> option<list<u8>>)",
    ),
    (
        guests::KV_FIELD,
        "warden-test:kv/store@0.1.0: function entries: the client's type is func() -> \
         list<record { name: string, value: list<u8> }> but the server's is func() -> \
         list<record { key: string, value: list<u8> }>",
    ),
    (
        guests::KV_PARAM,
        "warden-test:kv/store@0.1.0: function set: the client's type is func(key: string, \
         value: string) -> u32 but the server's is func(key: string, value: list<u8>) -> u32",
    ),
];

#[test]
fn a_mismatched_client_is_refused_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&server(dir.path(), false)).unwrap();
    for (i, (module, why)) in MISMATCHES.iter().enumerate() {
        let mut c = client(dir.path(), module, &[]);
        c.name = format!("probe{i}");
        let r = util::run_one(&rt, &c, LIMIT);
        assert_eq!(reason(&r), format!("cannot start: {why}"), "{r:?}");
        assert!(!util::stdout_of(dir.path(), "client").contains("probe called"));
    }
}

#[test]
fn warden_check_and_run_refuse_a_mismatch_with_one_line() {
    for (module, why) in MISMATCHES {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[[task]]\nname = \"kv\"\nmodule = {:?}\nserves = [\"{IFACE}\"]\nprovides = [\"kv\"]\n\n\
             [[task]]\nname = \"client\"\nmodule = {:?}\nuses = [\"kv\"]\n\
             binds = {{ \"{IFACE}\" = \"kv\" }}\n",
            component(guests::KV_SERVER),
            component(module)
        );
        let path = util::manifest(dir.path(), &text);
        for command in ["check", "run"] {
            let out = warden()
                .arg(command)
                .arg(&path)
                .env("WARDEN_CACHE_DIR", crate::components::cache_dir())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command}: {err}");
            let lines: Vec<&str> = err
                .lines()
                .filter(|l| !l.starts_with("warden: compiling"))
                .collect();
            assert_eq!(lines.len(), 1, "{command}: {err}");
            assert!(
                lines[0].ends_with(&format!("task \"client\": {why}")),
                "{command}: {err}"
            );
        }
    }
}

#[test]
fn a_manifest_system_runs_its_typed_client() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"kv\"\nmodule = {:?}\nserves = [\"{IFACE}\"]\nprovides = [\"kv\"]\n\n\
         [[task]]\nname = \"client\"\nmodule = {:?}\nargs = [\"check\"]\nuses = [\"kv\"]\n\
         binds = {{ \"{IFACE}\" = \"kv\" }}\n",
        component(guests::KV_SERVER),
        component(guests::KV_CLIENT)
    );
    let path = util::manifest(dir.path(), &text);
    let out = warden()
        .arg("run")
        .arg(&path)
        .env("WARDEN_CACHE_DIR", crate::components::cache_dir())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("typed checks passed"), "{stdout}");
    assert!(stderr.contains("task 1 (kv) exited 0"), "{stderr}");
}

/// Clients breaking the canonical ABI's rules (a key outside their
/// memory, a key that is not UTF-8, a list longer than their memory, an
/// allocator answering outside their memory) end alone; one sending more
/// than its bound has its call refused. The server, active or passive,
/// serves the next client as before.
#[test]
fn a_hostile_client_harms_only_itself() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let s = rt.spawn(&server(dir.path(), passive)).unwrap();
        for (op, why) in [
            ("wild", "out of bounds"),
            ("badutf8", "utf-8"),
            ("huge", "out of bounds"),
            ("badrealloc", "beyond end of memory"),
            ("flood", "more than the caller's max_message_bytes"),
        ] {
            let mut c = client(dir.path(), guests::KV_CLIENT, &[op]);
            c.name = op.into();
            c.stdio.stdout = warden::Output::File(dir.path().join(format!("{op}.out")));
            let r = util::run_one(&rt, &c, LIMIT);
            assert_eq!(r.status, "trapped", "{op} (passive {passive}): {r:?}");
            assert!(
                reason(&r).to_lowercase().contains(why),
                "{op} (passive {passive}): {r:?}"
            );
        }
        // The server answers the next client as before (a call whose
        // answer does not depend on what the others stored).
        let mut next = client(dir.path(), guests::KV_CLIENT, &["bytes", "1000"]);
        next.stdio.stdout = warden::Output::File(dir.path().join("next.out"));
        let r = util::run_one(&rt, &next, LIMIT);
        assert_eq!(r.exit_code, Some(0), "passive {passive}: {r:?}");
        let out = util::stdout_of(dir.path(), "next");
        assert!(out.contains("got 1000 bytes, checked"), "{out}");
        let live = rt.live_tasks();
        assert!(
            live.iter().any(|t| t.id == s),
            "passive {passive}: the server ended"
        );
        rt.kill_all("test over");
    }
}

/// An active server runs a call on its caller's scheduling context (CPU
/// inheritance, as for byte portal calls): the caller's account pays for
/// the server's spin, the server's report shows it as served, and once
/// the caller's call timed out the server is on its own account again.
#[test]
fn an_active_server_runs_on_its_caller_s_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut c = client(dir.path(), guests::KV_CLIENT, &["spin"]);
    c.call_timeout = Some(Duration::from_millis(400));
    let (r, s) = call(&rt, &server(dir.path(), false), &c);
    assert!(reason(&r).contains("call_timeout"), "{r:?}");
    // The server spins on, on its own account now.
    let own = |rt: &Runtime| rt.live_tasks().into_iter().find(|t| t.id == s).unwrap();
    let before = own(&rt).cpu_ms;
    let t = std::time::Instant::now();
    while own(&rt).cpu_ms < before + 50.0 {
        assert!(t.elapsed() < LIMIT, "the server stopped spinning");
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.kill(s, "test over").unwrap();
    let s = util::wait(&rt, s, LIMIT);
    assert!(s.served_cpu_ms > 50.0, "{s:?}");
    assert!(
        r.cpu_ms >= 0.8 * s.served_cpu_ms,
        "client {r:?}\nserver {s:?}"
    );
    assert!(s.cpu_ms >= 50.0, "{s:?}");
}

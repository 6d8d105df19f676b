//! `warden:kernel` from a component (`kernel_probe.c`): byte calls to a
//! module's service and to a passive one, a byte service served to a
//! module, memory objects, and every refusal as the module ABI's error,
//! by name.

use crate::components::{component, runtime};
use crate::util::{self, guests};
use std::path::Path;
use std::time::Duration;
use warden::TaskSpec;

const LIMIT: Duration = Duration::from_secs(60);

fn probe(dir: &Path, name: &str, args: &[&str]) -> TaskSpec {
    let mut s = util::spec(dir, name, component(guests::KERNEL_PROBE));
    s.args = args.iter().map(|a| a.to_string()).collect();
    s
}

/// The module echo server, serving `name`.
fn echo_server(dir: &Path, name: &str) -> TaskSpec {
    let mut s = util::spec(dir, name, guests::ECHO);
    s.args = vec!["server".into(), name.into()];
    s.ipc.provides = vec![name.into()];
    s
}

/// A component calls a module's echo service through the same name
/// service and call slots a module uses.
#[test]
fn a_component_calls_a_module_s_byte_service() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&echo_server(dir.path(), "echo")).unwrap();
    let mut c = probe(dir.path(), "client", &["call", "echo", "hello", "warden"]);
    c.ipc.uses = vec!["echo".into()];
    let r = util::run_one(&rt, &c, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        util::stdout_of(dir.path(), "client"),
        "hello -> hello\nwarden -> warden\n"
    );
    assert_eq!(r.ipc_calls, 2, "{r:?}");
}

/// A component serves a byte service a module calls: registered under
/// its `provides`, each call received, answered, and its caller named.
#[test]
fn a_component_serves_a_byte_service_to_a_module() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut s = probe(dir.path(), "upper", &["serve", "upper", "2"]);
    s.ipc.provides = vec!["upper".into()];
    let server = rt.spawn(&s).unwrap();
    util::wait_for_output(dir.path(), "upper", "ready\n");
    let mut caller = util::spec(dir.path(), "caller", guests::CALLER);
    caller.args = vec!["upper".into(), "abc".into(), "Warden 1".into()];
    caller.ipc.uses = vec!["upper".into()];
    let r = util::run_one(&rt, &caller, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let out = util::stdout_of(dir.path(), "caller");
    assert_eq!(out, "abc -> ABC\nWarden 1 -> WARDEN 1\n");
    let r = util::wait(&rt, server, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(util::stdout_of(dir.path(), "upper"), "ready\nserved 2\n");
}

#[test]
fn a_component_uses_memory_objects_within_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let r = util::run_one(&rt, &probe(dir.path(), "mem", &["mem"]), LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        util::stdout_of(dir.path(), "mem"),
        "read past the end: error range\nread of 4 GiB: error quota\n\
         write past the end: error range\nclosed: error bad-handle\nmem ok\n"
    );
}

/// Forged handles, names outside the grants, waits that time out and
/// answers to nothing fail with the module ABI's errors, by name.
#[test]
fn refusals_are_the_kernel_s_errors_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&echo_server(dir.path(), "secret")).unwrap();
    util::wait_for_output(dir.path(), "secret", "server: ready\n");
    let mut p = probe(dir.path(), "probe", &["errors"]);
    p.ipc.uses = vec!["never".into()];
    let r = util::run_one(&rt, &p, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        util::stdout_of(dir.path(), "probe"),
        "forged portal: error bad-handle\nhandle past i32: error bad-handle\n\
         lookup secret: error denied\nlookup never: error timeout\n\
         reply to no call: error bad-handle\nempty name: error inval\n"
    );
}

/// `task.set-call-timeout` bounds a call made "for ever": a call to a
/// server that never answers ends with `timeout`, and the caller goes on.
#[test]
fn a_call_timeout_set_through_the_kernel_bounds_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&echo_server(dir.path(), "echo")).unwrap();
    let mut c = probe(dir.path(), "client", &["deadline", "echo", "hang", "after"]);
    c.ipc.uses = vec!["echo".into()];
    let r = util::run_one(&rt, &c, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    // The echo server still sleeps in the first call: the second waits
    // behind it, and times out too.
    assert_eq!(
        util::stdout_of(dir.path(), "client"),
        "hang -> error timeout\nafter -> error timeout\n"
    );
    rt.kill_all("test over");
}

/// A component that grabs what it can gets the kernel's errors: a memory
/// object past its budget is `no-mem`, handles past `max_handles` are
/// `quota`, and the host holds nothing more for it.
#[test]
fn a_hoarding_component_meets_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut p = probe(dir.path(), "hog", &["hog"]);
    p.limits.memory_limit = Some(64 << 20);
    p.ipc.max_handles = 100;
    let r = util::run_one(&rt, &p, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    // One handle is the object itself.
    assert_eq!(
        util::stdout_of(dir.path(), "hog"),
        "1 TiB object: error no-mem\n99 more handles, then error quota\n"
    );
}

/// A component's byte calls reuse its call slot: the reply's buffer is
/// charged to the caller once, not once per call. 600 echoed calls of
/// 32 KiB each would charge about 19 MiB if every call's reply buffer
/// stayed charged; within a 12 MiB memory limit, every one succeeds.
#[test]
fn many_byte_calls_from_a_component_charge_its_slot_once() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.spawn(&echo_server(dir.path(), "echo")).unwrap();
    let mut c = probe(dir.path(), "client", &["repeat", "echo", "600", "32768"]);
    c.ipc.uses = vec!["echo".into()];
    c.limits.memory_limit = Some(12 << 20);
    let r = util::run_one(&rt, &c, LIMIT);
    assert_eq!(
        util::stdout_of(dir.path(), "client"),
        "600 calls echoed\n",
        "{r:?}"
    );
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.ipc_calls, 600, "{r:?}");
}

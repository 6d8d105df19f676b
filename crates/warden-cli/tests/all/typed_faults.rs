//! Typed calls whose functions return `warden:kernel`'s error
//! (`careful_client.c` against `counter_server.c`'s careful interface):
//! a server's trap, death or silence past the call timeout comes back
//! as an error by name, and the caller goes on.

use crate::components::{component, runtime};
use crate::util::{self, guests};
use std::path::Path;
use std::time::Duration;
use warden::TaskSpec;

const LIMIT: Duration = Duration::from_secs(60);

fn server(dir: &Path, passive: bool) -> TaskSpec {
    let mut s = util::spec(dir, "careful", component(guests::COUNTER_SERVER));
    s.serves = vec!["warden-test:kv/careful".into()];
    s.ipc.provides = vec!["careful".into()];
    s.passive = passive;
    s
}

fn client(dir: &Path, calls: &[&str]) -> TaskSpec {
    let mut s = util::spec(dir, "client", component(guests::CAREFUL_CLIENT));
    s.args = calls.iter().map(|a| a.to_string()).collect();
    s.ipc.uses = vec!["careful".into()];
    s.binds = vec![("warden-test:kv/careful".into(), "careful".into())];
    s
}

#[test]
fn a_server_s_trap_is_an_error_the_caller_gets() {
    for passive in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let s = rt.spawn(&server(dir.path(), passive)).unwrap();
        let r = util::run_one(
            &rt,
            &client(dir.path(), &["seven", "crash", "seven"]),
            LIMIT,
        );
        assert_eq!(r.exit_code, Some(0), "passive {passive}: {r:?}");
        assert_eq!(
            util::stdout_of(dir.path(), "client"),
            "seven: 7\ncrash: error peer-died\nseven: error peer-died\n",
            "passive {passive}"
        );
        assert_eq!(util::wait(&rt, s, LIMIT).status, "trapped");
    }
}

#[test]
fn a_call_past_its_timeout_is_an_error_the_caller_gets() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let s = rt.spawn(&server(dir.path(), false)).unwrap();
    let mut c = client(dir.path(), &["spin"]);
    c.call_timeout = Some(Duration::from_millis(200));
    let r = util::run_one(&rt, &c, LIMIT);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        util::stdout_of(dir.path(), "client"),
        "spin: error timeout\n"
    );
    // Killed, the server's callers get peer-died.
    rt.kill(s, "test over").unwrap();
    util::wait(&rt, s, LIMIT);
}

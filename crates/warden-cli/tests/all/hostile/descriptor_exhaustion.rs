//! Ten tasks each opening 256 listeners in a process allowed 2,048
//! descriptors (and unable to raise it): tasks together hold at most
//! half, files and sockets alike, so the web server and the control API
//! keep the descriptors they need and keep answering.

use super::site::*;
use std::os::unix::process::CommandExt;
use std::time::Duration;

const LIMIT: u64 = 2048;
const TASKS: usize = 10;

/// The process's descriptor limit set to [`LIMIT`], with the capability
/// to raise it dropped (Warden raises its limit at start when allowed).
fn limited(cmd: &mut std::process::Command) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            const CAP_SYS_RESOURCE: libc::c_ulong = 24;
            libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0);
            let l = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn listeners_cannot_take_the_servers_descriptors() {
    flood(guests::NET, "quota");
}

/// The same through a component's `wasi:sockets` (Python's `socket`).
#[test]
fn a_component_s_listeners_cannot_take_the_servers_descriptors() {
    flood(guests::built(guests::PY_COMMAND), "EMFILE");
}

/// [`TASKS`] tasks of `module` (`listeners 256` in its arguments) each
/// open what they may and hold it; those refused say `refused`. Their
/// memory limits are high enough that descriptors run out first.
fn flood(module: &str, refused: &str) {
    let mut text = format!("[[http]]\nlisten = \"127.0.0.1:0\"\n{}", bystander_route());
    for i in 0..TASKS {
        text.push_str(&format!(
            "[[task]]\nname = \"l{i}\"\nmodule = \"{module}\"\nargs = [\"listeners\", \"256\"]\n\
             listen = [\"127.0.0.1:0\"]\nstdout = \"DIR/l{i}.out\"\nmemory_limit = \"256MiB\"\n",
        ));
    }
    let site = Site::start_with(&text, |launch| launch.with(limited));
    let opened = |i: usize| -> Option<u64> {
        let out = site.out(&format!("l{i}"));
        out.strip_prefix("listeners ")?
            .split([':', '\n'])
            .next()?
            .parse()
            .ok()
    };
    site.until(
        "every task has opened what it could",
        Duration::from_secs(60),
        || (0..TASKS).all(|i| opened(i).is_some()),
    );
    let total: u64 = (0..TASKS).filter_map(opened).sum();
    let refused = (0..TASKS)
        .filter(|&i| site.out(&format!("l{i}")).contains(refused))
        .count();
    eprintln!("tasks hold {total} listeners; {refused} tasks refused");
    assert!(
        total <= LIMIT / 2,
        "tasks hold {total} of {LIMIT} descriptors"
    );
    assert!(refused > 0, "no task was refused");
    for _ in 0..20 {
        site.bystander_answers();
    }
    assert_eq!(site.live("l"), TASKS, "the control API answers");
}

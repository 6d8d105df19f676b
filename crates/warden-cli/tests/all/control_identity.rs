//! One control port, unmistakable: a control address the manifest or the
//! command line names that cannot be served ends the run before any task
//! starts, and the operator commands tell the system their token file
//! names from another one that has since taken its port.

use crate::launch::Launch;
use crate::util::*;
use std::process::Stdio;
use std::time::Duration;

/// Held by someone else: `warden run` exits 2 with the reason, and the
/// task never runs — named in the manifest or with `--control`.
#[test]
fn a_named_control_address_that_is_taken_ends_the_run_before_any_task() {
    let dir = tempfile::tempdir().unwrap();
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().to_string();
    let task = format!("[[task]]\nname = 'hello'\nmodule = '{}'\n", guests::HELLO);
    let in_manifest = manifest(
        dir.path(),
        &format!("[runtime]\ncontrol = '{taken}'\n{task}"),
    );
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, &task).unwrap();
    for args in [
        vec![in_manifest.clone()],
        vec!["--control".into(), taken.clone().into(), plain],
    ] {
        let out = warden()
            .arg("run")
            .args(&args)
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("control API not served") && err.contains(&taken),
            "{err}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("hello"),
            "the task ran: {err}"
        );
    }
    drop(holder);
}

/// System A dies without cleaning up (SIGKILL); another user's system B
/// takes its port. A's operator's `warden ps` and `warden kill` reach B,
/// see that B is not the system A's token file names, and say so in one
/// line, exit 2; B's task lives on and A's stale token is never sent.
#[test]
fn operator_commands_tell_the_system_they_mean_from_another() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!("[[task]]\nname = 'sleeper'\nmodule = '{}'\n", guests::SLEEP),
    );
    let mut a = Launch::new(&m).start();
    let addr = a.control().to_string();
    let port = addr.rsplit_once(':').unwrap().1;
    let token_file = runtime_dir().join(format!("warden/control-{port}.token"));
    let stamp = std::fs::read_to_string(&token_file).unwrap();
    assert!(
        stamp
            .lines()
            .nth(1)
            .unwrap()
            .contains(&format!("pid={}", a.pid())),
        "{stamp}"
    );
    // Before: the command reaches the system it means.
    let ps = warden().args(["ps", "--control", &addr]).output().unwrap();
    assert_eq!(
        ps.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    unsafe { libc::kill(a.pid() as i32, libc::SIGKILL) };
    a.wait(Duration::from_secs(60));
    assert!(token_file.exists(), "a killed system leaves its token file");

    let other_user = dir.path().join("other-run");
    let b = Launch::new(&m)
        .control(&addr)
        .with(|c| {
            c.env("XDG_RUNTIME_DIR", &other_user);
        })
        .start();
    assert_eq!(b.control(), addr, "{}", b.stderr());
    for words in [&["ps"][..], &["kill", "sleeper"]] {
        let out = warden()
            .args(words)
            .args(["--control", &addr])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{words:?}: {err}");
        assert!(
            err.contains(&format!("served by another system (pid {}", b.pid()))
                && err.contains(&token_file.display().to_string()),
            "{words:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // B's own operator reaches it, and its task was not killed.
    let ps = warden()
        .env("XDG_RUNTIME_DIR", &other_user)
        .args(["ps", "--json", "--control", &addr])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ps.stdout);
    assert_eq!(
        ps.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    assert!(
        text.contains("\"sleeper\"") && !text.contains("killed"),
        "{text}"
    );
    let _ = std::fs::remove_file(&token_file);
}

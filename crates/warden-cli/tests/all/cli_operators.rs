//! The operator commands as a newcomer meets them: `warden spawn` with a
//! program's flags, `ps` and `top` tables, and the errors of a wrong
//! task name or a wrong address.

use crate::control::{cli, ps, start, task};
use crate::util::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits until the task named `name` has ended; its entry.
fn ended(addr: &str, name: &str) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let tasks = ps(addr);
        let entry = task(&tasks, name);
        if let Some(e) =
            entry.filter(|e| matches!(e["state"].as_str(), Some("exited" | "trapped" | "killed")))
        {
            return e.clone();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{name} never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A service and its client brought up by hand: `--provides`, `--uses`,
/// `--name`, `--env` and a relative `--dir` (made absolute by the
/// command, since the system's working directory is another) reach the
/// tasks; ended tasks say how they ended in `ps`.
#[test]
fn spawn_takes_a_programs_flags() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let spawn = |args: &[&str]| {
        let out = warden()
            .current_dir(dir.path())
            .args(["spawn", "--control", addr])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let printed = spawn(&[
        guests::ECHO,
        "--name",
        "srv",
        "--provides",
        "svc",
        "--",
        "server",
        "svc",
    ]);
    assert!(printed.starts_with("spawned task "), "{printed}");
    spawn(&[
        guests::CALLER,
        "--uses",
        "svc",
        "--name",
        "cl",
        "--",
        "svc",
        "hi",
        "bye",
    ]);
    let cl = ended(addr, "cl");
    assert_eq!(cl["exit_code"], 0, "{cl}");
    let logs = text(&cli(addr, &["logs", "cl"]).stdout);
    assert!(
        logs.contains("hi -> hi") && logs.contains("bye -> bye"),
        "{logs}"
    );

    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/f.txt"), "on the host").unwrap();
    spawn(&[
        guests::PROGRAM,
        "--name",
        "reader",
        "--dir",
        "data::/data",
        "--env",
        "WHO=operator",
        "--memory-limit",
        "2MiB",
        "--",
        "read",
        "/data/f.txt",
        "WHO",
    ]);
    let reader = ended(addr, "reader");
    assert_eq!(reader["exit_code"], 0, "{reader}");
    assert_eq!(reader["memory_limit_bytes"], 2 << 20, "{reader}");
    let logs = text(&cli(addr, &["logs", "reader"]).stdout);
    assert!(
        logs.contains("on the host") && logs.contains("WHO=operator"),
        "{logs}"
    );

    // Without --provides the server may not register its name: it exits
    // 1, and `ps --all` says so in the row of an ended task.
    spawn(&[guests::ECHO, "--name", "unnamed", "--", "server", "other"]);
    assert_eq!(ended(addr, "unnamed")["exit_code"], 1);
    let table = text(&cli(addr, &["ps", "--all"]).stdout);
    let row = table
        .lines()
        .find(|l| l.contains(" unnamed "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains(" exited ") && row.ends_with("exit 1"),
        "{table}"
    );

    // A bad flag is refused by the command, before the system sees it.
    let out = cli(addr, &["spawn", guests::HELLO, "--dir", "/surely/not/here"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--dir \"/surely/not/here\": directory not found"));
    assert!(task(&ps(addr), "hello").is_some_and(|t| t["exit_code"] == 0));
    // --export reaches the task's keys, checked as a manifest's are.
    let out = cli(addr, &["spawn", guests::HELLO, "--export", "kv"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("not among the names the task provides"),
        "{out:?}"
    );
    let out = cli(
        addr,
        &[
            "spawn",
            guests::HELLO,
            "--name",
            "ex",
            "--provides",
            "kv",
            "--export",
            "kv",
        ],
    );
    assert!(out.status.success(), "{out:?}");
}

/// `logs` and `kill` of a task that does not exist say so alike.
#[test]
fn unknown_tasks_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    for cmd in ["logs", "kill"] {
        let out = cli(sys.control(), &[cmd, "nosuch"]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            text(&out.stderr).trim(),
            "warden: no task \"nosuch\"",
            "{cmd}"
        );
    }
}

/// An address where something else answers is not taken for a Warden.
#[test]
fn another_server_is_not_a_control_api() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let page = "<html><body>a web site</body></html>";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    for cmd in [&["ps"][..], &["top", "--iterations", "1"], &["logs", "x"]] {
        let out = cli(&addr, cmd);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains("is not a Warden control API") && !err.contains("<html>"),
            "{err}"
        );
        assert!(!text(&out.stdout).contains("<html>"));
    }
}

/// `top` piped prints plain tables (no screen control), within 100
/// columns unless asked for all of them.
#[test]
fn top_piped_is_plain_and_narrow() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let out = cli(sys.control(), &["top", "--iterations", "2"]);
    let top = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!top.contains('\x1b'), "{top:?}");
    assert_eq!(top.matches("warden top: ").count(), 2, "{top}");
    assert!(top.contains("sleeper"), "{top}");
    assert!(top.lines().all(|l| l.len() <= 100), "{top}");
    let wide = text(&cli(sys.control(), &["top", "--iterations", "1", "-w"]).stdout);
    assert!(
        wide.contains("SURPLUS") && !top.contains("SURPLUS"),
        "{wide}"
    );
}

/// `POST /api/spawn` with the token: the status and body of the answer.
fn post_spawn(addr: &str, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /api/spawn HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        token_of(addr),
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The spawn endpoint takes a manifest task's keys, or the short form,
/// never a mix of the two.
#[test]
fn spawn_requests_take_one_form() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let hello = guests::HELLO;
    let task = format!(r#"{{"name": "t", "module": "{hello}", "args": ["by", "api"]}}"#);
    let (code, body) = post_spawn(
        sys.control(),
        &format!(r#"{{"task": {task}, "args": ["x"]}}"#),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("every key goes inside it"), "{body}");
    let (code, body) = post_spawn(sys.control(), "{}");
    assert!(code == 400 && body.contains("either"), "{body}");
    let counted = format!(r#"{{"task": {{"name": "c", "module": "{hello}", "count": 2}}}}"#);
    let (code, body) = post_spawn(sys.control(), &counted);
    assert!(code == 400 && body.contains("count"), "{body}");
    // With a restart policy, the root supervisor takes it: killed, it
    // comes back; a second of that name is refused.
    let sleep = guests::SLEEP;
    let kept =
        format!(r#"{{"task": {{"name": "k", "module": "{sleep}", "restart": "transient"}}}}"#);
    let (code, body) = post_spawn(sys.control(), &kept);
    assert_eq!(code, 200, "{body}");
    let (code, again) = post_spawn(sys.control(), &kept);
    assert!(code == 400 && again.contains("already"), "{again}");
    assert!(cli(sys.control(), &["kill", "k"]).status.success());
    let t = std::time::Instant::now();
    loop {
        let tasks = crate::control::ps(sys.control());
        let back = (tasks.as_array().unwrap().iter())
            .any(|t| t["name"] == "k" && t["restarts"] == 1 && t["state"] != "killed");
        if back {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "{tasks:#}"
        );
    }
    let (code, body) = post_spawn(sys.control(), &format!(r#"{{"task": {task}}}"#));
    assert_eq!(code, 200, "{body}");
    let t = ended(sys.control(), "t");
    assert_eq!(t["exit_code"], 0, "{t}");
    let logs = text(&cli(sys.control(), &["logs", "t"]).stdout);
    assert!(logs.contains("arg 1: by\narg 2: api"), "{logs}");
}

//! One program from the command line, as `wasmtime run` users run one:
//! directories, environment, a listener, limits, and its exit status.

use crate::util::*;
use std::io::BufRead;
use std::process::{Output, Stdio};
use std::time::Duration;

fn run(args: &[&str]) -> Output {
    warden()
        .args(["run", "--no-cache", "--control", "off"])
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn mapped_directory_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("f.txt"), "from the host").unwrap();
    let mapped = format!("{}::/data", data.display());
    // Flags after the program.
    let out = warden()
        .args(["run", "--no-cache", guests::PROGRAM, "--dir", &mapped])
        .args(["--env", "GREETING=hi", "--control", "off"])
        .args(["read", "/data/f.txt", "GREETING"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("/data/f.txt: from the host"), "{stdout}");
    assert!(stdout.contains("GREETING=hi"), "{stdout}");
    let out = run(&[guests::PROGRAM, "read", "/data/f.txt", "GREETING"]);
    assert_eq!(out.status.code(), Some(1), "no --dir, no file");
    // `--dir HOST` maps the directory to the same path.
    let f = data.join("f.txt");
    let out = run(&[
        "--dir",
        data.to_str().unwrap(),
        guests::PROGRAM,
        "read",
        f.to_str().unwrap(),
        "UNSET_HERE",
    ]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(": from the host\nUNSET_HERE=(unset)"),
        "{stdout}"
    );
}

#[test]
fn host_variable_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let out = warden()
        .env("WARDEN_TEST_PASSED", "passed on")
        .args([
            "run",
            "--no-cache",
            "--control",
            "off",
            "--env",
            "WARDEN_TEST_PASSED",
        ])
        .args(["--dir", &format!("{}::/d", dir.path().display())])
        .args([guests::PROGRAM, "read", "/d/f", "WARDEN_TEST_PASSED"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(stdout.contains("WARDEN_TEST_PASSED=passed on"), "{stdout}");
}

#[test]
fn exit_status_is_the_programs() {
    for code in [0, 3, 125] {
        let out = run(&[guests::PROGRAM, "exit", &code.to_string()]);
        assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    }
    let out = run(&[guests::UNREACHABLE]);
    assert_eq!(out.status.code(), Some(134), "a trap, as Wasmtime says it");
    let err = text(&out.stderr);
    assert!(
        err.contains("trapped") && err.contains("unreachable"),
        "{err}"
    );
    let out = run(&["--cpu-limit", "50ms", guests::SPIN]);
    assert_eq!(out.status.code(), Some(137), "killed at its limit");
    assert!(text(&out.stderr).contains("cpu limit"));
}

#[test]
fn listener_served_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = warden()
        .args(["run", "--no-cache", "--control", "off", guests::PROGRAM])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--dir",
            &format!("{}::/d", dir.path().display()),
        ])
        .arg("serve")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "serving on descriptor 4\n", "after the one directory");
    // The one port it listens on: the listener's, bound by `warden run`.
    let [port] = listening_ports(child.id())[..] else {
        panic!("{:?}", listening_ports(child.id()))
    };
    let addr = format!("127.0.0.1:{port}");
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", &format!("http://{addr}/")])
        .output()
        .expect("curl is installed");
    assert_eq!(text(&out.stdout), "served once\n");
    let status = wait_child(&mut child, Duration::from_secs(20), "program still running");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn limit_flags_apply() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = warden()
        .args(["run", "--no-cache", "--control", "off", "--report"])
        .arg(&report)
        .args([
            guests::GROW,
            "--memory-limit",
            "1MiB",
            "--on-memory-limit",
            "kill",
        ])
        .args(["--name", "grower"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(137), "{}", text(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let t = &r[0];
    assert_eq!(t["name"], "grower");
    assert_eq!(t["memory_limit_bytes"], 1 << 20);
    assert_eq!(t["status"], "killed");
    assert!(t["reason"].as_str().unwrap().contains("memory"), "{t}");

    let out = run(&[
        guests::GROW,
        "--memory-limit",
        "1MiB",
        "--kill-on-memory-limit",
    ]);
    assert_eq!(out.status.code(), Some(137), "killed, not refused");
    let out = run(&[guests::GROW, "--memory-limit", "1MiB"]);
    assert_eq!(out.status.code(), Some(0), "refused growth, then exit 0");

    // The service and 7 portals fill a table of 8 handles.
    let out = run(&["--max-handles", "8", guests::HOSTILE, "portal-flood"]);
    assert_eq!(text(&out.stdout), "portal-flood: 7, then quota exceeded\n");
    // After the first program argument, flags are the program's.
    let out = run(&[guests::HOSTILE, "portal-flood", "--max-handles", "8"]);
    assert!(
        text(&out.stdout).starts_with("portal-flood: 1023,"),
        "{}",
        text(&out.stdout)
    );
}

/// Every bad command line is one line on stderr and exit status 2, before
/// anything runs.
#[test]
fn bad_flags_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!("[[task]]\nname = 'a'\nmodule = '{}'\n", guests::HELLO),
    );
    let port = "127.0.0.1:0";
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus", guests::HELLO], "unexpected argument '--bogus'"),
        (&["--memry-limit", "1MiB", guests::HELLO], "--memory-limit"),
        (
            &[guests::HELLO, "--memory-limit", "lots"],
            "invalid value 'lots'",
        ),
        (&[guests::HELLO, "--cpu-limit", "5 parsecs"], "--cpu-limit"),
        (
            &[guests::HELLO, "--socket-buffer", "1"],
            "--socket-buffer: \"1\" is not from 4KiB",
        ),
        (
            &[guests::HELLO, "--listen", port, "--max-sockets", "0"],
            "--max-sockets: 0",
        ),
        (
            &[guests::HELLO, "--listen", "nowhere"],
            "--listen: bad address grant \"nowhere\"",
        ),
        (
            &[guests::HELLO, "--dir", "/surely/not/here"],
            "--dir \"/surely/not/here\": directory not found",
        ),
        (&[guests::HELLO, "--env", "=x"], "--env: bad variable name"),
        (
            &[guests::HELLO, "--allow-connect", "example.com:80"],
            "--allow-connect",
        ),
        (
            &[guests::HELLO, "--stdin", "maybe"],
            "invalid value 'maybe'",
        ),
        (&["nothing.wasm"], "module not found: nothing.wasm"),
        (
            &[m.to_str().unwrap(), "--memory-limit", "1MiB"],
            "apply to a single module",
        ),
    ];
    for (args, want) in cases {
        let out = run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(
            err.starts_with("warden: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}

/// A control port named with `--control` and in use ends the run (status
/// 2) before the program runs: operator commands would reach whatever
/// holds it.
#[test]
fn control_port_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = warden()
        .args(["run", "--no-cache", "--control", &addr, guests::HELLO])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("control API not served"), "{err}");
    assert!(!text(&out.stdout).contains("hello"), "the program ran");
}

/// A bad control address is a usage error, before anything runs.
#[test]
fn bad_control_address_is_refused() {
    let out = warden()
        .args(["run", "--control", "127.0.0.1:99999", guests::HELLO])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid value '127.0.0.1:99999'"), "{err}");
    assert!(text(&out.stdout).is_empty(), "the program ran");
    let out = warden()
        .args(["ps", "--control", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("expected HOST:PORT"));
}

/// After the module, a flag Warden does not have starts the program's
/// arguments (a likely misspelling of one of Warden's is pointed out);
/// Warden's own flags there are still Warden's.
#[test]
fn flags_warden_lacks_after_the_module_are_the_programs() {
    let out = run(&[
        guests::HELLO,
        "--memory-limit",
        "4MiB",
        "--foo",
        "-x",
        "bar",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("arg 1: --foo\narg 2: -x\narg 3: bar\n"),
        "{printed}"
    );
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));

    let out = run(&[guests::HELLO, "--memry-limit", "1MiB"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("arg 1: --memry-limit\narg 2: 1MiB"));
    let err = text(&out.stderr);
    assert!(err.contains("Warden's flag is --memory-limit"), "{err}");
}

/// A single program opens no port of Warden's own unless asked to (as
/// `wasmtime run` opens none): only the listener it was given.
#[test]
fn a_single_program_opens_no_control_port() {
    let mut child = Reaped(
        warden()
            .args([
                "run",
                "--no-cache",
                guests::PROGRAM,
                "--listen",
                "127.0.0.1:0",
                "serve",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("serving on descriptor"), "{line}");
    // Only the listener it was given, on the port `warden run` bound.
    let [port] = listening_ports(child.id())[..] else {
        panic!("{:?}", listening_ports(child.id()))
    };
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut c, b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let status = wait_child(&mut child, Duration::from_secs(20), "program still running");
    assert_eq!(status.code(), Some(0));
}

/// Every listener is bound before a task starts: with the web server's
/// port taken, the run ends at once and no task has run.
#[test]
fn a_taken_port_ends_the_run_before_any_task() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\ncontrol = 'off'\n[[task]]\nname = 'a'\nmodule = '{}'\n\
             [[http]]\nlisten = '{addr}'\n[[http.route]]\npath = '/x'\nmodule = '{}'\n",
            guests::HELLO,
            guests::WAGI
        ),
    );
    let events = dir.path().join("events.jsonl");
    let out = warden()
        .args(["run", "--no-cache", "--events"])
        .arg(&events)
        .arg(&m)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&addr) && err.contains("in use"), "{err}");
    assert!(
        text(&out.stdout).is_empty(),
        "a task ran: {}",
        text(&out.stdout)
    );
    // The event log has no spawn in it (the task would have been spawned,
    // and killed, before the bind failed).
    let log = std::fs::read_to_string(&events).unwrap_or_default();
    assert!(!log.contains("\"spawn\""), "{log}");
}

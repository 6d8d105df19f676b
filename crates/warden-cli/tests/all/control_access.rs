//! The control API lets no one in who should not be, and no client can
//! crash, freeze or bloat it: the token, body and connection limits.

use crate::control::{ps, start, status_of, task};
use crate::util::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `head` (and `body`) and reads the whole answer.
fn exchange(addr: &str, head: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// A kill without the token, or with a wrong one, changes nothing; the
/// token file is the user's alone, the CLI finds it, and it is gone when
/// the run ends.
#[test]
fn changes_need_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut sys = start(dir.path());
    let addr = sys.control().to_string();
    let host = format!("Host: {addr}\r\n");
    let kill = "POST /api/tasks/sleeper/kill";
    assert_eq!(status_of(&addr, kill, &host), 401);
    let wrong = format!("{host}Authorization: Bearer {}\r\n", "0".repeat(64));
    assert_eq!(status_of(&addr, kill, &wrong), 401);
    assert_eq!(task(&ps(&addr), "sleeper").unwrap()["state"], "blocked");

    let token = token_of(&addr);
    let port = addr.rsplit(':').next().unwrap();
    let file = runtime_dir()
        .join("warden")
        .join(format!("control-{port}.token"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode, token.len()), (0o600, 64));
    let url = warden()
        .args(["dashboard", "--control", &addr])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&url.stdout).trim(),
        format!("http://{addr}/#token={token}")
    );
    // (The last live task: killing it ends the run.)
    let out = warden()
        .args(["kill", "--control", &addr, "sleeper"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = wait_child(
        &mut sys.child,
        Duration::from_secs(20),
        "run after last kill",
    );
    assert!(status.code().is_some(), "ended by itself: {status:?}");
    assert!(!file.exists(), "token file removed at exit");
}

/// A body claimed to be 1 TiB, cut off after ten bytes: refused at once
/// (the server used to try to allocate it and abort).
#[test]
fn huge_declared_body_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let head =
        format!("GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1099511627776\r\n\r\n");
    let answer = exchange(addr, &head, b"0123456789");
    assert_eq!(status(&answer), 413, "{answer}");
    let head = format!(
        "POST /api/spawn HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        token_of(addr)
    );
    // Chunked, so no length is declared: cut off at the limit.
    let chunk = vec![b'x'; 4096];
    let mut body = Vec::new();
    for _ in 0..(warden::control::MAX_BODY / 4096 + 2) {
        body.extend_from_slice(b"1000\r\n");
        body.extend_from_slice(&chunk);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let answer = exchange(addr, &head, &body);
    assert_eq!(status(&answer), 413, "{answer}");
    assert_eq!(task(&ps(addr), "sleeper").unwrap()["state"], "blocked");
}

/// One client that declares a body and sends part of it, and a crowd that
/// connect and say nothing, do not stop anyone else being served.
#[test]
fn slow_clients_freeze_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let mut slow = TcpStream::connect(addr).unwrap();
    write!(
        slow,
        "POST /api/spawn HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Length: 60000\r\n\r\n",
        token_of(addr)
    )
    .unwrap();
    slow.write_all(&[b' '; 1000]).unwrap();
    let silent: Vec<TcpStream> = (0..32).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let t = Instant::now();
    let tasks = ps(addr);
    assert!(task(&tasks, "sleeper").is_some());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "served only after the slow clients' timeouts"
    );
    // The slow client is cut off by the body timeout, with an answer.
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert_eq!(status(&answer), 408, "{answer}");
    drop(silent);
}

/// Off loopback the API can be served, but only to holders of the token:
/// reads need it too; the dashboard's page does not.
#[test]
fn non_loopback_needs_the_token_for_everything() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!("[[task]]\nname = 'sleeper'\nmodule = '{}'\n", guests::SLEEP),
    );
    // In the clear, which an address other than loopback needs said.
    let sys = Launch::new(&m)
        .args(["--no-cache", "--insecure-control"])
        .control("0.0.0.0:0")
        .start();
    let port = sys.control().strip_prefix("0.0.0.0:").unwrap().to_string();
    let addr = format!("127.0.0.1:{port}");
    let host = format!("Host: box.example:{port}\r\n");
    assert_eq!(status_of(&addr, "GET /api/tasks", &host), 401);
    assert_eq!(status_of(&addr, "GET /metrics", &host), 401);
    assert_eq!(status_of(&addr, "GET /", &host), 200);
    let auth = format!("{host}Authorization: Bearer {}\r\n", token_of(&addr));
    assert_eq!(status_of(&addr, "GET /api/tasks", &auth), 200);
}

/// A client that half-closes its side after sending the request (as
/// `curl` may, and as the fuzzer does) still gets the answer: found by
/// the control API fuzzer, when every such request went unanswered.
#[test]
fn half_closed_clients_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /api/tasks HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
}

//! HTTPS on the web servers: certificates from files (read again when
//! they change) or made at start, HTTP/2 by ALPN and HTTP/1.1, TLS 1.2
//! and 1.3 only, client certificates when a CA is named; and clients
//! that never finish a handshake, or send garbage, held to the server's
//! bounds while real clients are served. The clients are curl and
//! openssl.

use crate::cluster_auth::certificates;
use crate::http::curl;
use crate::util::*;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A site of one WAGI route, `/hello`, served over TLS with `tls` (the
/// `[[http]]` keys) and `extra` server keys.
fn site(dir: &Path, tls: &str) -> Served {
    let m = manifest(
        dir,
        &format!(
            "[[http]]\nlisten = '127.0.0.1:0'\n{tls}\n[[http.route]]\npath = '/hello'\nmodule = '{}'\n",
            guests::WAGI
        ),
    );
    Launch::new(&m).args(["--no-cache"]).start()
}

/// The SHA-256 fingerprint of the certificate served at `addr`, as
/// openssl writes it (`AB:CD:…`), or `None` if no handshake completes.
fn served_fingerprint(dir: &Path, addr: &str) -> Option<String> {
    let shown = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo | openssl s_client -connect {addr} 2>/dev/null | openssl x509 -noout -fingerprint -sha256"
        ))
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    text.trim().split_once('=').map(|(_, f)| f.to_string())
}

/// Whether openssl completes a handshake at `addr` with `version`
/// (`-tls1_1`, `-tls1_2`, `-tls1_3`).
fn handshakes(addr: &str, version: &str) -> bool {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", addr, version])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("Cipher is") && !text.contains("Cipher is (NONE)")
}

/// `name` in `dir`, as curl's arguments name files.
fn at(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

#[test]
fn https_with_certificate_files_speaks_http2_and_http11_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let web = site(
        dir.path(),
        "tls_cert = 'server.pem'\ntls_key = 'server.key'",
    );
    assert!(web.base().starts_with("https://"), "{}", web.base());
    let url = format!("{}/hello", web.base());
    let ca = at(dir.path(), "ca.pem");
    for (flag, version) in [("--http2", "HTTP/2 200"), ("--http1.1", "HTTP/1.1 200")] {
        let r = curl(&url, &["--cacert", &ca, flag]);
        assert!(r.head.starts_with(version), "{flag}: {r:?}");
        assert!(r.body.contains("path=/hello"), "{r:?}");
    }
    // Verified against the CA: an unknown certificate is refused.
    let r = Command::new("curl").args(["-sS", &url]).output().unwrap();
    assert!(
        !r.status.success(),
        "curl trusted a certificate no CA it knows signed"
    );
    // Plain HTTP on the port gets no answer.
    let plain = format!("http://{}/hello", web.addr());
    let r = Command::new("curl")
        .args(["-sS", "--max-time", "10", &plain])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&r.stdout).contains("path=/hello"));
    let addr = web.addr().to_string();
    assert!(!handshakes(&addr, "-tls1_1"), "TLS 1.1 accepted");
    assert!(handshakes(&addr, "-tls1_2") && handshakes(&addr, "-tls1_3"));
    // New files in place of the old: served within seconds, no restart.
    let before = served_fingerprint(dir.path(), &addr).expect("a certificate");
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    certificates(&other);
    std::fs::copy(other.join("server.key"), dir.path().join("server.key.new")).unwrap();
    std::fs::copy(other.join("server.pem"), dir.path().join("server.pem.new")).unwrap();
    std::fs::rename(
        dir.path().join("server.key.new"),
        dir.path().join("server.key"),
    )
    .unwrap();
    std::fs::rename(
        dir.path().join("server.pem.new"),
        dir.path().join("server.pem"),
    )
    .unwrap();
    let t = Instant::now();
    loop {
        let now = served_fingerprint(dir.path(), &addr);
        if now.as_deref().is_some_and(|f| f != before) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "still {now:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = curl(&url, &["--cacert", &at(&other, "ca.pem"), "--http2"]);
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
    // Files put back with their old times (as a copy that keeps them
    // would): only SIGHUP makes the server read them again.
    let third = dir.path().join("third");
    std::fs::create_dir(&third).unwrap();
    certificates(&third);
    let changed = served_fingerprint(dir.path(), &addr).unwrap();
    for f in ["server.key", "server.pem"] {
        let target = dir.path().join(f);
        let time = std::fs::metadata(&target).unwrap().modified().unwrap();
        std::fs::copy(third.join(f), &target).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&target)
            .unwrap()
            .set_modified(time)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500)); // past the once-a-second look
    assert_eq!(
        served_fingerprint(dir.path(), &addr).as_deref(),
        Some(changed.as_str())
    );
    unsafe { libc::kill(web.pid() as i32, libc::SIGHUP) };
    let t = Instant::now();
    while served_fingerprint(dir.path(), &addr).as_deref() == Some(changed.as_str()) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "SIGHUP did not reload"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = curl(&url, &["--cacert", &at(&third, "ca.pem"), "--http2"]);
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
}

#[test]
fn a_self_signed_certificate_is_made_and_its_fingerprint_printed() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "tls = 'self-signed'");
    let err = web.stderr();
    let printed = err
        .lines()
        .find_map(|l| {
            l.split_once("(certificate SHA-256 ")
                .map(|(_, f)| f.trim_end_matches(')'))
        })
        .unwrap_or_else(|| panic!("{err}"))
        .to_string();
    assert_eq!(
        served_fingerprint(dir.path(), web.addr()).as_deref(),
        Some(printed.as_str())
    );
    let r = curl(&format!("{}/hello", web.base()), &["-k", "--http2"]);
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
}

#[test]
fn a_named_client_ca_admits_only_the_clients_it_certified() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let web = site(
        dir.path(),
        "tls_cert = 'server.pem'\ntls_key = 'server.key'\ntls_client_ca = 'ca.pem'",
    );
    let url = format!("{}/hello", web.base());
    let without = Command::new("curl")
        .args(["-sS", "--cacert", "ca.pem", &url])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&without.stdout).contains("path=/hello"));
    let (ca, cert, key) = (
        at(dir.path(), "ca.pem"),
        at(dir.path(), "client.pem"),
        at(dir.path(), "client.key"),
    );
    let r = curl(&url, &["--cacert", &ca, "--cert", &cert, "--key", &key]);
    assert!(
        r.head.starts_with("HTTP/2 200") || r.head.starts_with("HTTP/1.1 200"),
        "{r:?}"
    );
    // A client certificate some other CA signed is refused.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    certificates(&other);
    let stranger = Command::new("curl")
        .args([
            "-sS",
            "--cacert",
            "ca.pem",
            "--cert",
            "other/client.pem",
            "--key",
            "other/client.key",
            &url,
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&stranger.stdout).contains("path=/hello"));
}

/// 200 connections that stop inside their ClientHello, 100 that send
/// garbage and 100 that send a ClientHello and never answer the server's:
/// a server of 64 connections serves a real client all along, its
/// stragglers are closed within the handshake's time, and it grows by
/// little.
#[test]
fn clients_that_never_finish_a_handshake_are_held_to_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "tls = 'self-signed'\nmax_connections = 64");
    let addr = web.addr().to_string();
    let url = format!("{}/hello", web.base());
    let pid = web.pid().to_string();
    let before = proc_status_bytes(&pid, "VmRSS").unwrap();
    // The first bytes of a TLS 1.2 ClientHello record.
    let hello_start = [
        0x16u8, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    let mut held = Vec::new();
    for i in 0..400 {
        let Ok(mut s) = std::net::TcpStream::connect(&addr) else {
            continue;
        };
        let _ = match i % 4 {
            0 | 1 => s.write_all(&hello_start),
            2 => s.write_all(&[0x47; 300]),
            _ => s.write_all(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"),
        };
        held.push(s);
        if i % 50 == 0 {
            let r = curl(&url, &["-k", "--http2"]);
            assert!(r.head.starts_with("HTTP/2 200"), "{i}: {r:?}");
        }
    }
    let r = curl(&url, &["-k", "--http1.1"]);
    assert!(r.head.starts_with("HTTP/1.1 200"), "{r:?}");
    // Every straggler is closed: evicted, refused, or timed out.
    let t = Instant::now();
    for mut s in held {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    let grew = proc_status_bytes(&pid, "VmHWM")
        .unwrap()
        .saturating_sub(before);
    assert!(grew < 64 << 20, "grew {} MiB", grew >> 20);
    let r = curl(&url, &["-k", "--http2"]);
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
}

/// The control API: refused in the clear on an address other than
/// loopback (unless `--insecure-control`); over TLS, the operator
/// commands pin the certificate the token file names, and refuse one
/// that is not it.
#[test]
fn the_control_api_speaks_tls_and_the_commands_pin_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let task = format!("[[task]]\nname = 'sleeper'\nmodule = '{}'\n", guests::SLEEP);
    let plain = manifest(dir.path(), &task);
    let out = warden()
        .args(["run", "--control", "0.0.0.0:0"])
        .arg(&plain)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs TLS") && err.contains("--insecure-control"),
        "{err}"
    );
    let tls = dir.path().join("tls.toml");
    std::fs::write(
        &tls,
        format!("[runtime]\ncontrol_tls = 'self-signed'\n{task}"),
    )
    .unwrap();
    let sys = Launch::new(&tls).control("0.0.0.0:0").start();
    let port = sys.control().rsplit_once(':').unwrap().1.to_string();
    let addr = format!("127.0.0.1:{port}");
    let ps = warden().args(["ps", "--control", &addr]).output().unwrap();
    let text = String::from_utf8_lossy(&ps.stdout);
    assert_eq!(
        ps.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    assert!(text.contains("sleeper"), "{text}");
    // HTTP/2 by ALPN; nothing answers in the clear.
    let url = format!("https://{addr}/api/tasks");
    let auth = format!("Authorization: Bearer {}", sys.token.clone().unwrap());
    let r = curl(&url, &["-k", "--http2", "-H", &auth]);
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
    let r = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            &format!("http://{addr}/api/tasks"),
        ])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&r.stdout).contains("sleeper"));
    // Another certificate than the one the token file names is refused.
    let file = runtime_dir().join(format!("warden/control-{port}.token"));
    let text = std::fs::read_to_string(&file).unwrap();
    let (head, pin) = text
        .split_once(" tls=")
        .expect("the token file names the certificate");
    let wrong: String = pin
        .trim()
        .chars()
        .map(|c| if c == ':' { c } else { '0' })
        .collect();
    std::fs::write(&file, format!("{head} tls={wrong}\n")).unwrap();
    let ps = warden().args(["ps", "--control", &addr]).output().unwrap();
    let err = String::from_utf8_lossy(&ps.stderr);
    assert_eq!(ps.status.code(), Some(2), "{err}");
    assert!(err.contains("not the one its token file names"), "{err}");
    std::fs::write(&file, text).unwrap();
}

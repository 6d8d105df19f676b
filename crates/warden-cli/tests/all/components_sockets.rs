//! `wasi:sockets` for components: a Python component (componentize-py,
//! its standard `socket` module) against real sockets on 127.0.0.1,
//! held to the grants, `max_sockets`, the link and the receive budget a
//! module's sockets are held to.

use crate::components::component;
use crate::util::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use warden::{TaskSpec, TaskStatus};

const LIMIT: Duration = Duration::from_secs(60);

/// The Python command component with `args`, its output in `dir`.
fn py(dir: &std::path::Path, name: &str, args: &[&str]) -> TaskSpec {
    let mut s = spec(dir, name, component(guests::PY_COMMAND));
    s.args = args.iter().map(|a| a.to_string()).collect();
    s
}

/// A loopback echo server on threads of its own: its address, and the
/// count of connections it has accepted.
fn echo_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut b = vec![0u8; 1 << 16];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// Whether a non-blocking accept on `l` finds a connection.
fn anyone_came(l: &TcpListener) -> bool {
    l.set_nonblocking(true).unwrap();
    l.accept().is_ok()
}

#[test]
fn a_python_component_connects_only_where_its_grants_allow() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let (echo, _) = echo_server();
    let mut ok = py(dir.path(), "ok", &["echo", &echo, "hello sockets"]);
    ok.net.connect = vec![echo.clone()];
    let r = run_one(&rt, &ok, LIMIT);
    assert!(r.succeeded(), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "ok"), "echoed: hello sockets\n");
    assert!(
        r.net_bytes_sent >= 13 && r.net_bytes_received >= 13,
        "{r:?}"
    );
    // No grant, a grant for another port, a grant for another host: the
    // connection is refused before it is made.
    let bait = TcpListener::bind("127.0.0.1:0").unwrap();
    let bait_addr = bait.local_addr().unwrap().to_string();
    for (name, grants) in [
        ("none", vec![]),
        ("port", vec![echo.clone()]),
        (
            "host",
            vec![format!("127.0.0.2:{}", bait.local_addr().unwrap().port())],
        ),
    ] {
        let mut s = py(dir.path(), name, &["reach", &bait_addr]);
        s.net.connect = grants;
        assert!(run_one(&rt, &s, LIMIT).succeeded());
        let out = stdout_of(dir.path(), name);
        assert_eq!(out, format!("reach {bait_addr}: EACCES\n"), "{name}");
    }
    assert!(!anyone_came(&bait), "a refused connection was made");
    // Connecting from a bound address needs a listen grant for it too.
    let mut b = py(dir.path(), "bound", &["bound", &echo]);
    b.net.connect = vec![echo.clone()];
    assert!(run_one(&rt, &b, LIMIT).succeeded());
    assert_eq!(stdout_of(dir.path(), "bound"), "bound: EACCES\n");
    b.net.listen = vec!["127.0.0.1:*".into()];
    assert!(run_one(&rt, &b, LIMIT).succeeded());
    assert_eq!(stdout_of(dir.path(), "bound"), "bound: ok\n");
    // UDP is refused, whatever the grants.
    let dgram = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dgram_addr = dgram.local_addr().unwrap().to_string();
    let mut u = py(dir.path(), "udp", &["udp", &dgram_addr]);
    u.net.connect = vec!["127.0.0.1:*".into()];
    assert!(run_one(&rt, &u, LIMIT).succeeded());
    assert_eq!(stdout_of(dir.path(), "udp"), "udp: EACCES\n");
    dgram.set_nonblocking(true).unwrap();
    assert!(dgram.recv(&mut [0u8; 16]).is_err(), "a datagram arrived");
    // A host name resolves only for a task that may connect somewhere;
    // an address written as text, for any.
    let mut named = py(dir.path(), "named", &["lookup", "localhost"]);
    named.net.connect = vec![echo.clone()];
    assert!(run_one(&rt, &named, LIMIT).succeeded());
    assert!(stdout_of(dir.path(), "named").contains("lookup localhost: 127.0.0.1"));
    let unnamed = py(dir.path(), "unnamed", &["lookup", "localhost"]);
    assert!(run_one(&rt, &unnamed, LIMIT).succeeded());
    let out = stdout_of(dir.path(), "unnamed");
    assert!(out.starts_with("lookup localhost: failed"), "{out}");
    let literal = py(dir.path(), "literal", &["lookup", "10.1.2.3"]);
    assert!(run_one(&rt, &literal, LIMIT).succeeded());
    assert_eq!(
        stdout_of(dir.path(), "literal"),
        "lookup 10.1.2.3: 10.1.2.3\n"
    );
}

#[test]
fn a_python_component_listens_under_its_grant_and_holds_to_max_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut server = py(dir.path(), "server", &["listen", "2"]);
    server.net.listen = vec!["127.0.0.1:*".into()];
    let id = rt.spawn(&server).unwrap();
    let addr = wait_for_line(dir.path(), "server", "listening ");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    for msg in [&b"one"[..], &big] {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(LIMIT)).unwrap();
        let writer = {
            let mut c = c.try_clone().unwrap();
            let msg = msg.to_vec();
            std::thread::spawn(move || {
                c.write_all(&msg).unwrap();
                c.shutdown(std::net::Shutdown::Write).unwrap();
            })
        };
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        writer.join().unwrap();
        assert!(back == msg, "{} bytes echoed of {}", back.len(), msg.len());
    }
    assert!(wait(&rt, id, LIMIT).succeeded());
    assert!(stdout_of(dir.path(), "server").ends_with("served 2\n"));
    // Without a listen grant it cannot.
    let denied = py(dir.path(), "denied", &["listen", "1"]);
    assert!(run_one(&rt, &denied, LIMIT).succeeded());
    assert_eq!(stdout_of(dir.path(), "denied"), "listen: EACCES\n");
    // Three sockets at most; the fourth is refused, and all go at its end.
    let (echo, accepted) = echo_server();
    let mut few = py(dir.path(), "few", &["sockets", &echo, "10"]);
    few.net.connect = vec![echo.clone()];
    few.net.max_sockets = 3;
    let r = run_one(&rt, &few, LIMIT);
    assert!(r.succeeded(), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "few"), "opened 3: EMFILE\n");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn a_component_s_sends_are_paced_and_its_reads_held_to_its_receive_limit() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let rate = 1_000_000;
    let (sink, got) = counting_sink();
    let mut sender = py(dir.path(), "sender", &["send", &sink, "3000000"]);
    sender.net.connect = vec![sink.clone()];
    sender.net.bandwidth_limit = Some(rate);
    let t = Instant::now();
    let r = run_one(&rt, &sender, LIMIT);
    let took = t.elapsed();
    assert!(r.succeeded(), "{r:?}");
    assert!(took >= Duration::from_secs(2), "3 MB at 1 MB/s in {took:?}");
    let sent = || got.load(std::sync::atomic::Ordering::SeqCst);
    let t = Instant::now();
    while sent() < 3_000_000 && t.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sent(), 3_000_000);
    assert!(r.net_bytes_sent >= 3_000_000, "{r:?}");
    // A source that sends 3 MB at once; the component reads at 1 MB/s.
    let source = TcpListener::bind("127.0.0.1:0").unwrap();
    let source_addr = source.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut c, _) = source.accept().unwrap();
        let _ = c.write_all(&vec![7u8; 3_000_000]);
    });
    let mut reader = py(dir.path(), "reader", &["recv", &source_addr]);
    reader.net.connect = vec![source_addr.clone()];
    reader.net.receive_limit = Some(rate);
    let t = Instant::now();
    let r = run_one(&rt, &reader, LIMIT);
    let took = t.elapsed();
    assert!(r.succeeded(), "{r:?}");
    assert_eq!(stdout_of(dir.path(), "reader"), "received 3000000\n");
    assert!(
        took >= Duration::from_secs(2),
        "3 MB read at 1 MB/s in {took:?}"
    );
    // Waiting for the budget costs no CPU to speak of.
    assert!(r.cpu_ms < 1000.0, "{r:?}");
}

#[test]
fn a_component_blocked_on_a_stalled_peer_is_killed_and_its_socket_closed() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    // A peer that accepts and never reads.
    let stall = TcpListener::bind("127.0.0.1:0").unwrap();
    let stall_addr = stall.local_addr().unwrap().to_string();
    let mut s = py(dir.path(), "stuck", &["send", &stall_addr, "1000000000"]);
    s.net.connect = vec![stall_addr.clone()];
    let id = rt.spawn(&s).unwrap();
    let (mut peer, _) = stall.accept().unwrap();
    wait_blocked(&rt, id);
    rt.kill(id, "by the test").unwrap();
    let r = wait(&rt, id, LIMIT);
    assert_eq!(r.ending(), TaskStatus::Killed("by the test".into()));
    // The connection is closed: the peer reads what was sent, then its end.
    peer.set_read_timeout(Some(LIMIT)).unwrap();
    let mut b = vec![0u8; 1 << 16];
    loop {
        match peer.read(&mut b) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("the peer never saw the end: {e}"),
        }
    }
}

#[test]
fn shutting_a_side_ends_it_at_once_and_loses_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let (echo, _) = echo_server();
    let mut half = py(dir.path(), "half", &["halfclose", &echo]);
    half.net.connect = vec![echo.clone()];
    assert!(run_one(&rt, &half, LIMIT).succeeded());
    // Bytes were waiting, yet the shut receiving side reads nothing (as
    // WASI says, though Linux would deliver them); the shut sending side
    // refuses.
    assert_eq!(
        stdout_of(dir.path(), "half"),
        "recv after shutdown(RD): 0 bytes\nsend after shutdown(WR): ESHUTDOWN\n"
    );
    // A peer with a small receive buffer that reads only once the sender
    // has shut its side: what the host kernel could not take at once was
    // held, and is still delivered, then the end.
    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    l.set_recv_buffer_size(4096).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(1).unwrap();
    let l: TcpListener = l.into();
    let addr = l.local_addr().unwrap().to_string();
    let mut f = py(dir.path(), "flush", &["flush", &addr, "65536"]);
    f.net.connect = vec![addr.clone()];
    let id = rt.spawn(&f).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    let sent: usize = wait_for_line(dir.path(), "flush", "sent ").parse().unwrap();
    assert_eq!(sent, 65536, "one write of a whole permit");
    peer.set_read_timeout(Some(LIMIT)).unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), sent);
    assert!(wait(&rt, id, LIMIT).succeeded());
}

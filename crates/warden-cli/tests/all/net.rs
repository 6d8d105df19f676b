//! Sockets as handles, against real sockets on 127.0.0.1: serving,
//! grants, passing a connection to a child, `poll`, kills, bad input, and
//! the descriptors and memory sockets hold.

use crate::util::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use warden::TaskSpec;

const LIMIT: Duration = Duration::from_secs(30);

/// A `net` guest task allowed to listen and connect anywhere on loopback.
fn net_task(dir: &std::path::Path, name: &str, args: &[&str]) -> TaskSpec {
    let mut s = spec(dir, name, guests::NET);
    s.args = args.iter().map(|a| a.to_string()).collect();
    s.net.listen = vec!["127.0.0.1:*".into()];
    s.net.connect = vec!["127.0.0.1:*".into()];
    s
}

/// Waits for the task's "listening <addr>" line and returns the address.
fn listening(dir: &std::path::Path, name: &str) -> String {
    wait_for_output(dir, name, "listening ");
    let out = stdout_of(dir, name);
    let line = out.lines().find(|l| l.starts_with("listening ")).unwrap();
    line["listening ".len()..].trim().to_string()
}

/// A Rust client's round trip through the task at `addr`.
fn round_trip(addr: &str, msg: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(msg).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    back
}

#[test]
fn an_echo_task_serves_tasks_and_host_clients() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let server = rt
        .spawn(&net_task(
            dir.path(),
            "server",
            &["echo", "127.0.0.1:0", "4"],
        ))
        .unwrap();
    let addr = listening(dir.path(), "server");
    assert_eq!(round_trip(&addr, b"hello warden"), b"hello warden");
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let name = format!("client{i}");
            let s = net_task(dir.path(), &name, &["client", &addr, "20", "3000"]);
            (name, rt.spawn(&s).unwrap())
        })
        .collect();
    for (name, id) in clients {
        let r = wait(&rt, id, LIMIT);
        assert_eq!(stdout_of(dir.path(), &name), "client ok\n", "{name}");
        assert!(r.succeeded());
        assert_eq!((r.net_bytes_sent, r.net_bytes_received), (60_000, 60_000));
        assert_eq!(r.connections, 1);
    }
    let r = wait(&rt, server, LIMIT);
    assert!(r.succeeded(), "{r:?}");
    assert_eq!(r.net_bytes_sent, 180_000 + 12);
    assert_eq!(r.connections, 4);
}

/// One worker: a task blocked in accept holds none (another task runs to
/// the end meanwhile), and a kill ends it at once, closing its listener.
#[test]
fn a_task_blocked_in_accept_holds_no_worker_and_dies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let id = rt
        .spawn(&net_task(
            dir.path(),
            "acceptor",
            &["accept", "127.0.0.1:0"],
        ))
        .unwrap();
    let addr = listening(dir.path(), "acceptor");
    let other = run_one(&rt, &spec(dir.path(), "hello", guests::HELLO), LIMIT);
    assert!(other.succeeded(), "the only worker was free");
    let t = Instant::now();
    rt.kill(id, "test").unwrap();
    let r = wait(&rt, id, LIMIT);
    assert_eq!(r.status, "killed");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(TcpStream::connect(&addr).is_err(), "its listener is closed");
}

/// A task blocked in recv is killed; its peer sees the close.
#[test]
fn a_killed_tasks_peers_see_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let id = rt
        .spawn(&net_task(dir.path(), "reader", &["recv", &addr]))
        .unwrap();
    let (mut peer, _) = l.accept().unwrap();
    wait_for_output(dir.path(), "reader", "connected");
    rt.kill(id, "test").unwrap();
    peer.set_read_timeout(Some(LIMIT)).unwrap();
    let mut b = [0u8; 8];
    assert_eq!(peer.read(&mut b).unwrap(), 0, "end of stream");
    assert_eq!(wait(&rt, id, LIMIT).status, "killed");
}

/// A parent accepts, moves the connection to a child, and the child
/// serves it.
#[test]
fn an_accepted_connection_is_served_by_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = net_task(dir.path(), "parent", &["pass", "127.0.0.1:0"]);
    s.ipc.modules = vec![("child".into(), guests::NET.into())];
    let parent = rt.spawn(&s).unwrap();
    let addr = listening(dir.path(), "parent");
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(LIMIT)).unwrap();
    c.write_all(b"served by a child").unwrap();
    let mut back = [0u8; 17];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"served by a child");
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let r = wait(&rt, parent, LIMIT);
    let out = stdout_of(dir.path(), "parent");
    assert!(
        out.contains("child serving") && out.contains("child exited 0"),
        "{out}"
    );
    assert!(r.succeeded(), "{out}");
}

#[test]
fn addresses_outside_the_grants_are_denied() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "g", guests::NET);
    s.args = vec!["grants".into()];
    s.net.listen = vec!["127.0.0.1:8000-8100".into()];
    s.net.connect = vec!["127.0.0.1:80".into()];
    assert!(run_one(&rt, &s, LIMIT).succeeded());
    assert_eq!(
        stdout_of(dir.path(), "g"),
        "listen 127.0.0.1:1: denied\nlisten [::1]:0: denied\n\
         connect 127.0.0.1:9: denied\nconnect 10.1.2.3:80: denied\n"
    );
}

#[test]
fn bad_arguments_get_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let r = run_one(
        &rt,
        &net_task(dir.path(), "bad", &["bad", "127.0.0.1:0"]),
        LIMIT,
    );
    let out = stdout_of(dir.path(), "bad");
    assert!(out.ends_with("bad ok\n"), "{out}");
    assert!(r.succeeded());
}

/// One task serves portal calls and connections from one `poll`, and a
/// `poll` of one handle alone (a listener, a connection, a service) waits
/// until it is ready.
#[test]
fn poll_waits_on_services_and_sockets_together() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = net_task(dir.path(), "mix", &["pollmix", "127.0.0.1:0"]);
    s.ipc.provides = vec!["mix".into()];
    let id = rt.spawn(&s).unwrap();
    let addr = listening(dir.path(), "mix");
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(LIMIT)).unwrap();
    let mut hi = [0u8; 2];
    c.read_exact(&mut hi).unwrap();
    assert_eq!(&hi, b"hi");
    let mut caller = spec(dir.path(), "caller", guests::ECHO);
    caller.args = vec!["client".into(), "mix".into(), "1".into(), "ping".into()];
    caller.ipc.uses = vec!["mix".into()];
    let r = run_one(&rt, &caller, LIMIT);
    assert!(r.succeeded(), "{}", stdout_of(dir.path(), "caller"));
    // Then each alone, woken only once it waits: the listener, the
    // connection it accepts, the service.
    wait_for_output(dir.path(), "mix", "alone 1");
    wait_blocked(&rt, id);
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(LIMIT)).unwrap();
    wait_for_output(dir.path(), "mix", "alone 2");
    wait_blocked(&rt, id);
    c.write_all(b"x").unwrap();
    let mut ok = [0u8; 2];
    c.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"ok");
    wait_for_output(dir.path(), "mix", "alone 3");
    wait_blocked(&rt, id);
    let r = run_one(&rt, &caller, LIMIT);
    assert!(r.succeeded(), "{}", stdout_of(dir.path(), "caller"));
    let r = wait(&rt, id, LIMIT);
    let out = stdout_of(dir.path(), "mix");
    assert!(r.succeeded(), "{r:?}\n{out}");
    assert!(
        out.contains("woke: connection") && out.contains("woke: call"),
        "{out}"
    );
    assert!(out.contains("alone ok"), "{out}");
}

/// Over `max_sockets`: quota; over the memory budget (each connection is
/// charged its buffers): out of memory. Nothing else is affected.
#[test]
fn socket_count_and_buffers_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut few = net_task(dir.path(), "few", &["hold", &addr, "10"]);
    few.net.max_sockets = 4;
    let r = run_one(&rt, &few, LIMIT);
    assert_eq!(r.exit_code, Some(1));
    assert_eq!(stdout_of(dir.path(), "few"), "connect 4: quota exceeded\n");
    let mut small = net_task(dir.path(), "small", &["hold", &addr, "100"]);
    small.limits.memory_limit = Some(4 << 20);
    let r = run_one(&rt, &small, LIMIT);
    assert_eq!(r.exit_code, Some(1));
    let out = stdout_of(dir.path(), "small");
    assert!(out.ends_with(": out of memory\n"), "{out}");
    assert!(r.peak_memory_bytes <= 4 << 20);
}

/// This process's descriptors that are TCP sockets connected to `port`
/// (found through their inodes in `/proc/net/tcp`), so that other tests'
/// descriptors do not count.
fn sockets_to(port: u16) -> usize {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let inodes: std::collections::HashSet<String> = tcp
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote_port = u16::from_str_radix(f[2].rsplit(':').next()?, 16).ok()?;
            (remote_port == port).then(|| f[9].to_string())
        })
        .collect();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .filter(|inode| inodes.contains(inode))
        .count()
}

/// 1,000 connections held by ten tasks, all killed: every peer sees its
/// connection close, and none of the process's descriptors for them is
/// left.
#[test]
fn descriptors_return_to_baseline_after_a_thousand_connections() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let port = l.local_addr().unwrap().port();
    let acceptor = std::thread::spawn(move || {
        (0..1000)
            .map(|_| l.accept().unwrap().0)
            .collect::<Vec<TcpStream>>()
    });
    let ids: Vec<_> = (0..10)
        .map(|i| {
            let name = format!("holder{i}");
            rt.spawn(&net_task(dir.path(), &name, &["hold", &addr, "100"]))
                .unwrap()
        })
        .collect();
    for i in 0..10 {
        wait_for_output(dir.path(), &format!("holder{i}"), "holding 100");
    }
    let peers = acceptor.join().unwrap();
    assert_eq!(sockets_to(port), 1000, "the tasks' ends are open");
    for id in ids {
        rt.kill(id, "test").unwrap();
        assert_eq!(wait(&rt, id, LIMIT).status, "killed");
    }
    for mut p in peers {
        p.set_read_timeout(Some(LIMIT)).unwrap();
        assert_eq!(p.read(&mut [0u8; 4]).unwrap(), 0);
    }
    assert_eq!(sockets_to(port), 0, "the tasks' descriptors are closed");
}

//! Shared helpers for the integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use warden::{Output, PolicyKind, Runtime, RuntimeConfig, TaskReport, TaskSpec};

pub use crate::launch::{Launch, Served};
pub use warden_test_guests as guests;

/// A runtime with `workers` workers and no disk cache, sized for at most
/// 1,100 live tasks (tests run side by side, each with its own runtime).
pub fn runtime(workers: usize) -> Runtime {
    runtime_with(workers, PolicyKind::RoundRobin, 1100)
}

/// A runtime with `workers` workers, the root policy `scheduler`, room for
/// `max_tasks` live tasks and no disk cache.
pub fn runtime_with(workers: usize, scheduler: PolicyKind, max_tasks: u32) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers,
        cache_dir: None,
        max_tasks,
        scheduler,
        // Tests side by side hold thousands of sockets and files.
        raise_descriptor_limit: true,
        ..RuntimeConfig::default()
    })
    .expect("runtime starts")
}

/// A task spec whose stdout goes to `dir/<name>.out`.
pub fn spec(dir: &Path, name: &str, module: &str) -> TaskSpec {
    let mut s = TaskSpec::new(name, module);
    s.stdio.stdout = Output::File(dir.join(format!("{name}.out")));
    s
}

/// What the task named `name` (see [`spec`]) wrote to stdout. The file
/// exists once the task was spawned; a missing one fails the test.
pub fn stdout_of(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.out"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Spawns and waits, failing the test after `limit`.
pub fn run_one(rt: &Runtime, spec: &TaskSpec, limit: Duration) -> TaskReport {
    let id = rt.spawn(spec).expect("spawn");
    wait(rt, id, limit)
}

/// Waits for a task, failing the test (instead of hanging) after `limit`.
pub fn wait(rt: &Runtime, id: warden::TaskId, limit: Duration) -> TaskReport {
    rt.wait_timeout(id, Some(limit))
        .expect("task known")
        .unwrap_or_else(|| panic!("task {id} still running after {limit:?}"))
}

/// The `warden` binary.
/// The `warden` binary, with control token files kept under this test
/// build's own directory.
pub fn warden() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_warden"));
    c.env("XDG_RUNTIME_DIR", runtime_dir());
    c
}

/// Where the `warden` processes of the tests keep their token files.
pub fn runtime_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("run")
}

/// The control token of the system serving on `addr`.
pub fn token_of(addr: &str) -> String {
    let port = addr.rsplit(':').next().unwrap();
    let file = runtime_dir()
        .join("warden")
        .join(format!("control-{port}.token"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    // The token is the first line; the system's stamp follows.
    text.lines().next().unwrap_or("").to_string()
}

/// `warden run` on `manifest` in `dir`, without a control API, its stdin
/// a pipe the test writes to (readiness lines to guests that wait on it).
pub fn run_with_stdin(dir: &Path, manifest: &Path) -> Reaped {
    let child = warden()
        .args(["run", "--control", "off"])
        .arg(manifest)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Reaped(child)
}

/// A child process that is killed and reaped when dropped, so that a test
/// failing half way leaves no `warden run` behind.
pub struct Reaped(pub std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for a child process to exit, killing it and failing the test
/// with `what` if it is still running after `limit`.
pub fn wait_child(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes a manifest into `dir` and returns its path.
pub fn manifest(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("warden.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Current resident set size of this process, bytes.
pub fn rss_bytes() -> u64 {
    rss_of("self")
}

/// Current resident set size of process `pid` ("self" for this one), bytes.
pub fn rss_of(pid: &str) -> u64 {
    proc_status_bytes(pid, "VmRSS").unwrap()
}

/// A size field (`VmRSS`, `VmHWM` …) of `/proc/<pid>/status`, bytes;
/// `None` once the process is gone or has no memory (a zombie).
pub fn proc_status_bytes(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: u64 = value.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// The body of `GET path` on a control API (HTTP/1.0, no token: the
/// figures open on loopback).
pub fn get_body(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// A free loopback port for a test that must name a port before
/// anything binds it (tasks whose grants name Warden's own endpoints, a
/// document's commands), where every other listener binds port 0: below
/// the kernel's range for port 0 and outgoing connections
/// (`ip_local_port_range`), so that neither can take it before the
/// system does, and a different one at each call in this process.
pub fn fixed_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let span = 8192.min(low - 1024);
    // Where this process starts, so that two test processes rarely meet.
    let start = (std::process::id() % u32::from(span)) as u16;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no fixed port left");
        let port = low - span + (start + n) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// The TCP ports process `pid` listens on.
pub fn listening_ports(pid: u32) -> Vec<u16> {
    let sockets: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local address, state (0A: listening), inode
            if f.len() > 9 && f[3] == "0A" && sockets.contains(f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

/// A loopback address nothing listens on: a socket bound to it (not
/// listening, so connections are refused) holds it for as long as the
/// socket lives, so that nothing else takes it meanwhile.
pub fn refusing_addr() -> (socket2::Socket, String) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap().to_string();
    (s, addr)
}

/// Waits until the task named `name` has printed `want` (a readiness
/// marker), failing the test after 20 s. Its output file may not exist yet
/// (a task a `warden run` process has still to start).
pub fn wait_for_output(dir: &std::path::Path, name: &str, want: &str) {
    let t = Instant::now();
    let path = dir.join(format!("{name}.out"));
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains(want)
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{name} never printed {want:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the task named `name` has printed a whole line holding
/// `prefix` (see [`wait_for_output`]); the rest of that line after it.
pub fn wait_for_line(dir: &std::path::Path, name: &str, prefix: &str) -> String {
    wait_for_output(dir, name, prefix);
    let t = Instant::now();
    loop {
        let out = stdout_of(dir, name);
        let rest = &out[out.find(prefix).unwrap() + prefix.len()..];
        if let Some((line, _)) = rest.split_once('\n') {
            return line.to_string();
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{name}: {out:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A loopback listener whose every connection is read and discarded, on a
/// thread of its own; its address.
pub fn discarding_sink() -> String {
    counting_sink().0
}

/// [`discarding_sink`], which also counts the bytes it has received (from
/// all its connections).
pub fn counting_sink() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::Read;
    use std::sync::atomic::Ordering;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = count.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let total = total.clone();
            std::thread::spawn(move || {
                let mut b = vec![0u8; 1 << 16];
                while let Ok(n @ 1..) = s.read(&mut b) {
                    total.fetch_add(n as u64, Ordering::Relaxed);
                }
            });
        }
    });
    (addr, count)
}

/// Waits until task `id`'s view satisfies `ready` (checked every
/// `every`); `what` names the wait in the failure.
pub fn wait_view(
    rt: &warden::Runtime,
    id: warden::TaskId,
    every: Duration,
    what: &str,
    ready: impl Fn(&warden::TaskView) -> bool,
) {
    let t = Instant::now();
    while !rt.task_views().iter().any(|v| v.id == id && ready(v)) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "task {id} never {what}"
        );
        std::thread::sleep(every);
    }
}

/// Waits until task `id` has run for at least `cpu_ms` of CPU time (so
/// it is running, not queued).
pub fn wait_ran(rt: &warden::Runtime, id: warden::TaskId, cpu_ms: f64) {
    wait_view(rt, id, Duration::from_millis(2), "ran", |v| {
        v.cpu_ms >= cpu_ms
    });
}

/// Waits until task `id` is blocked (a client in its call, a server in
/// `recv`).
pub fn wait_blocked(rt: &warden::Runtime, id: warden::TaskId) {
    wait_view(rt, id, Duration::from_millis(2), "blocked", |v| {
        v.state == "blocked"
    });
}

/// `e2fsck -fn` of the ext2 image `img`: its exit status and what it
/// printed.
pub fn e2fsck(img: &Path) -> (i32, String) {
    let out = Command::new("e2fsck").arg("-fn").arg(img).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// What `debugfs -R REQUEST img` printed.
pub fn debugfs(img: &Path, request: &str) -> String {
    let out = Command::new("debugfs")
        .args(["-R", request])
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An HTTP/1.1 body as sent after its head (`head` the header lines):
/// the chunks joined if it was chunked, with whether it ended properly
/// (its last chunk came); else the bytes as they are, taken as whole.
pub fn http1_body(head: &str, raw: &[u8]) -> (Vec<u8>, bool) {
    let chunked = head
        .to_ascii_lowercase()
        .lines()
        .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
    if !chunked {
        return (raw.to_vec(), true);
    }
    let mut out = Vec::new();
    let mut rest = raw;
    loop {
        let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") else {
            return (out, false);
        };
        let size = std::str::from_utf8(&rest[..nl])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
        let Some(size) = size else {
            return (out, false);
        };
        rest = &rest[nl + 2..];
        if size == 0 {
            return (out, true);
        }
        if rest.len() < size + 2 {
            out.extend_from_slice(&rest[..rest.len().min(size)]);
            return (out, false);
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[test]
fn chunked_bodies_are_joined_and_a_cut_one_is_seen() {
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked";
    assert_eq!(
        http1_body(head, b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        (b"abcde".to_vec(), true)
    );
    assert_eq!(
        http1_body(head, b"3\r\nabc\r\n2\r\nd"),
        (b"abcd".to_vec(), false)
    );
    assert_eq!(
        http1_body("HTTP/1.1 200 OK", b"3\r\nabc"),
        (b"3\r\nabc".to_vec(), true)
    );
}

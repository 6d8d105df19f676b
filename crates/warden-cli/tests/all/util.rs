//! Shared helpers for the integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use warden::{Output, PolicyKind, Runtime, RuntimeConfig, TaskReport, TaskSpec};

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
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
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

/// A free loopback port (for a control API).
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

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A `warden run` child process with its control API; killed on drop.
pub struct System {
    child: Reaped,
    /// Its control address.
    pub addr: String,
}

impl System {
    /// The `warden run` process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The `warden run` process.
    pub fn child(&mut self) -> &mut std::process::Child {
        &mut self.child
    }
}

/// Starts `warden run` on `manifest` with its control API on a free port,
/// and waits until the API answers.
pub fn start_system(manifest: &Path) -> System {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = warden()
        .args(["run", "--no-cache", "--control", &addr])
        .arg(manifest)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let system = System {
        child: Reaped(child),
        addr,
    };
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(&system.addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "control API never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    system
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

/// A `warden run` serving `[[http]]` routes, its stderr collected; killed
/// on drop.
pub struct Served {
    pub child: Reaped,
    /// `http://ADDR` of its first server.
    pub base: String,
    /// Everything it wrote on stderr so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Runs `warden run ARGS MANIFEST` and waits for its "serving" line.
pub fn serve(args: &[&str], manifest: &Path) -> Served {
    serve_with(args, manifest, |_| {})
}

/// [`serve`], the command first given to `prepare`.
pub fn serve_with(args: &[&str], manifest: &Path, prepare: impl FnOnce(&mut Command)) -> Served {
    use std::io::BufRead;
    let mut cmd = warden();
    cmd.arg("run")
        .args(args)
        .arg(manifest)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    prepare(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let (lines, all) = (child.stderr.take().unwrap(), stderr.clone());
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(lines).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("warden: serving http://") {
                let _ = tx.send(addr.trim_end_matches('/').to_string());
            }
            let mut s = all.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    // Until it says it serves, or ends: compiling a system's components
    // (a Python one is 15 MB of code) takes minutes on a loaded machine.
    let started = std::time::Instant::now();
    let addr = loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(addr) => break addr,
            Err(_) if started.elapsed() > Duration::from_secs(600) => {
                panic!("no server came up in 10 minutes: {}", stderr.lock().unwrap())
            }
            Err(_) => {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("no server came up ({status}): {}", stderr.lock().unwrap());
                }
            }
        }
    };
    Served {
        child: Reaped(child),
        base: format!("http://{addr}"),
        stderr,
    }
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

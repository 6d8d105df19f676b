//! Clusters: `warden run` processes joined through a real `nats-server`
//! on a loopback port — remote calls, grants, load sharing, node death,
//! a lost broker, bad frames and the operators' views.

use crate::util::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` on loopback; killed on drop.
pub(crate) struct Broker {
    child: Reaped,
    /// Its client port.
    pub port: u16,
    /// Its route port, if it is a server of a NATS cluster.
    pub route: Option<u16>,
}

impl Broker {
    /// A broker on a port of its own choosing.
    pub fn start() -> Broker {
        Self::with_args(None, &[])
    }

    /// A broker on `port` (a [`fixed_port`], for a broker started again
    /// on the port of one that died).
    fn on(port: u16) -> Broker {
        Self::with_args(Some(port), &[])
    }

    /// Kills the broker and waits for its end.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A server of a NATS cluster, its routes reaching `other`'s route
    /// port (the first server reaches none: the second's route to it
    /// joins them).
    pub(crate) fn routed(other: Option<u16>) -> Broker {
        let routes = other.map(|o| format!("nats://127.0.0.1:{o}"));
        let mut args = vec!["--cluster_name", "w", "--cluster", "nats://127.0.0.1:-1"];
        if let Some(r) = &routes {
            args.extend(["--routes", r]);
        }
        Self::with_args(None, &args)
    }

    /// A broker with the configuration file `conf` (which must not name
    /// a listening address: the broker picks its port).
    pub fn with_config(conf: &Path) -> Broker {
        Self::with_args(None, &["-c", conf.to_str().unwrap()])
    }

    /// `nats-server` with `more` arguments on `port` (or one it picks),
    /// once its log says where it listens.
    fn with_args(port: Option<u16>, more: &[&str]) -> Broker {
        // Debian puts it in /usr/sbin, which not every PATH holds.
        let exe = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("nats-server");
        let port = port.map_or("-1".to_string(), |p| p.to_string());
        let mut child = Reaped(
            Command::new(exe)
                .args(more)
                .args(["-a", "127.0.0.1", "-p", &port])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("nats-server (scripts/test installs it: apt-get install nats-server)"),
        );
        let lines = log_lines(child.stderr.take().unwrap());
        let listening = |what: &str| {
            let line = lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("nats-server never listened for {what}"));
            let at = line
                .split(&format!("Listening for {what} connections on "))
                .nth(1)?;
            at.rsplit(':').next()?.trim().parse::<u16>().ok()
        };
        let port = std::iter::repeat_with(|| listening("client"))
            .find_map(|p| p)
            .unwrap();
        let route = more.contains(&"--cluster").then(|| {
            std::iter::repeat_with(|| listening("route"))
                .find_map(|p| p)
                .unwrap()
        });
        Broker { child, port, route }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

/// The lines of a log, read (to its end) on a thread of their own.
fn log_lines(log: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(log).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// A `warden run` node; its stdout (the tasks' lines) goes to a file in
/// its directory. Killed on drop.
pub(crate) struct Node {
    pub served: Served,
    dir: PathBuf,
}

impl Node {
    /// Starts node `name` in `dir/name` with `tasks` (TOML) on `broker`;
    /// returns once it has joined and serves its control API (or has
    /// ended: a node refused at its start).
    pub fn start(dir: &Path, name: &str, broker: &str, tasks: &str) -> Node {
        Self::start_with(dir, name, broker, "", tasks, &[])
    }

    /// [`Node::start`] with more `[cluster]` keys (TOML lines) and
    /// environment variables.
    pub fn start_with(
        dir: &Path,
        name: &str,
        broker: &str,
        keys: &str,
        tasks: &str,
        env: &[(&str, &str)],
    ) -> Node {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(guests::CLUSTER, dir.join("cluster.wasm")).unwrap();
        std::fs::copy(guests::ECHO, dir.join("echo.wasm")).unwrap();
        // A list of brokers is given as a TOML array.
        let nats = if broker.starts_with('[') {
            broker.to_string()
        } else {
            format!("\"{broker}\"")
        };
        let text = format!("[cluster]\nnats = {nats}\nnode = \"{name}\"\n{keys}\n{tasks}");
        let out = std::fs::File::create(dir.join("out")).unwrap();
        let served = Launch::new(&manifest(&dir, &text))
            .with(|c| {
                c.envs(env.iter().copied()).stdout(out);
            })
            .start();
        Node { served, dir }
    }

    /// Whether the node's process is still running.
    pub fn running(&mut self) -> bool {
        self.served.child.try_wait().unwrap().is_none()
    }

    /// The node's process id, for /proc.
    pub fn pid(&self) -> String {
        self.served.pid().to_string()
    }

    pub fn out(&self) -> String {
        std::fs::read_to_string(self.dir.join("out")).unwrap_or_default()
    }

    /// What `warden run` wrote on stderr (all of it once
    /// [`Node::finish`] returned).
    pub fn err(&self) -> String {
        self.served.stderr()
    }

    /// Waits until the node's output holds `want`.
    pub fn wait_for(&self, want: &str) {
        let t = Instant::now();
        while !self.out().contains(want) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "never printed {want:?}; out:\n{}\nerr:\n{}",
                self.out(),
                self.err()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the node's `warden run` to end; its exit code.
    pub fn finish(&mut self) -> i32 {
        let status = self.served.wait(Duration::from_secs(60));
        status.code().unwrap_or(-1)
    }

    /// `GET path` on the node's control API (once it is up).
    pub fn get(&self, path: &str) -> String {
        let t = Instant::now();
        loop {
            match self.try_get(path) {
                Ok(text) => return text,
                Err(e) => assert!(t.elapsed() < Duration::from_secs(30), "control API: {e}"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `GET path` on the node's control API, tried once.
    fn try_get(&self, path: &str) -> std::io::Result<String> {
        let control = self.served.control();
        let mut s = std::net::TcpStream::connect(control)?;
        let token = token_of(control);
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n",
            control
        )?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    }

    /// Waits until the node's counter `metric` reaches `at_least`.
    pub fn wait_metric(&self, metric: &str, at_least: f64) {
        let t = Instant::now();
        while self.metric(metric) < at_least {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{metric} stayed at {} (want {at_least}); err:\n{}",
                self.metric(metric),
                self.err()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A counter of the node's `/metrics`, 0 if absent.
    pub fn metric(&self, line_start: &str) -> f64 {
        counter(&self.get("/metrics"), line_start)
    }

    /// [`Node::metric`] asked once: `None` if the node did not answer.
    pub fn try_metric(&self, line_start: &str) -> Option<f64> {
        Some(counter(&self.try_get("/metrics").ok()?, line_start))
    }
}

/// The counter `line_start` names in a `/metrics` text, 0 if absent.
fn counter(metrics: &str, line_start: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A task serving `name` for the cluster, answering with `tag`.
pub(crate) fn server(name: &str, tag: &str) -> String {
    format!(
        "[[task]]\nname = \"server\"\nmodule = \"cluster.wasm\"\nargs = [\"serve\", \"{name}\", \"{tag}\"]\n\
         provides = [\"{name}\"]\nexport = [\"{name}\"]\n"
    )
}

/// A task running the cluster guest with `args`, allowed to use `uses`.
pub(crate) fn client(task: &str, args: &[&str], uses: &[&str]) -> String {
    format!(
        "[[task]]\nname = \"{task}\"\nmodule = \"cluster.wasm\"\nargs = {args:?}\nuses = {uses:?}\n"
    )
}

#[test]
fn a_remote_call_crosses_nodes_and_names_its_caller() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &(client("calls", &["call", "kv", "200", "hello"], &["kv"])
            + &client("origin", &["origin", "kv"], &["kv"])),
    );
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    let out = b.out();
    assert!(out.contains("client: from a 200"), "{out}");
    // The server sees the calling node and task (the task's id on b).
    let origin = out
        .lines()
        .find_map(|l| l.split("origin: ").nth(1))
        .unwrap_or_else(|| panic!("{out}"));
    let (node, task) = origin.split_once('/').unwrap();
    assert_eq!(node, "b");
    assert!(task.parse::<u64>().unwrap() > 0);
    assert_eq!(a.metric("warden_cluster_served_total{name=\"kv\"}"), 201.0);
}

#[test]
fn grants_and_exports_still_apply_across_nodes() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    // "kv" is exported; "private" is provided but not exported.
    let private = "[[task]]\nname = \"private\"\nmodule = \"cluster.wasm\"\n\
                   args = [\"serve\", \"private\", \"a\"]\nprovides = [\"private\"]\n";
    let a = Node::start(d.path(), "a", &broker.url(), &(server("kv", "a") + private));
    a.wait_for("[server] server: ready");
    a.wait_for("[private] server: ready");
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &(client("granted", &["call", "kv", "1", "x"], &["kv"])
            + &client("ungranted", &["call", "kv", "1", "x"], &[])
            + &client(
                "unexported",
                &["call", "private", "1", "x", "1500"],
                &["private"],
            )
            + "[[task]]\nname = \"handles\"\nmodule = \"echo.wasm\"\n\
               args = [\"client\", \"kv\", \"1\", \"handles\"]\nuses = [\"kv\"]\n"),
    );
    b.finish();
    let out = b.out();
    assert!(out.contains("[granted] client: from a 1"), "{out}");
    assert!(out.contains("[ungranted] client: lookup: denied"), "{out}");
    assert!(
        out.contains("[unexported] client: lookup: timed out"),
        "{out}"
    );
    // Only bytes cross nodes: a memory object in the request is refused.
    assert!(
        out.contains("[handles] client: call: invalid argument"),
        "{out}"
    );
}

#[test]
fn nodes_exporting_one_name_share_its_calls() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let c = Node::start(d.path(), "c", &broker.url(), &server("kv", "c"));
    // b calls only once it knows both serve: its client is started by
    // hand once b's directory holds a and c (b's own server keeps it
    // running until then).
    a.wait_for("server: ready");
    c.wait_for("server: ready");
    let b = Node::start(d.path(), "b", &broker.url(), &server("log", "b"));
    b.wait_metric("warden_cluster_nodes", 2.0);
    let spawned = warden()
        .args(["spawn", "--control", b.served.control()])
        .arg(b.dir.join("cluster.wasm"))
        .args([
            "--name", "calls", "--uses", "kv", "--", "call", "kv", "400", "x",
        ])
        .output()
        .unwrap();
    assert!(spawned.status.success(), "{spawned:?}");
    b.wait_for("client: ok 400");
    let out = b.out();
    let from = |tag: &str| -> u32 {
        out.lines()
            .find_map(|l| l.split(&format!("client: from {tag} ")).nth(1))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    let (na, nc) = (from("a"), from("c"));
    assert_eq!(na + nc, 400, "{out}");
    // The caller picks one of the serving nodes at random for each
    // call: each gets a fair part (here at least a fifth).
    assert!(na >= 80 && nc >= 80, "a {na}, c {nc}");
}

/// A node listed as serving a name but not listening for its calls (in
/// life, a node just died, until its silence ends its listing; here a
/// stranger announcing itself in an open cluster) never fails a call: the
/// broker says nobody listens there, and the call goes to the next node
/// serving the name. Without that, the first call sent to "ghost" would
/// fail with "peer died" and end the client.
#[test]
fn a_call_nobody_hears_goes_to_the_next_node_serving_the_name() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let c = Node::start(d.path(), "c", &broker.url(), &server("kv", "c"));
    c.wait_for("server: ready");
    let calls = 20_000;
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("calls", &["call", "kv", &calls.to_string(), "x"], &["kv"]),
    );
    // Once b's calls are under way, "ghost" announces kv every 200 ms.
    let t = Instant::now();
    while c.metric("warden_cluster_served_total{name=\"kv\"}") < 1.0 {
        assert!(t.elapsed() < Duration::from_secs(60), "no call reached c");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ghost = {
        let stop = stop.clone();
        let port = broker.port;
        std::thread::spawn(move || announce_ghost(port, &stop))
    };
    // Until b lists ghost beside c (or b's client has failed).
    let mut heard = false;
    while !heard && b.served.child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "b never heard ghost");
        // Tried once: b may end between the check and the request.
        let nodes = b
            .try_get("/metrics")
            .map(|m| counter(&m, "warden_cluster_nodes"));
        heard = nodes.is_ok_and(|n| n >= 2.0);
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = b.finish();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ghost.join().unwrap();
    assert_eq!(code, 0, "{}", b.out());
    assert!(heard, "b's calls ended before it heard ghost");
    assert!(
        b.out().contains(&format!("client: from c {calls}")),
        "{}",
        b.out()
    );
}

/// Announces node "ghost", exporting kv, until `stop`; subscribes to
/// nothing.
fn announce_ghost(port: u16, stop: &std::sync::atomic::AtomicBool) {
    let mut ghost = Rogue::connect(port);
    let announce = br#"{"node":"ghost","instance":1,"exports":["kv"]}"#;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        ghost.publish("warden.default.node.ghost", "", announce);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A call to a node that dies fails with "peer died" once the node has
/// been silent for 1.5 s (its last word came at most 250 ms before the
/// kill); the bound adds a margin for timers late on a busy machine.
#[test]
fn a_node_killed_mid_call_is_peer_death_after_its_silence() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let mut a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("caller", &["call", "kv", "1", "hang"], &["kv"]),
    );
    a.wait_for("server: got hang");
    let killed = Instant::now();
    unsafe { libc::kill(a.pid().parse().unwrap(), libc::SIGKILL) };
    let _ = a.served.child.wait();
    b.wait_for("client: call:");
    let after = killed.elapsed();
    assert!(b.out().contains("client: call: peer died"), "{}", b.out());
    assert!(
        after < Duration::from_millis(1500 + 2500),
        "peer death seen after {after:?}"
    );
    // A task of the system failed: `warden run` says so.
    assert_eq!(b.finish(), 1);
}

#[test]
fn an_unreachable_broker_is_one_clear_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let (_held, addr) = refusing_addr(); // nothing listens there
    let mut n = Node::start(d.path(), "a", &format!("nats://{addr}"), &server("kv", "a"));
    assert_eq!(n.finish(), 2);
    let err = n.err();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot reach the cluster's broker at nats://127.0.0.1:"),
        "{err}"
    );
}

#[test]
fn a_taken_node_name_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    a.wait_for("server: ready");
    let mut again = Node::start(&d.path().join("2"), "a", &broker.url(), &server("kv", "a"));
    assert_eq!(again.finish(), 2);
    assert!(
        again.err().contains("another live node is named \"a\""),
        "{}",
        again.err()
    );
}

#[test]
fn calls_fail_while_the_broker_is_lost_and_work_once_it_is_back() {
    let d = tempfile::tempdir().unwrap();
    // On a port no listener on port 0 can take while it is down.
    let port = fixed_port();
    let mut broker = Broker::on(port);
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    // A client that calls for ever, printing each failure's kind.
    let b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("calls", &["call", "kv", "1000000000", "x"], &["kv"]),
    );
    a.wait_metric("warden_cluster_served_total{name=\"kv\"}", 10.0);
    broker.kill();
    b.wait_for("client: call: peer died");
    // Local work goes on: the server task still runs.
    let tasks: serde_json::Value = serde_json::from_str(body(&a.get("/api/tasks"))).unwrap();
    assert_eq!(tasks[0]["state"], "blocked", "{tasks}");
    // Once the broker is back, a's name is offered again and called.
    let _back = Broker::on(port);
    let mut c = Node::start(
        d.path(),
        "c",
        &format!("nats://127.0.0.1:{port}"),
        &client("calls", &["call", "kv", "3", "x"], &["kv"]),
    );
    assert_eq!(c.finish(), 0, "{}{}", c.out(), c.err());
    assert!(c.out().contains("client: from a 3"), "{}", c.out());
}

/// The body of an HTTP response.
fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[test]
fn malformed_frames_are_dropped_and_counted() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let calls = client("calls", &["call", "kv", "3", "x"], &["kv"]);
    // Once b's calls were served, a subscribes to kv's calls.
    let mut b = Node::start(d.path(), "b", &broker.url(), &calls);
    assert_eq!(b.finish(), 0, "{}", b.out());
    let mut s = std::net::TcpStream::connect(("127.0.0.1", broker.port)).unwrap();
    // The last claims to come from b, on a subject that names x.
    let frames: [(&str, &[u8]); 5] = [
        ("warden.default.call.x.a.kv reply.1", b"\x01\x01\xffgarbage"),
        ("warden.default.call.x.a.kv reply.2", b""),
        (
            "warden.default.node.x",
            b"{\"node\":\"y\",\"instance\":1,\"exports\":[]}",
        ),
        ("warden.default.node.z", b"not json"),
        (
            "warden.default.call.x.a.kv reply.3",
            b"\x01\x01\x01b\x07\0\0\0\0\0\0\0\0hi",
        ),
    ];
    let mut text = b"CONNECT {\"verbose\":false}\r\n".to_vec();
    for (subject, payload) in frames {
        text.extend_from_slice(format!("PUB {subject} {}\r\n", payload.len()).as_bytes());
        text.extend_from_slice(payload);
        text.extend_from_slice(b"\r\n");
    }
    text.extend_from_slice(b"PING\r\n");
    s.write_all(&text).unwrap();
    a.wait_metric("warden_cluster_dropped_frames_total", 5.0);
    // The node still serves, and served only real calls.
    let mut c = Node::start(d.path(), "c", &broker.url(), &calls);
    assert_eq!(c.finish(), 0, "{}", c.out());
    assert_eq!(a.metric("warden_cluster_served_total{name=\"kv\"}"), 6.0);
}

#[test]
fn ps_cluster_lists_every_node_with_its_tasks() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let c = Node::start(d.path(), "c", &broker.url(), &server("log", "c"));
    a.wait_for("server: ready");
    c.wait_for("server: ready");
    let t = Instant::now();
    let nodes = loop {
        let out = warden()
            .args(["ps", "--cluster", "--json", "--control", a.served.control()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if v.as_array().unwrap().len() == 2 {
            break v;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{v}");
    };
    assert_eq!(nodes[0]["node"], "a");
    assert_eq!(nodes[1]["node"], "c");
    assert_eq!(nodes[1]["tasks"][0]["name"], "server");
    let table = warden()
        .args(["ps", "--cluster", "--control", a.served.control()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("NODE a (1 tasks)") && text.contains("NODE c (1 tasks)"),
        "{text}"
    );
}

#[test]
fn portals_cross_nodes_both_ways_and_are_given_back() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    // On b: a local service "back", a task that sends a portal to it in a
    // call to a's kv (a calls back through it), and one that gets a
    // portal to kv's service in a reply and calls through it.
    let back = "[[task]]\nname = \"back\"\nmodule = \"cluster.wasm\"\n\
                args = [\"serve\", \"back\", \"b\"]\nprovides = [\"back\"]\n";
    let b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &(back.to_string()
            + &client("callback", &["callback", "kv", "back"], &["kv", "back"])
            + &client("give", &["give", "kv"], &["kv"])),
    );
    b.wait_for("[callback] callback: b:ping");
    b.wait_for("[give] given: a:hello");
    // Both loans come back once their borrowers closed the portals.
    let t = Instant::now();
    loop {
        let lent = (
            a.metric("warden_cluster_lent_portals"),
            b.metric("warden_cluster_lent_portals"),
        );
        if lent == (0.0, 0.0) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "still lent (a, b): {lent:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(b.metric("warden_cluster_served_total{name=\"(portal)\"}") >= 1.0);
    assert!(a.metric("warden_cluster_served_total{name=\"(portal)\"}") >= 1.0);
}

/// A raw NATS client: the attacker.
pub(crate) struct Rogue {
    s: std::net::TcpStream,
    r: BufReader<std::net::TcpStream>,
}

impl Rogue {
    pub(crate) fn connect(port: u16) -> Rogue {
        Self::open(port, "")
    }

    /// Connects with a user name and password.
    pub(crate) fn connect_as(port: u16, user: &str, pass: &str) -> Rogue {
        let mut me = Self::open(port, &format!(",\"user\":\"{user}\",\"pass\":\"{pass}\""));
        me.send(b"PING\r\n");
        assert_eq!(me.violations(), 0, "connected");
        me
    }

    /// Reads the broker's INFO and sends CONNECT with `more` fields.
    pub(crate) fn open(port: u16, more: &str) -> Rogue {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut info = String::new();
        r.read_line(&mut info).unwrap();
        let mut me = Rogue { s, r };
        let connect = format!("CONNECT {{\"verbose\":false,\"pedantic\":false{more}}}\r\n");
        me.send(connect.as_bytes());
        me
    }

    /// Reads until the broker's PONG; how many permission violations it
    /// reported before it (panics on a message: nothing may arrive).
    pub(crate) fn violations(&mut self) -> usize {
        self.s
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut n = 0;
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).unwrap();
            match line.trim() {
                "PONG" => return n,
                "PING" => self.send(b"PONG\r\n"),
                l if l.contains("Permissions Violation") => n += 1,
                l if l.starts_with("MSG") => panic!("the rogue heard {l}"),
                l if l.starts_with("-ERR") => panic!("{l}"),
                _ => {}
            }
        }
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    pub(crate) fn publish(&mut self, subject: &str, reply: &str, payload: &[u8]) {
        let head = format!("PUB {subject} {reply} {}\r\n", payload.len());
        let mut m = head.into_bytes();
        m.extend_from_slice(payload);
        m.extend_from_slice(b"\r\n");
        self.send(&m);
    }

    /// Waits for the broker's PONG.
    pub(crate) fn pong(&mut self) {
        self.s
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut line = String::new();
        while line.trim() != "PONG" {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            if line.starts_with("MSG") {
                let len: usize = line.split_whitespace().last().unwrap().parse().unwrap();
                let mut skip = vec![0; len + 2];
                self.r.read_exact(&mut skip).unwrap();
            }
        }
    }

    /// The next message's subject, reply subject and payload, answering
    /// the broker's pings; `None` after `within`.
    pub(crate) fn next(&mut self, within: Duration) -> Option<(String, String, Vec<u8>)> {
        self.s.set_read_timeout(Some(within)).unwrap();
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).ok()?;
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.first().copied() {
                Some("PING") => self.send(b"PONG\r\n"),
                Some("MSG") => {
                    let len: usize = parts.last()?.parse().ok()?;
                    let reply = if parts.len() == 5 { parts[3] } else { "" }.to_string();
                    let mut payload = vec![0; len + 2];
                    self.r.read_exact(&mut payload).ok()?;
                    payload.truncate(len);
                    return Some((parts[1].to_string(), reply, payload));
                }
                Some(_) => {}
                None => return None,
            }
        }
    }
}

impl Rogue {
    /// Subjects of the messages heard before the broker's PONG.
    pub(crate) fn heard_until_pong(&mut self) -> Vec<String> {
        self.send(b"PING\r\n");
        self.s
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut heard = vec![];
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).unwrap();
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.first().copied() {
                Some("PONG") => return heard,
                Some("PING") => self.send(b"PONG\r\n"),
                Some("MSG") => {
                    let len: usize = parts.last().unwrap().parse().unwrap();
                    let mut skip = vec![0; len + 2];
                    self.r.read_exact(&mut skip).unwrap();
                    heard.push(parts[1].to_string());
                }
                _ => {}
            }
        }
    }
}

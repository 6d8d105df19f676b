//! Beyond one machine: a portal call to a task on another node, through a
//! NATS broker, beside Erlang's distribution (a message round trip
//! between processes on two nodes) and beside a local portal call; and
//! how calls per second grow with the nodes serving one name.

use super::contestant::{measure, Contestant};
use super::finish;
use crate::harness::{without_idle_spin, Ctx};
use crate::inproc::{self, quiet};
use crate::model::{Samples, Table};
use crate::peers::{figure, figures};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden::cluster_config::ClusterKeys;
use warden::{ClusterSpec, Runtime, TaskSpec};
use warden_test_guests as guests;

const REMOTE: &str = "Warden remote portal call (2 nodes, nats-server)";
const ERLANG: &str = "Erlang distribution (2 nodes, erl -sname)";
const LOCAL: &str = "Warden local portal call (1 node)";
const KEYED: &str = "Warden remote portal call, keyed cluster (every frame sealed)";
const NATS: &str = "NATS request/reply alone (async-nats, same broker)";
const NATS_TWO: &str = "NATS request/reply alone, answered from another thread";
const ONE_CLIENT: &str = "Warden remote calls, one client";
const MANY: &str = "Warden remote calls (nats-server)";
const ERL_SCALE: &str = "Erlang distribution (erl -sname)";
const COLUMNS: [&str; 2] = ["null round trip", "100-byte request"];

pub fn run(ctx: &Ctx) -> Vec<Table> {
    let broker = match Broker::start() {
        Ok(b) => b,
        Err(e) => return vec![failed(e)],
    };
    vec![latency(ctx, &broker), throughput(ctx, &broker)]
}

fn latency(ctx: &Ctx, broker: &Broker) -> Table {
    let calls: u64 = ctx.pick(20_000, 2_000);
    let mut t = Table::new(
        "cluster",
        "Remote call round trip across two nodes (µs)",
        "issue: nodes joined through NATS; Erlang distribution as the anchor",
        &COLUMNS.map(|c| (c, "µs")),
    );
    t.method = latency_method(calls);
    let nodes = match Pair::start(broker, None) {
        Ok(n) => n,
        Err(e) => {
            t.notes.push(format!("the Warden nodes did not start: {e}"));
            return finish(t, &Default::default());
        }
    };
    let kinds = ["null", "str100"];
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(REMOTE).runs(|s| {
                let f = without_idle_spin(&nodes.runtimes(), || nodes.call(calls, &kinds))?;
                push_figures(s, REMOTE, &f, kinds)
            }),
            Contestant::peer(ERLANG).prepared(
                || ErlNode::start(ctx, 0),
                |peer, s| {
                    let f = figures(&mut peer.caller(calls)?)?;
                    push_figures(s, ERLANG, &f, ["dist_null", "dist_str100"])
                },
            ),
            Contestant::peer(NATS).runs(|s| nats_row(s, NATS, &broker.url, calls, false)),
            Contestant::peer(NATS_TWO).runs(|s| nats_row(s, NATS_TWO, &broker.url, calls, true)),
            Contestant::peer(KEYED).prepared(
                || Keyring::new(&["a", "b"]).and_then(|k| Pair::start(broker, Some(&k))),
                |keyed, s| {
                    let f = without_idle_spin(&keyed.runtimes(), || keyed.call(calls, &kinds))?;
                    push_figures(s, KEYED, &f, kinds)
                },
            ),
            Contestant::peer(LOCAL).runs(|s| {
                let f = inproc::ipc(1, calls * 10, &kinds)?;
                push_figures(s, LOCAL, &f, kinds)
            }),
        ],
    );
    latency_notes(&mut t);
    m.finish(t)
}

fn latency_method(calls: u64) -> String {
    format!(
        "{calls} calls per sample, timed inside the calling program (Warden's and Erlang's alike: \
         the second of two runs). Warden: two runtimes in the harness process, nodes \"a\" and \"b\", each \
         with its own connection to one nats-server on loopback; a task on b looks up the name \
         task on a exports and calls it (ipc_bench: empty request and reply; a 100-byte string \
         in, its length out), so every call crosses the broker twice. Erlang: two `erl -sname` \
         nodes on this machine; a process on one sends a message to a process on the other and \
         waits for the answer (an atom; a 100-character string, its length back). Local: the \
         same Warden calls between two tasks of one runtime. Keyed: the same two nodes in a \
         cluster whose members are listed with their nkeys (`cluster.key`, `cluster.members`), \
         so that each call, progress note and reply is sealed by its sender (HMAC-SHA256 with the \
         key the two nodes share, see doc/clusters.md) and checked by its receiver. Waiting: \
         Warden's remote rows run with its idle spin off (its runtimes' idle spin set to zero, Runtime::set_idle_spin), so that \
         every thread waiting for a message blocks at once, as the NATS clients' and Erlang's do."
    )
}

fn latency_notes(t: &mut Table) {
    t.notes.push(
        "The NATS rows are the broker's own floor: two async-nats clients in one process, one \
         answering the other's messages (published with a reply subject, the answer read from \
         a subscription), requests with the calls' bodies (empty, 100 bytes) and 4-byte \
         answers, no Warden around them; in the \
         first both clients share one thread, in the second each has its own. Target: the \
         Warden round trip within 1.15× of the second, the floor of two parties each on a \
         thread of its own, as two nodes are (two processes, in use). The first shares one \
         thread between both clients, which no two nodes can do; it is shown for reference."
            .into(),
    );
    t.notes.push(
        "Target: the remote round trip at most 2× Erlang distribution's. A Warden call crosses \
         the broker (client → nats-server → serving node and back: four loopback hops); \
         Erlang's nodes talk over one direct TCP connection (two hops)."
            .into(),
    );
}

/// A row's two figures, from a program's figures `names` (ns): the null
/// round trip, then the 100-byte request.
fn push_figures(
    s: &mut Samples,
    system: &str,
    f: &BTreeMap<String, f64>,
    names: [&str; 2],
) -> Result<(), String> {
    for (col, name) in COLUMNS.iter().zip(names) {
        s.push(&format!("{system}/{col}"), figure(f, name)? / 1e3);
    }
    Ok(())
}

/// A NATS floor row (see [`nats_alone`]).
fn nats_row(
    s: &mut Samples,
    system: &str,
    url: &str,
    calls: u64,
    own_thread: bool,
) -> Result<(), String> {
    let (null, str100) = nats_alone(url, calls, own_thread)?;
    s.push(&format!("{system}/{}", COLUMNS[0]), null / 1e3);
    s.push(&format!("{system}/{}", COLUMNS[1]), str100 / 1e3);
    Ok(())
}

fn throughput(ctx: &Ctx, broker: &Broker) -> Table {
    let clients: usize = 8;
    let calls: u64 = ctx.pick(4_000, 500);
    let columns = ["1 node", "2 nodes", "3 nodes"];
    let mut t = Table::new(
        "cluster_scale",
        "Calls per second to one exported name, by serving nodes (calls/s)",
        "issue: nodes joined through NATS (load sharing)",
        &columns.map(|c| (c, "calls/s")),
    );
    t.method = throughput_method(clients, calls);
    let erl: Result<Vec<ErlNode>, String> = (1..=3).map(|i| ErlNode::start(ctx, i)).collect();
    let erl = &erl;
    // The rows, then a contestant per row and column, column by column.
    let mut list = vec![
        Contestant::warden(MANY),
        Contestant::peer(ERL_SCALE),
        Contestant::peer(ONE_CLIENT),
    ];
    for (k, col) in (1..=3).zip(columns) {
        let each = [
            (MANY, clients, false),
            (ONE_CLIENT, 1, false),
            (ERL_SCALE, clients, true),
        ];
        list.extend(each.map(|(system, clients, erlang)| {
            let name = format!("{system}/{col}");
            Contestant::rowless(&name.clone()).runs(move |s| {
                let rate = match erlang {
                    false => scale_sample(broker, k, clients, calls)?,
                    true => erl_scale(erl, k, clients, calls)?,
                };
                s.push(&name, rate);
                Ok(())
            })
        }));
    }
    let m = measure(ctx.rounds, &mut t, list);
    for (name, e) in m.errors {
        t.notes.push(format!("{name} failed: {e}"));
    }
    throughput_notes(&mut t, clients, calls);
    t.compute_ratios();
    t
}

fn throughput_method(clients: usize, calls: u64) -> String {
    format!(
        "{clients} client tasks on one node each make {calls} null calls to a name that 1, 2 or \
         3 other nodes export (the calling node sends each call to one of them, picked at \
         random): the clients are spawned and waited for once untimed (node start, lookups, \
         warm-up), then spawned again, and the figure is {clients} × {calls} calls over the \
         time from the first spawn of the second round to its last client's end. Every node \
         is a runtime in the harness process with its own broker connection, started afresh \
         for each sample. Erlang, the same span: {clients} processes on one node each make \
         {calls} round trips to a server process on one of 1, 2 or 3 other nodes (process i \
         uses node i mod K), spawned and waited for twice, the second time timed. The \
         contestants run in interleaved rounds after a warm-up round. All share this \
         machine's cores (and Warden's the broker)."
    )
}

fn throughput_notes(t: &mut Table, clients: usize, calls: u64) {
    t.notes.push(format!(
        "The \"{ONE_CLIENT}\" row is Warden again with a single client task making the same \
         {calls} calls: its ratio is how many times one client's calls per second {clients} \
         clients get (how well calls from many clients are pipelined on a node's broker \
         connection). Target: at least 4."
    ));
    t.notes.push(
        "Ratios here are of calls per second: below 1, Warden completes fewer. On a machine \
         with few cores every node, the broker and the clients share them, so added nodes add \
         parallel servers but no cores; the table shows what sharing costs or gains here."
            .into(),
    );
}

/// Erlang's calls per second from `clients` processes to the first `k`
/// serving nodes.
fn erl_scale(
    erl: &Result<Vec<ErlNode>, String>,
    k: usize,
    clients: usize,
    calls: u64,
) -> Result<f64, String> {
    let nodes = erl.as_ref().map_err(Clone::clone)?;
    let mut args = vec!["scale".to_string(), calls.to_string(), clients.to_string()];
    args.extend(nodes[..k].iter().map(|n| n.name.clone()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let f = figures(&mut calling(&nodes[0].dir, &args))?;
    figure(&f, "dist_scale")
}

/// Nanoseconds per request/reply through the broker between two bare
/// async-nats clients: an empty request, then a 100-byte one (each
/// answered with 4 bytes), `calls` of each. The answering client runs on
/// the caller's thread, or (`own_thread`) on a thread of its own, as a
/// second node would.
fn nats_alone(url: &str, calls: u64, own_thread: bool) -> Result<(f64, f64), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let rt = current_thread()?;
    let answerer = if own_thread {
        let (tx, rx) = std::sync::mpsc::channel();
        let url = url.to_string();
        let thread = std::thread::spawn(move || {
            let Ok(rt) = current_thread() else { return };
            rt.block_on(async {
                match answering(&url).await {
                    Ok((task, stop)) => {
                        let _ = tx.send(Ok(stop));
                        let _ = task.await;
                    }
                    Err(e) => drop(tx.send(Err(e))),
                }
            })
        });
        let stop = rx.recv().map_err(|e| err(&e))??;
        Some((thread, stop))
    } else {
        None
    };
    let timed = rt.block_on(async {
        let local = match answerer {
            Some(_) => None,
            None => Some(answering(url).await?),
        };
        let timed = request_loop(url, calls).await;
        drop(local);
        timed
    });
    if let Some((thread, stop)) = answerer {
        drop(stop);
        let _ = thread.join();
    }
    timed
}

fn current_thread() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// The answering client's task, and what stops it when dropped.
type Answering = (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
);

/// A client answering every message on "floor" with 4 bytes, until the
/// sender it returns is dropped.
async fn answering(url: &str) -> Result<Answering, String> {
    use futures_util::StreamExt;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let server = async_nats::connect(url).await.map_err(|e| err(&e))?;
    let mut requests = server.subscribe("floor").await.map_err(|e| err(&e))?;
    server.flush().await.map_err(|e| err(&e))?;
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        loop {
            let m = tokio::select! {
                m = requests.next() => m,
                _ = &mut stopped => None,
            };
            let Some(m) = m else { return };
            if let Some(reply) = m.reply {
                let answer = bytes::Bytes::from_static(b"\0\0\0\0");
                let _ = server.publish(reply, answer).await;
            }
        }
    });
    Ok((task, stop))
}

/// Times `calls` requests (empty, then 100 bytes) to "floor", each
/// waited for: nanoseconds per request of each size.
async fn request_loop(url: &str, calls: u64) -> Result<(f64, f64), String> {
    use futures_util::StreamExt;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let client = async_nats::connect(url).await.map_err(|e| err(&e))?;
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(format!("{inbox}.*"))
        .await
        .map_err(|e| err(&e))?;
    client.flush().await.map_err(|e| err(&e))?;
    let mut per_call = Vec::new();
    for size in [0usize, 100] {
        let body = bytes::Bytes::from(vec![b'x'; size]);
        let t = Instant::now();
        for i in 0..calls {
            let to = format!("{inbox}.{i}");
            client
                .publish_with_reply("floor", to, body.clone())
                .await
                .map_err(|e| err(&e))?;
            answers.next().await.ok_or("the broker went away")?;
        }
        per_call.push(t.elapsed().as_nanos() as f64 / calls as f64);
    }
    Ok((per_call[0], per_call[1]))
}

/// One sample: `k` serving nodes, `clients` callers on another node.
fn scale_sample(broker: &Broker, k: usize, clients: usize, calls: u64) -> Result<f64, String> {
    let servers: Vec<Node> = (0..k)
        .map(|i| Node::serving(broker, &format!("s{i}"), None))
        .collect::<Result<_, _>>()?;
    let client = Node::join(broker, "c", None)?;
    client.wait_for_exporters(k)?;
    let mut spec = quiet("client", guests::IPC_BENCH);
    // One run of the calls per client (ipc_bench's fifth argument), so
    // that what is timed is exactly the calls counted.
    spec.args = ["client", &calls.to_string(), "null", "bench", "1"]
        .map(String::from)
        .into();
    spec.ipc.uses = vec!["bench".into()];
    let round = || -> Result<Duration, String> {
        let t = Instant::now();
        let ids = (0..clients)
            .map(|_| client.rt.spawn(&spec).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        for id in ids {
            let r = client
                .rt
                .wait_timeout(id, Some(Duration::from_secs(300)))
                .map_err(|e| e.to_string())?
                .ok_or("a client did not finish in 300 s")?;
            if r.exit_code != Some(0) {
                return Err(format!("a client ended {} {:?}", r.status, r.reason));
            }
        }
        Ok(t.elapsed())
    };
    round()?; // warm-up, as Erlang's first run
    let timed = round()?;
    drop(servers);
    Ok((clients as u64 * calls) as f64 / timed.as_secs_f64())
}

fn failed(e: String) -> Table {
    let mut t = Table::new(
        "cluster",
        "Remote call round trip across two nodes (µs)",
        "issue: nodes joined through NATS",
        &COLUMNS.map(|c| (c, "µs")),
    );
    t.notes.push(format!("no broker: {e}"));
    t
}

/// A `nats-server` on a free loopback port.
struct Broker {
    child: Child,
    url: String,
}

impl Broker {
    fn start() -> Result<Broker, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let exe = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("nats-server");
        let child = Command::new(exe)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nats-server: {e} (install nats-server)"))?;
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed() > Duration::from_secs(20) {
                return Err("nats-server did not come up".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(Broker {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A runtime joined to the cluster as `node`.
struct Node {
    rt: Runtime,
}

/// The keys of a keyed cluster's nodes: their seeds in a temporary
/// directory, and every member's public key.
struct Keyring {
    dir: tempfile::TempDir,
    members: std::collections::BTreeMap<String, String>,
}

impl Keyring {
    fn new(nodes: &[&str]) -> Result<Keyring, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut members = std::collections::BTreeMap::new();
        for node in nodes {
            let key = nkeys::KeyPair::new_server();
            let seed = key.seed().map_err(|e| e.to_string())?;
            std::fs::write(dir.path().join(format!("{node}.nk")), seed)
                .map_err(|e| e.to_string())?;
            members.insert(node.to_string(), key.public_key());
        }
        Ok(Keyring { dir, members })
    }

    /// Node `node`'s `[cluster]` keys.
    fn keys(&self, node: &str) -> ClusterKeys {
        ClusterKeys {
            seed: self.dir.path().join(format!("{node}.nk")),
            members: self.members.clone(),
        }
    }
}

impl Node {
    /// Joins as `node`: of the default cluster, or with `keys` of the
    /// cluster "keyed".
    fn join(broker: &Broker, node: &str, keys: Option<&Keyring>) -> Result<Node, String> {
        let rt = inproc::runtime(1, 64);
        let mut spec = ClusterSpec::new(vec![broker.url.clone()], node);
        if let Some(k) = keys {
            spec.cluster = "keyed".into();
            spec.keys = Some(k.keys(node));
        }
        rt.join_cluster(&spec).map_err(|e| e.to_string())?;
        Ok(Node { rt })
    }

    /// A node whose `ipc_bench server` task exports "bench".
    fn serving(broker: &Broker, node: &str, keys: Option<&Keyring>) -> Result<Node, String> {
        let n = Node::join(broker, node, keys)?;
        let mut s: TaskSpec = quiet("server", guests::IPC_BENCH);
        s.args = vec!["server".into()];
        s.ipc.provides = vec!["bench".into()];
        s.ipc.export = vec!["bench".into()];
        n.rt.spawn(&s).map_err(|e| e.to_string())?;
        Ok(n)
    }

    /// Waits until `k` other nodes export "bench".
    fn wait_for_exporters(&self, k: usize) -> Result<(), String> {
        let t = Instant::now();
        let cluster = self.rt.cluster().ok_or("not in a cluster")?;
        loop {
            let n = cluster.nodes().into_iter();
            if n.filter(|(_, e)| e.iter().any(|x| x == "bench")).count() >= k {
                return Ok(());
            }
            if t.elapsed() > Duration::from_secs(20) {
                return Err(format!("only {:?} seen after 20 s", cluster.nodes()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.rt.kill_all("benchmark over");
        self.rt.wait_all();
    }
}

/// The two nodes of the round-trip table.
struct Pair {
    _server: Node,
    client: Node,
}

impl Pair {
    fn start(broker: &Broker, keys: Option<&Keyring>) -> Result<Pair, String> {
        let server = Node::serving(broker, "a", keys)?;
        let client = Node::join(broker, "b", keys)?;
        client.wait_for_exporters(1)?;
        Ok(Pair {
            _server: server,
            client,
        })
    }

    /// Both nodes' runtimes.
    fn runtimes(&self) -> [&Runtime; 2] {
        [&self._server.rt, &self.client.rt]
    }

    fn call(
        &self,
        calls: u64,
        kinds: &[&str],
    ) -> Result<std::collections::BTreeMap<String, f64>, String> {
        let mut spec = TaskSpec::new("client", guests::IPC_BENCH);
        spec.args = vec![
            "client".into(),
            calls.to_string(),
            kinds.join(","),
            "bench".into(),
        ];
        spec.ipc.uses = vec!["bench".into()];
        inproc::guest_figures(&self.client.rt, spec)
    }
}

/// The serving Erlang node, running while the table is taken.
struct ErlNode {
    child: Child,
    name: String,
    dir: std::path::PathBuf,
}

const COOKIE: &str = "wardenbench";

impl ErlNode {
    /// Serving node number `i`.
    fn start(ctx: &Ctx, i: usize) -> Result<ErlNode, String> {
        let dir = ctx.peers.erlang_dir()?.to_path_buf();
        let name = format!("wardenb{}_{i}", std::process::id());
        let child = Command::new("erl")
            .args(["-sname", &name, "-setcookie", COOKIE, "-noshell", "-pa"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("erl: {e}"))?;
        Ok(ErlNode { child, name, dir })
    }

    /// The calling node's command: `calls` round trips of each kind.
    fn caller(&self, calls: u64) -> Result<Command, String> {
        Ok(calling(
            &self.dir,
            &["main", &calls.to_string(), &self.name],
        ))
    }
}

/// An `erl` calling node running `dist:FUNCTION(ARGS)`, then stopping.
fn calling(dir: &std::path::Path, run: &[&str]) -> Command {
    let mut c = Command::new("erl");
    c.args(["-sname", &format!("wardena{}", std::process::id())])
        .args(["-setcookie", COOKIE, "-noshell", "-pa"])
        .arg(dir)
        .args(["-run", "dist"])
        .args(run)
        .args(["-s", "init", "stop"]);
    c
}

impl Drop for ErlNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

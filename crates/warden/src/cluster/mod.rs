//! Clusters: Warden nodes joined through a NATS broker.
//!
//! A node is one runtime with a `[cluster]` section. It announces itself
//! and the names it exports every [`ANNOUNCE`]; every node keeps a
//! [`directory::Directory`] of the others from their announcements, and a
//! node silent for [`NODE_TTL`] is gone. A lookup that finds no local
//! name finds one a live node exports ([`remote`]), and calls to it cross
//! the broker with the semantics of local calls: bytes copied both ways,
//! the caller's quotas and budget, `PeerDied` when the serving node dies
//! or the broker is lost. The serving side is [`serve`]; portals crossing
//! nodes are [`portal`]; the frames and subjects are [`wire`].
//!
//! Locks: the directory's (`Shared::dir`), the table of calls waiting
//! for answers (`Shared::pending`) and that of lent portals
//! (`Shared::lent`) are never held together, and the name
//! service releases its own lock before it asks this module.
//!
//! Subjects (`warden.<cluster>.` prefix, [`wire::Subjects`]):
//! `call.<name>` (a queue group of the nodes serving it), `node.<node>`
//! (announcements), `hello.<node>` (is the name taken?), `ps` (every
//! node's tasks, for `warden ps --cluster`), and each node's own inbox for
//! answers, whose name is a secret of the node and each call's subject
//! a secret of the call. The broker connection's credentials and TLS are
//! [`broker`]'s.

mod broker;
mod directory;
mod permissions;
mod portal;
mod remote;
mod serve;
mod stats;
mod wire;

pub use broker::{shown as shown_url, BrokerAuth, BrokerTls, Secret};
pub use permissions::{broker_config, Member};
pub use stats::NameCounts;
pub use wire::{valid_node, DEFAULT_CLUSTER};

use crate::ipc::client::HostClient;
use crate::ipc::Kernel;
use directory::Directory;
use futures_util::StreamExt;
use remote::Relay;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// How often a node announces itself.
pub const ANNOUNCE: Duration = Duration::from_millis(250);
/// A node silent this long is gone.
pub const NODE_TTL: Duration = Duration::from_millis(1500);
/// How often a serving node tells a caller it still works on its call.
pub const PROGRESS: Duration = Duration::from_millis(250);
/// A call that hears nothing this long fails with `PeerDied`.
pub const SILENCE: Duration = Duration::from_millis(1500);
/// How long joining waits for the broker.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long `warden ps --cluster` waits for the other nodes.
const GATHER: Duration = Duration::from_secs(1);
/// How long [`Cluster::drain`] waits for the answers still being sent.
const DRAIN: Duration = Duration::from_secs(2);

/// The `[cluster]` section of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Broker URLs (`nats://host:port`, `tls://host:port`); the client
    /// fails over between them.
    pub nats: Vec<String>,
    /// This node's name, unique within the cluster.
    pub node: String,
    /// The cluster's name: clusters sharing a broker never hear each
    /// other ([`DEFAULT_CLUSTER`] when the manifest names none).
    pub cluster: String,
    /// How the node proves who it is to the broker.
    pub auth: BrokerAuth,
    /// TLS to the broker.
    pub tls: BrokerTls,
}

impl ClusterSpec {
    /// Node `node` of the default cluster, through the brokers at `nats`,
    /// with no credentials and no TLS.
    pub fn new(nats: Vec<String>, node: &str) -> ClusterSpec {
        ClusterSpec {
            nats,
            node: node.to_string(),
            cluster: DEFAULT_CLUSTER.to_string(),
            auth: BrokerAuth::None,
            tls: BrokerTls::default(),
        }
    }
}

/// The tasks of this node, as `warden ps` shows them (JSON).
pub type TaskList = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// A runtime's membership of a cluster. Dropping it leaves the cluster.
pub struct Cluster {
    shared: Arc<Shared>,
    reactor: Reactor,
    /// The broker's addresses, kept from tasks' grants (see `net::own`).
    _broker: Vec<crate::net::own::OwnEndpoint>,
}

/// The node's own thread, driving its broker connection and loops on a
/// single-threaded Tokio runtime (apart from the tasks' I/O, so that
/// neither waits for the other).
struct Reactor {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reactor {
    fn start() -> Result<Reactor, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cluster: {e}"))?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("warden-cluster".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
                rt.shutdown_background();
            })
            .map_err(|e| format!("cluster: {e}"))?;
        Ok(Reactor {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `f` on the reactor and waits for its result.
    fn run<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv().ok()
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the node's loops and the name service share.
pub(crate) struct Shared {
    me: Weak<Shared>,
    node: String,
    instance: u64,
    subjects: wire::Subjects,
    client: async_nats::Client,
    tokio: tokio::runtime::Handle,
    kernel: Weak<Kernel>,
    /// Calls the local services exported names reach.
    host: HostClient,
    start: Instant,
    dir: Mutex<Dir>,
    /// Calls waiting for an answer, by number: the secret their
    /// answer's subject must carry, and where the answer goes.
    pending: Mutex<HashMap<u64, (u64, mpsc::Sender<remote::Heard>)>>,
    /// Portals lent to other nodes, by number.
    lent: Mutex<HashMap<u64, AbortHandle>>,
    next_call: AtomicU64,
    inbox: String,
    stats: stats::Stats,
    in_flight: tokio::sync::Semaphore,
    exports_changed: tokio::sync::Notify,
    tasks: Tasks,
    task_list: TaskList,
}

/// The directory and what depends on it, under one lock.
struct Dir {
    directory: Directory,
    /// Lookups waiting for a name some node may export.
    waiters: Vec<(String, Waker)>,
    relays: HashMap<String, Relay>,
}

/// The node's background tasks, stopped when it leaves (they hold the
/// shared state, so it cannot end them by being dropped).
#[derive(Default)]
struct Tasks(Mutex<Vec<AbortHandle>>);

impl Tasks {
    /// Keeps `h`, forgetting finished tasks as the list doubles.
    fn push(&self, h: AbortHandle) {
        let mut tasks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if tasks.len() >= 16 && tasks.len().is_power_of_two() {
            tasks.retain(|t| !t.is_finished());
        }
        tasks.push(h);
    }

    fn abort_all(&self) {
        for h in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            h.abort();
        }
    }
}

impl Cluster {
    /// Connects to the broker and joins the cluster as `spec.node`:
    /// refused if the broker cannot be reached or another live node has
    /// the name. The node's exported names are offered as they are
    /// registered; lookups in `kernel` reach the other nodes' from now on.
    pub(crate) fn join(
        spec: &ClusterSpec,
        kernel: &Arc<Kernel>,
        host: HostClient,
        task_list: TaskList,
    ) -> Result<Cluster, String> {
        if !valid_node(&spec.node) {
            return Err(format!("cluster.node: {:?} is not a node name", spec.node));
        }
        if !valid_node(&spec.cluster) {
            return Err(format!(
                "cluster.name: {:?} is not a cluster name",
                spec.cluster
            ));
        }
        let broker = broker_endpoints(spec);
        let reactor = Reactor::start()?;
        let tokio = reactor.handle.clone();
        let owned = spec.clone();
        let client = reactor
            .run(async move { broker::connect(&owned).await })
            .ok_or("cluster: the node's thread stopped")??;
        let instance = instance_number();
        let subjects = wire::Subjects::of(&spec.cluster);
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            node: spec.node.clone(),
            instance,
            inbox: subjects.inbox(&spec.node, rand::random()),
            subjects,
            client,
            tokio: tokio.clone(),
            kernel: Arc::downgrade(kernel),
            host,
            start: Instant::now(),
            dir: Mutex::new(Dir {
                directory: Directory::new(NODE_TTL.as_millis() as u64),
                waiters: Vec::new(),
                relays: HashMap::new(),
            }),
            pending: Mutex::default(),
            lent: Mutex::default(),
            next_call: AtomicU64::new(1),
            stats: stats::Stats::default(),
            in_flight: tokio::sync::Semaphore::new(serve::MAX_IN_FLIGHT),
            exports_changed: tokio::sync::Notify::new(),
            tasks: Tasks::default(),
            task_list,
        });
        reactor
            .run(shared.clone().start())
            .ok_or("cluster: the node's thread stopped")??;
        kernel.names.set_remote(shared.clone());
        let _ = kernel.node.set(spec.node.clone());
        Ok(Cluster {
            shared,
            reactor,
            _broker: broker,
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Live nodes other than this one, by name, each with the names it
    /// exports.
    pub fn nodes(&self) -> Vec<(String, Vec<String>)> {
        let now = self.shared.now_ms();
        let dir = self.shared.lock_dir();
        let nodes = dir.directory.nodes(now).into_iter();
        nodes.map(|(n, info)| (n, info.exports)).collect()
    }

    /// Remote-call counts by name (calls through portals that crossed
    /// nodes under `(portal)`), and frames dropped as malformed.
    pub fn counts(&self) -> (Vec<(String, NameCounts)>, u64) {
        (self.shared.stats.names(), self.shared.stats.dropped())
    }

    /// Portals this node has lent to others and not had back.
    pub fn lent_portals(&self) -> usize {
        self.shared.lent()
    }

    /// Sends the answers to calls from other nodes that are still being
    /// served here, then flushes the broker connection: call it once this
    /// node's tasks have ended and before the process exits, or a caller
    /// elsewhere whose call the last task answered hears `PeerDied`
    /// instead of the answer. Waits at most 2 s for each of the two
    /// steps.
    pub fn drain(&self) {
        self.reactor.run(self.shared.clone().drain());
    }

    /// Every live node's tasks, this one's too, sorted by node:
    /// `[{"node", "tasks"}]`. Nodes that do not answer within a second
    /// are left out.
    pub fn tasks(&self) -> Vec<serde_json::Value> {
        let s = self.shared.clone();
        self.reactor.run(s.gather()).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shared.tasks.abort_all();
        for (_, h) in self.shared.lock_lent().drain() {
            h.abort();
        }
    }
}

/// The addresses `spec`'s brokers resolve to, registered as Warden's own.
fn broker_endpoints(spec: &ClusterSpec) -> Vec<crate::net::own::OwnEndpoint> {
    use std::net::ToSocketAddrs;
    spec.nats
        .iter()
        .filter_map(|url| url.parse::<async_nats::ServerAddr>().ok())
        .filter_map(|a| (a.host(), a.port()).to_socket_addrs().ok())
        .flatten()
        .map(crate::net::own::register)
        .collect()
}

/// A number telling this process's node from an earlier one of its name.
fn instance_number() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

impl Shared {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn lock_dir(&self) -> MutexGuard<'_, Dir> {
        self.dir.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_lent(&self) -> MutexGuard<'_, HashMap<u64, AbortHandle>> {
        self.lent.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_pending(&self) -> MutexGuard<'_, HashMap<u64, (u64, mpsc::Sender<remote::Heard>)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the node name is free, then starts the node's loops.
    async fn start(self: Arc<Self>) -> Result<(), String> {
        let c = &self.client;
        let hello = self.subjects.hello(&self.node);
        // An answer means the name is taken; no responders (or silence)
        // means it is free.
        let asked = c.request(hello.clone(), "".into());
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), asked).await {
            return Err(format!(
                "cluster.node: another live node is named {:?}",
                self.node
            ));
        }
        let subscribe = |subject: String| async move {
            c.subscribe(subject)
                .await
                .map_err(|e| format!("cannot subscribe on the cluster's broker: {e}"))
        };
        let subs = [
            subscribe(hello).await?,
            subscribe(self.subjects.announcements()).await?,
            subscribe(format!("{}.*", self.inbox)).await?,
            subscribe(self.subjects.ps()).await?,
        ];
        let [hello, nodes, inbox, ps] = subs;
        let s = &self;
        let spawned = [
            s.tokio.spawn(s.clone().answer_hello(hello)),
            s.tokio.spawn(s.clone().listen_nodes(nodes)),
            s.tokio.spawn(s.clone().listen_inbox(inbox)),
            s.tokio.spawn(s.clone().answer_ps(ps)),
            s.tokio.spawn(s.clone().announce_loop()),
        ];
        for t in spawned {
            s.tasks.push(t.abort_handle());
        }
        c.flush()
            .await
            .map_err(|e| format!("cluster's broker: {e}"))
    }

    async fn answer_hello(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            if let Some(reply) = msg.reply {
                let _ = self.client.publish(reply, self.node.clone().into()).await;
            }
        }
    }

    /// Keeps the directory from the other nodes' announcements, waking
    /// lookups that wait for a name just offered.
    async fn listen_nodes(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let Some(a) = wire::decode_announce(&self.subjects, msg.subject.as_str(), &msg.payload)
            else {
                self.stats.drop_frame();
                continue;
            };
            if a.node == self.node {
                continue;
            }
            let now = self.now_ms();
            let woken = {
                let mut dir = self.lock_dir();
                if !dir.directory.heard(a, now) {
                    continue;
                }
                std::mem::take(&mut dir.waiters)
            };
            for (_, w) in woken {
                w.wake();
            }
        }
    }

    async fn listen_inbox(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            self.heard(msg);
        }
    }

    /// Offers the exported names and announces them, every [`ANNOUNCE`]
    /// and at once when a name is exported.
    async fn announce_loop(self: Arc<Self>) {
        let mut offered = serve::Offered::default();
        let subject = self.subjects.announce(&self.node);
        loop {
            let exports = self.offer(&mut offered).await;
            let a = wire::Announce {
                node: self.node.clone(),
                instance: self.instance,
                exports,
            };
            let bytes = serde_json::to_vec(&a).unwrap_or_default();
            let _ = self.client.publish(subject.clone(), bytes.into()).await;
            let now = self.now_ms();
            self.lock_dir().directory.expire(now);
            let _ = tokio::time::timeout(ANNOUNCE, self.exports_changed.notified()).await;
        }
    }

    /// This node's part of `warden ps --cluster`.
    fn my_tasks(&self) -> serde_json::Value {
        serde_json::json!({ "node": self.node, "tasks": (self.task_list)() })
    }

    async fn answer_ps(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let Some(reply) = msg.reply else { continue };
            let s = self.clone();
            let mine = tokio::task::spawn_blocking(move || s.my_tasks()).await;
            let bytes = serde_json::to_vec(&mine.unwrap_or_default()).unwrap_or_default();
            let _ = self.client.publish(reply, bytes.into()).await;
        }
    }

    /// See [`Cluster::drain`]. Each call being served holds a permit of
    /// `in_flight` until its answer is published, so holding them all
    /// means none is left.
    async fn drain(self: Arc<Self>) {
        let all = serve::MAX_IN_FLIGHT as u32;
        let _ = tokio::time::timeout(DRAIN, self.in_flight.acquire_many(all)).await;
        let _ = tokio::time::timeout(DRAIN, self.client.flush()).await;
    }

    /// Every live node's tasks (see [`Cluster::tasks`]).
    async fn gather(self: Arc<Self>) -> Vec<serde_json::Value> {
        let s = self.clone();
        let mut all = vec![tokio::task::spawn_blocking(move || s.my_tasks())
            .await
            .unwrap_or_default()];
        let expected = {
            let now = self.now_ms();
            self.lock_dir().directory.nodes(now).len()
        };
        let inbox = self.client.new_inbox();
        let Ok(mut sub) = self.client.subscribe(inbox.clone()).await else {
            return all;
        };
        let ps = self.subjects.ps();
        if self
            .client
            .publish_with_reply(ps, inbox, "".into())
            .await
            .is_err()
        {
            return all;
        }
        let deadline = tokio::time::Instant::now() + GATHER;
        while all.len() <= expected {
            match tokio::time::timeout_at(deadline, sub.next()).await {
                Ok(Some(msg)) => match serde_json::from_slice::<serde_json::Value>(&msg.payload) {
                    Ok(v) if v["node"].as_str() == Some(self.node.as_str()) => {}
                    Ok(v) if v["node"].is_string() && v["tasks"].is_array() => all.push(v),
                    _ => self.stats.drop_frame(),
                },
                _ => break,
            }
        }
        all.sort_by(|a, b| a["node"].as_str().cmp(&b["node"].as_str()));
        all
    }
}

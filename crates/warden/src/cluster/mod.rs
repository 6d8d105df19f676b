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
//! Locks: the directory's (`Shared::dir`, taken only by the node's own
//! thread and by operators' queries), the providers' index that lookups
//! read (`Shared::names`), the table of calls waiting for answers
//! (`Shared::pending`), that of calls given up on (`Shared::abandoned`),
//! that of lent portals (`Shared::lent`) and the replay windows
//! (`Shared::windows`) are never held together (only the
//! list of the node's background tasks, `Shared::tasks`, is taken under
//! the index's, when a lookup makes a relay), and the name service
//! releases its own lock before it asks this module. An
//! announcement is decoded and compared outside every lock; the index
//! is then updated with work linear in what it changed.
//!
//! Subjects (`warden.<cluster>.` prefix, [`wire::Subjects`]):
//! `call.<caller>.<server>.<name>` (the caller picks one of the nodes
//! serving the name), `node.<node>` (announcements), `hello.<node>` (is
//! the name taken?), `ps` (every node's tasks, for `warden ps
//! --cluster`), and each node's own inbox for answers, whose name is a
//! secret of the node and each call's subject a secret of the call. The
//! broker connection's credentials and TLS are [`broker`]'s; a cluster
//! whose members are listed with their keys signs and checks every frame
//! ([`seal`]).

mod broker;
mod directory;
mod intake;
mod permissions;
mod portal;
mod ps;
mod remote;
mod replay;
mod seal;
mod serve;
mod stats;
mod wire;

pub use broker::{shown as shown_url, BrokerAuth, BrokerTls, Secret};
pub use permissions::{broker_config, Member};
pub use seal::Keys as ClusterKeys;
pub use stats::{NameCounts, Refusals};
pub use wire::{valid_node, DEFAULT_CLUSTER};

use crate::ipc::client::HostClient;
use crate::ipc::Kernel;
use directory::Directory;
use futures_util::StreamExt;
use remote::Relay;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};
use tokio::task::AbortHandle;

/// How often a node announces itself.
pub const ANNOUNCE: Duration = Duration::from_millis(250);
/// A node silent this long is gone.
pub const NODE_TTL: Duration = Duration::from_millis(1500);
/// How often a serving node tells a caller it still works on its call.
pub const PROGRESS: Duration = Duration::from_millis(250);
/// A call that hears nothing this long fails with `PeerDied`.
pub const SILENCE: Duration = Duration::from_millis(1500);
/// A frame's receiver when it is meant for any node (see `sealed`).
const ANY: (&str, u64) = ("", 0);
/// Most questions "is this name taken?" answered a second (and at once).
const HELLOS_PER_SECOND: u64 = 16;
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
    /// other (`DEFAULT_CLUSTER` when the manifest names none).
    pub cluster: String,
    /// How the node proves who it is to the broker.
    pub auth: BrokerAuth,
    /// TLS to the broker.
    pub tls: BrokerTls,
    /// This node's key and the members' public keys; `None` for an
    /// open cluster, whose frames are not signed.
    pub keys: Option<ClusterKeys>,
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
            keys: None,
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
    /// Where the spans of traced calls served here go.
    spans: Option<Arc<crate::telemetry::Exporter>>,
    start: Instant,
    /// How this node's frames are signed and others' checked.
    trust: seal::Trust,
    dir: Mutex<Directory>,
    names: Mutex<Names>,
    /// Calls waiting for an answer, by number.
    pending: Mutex<HashMap<u64, remote::Pending>>,
    /// Calls given up on whose answers may still come.
    abandoned: Mutex<remote::Abandoned>,
    /// Replay windows of the calls to names served here: by calling
    /// node, then by name.
    windows: Mutex<HashMap<String, HashMap<Arc<str>, replay::Window>>>,
    /// Portals lent to other nodes, by number.
    lent: Mutex<HashMap<u64, portal::Loan>>,
    /// Loans being made (changed under `lent`'s lock).
    lending: std::sync::atomic::AtomicUsize,
    next_call: AtomicU64,
    /// Set once the node leaves: no call is sent (or waits) after.
    left: std::sync::atomic::AtomicBool,
    inbox: String,
    stats: stats::Stats,
    /// The frames its feeds hold (see `intake`).
    intake: Arc<intake::Intake>,
    in_flight: tokio::sync::Semaphore,
    exports_changed: tokio::sync::Notify,
    tasks: Tasks,
    task_list: TaskList,
}

/// A node serving a name, as the caller's side sees it: with the
/// subject this node's calls to the name go to there, made once when
/// the node is heard to serve it rather than for each call.
#[derive(Clone)]
pub(crate) struct Provider {
    node: Arc<str>,
    instance: u64,
    subject: async_nats::Subject,
}

/// What lookups read: the live nodes serving each name, the lookups
/// waiting for a name, and the relays made for names.
#[derive(Default)]
struct Names {
    served: HashMap<String, Vec<Provider>>,
    /// Lookups waiting for a name some node may export.
    waiters: Vec<(String, Waker)>,
    relays: HashMap<String, Relay>,
}

impl Names {
    /// Applies what one node's announcement (or silence) changed; true
    /// if a name nobody served is served now. `calls` holds, for each name
    /// added, the subject of this node's calls to it on `node` (made
    /// before the lock is taken).
    fn apply(
        &mut self,
        node: &str,
        change: directory::Change,
        calls: Vec<async_nats::Subject>,
    ) -> bool {
        for name in &change.removed {
            if let Some(v) = self.served.get_mut(name) {
                v.retain(|p| &*p.node != node);
                if v.is_empty() {
                    self.served.remove(name);
                }
            }
        }
        let mut new = false;
        let node: Arc<str> = node.into();
        debug_assert_eq!(change.added.len(), calls.len());
        for (name, subject) in change.added.into_iter().zip(calls) {
            let p = Provider {
                node: node.clone(),
                instance: change.instance,
                subject,
            };
            match self.served.get_mut(&name) {
                Some(v) => v.push(p),
                None => {
                    new = true;
                    self.served.insert(name, vec![p]);
                }
            }
        }
        new
    }
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

/// Whether `spec`'s node and cluster names are names.
fn check_names(spec: &ClusterSpec) -> Result<(), String> {
    if !valid_node(&spec.node) {
        return Err(format!("cluster.node: {:?} is not a node name", spec.node));
    }
    if !valid_node(&spec.cluster) {
        return Err(format!(
            "cluster.name: {:?} is not a cluster name",
            spec.cluster
        ));
    }
    Ok(())
}

impl Cluster {
    /// Connects to the broker and joins the cluster as `spec.node`:
    /// refused if the broker cannot be reached or another live node has
    /// the name. The node's exported names are offered as they are
    /// registered; lookups in `kernel` reach the other nodes' from now on.
    pub(crate) fn join(
        spec: &ClusterSpec,
        kernel: &Arc<Kernel>,
        (host, spans): (HostClient, Option<Arc<crate::telemetry::Exporter>>),
        task_list: TaskList,
    ) -> Result<Cluster, String> {
        check_names(spec)?;
        let instance = replay::instance_number();
        let trust = seal::Trust::load(&spec.node, instance, spec.keys.as_ref())?;
        let broker = broker_endpoints(spec);
        let reactor = Reactor::start()?;
        let tokio = reactor.handle.clone();
        let owned = spec.clone();
        let client = reactor
            .run(async move { broker::connect(&owned).await })
            .ok_or("cluster: the node's thread stopped")??;
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
            spans,
            start: Instant::now(),
            trust,
            dir: Mutex::new(Directory::new(NODE_TTL.as_millis() as u64)),
            names: Mutex::default(),
            pending: Mutex::default(),
            abandoned: Mutex::default(),
            windows: Mutex::default(),
            lent: Mutex::default(),
            next_call: AtomicU64::new(1),
            left: Default::default(),
            lending: Default::default(),
            stats: stats::Stats::default(),
            intake: Arc::default(),
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
        let nodes = self.shared.lock_dir().nodes(now).into_iter();
        nodes.map(|(n, info)| (n, info.exports)).collect()
    }

    /// Remote-call counts by name (calls through portals that crossed
    /// nodes under `(portal)`), and what this node refused.
    pub fn counts(&self) -> (Vec<(String, NameCounts)>, Refusals) {
        let refused = Refusals {
            overflowed: self.shared.intake.overflowed(),
            ..self.shared.stats.refusals()
        };
        (self.shared.stats.names(), refused)
    }

    /// Bytes of frames from the broker this node holds unchecked (at
    /// most `intake::MAX_INTAKE_BYTES`).
    pub fn intake_bytes(&self) -> u64 {
        self.shared.intake.held()
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
        for (_, loan) in self.shared.lock_lent().drain() {
            loan.task.abort();
        }
        // Nothing will answer the calls waiting now, nor sweep them: they
        // fail, on the node's thread, after which no call waits (see
        // `exchange`).
        self.shared.left.store(true, Ordering::Release);
        let s = self.shared.clone();
        self.reactor.run(async move { s.fail_all_pending() });
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

impl Shared {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn lock_dir(&self) -> MutexGuard<'_, Directory> {
        self.dir.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_names(&self) -> MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_lent(&self) -> MutexGuard<'_, HashMap<u64, portal::Loan>> {
        self.lent.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_pending(&self) -> MutexGuard<'_, HashMap<u64, remote::Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_abandoned(&self) -> MutexGuard<'_, remote::Abandoned> {
        self.abandoned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the node name is free, then starts the node's loops.
    async fn start(self: Arc<Self>) -> Result<(), String> {
        let c = &self.client;
        let hello = self.subjects.hello(&self.node);
        if self.name_taken(&hello).await {
            return Err(format!(
                "cluster.node: another live node is named {:?}",
                self.node
            ));
        }
        let me = &*self;
        let subscribe = |subject: String| async move {
            c.subscribe(subject)
                .await
                .map(|sub| me.feed(sub))
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
            s.tokio.spawn(s.clone().silence_loop()),
        ];
        for t in spawned {
            s.tasks.push(t.abort_handle());
        }
        c.flush()
            .await
            .map_err(|e| format!("cluster's broker: {e}"))
    }

    /// Whether a live node answers to this node's name: any answer in an
    /// open cluster, one signed with this node's own key in a keyed one
    /// (others are counted as forged). The broker's "no responders", or a
    /// second's silence, means the name is free.
    async fn name_taken(&self, hello: &str) -> bool {
        let inbox = self.client.new_inbox();
        let Ok(mut answers) = self.client.subscribe(inbox.clone()).await else {
            return false;
        };
        let asked = self
            .client
            .publish_with_reply(hello.to_string(), inbox.clone(), "".into());
        if asked.await.is_err() {
            return false;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, answers.next()).await {
            if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
                return false;
            }
            match self.trust.open(&inbox, "", &msg.payload) {
                Ok((_, None)) => return true,
                Ok((_, Some(seal))) if seal.signer == self.node => return true,
                _ => self.stats.forged(),
            }
        }
        false
    }

    /// `sub`'s frames, drained at once and held within the node's bound
    /// on unchecked bytes (see `intake`).
    fn feed(&self, sub: async_nats::Subscriber) -> intake::Feed {
        intake::Feed::new(sub, self.intake.clone(), &self.tokio)
    }

    /// Whether frames are sealed and checked (the cluster lists its
    /// members' keys).
    fn keyed(&self) -> bool {
        matches!(self.trust, seal::Trust::Keyed { .. })
    }

    /// `frame` sealed for `subject` and `reply`, meant for node
    /// `receiver`'s instance `to` ("" and 0: any node, any instance);
    /// unchanged in an open cluster.
    fn sealed(
        &self,
        subject: &str,
        reply: &str,
        mut frame: Vec<u8>,
        (receiver, to): (&str, u64),
    ) -> bytes::Bytes {
        self.trust.seal(subject, reply, &mut frame, to, receiver);
        frame.into()
    }

    /// The frame of `msg` if its seal holds (always, in an open cluster),
    /// with what the seal says; counts it as forged otherwise.
    fn opened<'a>(
        &self,
        msg: &'a async_nats::Message,
    ) -> Option<(&'a [u8], Option<seal::Seal<'a>>)> {
        let reply = msg.reply.as_ref().map_or("", |r| r.as_str());
        match self.trust.open(msg.subject.as_str(), reply, &msg.payload) {
            Ok(opened) => Some(opened),
            Err(_) => {
                self.stats.forged();
                None
            }
        }
    }

    /// Answers whoever asks whether this node's name is taken, at most
    /// [`HELLOS_PER_SECOND`] a second (each answer costs a signature in a
    /// keyed cluster); questions past that are dropped.
    async fn answer_hello(self: Arc<Self>, mut sub: intake::Feed) {
        let mut rate = directory::Bucket::full(HELLOS_PER_SECOND, self.now_ms());
        while let Some(msg) = sub.next().await {
            if !rate.take(1, HELLOS_PER_SECOND, HELLOS_PER_SECOND, self.now_ms()) {
                self.stats.drop_frame();
                continue;
            }
            if let Some(reply) = msg.reply {
                let answer = self.sealed(&reply, "", self.node.clone().into_bytes(), ANY);
                let _ = self.client.publish(reply, answer).await;
            }
        }
    }

    /// Keeps the directory from the other nodes' announcements, waking
    /// lookups that wait for a name just offered.
    async fn listen_nodes(self: Arc<Self>, mut sub: intake::Feed) {
        let mut windows: HashMap<String, replay::Window> = HashMap::new();
        while let Some(msg) = sub.next().await {
            let Some(a) = self.announcement(&msg, &mut windows) else {
                continue;
            };
            let node = a.node.clone();
            let now = self.now_ms();
            let change = self.lock_dir().heard(a, now);
            let change = match change {
                Ok(c) => c,
                Err(_) => {
                    self.stats.refuse_announcement();
                    continue;
                }
            };
            let calls = change.added.iter();
            let calls = calls.map(|name| self.subjects.call(&self.node, &node, name).into());
            let calls = calls.collect();
            let woken = {
                let mut names = self.lock_names();
                if !names.apply(&node, change, calls) {
                    continue;
                }
                std::mem::take(&mut names.waiters)
            };
            for (_, w) in woken {
                w.wake();
            }
        }
    }

    /// Another node's announcement in `msg`, if it is within the bounds
    /// on announcements, sealed by that node (in a keyed cluster: and not
    /// a replay, by `windows`) and well formed. A node's own rate is
    /// charged once the seal shows the node sent it (at once, in an open
    /// cluster, where nothing can show it).
    fn announcement(
        &self,
        msg: &async_nats::Message,
        windows: &mut HashMap<String, replay::Window>,
    ) -> Option<wire::Announce> {
        let node = msg.subject.as_str().rsplit('.').next().unwrap_or("");
        if node == self.node {
            return None;
        }
        let now = self.now_ms();
        let keyed = self.keyed();
        let admitted = {
            let mut dir = self.lock_dir();
            let all = dir.admit_bytes(msg.payload.len(), now);
            all.and_then(|()| if keyed { Ok(()) } else { dir.admit(node, now) })
        };
        if admitted.is_err() {
            self.stats.refuse_announcement();
            return None;
        }
        let (frame, seal) = self.opened(msg)?;
        if let Some(seal) = seal {
            let window = match windows.get_mut(node) {
                Some(w) => w,
                None => windows.entry(node.to_string()).or_default(),
            };
            if seal.signer != node || !window.take(seal.instance, seal.seq) {
                self.stats.forged();
                return None;
            }
            if self.lock_dir().admit(node, now).is_err() {
                self.stats.refuse_announcement();
                return None;
            }
        }
        let a = wire::decode_announce(&self.subjects, msg.subject.as_str(), frame);
        if a.is_none() {
            self.stats.drop_frame();
        }
        a
    }

    async fn listen_inbox(self: Arc<Self>, mut sub: intake::Feed) {
        while let Some(msg) = sub.next().await {
            self.heard(msg).await;
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
            let frame = self.sealed(&subject, "", bytes, ANY);
            let _ = self.client.publish(subject.clone(), frame).await;
            let now = self.now_ms();
            let gone = self.lock_dir().expire(now);
            for (node, removed) in gone {
                let change = directory::Change {
                    removed,
                    ..Default::default()
                };
                self.lock_names().apply(&node, change, Vec::new());
            }
            let _ = tokio::time::timeout(ANNOUNCE, self.exports_changed.notified()).await;
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
}

//! The link: the mechanism that paces outgoing bytes by the [`FairTree`].
//!
//! A task about to send asks its [`Flow`] for permission to send a packet
//! (up to [`PACKET`] bytes); the request waits in the task's leaf of the
//! tree until the link's thread grants it. That thread plays the link: it
//! grants packets in the tree's order, each taking `len / link_rate` of
//! the link's time, and sleeps until the link is free or a cap releases
//! something. Without a link rate the link is never busy and only caps
//! hold packets back. A task whose path has neither (the common case)
//! has no flow at all and sends without asking.
//!
//! Lock order: the link's state lock is a leaf — wakers are called after
//! it is released.

use super::fair::{FairTree, NodeId, ROOT};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The most bytes one grant covers.
pub const PACKET: u32 = 64 * 1024;

/// How far behind real time the link's clock may fall and catch up (the
/// sleeps of its thread overshoot a little; more than this is idleness,
/// which is not saved up).
const SLACK_NS: u64 = 1_000_000;

/// The shared link.
pub struct Link {
    rate: Option<u64>,
    epoch: Instant,
    state: Mutex<State>,
    news: Condvar,
}

struct State {
    tree: FairTree,
    /// Per node: whether its packet was granted, and who waits for it.
    granted: Vec<bool>,
    waiters: Vec<Option<Waker>>,
    /// When the link finishes sending what it has granted (ns).
    free_at: u64,
    /// Whether the thread runs, and whether it should stop.
    running: bool,
    stop: bool,
}

impl Link {
    /// A link of `rate` bytes per second (`None`: unlimited).
    pub fn new(rate: Option<u64>) -> Arc<Link> {
        Arc::new(Link {
            rate,
            epoch: Instant::now(),
            state: Mutex::new(State {
                tree: FairTree::new(),
                granted: vec![false],
                waiters: vec![None],
                free_at: 0,
                running: false,
                stop: false,
            }),
            news: Condvar::new(),
        })
    }

    /// The link's rate, bytes per second.
    pub fn rate(&self) -> Option<u64> {
        self.rate
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a group or task node under `parent` (`None`: the link).
    pub fn add(&self, parent: Option<NodeId>, weight: u64, cap: Option<u64>) -> NodeId {
        let now = self.now();
        let mut st = self.lock();
        let id = st.tree.add(parent.unwrap_or(ROOT), weight, cap, now);
        if st.granted.len() <= id {
            st.granted.resize(id + 1, false);
            st.waiters.resize(id + 1, None);
        }
        st.granted[id] = false;
        st.waiters[id] = None;
        id
    }

    /// Whether sends from `leaf` must be paced (a link rate, or a cap on
    /// its path).
    pub fn shapes(&self, leaf: NodeId) -> bool {
        self.rate.is_some() || self.lock().tree.capped(leaf)
    }

    /// Whether the node or an ancestor has a cap.
    pub fn capped(&self, id: NodeId) -> bool {
        self.lock().tree.capped(id)
    }

    /// Removes a node once its children are gone (see [`FairTree::retire`]).
    pub fn retire(&self, id: NodeId) {
        self.lock().tree.retire(id);
    }

    /// Waits until `leaf` may send `len` bytes (at most [`PACKET`]).
    pub fn transmit(self: &Arc<Self>, leaf: NodeId, len: u32) -> Transmit {
        Transmit {
            link: self.clone(),
            leaf,
            len: len.clamp(1, PACKET),
            queued: false,
        }
    }

    /// The link's thread: grants packets as the link frees up.
    fn run(&self) {
        let mut woken: Vec<Waker> = Vec::new();
        let mut st = self.lock();
        while !st.stop {
            let now = self.now();
            let deadline = self.grant(&mut st, now, &mut woken);
            drop(st);
            for w in woken.drain(..) {
                w.wake();
            }
            st = self.lock();
            if st.stop {
                break;
            }
            if st.tree.backlog() > 0 && deadline.is_none() {
                continue; // news arrived while the lock was free
            }
            st = match deadline {
                Some(at) => {
                    let wait = Duration::from_nanos(at.saturating_sub(self.now()));
                    self.news
                        .wait_timeout(st, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.news.wait(st).unwrap_or_else(|e| e.into_inner()),
            };
        }
        st.running = false;
    }

    /// Grants what the link can send by `now`; returns when to look again
    /// (`None`: when a packet arrives).
    fn grant(&self, st: &mut State, now: u64, woken: &mut Vec<Waker>) -> Option<u64> {
        loop {
            if st.tree.backlog() == 0 {
                return None;
            }
            if self.rate.is_some() && st.free_at > now {
                return Some(st.free_at);
            }
            let Some((leaf, len)) = st.tree.dequeue(now) else {
                return st.tree.next_release(now);
            };
            st.granted[leaf] = true;
            if let Some(w) = st.waiters[leaf].take() {
                woken.push(w);
            }
            if let Some(rate) = self.rate {
                let start = st.free_at.max(now.saturating_sub(SLACK_NS));
                st.free_at = start + (len as u64 * 1_000_000_000).div_ceil(rate);
            }
        }
    }

    fn start_thread(self: &Arc<Self>, st: &mut State) {
        if st.running {
            return;
        }
        let link = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("warden-link".into())
            .spawn(move || {
                if let Some(link) = link.upgrade() {
                    link.run();
                }
            });
        st.running = spawned.is_ok();
    }

    /// Stops the link's thread (granting nothing more).
    pub fn stop(&self) {
        self.lock().stop = true;
        self.news.notify_all();
    }
}

/// A request to send one packet; resolves once the link grants it.
/// Dropping it before then withdraws the packet.
pub struct Transmit {
    link: Arc<Link>,
    leaf: NodeId,
    len: u32,
    queued: bool,
}

impl Transmit {
    /// The bytes it asks for.
    pub fn bytes(&self) -> u32 {
        self.len
    }
}

impl Future for Transmit {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let link = self.link.clone();
        let mut st = link.lock();
        let leaf = self.leaf;
        if std::mem::take(&mut st.granted[leaf]) {
            self.queued = false;
            return Poll::Ready(());
        }
        match &st.waiters[leaf] {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waiters[leaf] = Some(cx.waker().clone()),
        }
        if !self.queued {
            self.queued = true;
            st.tree.enqueue(leaf, self.len);
            link.start_thread(&mut st);
            drop(st);
            link.news.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for Transmit {
    fn drop(&mut self) {
        if self.queued {
            let mut st = self.link.lock();
            st.tree.cancel(self.leaf);
            st.granted[self.leaf] = false;
            st.waiters[self.leaf] = None;
        }
    }
}

/// A task's place on the link: its node (which its children hang under)
/// and the leaf its own packets wait in.
pub struct Flow {
    /// The shared link.
    pub link: Arc<Link>,
    /// The task's node.
    pub node: NodeId,
    /// Its own packets' leaf.
    pub leaf: NodeId,
    /// Whether its sends are paced at all.
    pub shaped: bool,
    /// Bytes granted and not yet sent (a send that took less than its
    /// grant keeps the rest for the next).
    pub credit: u64,
}

impl Flow {
    /// A task's flow under `parent` (its group's or parent task's node).
    pub fn new(link: &Arc<Link>, parent: Option<NodeId>, share: u64, cap: Option<u64>) -> Flow {
        let node = link.add(parent, share, cap);
        let leaf = link.add(Some(node), share, None);
        Flow {
            shaped: link.shapes(leaf),
            link: link.clone(),
            node,
            leaf,
            credit: 0,
        }
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.link.retire(self.leaf);
        self.link.retire(self.node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real time, two backlogged flows 1:3 on a 50 MB/s link: the grants
    /// follow the weights, and the link's rate holds.
    #[test]
    fn grants_follow_weights_at_the_link_rate() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let link = Link::new(Some(50_000_000));
        let a = Flow::new(&link, None, 1, None);
        let b = Flow::new(&link, None, 3, None);
        assert!(a.shaped && b.shaped);
        let sent = Arc::new([
            std::sync::atomic::AtomicU64::new(0),
            std::sync::atomic::AtomicU64::new(0),
        ]);
        let start = Instant::now();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for (i, leaf) in [a.leaf, b.leaf].into_iter().enumerate() {
                let (link, sent) = (link.clone(), sent.clone());
                tasks.push(tokio::spawn(async move {
                    while start.elapsed() < Duration::from_millis(400) {
                        link.transmit(leaf, PACKET).await;
                        sent[i].fetch_add(PACKET as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
        let elapsed = start.elapsed().as_secs_f64();
        let (x, y) = (
            sent[0].load(std::sync::atomic::Ordering::Relaxed) as f64,
            sent[1].load(std::sync::atomic::Ordering::Relaxed) as f64,
        );
        let frac = x / (x + y);
        assert!((frac - 0.25).abs() < 0.03, "a's fraction {frac}");
        let rate = (x + y) / elapsed;
        assert!(rate < 50e6 * 1.1, "link rate held: {rate}");
        link.stop();
    }

    /// Many flows at once, in groups, some capped, their requests often
    /// withdrawn mid-wait (a timeout, as a killed task's would be): every
    /// request that is not withdrawn is granted (no lost wake-up), and
    /// nothing is left queued.
    #[test]
    fn stress_grants_withdrawals_and_caps() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        for rate in [Some(2_000_000_000), None] {
            let link = Link::new(rate);
            let groups: Vec<NodeId> = (0..4)
                .map(|g| link.add(None, 1 + g, (g == 3).then_some(500_000_000)))
                .collect();
            let flows: Vec<Arc<Flow>> = (0..64)
                .map(|i| {
                    let cap = (i % 7 == 0).then_some(200_000_000);
                    Arc::new(Flow::new(&link, Some(groups[i % 4]), 1 + i as u64 % 3, cap))
                })
                .collect();
            let granted = Arc::new(std::sync::atomic::AtomicU64::new(0));
            rt.block_on(async {
                let mut tasks = Vec::new();
                for (i, flow) in flows.iter().enumerate() {
                    let (flow, link, granted) = (flow.clone(), link.clone(), granted.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut seed = i as u64 * 2_654_435_761 + 1;
                        for _ in 0..200 {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            let t = link.transmit(flow.leaf, (seed % PACKET as u64) as u32 + 1);
                            if !flow.shaped {
                                continue;
                            }
                            if seed.is_multiple_of(4) {
                                let wait = Duration::from_micros(seed % 200);
                                let _ = tokio::time::timeout(wait, t).await;
                            } else {
                                t.await;
                                granted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }));
                }
                for t in tasks {
                    tokio::time::timeout(Duration::from_secs(60), t)
                        .await
                        .expect("every request not withdrawn is granted")
                        .unwrap();
                }
            });
            assert!(granted.load(std::sync::atomic::Ordering::Relaxed) > 0);
            assert_eq!(link.lock().tree.backlog(), 0, "nothing left queued");
            drop(flows);
            for g in groups {
                link.retire(g);
            }
            assert_eq!(link.lock().tree.nodes(), 1);
            link.stop();
        }
    }

    #[test]
    fn unshaped_flows_need_no_grants_and_nodes_go_with_flows() {
        let link = Link::new(None);
        let f = Flow::new(&link, None, 1, None);
        assert!(!f.shaped);
        let capped = Flow::new(&link, Some(f.node), 1, Some(1_000_000));
        assert!(capped.shaped, "a cap of its own");
        drop(f);
        assert_eq!(
            link.lock().tree.nodes(),
            4,
            "the parent waits for its child"
        );
        drop(capped);
        assert_eq!(link.lock().tree.nodes(), 1);
    }
}

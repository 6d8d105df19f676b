//! Hierarchical fair queueing of outgoing bytes: H-WF2Q+ (Bennett and
//! Zhang's hierarchical packet fair queueing with WF2Q+ at every node)
//! over a tree of groups and tasks, with an optional rate cap per node.
//!
//! Pure policy, like the CPU schedulers: no sockets, threads or clocks —
//! the caller passes `now` (ns) and sends the packets this returns.
//!
//! # The arithmetic
//!
//! Each inner node serves its children as a WF2Q+ server. A child `c` of
//! node `p` has weight `w_c`; `W_p` is the sum of the weights of all of
//! `p`'s children, busy or not, so `c` is guaranteed the fraction
//! `w_c / W_p` of whatever `p` gets. Virtual time is counted in bytes of
//! the parent's service:
//!
//! - `p.vtime` (`V`) advances by `L` when `p` sends a packet of `L` bytes,
//!   and never lags the smallest start tag of its busy children:
//!   `V = max(V + L, min S_c)` — the `max` taken when `p` next picks, so
//!   that a sender that asks again as soon as its packet left (as tasks
//!   do, one packet at a time) counts as busy throughout;
//! - a child that turns busy gets `S_c = max(V, F_c)` and
//!   `F_c = S_c + L_c · W_p / w_c` (`L_c` its next packet's length); after
//!   it sent a packet and stays busy, `S_c = F_c` and `F_c` moves on by
//!   its next length the same way;
//! - `p` picks, among busy children whose start tag has been reached
//!   (`S_c ≤ V`, "eligible"), the one with the smallest finish tag (and
//!   the smallest start tag if none is eligible), and descends into it.
//!
//! So while the link is saturated every busy child gets the link in
//! proportion to its weight, within one packet; an idle child's share
//! goes to the busy ones at once, since only busy children are picked and
//! `V` jumps forward when they are all ahead of it (work conservation).
//!
//! A node may carry a cap, a token bucket of `rate` bytes per second
//! holding at most [`burst`] bytes: a packet may pass while the bucket is
//! not empty (it may go into debt by one packet, so a long run averages
//! exactly `rate`). A capped node with an empty bucket is passed over, as
//! if idle, until [`FairTree::next_release`]; when it is picked again its
//! start tag is brought up to `V`, so it does not burst to catch up.
//!
//! Leaves hold at most one waiting packet each: a task sends one packet at
//! a time, waiting until it is granted.

/// A node of the tree: the link itself (`ROOT`), a group, or a task.
pub type NodeId = usize;

/// The root: the link.
pub const ROOT: NodeId = 0;

/// The most bytes a capped node may send at once after idling: 5 ms at
/// its rate, and at least one full packet.
pub fn burst(rate: u64) -> f64 {
    (rate as f64 * 0.005).max(64.0 * 1024.0)
}

/// A token bucket of `rate` bytes per second holding at most
/// [`burst`]`(rate)`; it starts full.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: f64,
    tokens: f64,
    last_ns: u64,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(rate: u64, now: u64) -> Bucket {
        Bucket {
            rate: rate as f64,
            tokens: burst(rate),
            last_ns: now,
        }
    }

    /// Nanoseconds from `now` until the bucket is not empty (0: it is not).
    pub fn wait_ns(&mut self, now: u64) -> u64 {
        self.refill(now);
        if self.tokens > 0.0 {
            0
        } else {
            ((-self.tokens / self.rate) * 1e9).ceil() as u64 + 1
        }
    }

    /// Bytes it holds now (at least 0).
    pub fn available(&mut self, now: u64) -> u64 {
        self.refill(now);
        self.tokens.max(0.0) as u64
    }

    /// Takes `n` bytes (the bucket may go into debt).
    pub fn take(&mut self, n: u64) {
        self.tokens -= n as f64;
    }

    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last_ns) as f64 / 1e9;
        self.tokens = (self.tokens + dt * self.rate).min(burst(self.rate as u64));
        self.last_ns = self.last_ns.max(now);
    }
}

#[derive(Debug, Clone, Default)]
struct Node {
    live: bool,
    parent: NodeId,
    weight: u64,
    children: Vec<NodeId>,
    /// Sum of the children's weights.
    child_weights: u64,
    cap: Option<Bucket>,
    /// Packets waiting in this subtree.
    backlog: u64,
    /// A leaf's waiting packet (its length).
    pending: Option<u32>,
    /// The length of the last packet sent through this node, used as the
    /// next one's for the tags of an inner node.
    last_len: u32,
    start: f64,
    finish: f64,
    vtime: f64,
    /// Passed over for its cap; its tags are refreshed when picked again.
    held: bool,
    /// To be removed when its last child is.
    retired: bool,
}

/// The tree and its state.
#[derive(Debug, Clone)]
pub struct FairTree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    /// The path of the packet being dequeued, kept to reuse its storage.
    path: Vec<NodeId>,
}

impl Default for FairTree {
    fn default() -> Self {
        Self::new()
    }
}

impl FairTree {
    /// A tree holding only the link.
    pub fn new() -> Self {
        let root = Node {
            live: true,
            weight: 1,
            ..Node::default()
        };
        FairTree {
            nodes: vec![root],
            free: Vec::new(),
            path: Vec::new(),
        }
    }

    /// Adds a node under `parent` with `weight` (at least 1) and an
    /// optional cap in bytes per second; `now` starts the cap's bucket
    /// full.
    pub fn add(&mut self, parent: NodeId, weight: u64, cap: Option<u64>, now: u64) -> NodeId {
        let node = Node {
            live: true,
            parent,
            weight: weight.max(1),
            cap: cap.map(|rate| Bucket::new(rate, now)),
            ..Node::default()
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id] = node;
                id
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        let w = self.nodes[id].weight;
        let p = &mut self.nodes[parent];
        p.children.push(id);
        p.child_weights += w;
        id
    }

    /// Removes a node without children, dropping its waiting packet.
    pub fn remove(&mut self, id: NodeId) {
        debug_assert!(id != ROOT && self.nodes[id].children.is_empty());
        self.cancel(id);
        let (parent, w) = (self.nodes[id].parent, self.nodes[id].weight);
        let p = &mut self.nodes[parent];
        p.children.retain(|&c| c != id);
        p.child_weights -= w;
        self.nodes[id] = Node::default();
        self.free.push(id);
    }

    /// Removes a node once it has no children: now if it has none, else
    /// when its last child goes. A retired parent left childless goes too.
    pub fn retire(&mut self, id: NodeId) {
        self.nodes[id].retired = true;
        let mut n = id;
        while n != ROOT && self.nodes[n].retired && self.nodes[n].children.is_empty() {
            let parent = self.nodes[n].parent;
            self.remove(n);
            n = parent;
        }
    }

    /// Nodes in the tree, the link included.
    pub fn nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Whether the node or any ancestor below the root has a cap.
    pub fn capped(&self, mut id: NodeId) -> bool {
        while id != ROOT {
            if self.nodes[id].cap.is_some() {
                return true;
            }
            id = self.nodes[id].parent;
        }
        false
    }

    /// Queues a packet of `len` bytes at leaf `id` (replacing none: a leaf
    /// has at most one waiting).
    pub fn enqueue(&mut self, id: NodeId, len: u32) {
        debug_assert!(self.nodes[id].pending.is_none());
        self.nodes[id].pending = Some(len.max(1));
        let mut c = id;
        while c != ROOT {
            let p = self.nodes[c].parent;
            self.nodes[c].backlog += 1;
            if self.nodes[c].backlog == 1 {
                // Turned busy: tags from the parent's current virtual time.
                let v = self.nodes[p].vtime;
                let span = self.span(c, len.max(1));
                let n = &mut self.nodes[c];
                n.start = v.max(n.finish);
                n.last_len = len.max(1);
                n.finish = n.start + span;
            }
            c = p;
        }
        self.nodes[ROOT].backlog += 1;
    }

    /// Withdraws leaf `id`'s waiting packet, if it has one.
    pub fn cancel(&mut self, id: NodeId) {
        if self.nodes[id].pending.take().is_none() {
            return;
        }
        let mut c = id;
        loop {
            self.nodes[c].backlog -= 1;
            if c == ROOT {
                break;
            }
            c = self.nodes[c].parent;
        }
    }

    /// Whether leaf `id` has a packet waiting.
    #[cfg(test)]
    pub fn waiting(&self, id: NodeId) -> bool {
        self.nodes[id].pending.is_some()
    }

    /// Packets waiting anywhere.
    pub fn backlog(&self) -> u64 {
        self.nodes[ROOT].backlog
    }

    /// The next packet to send at `now`: its leaf and length, removed from
    /// the tree. `None` if nothing waits, or everything waiting is held by
    /// a cap.
    pub fn dequeue(&mut self, now: u64) -> Option<(NodeId, u32)> {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let mut n = ROOT;
        while self.nodes[n].pending.is_none() {
            match self.pick(n, now) {
                Some(c) => path.push(c),
                None => {
                    self.path = path;
                    return None;
                }
            }
            n = *path.last().expect("just pushed");
        }
        let len = self.nodes[n].pending.take().expect("a leaf with a packet");
        self.served(&path, len);
        self.path = path;
        Some((n, len))
    }

    /// When a cap next lets a waiting packet through (ns), if one holds any.
    pub fn next_release(&self, now: u64) -> Option<u64> {
        self.nodes
            .iter()
            .filter(|n| n.live && n.backlog > 0)
            .filter_map(|n| n.cap.as_ref())
            .filter_map(|b| {
                let dt = now.saturating_sub(b.last_ns) as f64 / 1e9;
                let tokens = b.tokens + dt * b.rate;
                (tokens <= 0.0).then(|| now + ((-tokens / b.rate) * 1e9).ceil() as u64 + 1)
            })
            .min()
    }

    /// The tag distance of `len` bytes for child `c` of its parent.
    fn span(&self, c: NodeId, len: u32) -> f64 {
        let p = &self.nodes[self.nodes[c].parent];
        len as f64 * p.child_weights as f64 / self.nodes[c].weight as f64
    }

    /// Among `p`'s busy children whose caps allow, the eligible one with
    /// the smallest finish tag (else the smallest start tag).
    fn pick(&mut self, p: NodeId, now: u64) -> Option<NodeId> {
        // Never behind the busy children's smallest start tag. Done here,
        // at the next pick, rather than when a packet leaves: a sender
        // that asks again as soon as its packet went is busy all along.
        let min_start = self.nodes[p]
            .children
            .iter()
            .filter(|&&k| self.nodes[k].backlog > 0)
            .map(|&k| self.nodes[k].start)
            .fold(f64::INFINITY, f64::min);
        if min_start.is_finite() && min_start > self.nodes[p].vtime {
            self.nodes[p].vtime = min_start;
        }
        let v = self.nodes[p].vtime;
        let mut best: Option<(bool, f64, NodeId)> = None;
        for i in 0..self.nodes[p].children.len() {
            let c = self.nodes[p].children[i];
            if self.nodes[c].backlog == 0 || !self.cap_allows(c, now) {
                continue;
            }
            if self.nodes[c].held {
                let span = self.span(c, self.nodes[c].last_len);
                let n = &mut self.nodes[c];
                n.held = false;
                n.start = n.start.max(v);
                n.finish = n.start + span;
            }
            let n = &self.nodes[c];
            let key = if n.start <= v {
                (true, n.finish, c)
            } else {
                (false, n.start, c)
            };
            let better = match best {
                None => true,
                Some((e, k, _)) => (key.0 && !e) || (key.0 == e && key.1 < k),
            };
            if better {
                best = Some(key);
            }
        }
        best.map(|b| b.2)
    }

    fn cap_allows(&mut self, c: NodeId, now: u64) -> bool {
        let n = &mut self.nodes[c];
        let Some(b) = &mut n.cap else { return true };
        b.refill(now);
        let ok = b.tokens > 0.0;
        if !ok {
            n.held = true;
        }
        ok
    }

    /// Updates tags, virtual times and buckets along `path` (root's child
    /// first, the leaf last) after a packet of `len` bytes was sent.
    fn served(&mut self, path: &[NodeId], len: u32) {
        self.nodes[ROOT].backlog -= 1;
        for &c in path {
            let p = self.nodes[c].parent;
            let span = self.span(c, len);
            let n = &mut self.nodes[c];
            n.backlog -= 1;
            if let Some(b) = &mut n.cap {
                b.tokens -= len as f64;
            }
            n.last_len = len;
            if n.backlog > 0 {
                n.start = n.finish;
                n.finish = n.start + span;
            }
            // The parent's virtual time advances by the work done (and is
            // brought up to its busy children's start tags at its next pick).
            self.nodes[p].vtime += len as f64;
        }
    }
}

#[cfg(test)]
mod tests;

//! Scheduling policy: which runnable task runs next.
//!
//! Policy is kept apart from mechanism. The executor tells a [`RunQueue`]
//! when a task becomes runnable, how much CPU a task used, and asks it
//! which task to run when a worker is free; nothing here sees Wasm,
//! threads or real clocks (time arrives as an explicit `now`), so every
//! policy is tested in microseconds with a simulated clock.
//!
//! [`Tree`] is the run queue Warden uses: a tree of groups, each ordering
//! its children (tasks and subgroups) with its own [`Policy`] — round
//! robin, fixed priority, stride or lottery ([`policies`]). A group is
//! runnable while any descendant is; picking descends from the root, each
//! group choosing among its runnable children. CPU used by a task is
//! charged to it and to every group above it, so a group's share covers
//! all its members (stride between tenants at the root, priorities inside
//! one tenant, for example). Tasks and groups may carry a [`Cap`]: at most
//! a fraction of a core over a window; a capped entry that used its
//! allowance is set aside until its window rolls over.
//!
//! Nested tasks (Alta, GVM's hierarchical scheduling) get groups of their
//! own, made on demand: when a task's first child is added, the task's
//! place in its group becomes a *subtree* group holding the task itself
//! and its children, ordered by stride. The parent's share (or tickets,
//! or priority) is the subtree's in the parent's group, so it covers the
//! whole family; each member's share is a weight inside it. A subtree
//! group disappears with its last member.

pub mod cap;
pub mod policies;

pub use cap::Cap;
pub use policies::{FixedPriority, Lottery, RoundRobin, Stride};

use crate::idmap::IdMap;

/// Identifies a task to the policy. The executor's task ids are used as is.
pub type TaskKey = u64;

/// Scheduling parameters of a task or group within its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Stride share (default 1).
    pub share: u32,
    /// Lottery tickets (default 100).
    pub tickets: u32,
    /// Fixed priority, higher runs first (default 0).
    pub priority: i32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            share: 1,
            tickets: 100,
            priority: 0,
        }
    }
}

/// The policy a group uses among its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyKind {
    /// `RoundRobin`.
    #[default]
    RoundRobin,
    /// `FixedPriority`.
    Priority,
    /// `Stride`.
    Stride,
    /// `Lottery`.
    Lottery,
}

impl PolicyKind {
    /// Parses a manifest name.
    pub fn parse(name: &str) -> Result<PolicyKind, String> {
        Ok(match name {
            "round-robin" | "rr" => PolicyKind::RoundRobin,
            "priority" => PolicyKind::Priority,
            "stride" => PolicyKind::Stride,
            "lottery" => PolicyKind::Lottery,
            other => {
                return Err(format!(
                    "{other:?} is not one of \"round-robin\", \"priority\", \"stride\", \"lottery\""
                ))
            }
        })
    }

    fn build(self, seed: u64) -> Box<dyn Policy> {
        match self {
            PolicyKind::RoundRobin => Box::<RoundRobin>::default(),
            PolicyKind::Priority => Box::<FixedPriority>::default(),
            PolicyKind::Stride => Box::<Stride>::default(),
            PolicyKind::Lottery => Box::new(Lottery::new(seed)),
        }
    }
}

/// One group's ordering of its children. Keys are registered with `add`
/// before they are enqueued; a key is enqueued at most once at a time.
pub trait Policy: Send {
    /// Registers a child with its parameters.
    fn add(&mut self, key: u64, params: &Params);
    /// Unregisters a child (dequeuing it if queued).
    fn forget(&mut self, key: u64);
    /// The child became runnable.
    fn enqueue(&mut self, key: u64);
    /// Removes and returns the child to run next.
    fn pick(&mut self) -> Option<u64>;
    /// Dequeues a child; whether it was queued.
    fn remove(&mut self, key: u64) -> bool;
    /// The child used `ns` of CPU.
    fn charge(&mut self, _key: u64, _ns: u64) {}
    /// Changes a child's parameters.
    fn set_params(&mut self, _key: u64, _params: &Params) {}
    /// Whether `charge` affects the order (stride, lottery).
    fn uses_charges(&self) -> bool {
        false
    }
}

/// The decision interface between the executor and the scheduling policy.
///
/// Each runnable task is pushed once and popped once per run: the executor
/// never pushes a task that is already queued or running.
pub trait RunQueue: Send {
    /// Registers a task before its first push.
    fn add(&mut self, task: TaskKey, sched: &TaskSched);
    /// Unregisters a finished task.
    fn forget(&mut self, task: TaskKey);
    /// `task` became runnable (new, woken, or its time slice ended).
    fn push(&mut self, task: TaskKey);
    /// Picks the next task to run at time `now` (ns), removing it.
    fn pop(&mut self, now: u64) -> Option<TaskKey>;
    /// Forgets a queued task; returns whether it was queued.
    fn remove(&mut self, task: TaskKey) -> bool;
    /// `task` used `ns` of CPU, ending at `now`.
    fn charge(&mut self, task: TaskKey, ns: u64, now: u64);
    /// Queued tasks, throttled ones included.
    fn len(&self) -> usize;
    /// Whether no task is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// When the earliest throttled task becomes eligible again.
    fn next_release(&self) -> Option<u64>;
    /// Changes a task's parameters.
    fn set_params(&mut self, task: TaskKey, params: &Params);
    /// Whether `charge` matters (some policy or cap uses CPU figures); if
    /// not, the executor skips it.
    fn needs_charges(&self) -> bool {
        true
    }
    /// Whether it may hold a runnable task back while a worker idles (a
    /// CPU cap does): then the executor runs no task outside it, with no
    /// host hand-off. Yes unless it says otherwise.
    fn throttles(&self) -> bool {
        true
    }
}

/// How a task is scheduled.
#[derive(Debug, Clone, Default)]
pub struct TaskSched {
    /// Its parameters within its group.
    pub params: Params,
    /// Its group (an index returned by [`Tree::add_group`]; 0 is the root).
    pub group: usize,
    /// Its own CPU cap, if any.
    pub cap: Option<Cap>,
    /// Schedule it inside this task's subtree (a child's parent), which
    /// takes precedence over `group` while the parent is registered.
    pub parent: Option<TaskKey>,
}

const GROUP_BIT: u64 = 1 << 63;

struct Node {
    policy: Box<dyn Policy>,
    parent: Option<usize>,
    /// Queued children (tasks or groups) in `policy`.
    runnable: usize,
    /// For a subtree group: the task whose family it schedules.
    owner: Option<TaskKey>,
    /// Registered children (tasks or groups); a subtree group goes when
    /// this drops to zero.
    members: usize,
}

impl Node {
    fn new(policy: Box<dyn Policy>, parent: Option<usize>, owner: Option<TaskKey>) -> Self {
        Node {
            policy,
            parent,
            runnable: 0,
            owner,
            members: 0,
        }
    }
}

/// The hierarchical run queue (see the module docs).
pub struct Tree {
    nodes: Vec<Node>,
    /// Indices of dissolved subtree groups, for reuse.
    free: Vec<usize>,
    group_of: IdMap<TaskKey, usize>,
    params: IdMap<TaskKey, Params>,
    /// A task with children → its subtree group.
    subtree: IdMap<TaskKey, usize>,
    caps: IdMap<u64, Cap>,
    /// Entries over their cap: (eligible again at, node, key).
    throttled: Vec<(u64, usize, u64)>,
    queued: usize,
}

impl Tree {
    /// A tree whose root group uses `root`.
    pub fn new(root: PolicyKind) -> Self {
        Tree {
            nodes: vec![Node::new(root.build(1), None, None)],
            free: Vec::new(),
            group_of: IdMap::default(),
            params: IdMap::default(),
            subtree: IdMap::default(),
            caps: IdMap::default(),
            throttled: Vec::new(),
            queued: 0,
        }
    }

    /// Adds a group under `parent` ordering its own children by `policy`;
    /// returns its index.
    pub fn add_group(
        &mut self,
        parent: usize,
        policy: PolicyKind,
        params: &Params,
        cap: Option<Cap>,
    ) -> usize {
        let index = self.alloc(policy, parent, None);
        self.nodes[parent]
            .policy
            .add(GROUP_BIT | index as u64, params);
        self.nodes[parent].members += 1;
        if let Some(cap) = cap {
            self.caps.insert(GROUP_BIT | index as u64, cap);
        }
        index
    }

    fn alloc(&mut self, policy: PolicyKind, parent: usize, owner: Option<TaskKey>) -> usize {
        let index = self.free.pop().unwrap_or(self.nodes.len());
        let node = Node::new(policy.build(index as u64 + 1), Some(parent), owner);
        match self.nodes.get_mut(index) {
            Some(slot) => *slot = node,
            None => self.nodes.push(node),
        }
        index
    }

    /// The subtree group of `task`, made now if it has none: the task's
    /// place in its group passes to the new group (with the task's
    /// parameters), and the task becomes the group's first member. `None`
    /// if the task is not registered.
    fn nest(&mut self, task: TaskKey) -> Option<usize> {
        if let Some(&n) = self.subtree.get(&task) {
            return Some(n);
        }
        let g = *self.group_of.get(&task)?;
        let params = self.params.get(&task).copied().unwrap_or_default();
        let n = self.alloc(PolicyKind::Stride, g, Some(task));
        let was_queued = self.remove(task);
        self.nodes[g].policy.forget(task);
        self.nodes[g].policy.add(GROUP_BIT | n as u64, &params);
        self.nodes[n].policy.add(task, &params);
        self.nodes[n].members = 1;
        self.group_of.insert(task, n);
        self.subtree.insert(task, n);
        if was_queued {
            self.push(task);
        }
        Some(n)
    }

    /// A member of `node` left; a subtree group left empty goes too.
    fn leave(&mut self, node: usize) {
        self.nodes[node].members -= 1;
        let Some(owner) = self.nodes[node].owner else {
            return;
        };
        if self.nodes[node].members > 0 {
            return;
        }
        let key = GROUP_BIT | node as u64;
        let parent = self.nodes[node]
            .parent
            .expect("a subtree group has a parent");
        self.dequeue_in(parent, key);
        self.throttled.retain(|t| t.2 != key);
        self.nodes[parent].policy.forget(key);
        self.subtree.remove(&owner);
        self.nodes[node] = Node::new(Box::<RoundRobin>::default(), None, None);
        self.free.push(node);
        self.leave(parent);
    }

    /// Groups in use (the root, named groups and live subtree groups).
    pub fn groups(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    fn enqueue_in(&mut self, node: usize, key: u64) {
        self.nodes[node].policy.enqueue(key);
        self.nodes[node].runnable += 1;
        if self.nodes[node].runnable == 1 {
            let group_key = GROUP_BIT | node as u64;
            let throttled = self.throttled.iter().any(|t| t.2 == group_key);
            if let (Some(parent), false) = (self.nodes[node].parent, throttled) {
                self.enqueue_in(parent, group_key);
            }
        }
    }

    fn dequeue_in(&mut self, node: usize, key: u64) -> bool {
        if !self.nodes[node].policy.remove(key) {
            return false;
        }
        self.nodes[node].runnable -= 1;
        if self.nodes[node].runnable == 0 {
            if let Some(parent) = self.nodes[node].parent {
                self.dequeue_in(parent, GROUP_BIT | node as u64);
            }
        }
        true
    }

    fn release(&mut self, now: u64) {
        let mut i = 0;
        while i < self.throttled.len() {
            if self.throttled[i].0 <= now {
                let (_, node, key) = self.throttled.swap_remove(i);
                self.enqueue_in(node, key);
            } else {
                i += 1;
            }
        }
    }

    fn pop_from(&mut self, node: usize, now: u64) -> Option<TaskKey> {
        loop {
            let key = self.nodes[node].policy.pick()?;
            self.nodes[node].runnable -= 1;
            if let Some(until) = self.caps.get_mut(&key).and_then(|c| c.throttled_until(now)) {
                self.throttled.push((until, node, key));
                continue;
            }
            if key & GROUP_BIT == 0 {
                return Some(key);
            }
            let group = (key & !GROUP_BIT) as usize;
            if let Some(task) = self.pop_from(group, now) {
                if self.nodes[group].runnable > 0 {
                    self.nodes[node].policy.enqueue(key);
                    self.nodes[node].runnable += 1;
                }
                return Some(task);
            }
        }
    }
}

impl RunQueue for Tree {
    fn add(&mut self, task: TaskKey, sched: &TaskSched) {
        let group = match sched.parent.and_then(|p| self.nest(p)) {
            Some(subtree) => subtree,
            None if sched.group < self.nodes.len() => sched.group,
            None => 0,
        };
        self.group_of.insert(task, group);
        self.params.insert(task, sched.params);
        self.nodes[group].policy.add(task, &sched.params);
        self.nodes[group].members += 1;
        if let Some(cap) = sched.cap.clone() {
            self.caps.insert(task, cap);
        }
    }

    fn forget(&mut self, task: TaskKey) {
        self.remove(task);
        self.caps.remove(&task);
        self.params.remove(&task);
        if let Some(g) = self.group_of.remove(&task) {
            self.nodes[g].policy.forget(task);
            self.leave(g);
        }
    }

    fn push(&mut self, task: TaskKey) {
        let group = self.group_of.get(&task).copied().unwrap_or(0);
        self.enqueue_in(group, task);
        self.queued += 1;
    }

    fn pop(&mut self, now: u64) -> Option<TaskKey> {
        if !self.throttled.is_empty() {
            self.release(now);
        }
        let task = self.pop_from(0, now)?;
        self.queued -= 1;
        Some(task)
    }

    fn remove(&mut self, task: TaskKey) -> bool {
        let group = self.group_of.get(&task).copied().unwrap_or(0);
        let removed = self.dequeue_in(group, task) || {
            let before = self.throttled.len();
            self.throttled.retain(|&(_, _, k)| k != task);
            self.throttled.len() < before
        };
        self.queued -= removed as usize;
        removed
    }

    fn charge(&mut self, task: TaskKey, ns: u64, now: u64) {
        let mut node = self.group_of.get(&task).copied().unwrap_or(0);
        let mut key = task;
        loop {
            self.nodes[node].policy.charge(key, ns);
            if let Some(cap) = self.caps.get_mut(&key) {
                cap.charge(now, ns);
            }
            match self.nodes[node].parent {
                Some(parent) => {
                    key = GROUP_BIT | node as u64;
                    node = parent;
                }
                None => break,
            }
        }
    }

    fn len(&self) -> usize {
        self.queued
    }

    fn next_release(&self) -> Option<u64> {
        self.throttled.iter().map(|t| t.0).min()
    }

    fn set_params(&mut self, task: TaskKey, params: &Params) {
        if let Some(&g) = self.group_of.get(&task) {
            self.params.insert(task, *params);
            self.nodes[g].policy.set_params(task, params);
        }
    }

    fn needs_charges(&self) -> bool {
        !self.caps.is_empty() || self.nodes.iter().any(|n| n.policy.uses_charges())
    }

    fn throttles(&self) -> bool {
        !self.caps.is_empty()
    }
}

#[cfg(test)]
mod tests;

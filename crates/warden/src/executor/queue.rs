//! The run queue as the executor keeps it: the scheduling policy, the live
//! task cells, and the CPU-inheritance proxies.
//!
//! A server running on a blocked client's lent context is queued under
//! the client's key (the client is not runnable itself, so its place in
//! the policy is free): it competes for CPU with the client's share and
//! priority, and its CPU is charged there. `proxy` maps the client's key
//! to the server queued under it, `proxied` the other way.

use super::TaskCell;
use crate::sched::RunQueue;
use crate::task::TaskShared;
use std::collections::HashMap;
use std::sync::Arc;

pub(super) struct Queue {
    pub(super) policy: Box<dyn RunQueue>,
    pub(super) cells: HashMap<u64, Arc<TaskCell>>,
    pub(super) shutdown: bool,
    /// Workers waiting for work (only they need a notification).
    pub(super) idle: usize,
    /// A blocked client's key → the server queued under it.
    proxy: HashMap<u64, u64>,
    /// The server → the client whose key it is queued under.
    proxied: HashMap<u64, u64>,
}

impl Queue {
    pub(super) fn new(policy: Box<dyn RunQueue>) -> Self {
        Queue {
            policy,
            cells: HashMap::new(),
            shutdown: false,
            idle: 0,
            proxy: HashMap::new(),
            proxied: HashMap::new(),
        }
    }

    /// Queues a runnable task: under the key of the blocked client that
    /// lends it its context, if any (CPU inheritance), else its own.
    pub(super) fn push(&mut self, shared: &TaskShared) {
        let id = shared.id.0;
        // Someone queued under this task's key must move to its own key.
        if let Some(t) = self.proxy.remove(&id) {
            self.proxied.remove(&t);
            self.policy.remove(id);
            self.policy.push(t);
        }
        if let Some(donor) = shared.inherit.donor_id() {
            let blocked = self
                .cells
                .get(&donor)
                .is_some_and(|c| c.shared.state.load().is_idle());
            if blocked && !self.proxy.contains_key(&donor) {
                self.proxy.insert(donor, id);
                self.proxied.insert(id, donor);
                self.policy.push(donor);
                return;
            }
        }
        self.policy.push(id);
    }

    /// The next task to run.
    pub(super) fn pop(&mut self, now: u64) -> Option<Arc<TaskCell>> {
        loop {
            let key = self.policy.pop(now)?;
            let task = match self.proxy.remove(&key) {
                Some(t) => {
                    self.proxied.remove(&t);
                    t
                }
                None => key,
            };
            if let Some(c) = self.cells.get(&task) {
                return Some(c.clone());
            }
        }
    }

    /// Dequeues a task (wherever it is queued); whether it was.
    pub(super) fn remove(&mut self, task: u64) -> bool {
        match self.proxied.remove(&task) {
            Some(donor) => {
                self.proxy.remove(&donor);
                self.policy.remove(donor)
            }
            None => self.policy.remove(task),
        }
    }

    /// Forgets a finished task, handing anyone queued under its key back
    /// their own.
    pub(super) fn forget(&mut self, task: u64) {
        self.cells.remove(&task);
        if let Some(t) = self.proxy.remove(&task) {
            self.proxied.remove(&t);
            self.policy.remove(task);
            self.policy.push(t);
        }
        self.remove(task);
        self.policy.forget(task);
    }
}

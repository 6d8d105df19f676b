//! The run queue as the executor keeps it: the scheduling policy, the live
//! task cells, and the CPU-inheritance proxies.
//!
//! A server running on a blocked client's lent context is queued under
//! the client's key (the client is not runnable itself, so its place in
//! the policy is free): it competes for CPU with the client's share and
//! priority, and its CPU is charged there. `proxy` maps the client's key
//! to the server queued under it, `proxied` the other way.
//!
//! A server queued while its client is not blocked (the client ran out
//! its own slice between handing the server its call and waiting for the
//! answer, or was woken while the server was queued under its key) goes
//! under its own key, and is *stranded* there: at its own share and
//! priority it could starve while the client waits for it. The client's
//! next block refiles it ([`Queue::refile`]). The protocol, with
//! `stranded` the count of stranded servers (an atomic, read without the
//! queue's lock):
//!
//! 1. `push` of a server lent a context: increment `stranded`, full
//!    fence, then read the client's state. Idle: queue under its key and
//!    decrement `stranded`. Else: record (client, server), keep the count.
//! 2. A client whose poll ends with it blocked: full fence, read
//!    `stranded`; if not zero, take the lock and `refile` itself.
//!
//! The fences order 1's increment before its read and 2's block before
//! its read: either `push` sees the client blocked, or the client sees
//! the count (and, taking the lock after `push` released it, the record).

use super::TaskCell;
use crate::idmap::IdMap;
use crate::sched::RunQueue;
use crate::task::TaskShared;
use std::collections::hash_map::Entry;
use std::sync::atomic::{fence, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

pub(super) struct Queue {
    pub(super) policy: Box<dyn RunQueue>,
    pub(super) cells: IdMap<u64, Arc<TaskCell>>,
    pub(super) shutdown: bool,
    /// Workers waiting for work (only they need a notification).
    pub(super) idle: usize,
    /// A blocked client's key → the server queued under it.
    proxy: IdMap<u64, u64>,
    /// The server → the client whose key it is queued under.
    proxied: IdMap<u64, u64>,
    /// Stranded servers: (client, server).
    strands: Vec<(u64, u64)>,
    /// How many, plus pushes deciding (see the protocol above).
    stranded: Arc<AtomicUsize>,
}

impl Queue {
    /// A queue with `policy`; `stranded` is read by workers without the
    /// lock (see the protocol above).
    pub(super) fn new(policy: Box<dyn RunQueue>, stranded: Arc<AtomicUsize>) -> Self {
        Queue {
            policy,
            cells: IdMap::default(),
            shutdown: false,
            idle: 0,
            proxy: IdMap::default(),
            proxied: IdMap::default(),
            strands: Vec::new(),
            stranded,
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
            // It waits for this client's next block (id is not idle).
            self.stranded.fetch_add(1, SeqCst);
            self.strand(id, t);
        }
        if let Some(donor) = shared.inherit.donor_id() {
            // Protocol step 1.
            self.stranded.fetch_add(1, SeqCst);
            fence(SeqCst);
            let blocked = self
                .cells
                .get(&donor)
                .is_some_and(|c| c.shared.state.load().is_idle());
            if blocked {
                // Its key taken by another server (a chain of calls on
                // one context): this one waits under its own, as before.
                self.stranded.fetch_sub(1, SeqCst);
                if let Entry::Vacant(e) = self.proxy.entry(donor) {
                    e.insert(id);
                    self.proxied.insert(id, donor);
                    self.policy.push(donor);
                    return;
                }
            } else {
                self.strand(donor, id);
            }
        }
        self.policy.push(id);
    }

    /// Records a stranded server, counted already (once per pair).
    fn strand(&mut self, client: u64, server: u64) {
        if self.strands.contains(&(client, server)) {
            self.stranded.fetch_sub(1, SeqCst);
        } else {
            self.strands.push((client, server));
        }
    }

    /// `client` has blocked: the servers stranded while it was not go
    /// under its key, those it still lends its context to and that are
    /// still queued under their own.
    ///
    /// Records whose server no longer runs on its client's context (the
    /// call ended) are dropped too, so that the count falls back to zero
    /// and blocking tasks stop taking the lock for this.
    pub(super) fn refile(&mut self, client: u64) {
        let (cells, before) = (&self.cells, self.strands.len());
        let mut mine = vec![];
        self.strands.retain(|&(c, server)| {
            let lent = cells
                .get(&server)
                .is_some_and(|s| s.shared.inherit.donor_id() == Some(c));
            if lent && c == client {
                mine.push(server);
            }
            lent && c != client
        });
        self.stranded.fetch_sub(before - self.strands.len(), SeqCst);
        for server in mine {
            self.refile_server(server, client);
        }
    }

    /// `client` has blocked: `server`, if it still runs on the client's
    /// context and is queued under its own key, goes under the client's.
    pub(super) fn refile_server(&mut self, server: u64, client: u64) {
        let Some(cell) = self.cells.get(&server).cloned() else {
            return;
        };
        let still_lent = cell.shared.inherit.donor_id() == Some(client);
        if still_lent && !self.proxied.contains_key(&server) && self.policy.remove(server) {
            self.push(&cell.shared);
        }
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

    /// Whether `task` is queued, if at all, under its own key alone: no
    /// client lends it its context and it lends none (no call between
    /// them is in flight).
    pub(super) fn is_plain(&self, task: u64) -> bool {
        !self.proxied.contains_key(&task)
            && !self.proxy.contains_key(&task)
            && !self.strands.iter().any(|&(c, s)| c == task || s == task)
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
        let before = self.strands.len();
        self.strands.retain(|&(c, s)| c != task && s != task);
        self.stranded.fetch_sub(before - self.strands.len(), SeqCst);
        if let Some(t) = self.proxy.remove(&task) {
            self.proxied.remove(&t);
            self.policy.remove(task);
            self.policy.push(t);
        }
        self.remove(task);
        self.policy.forget(task);
    }
}

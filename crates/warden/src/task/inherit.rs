//! CPU inheritance (GVM): a client blocked in a call lends its scheduling
//! context to the server until the call ends.
//!
//! A server may hold several calls at once (queued and received), each
//! from a blocked client; every one of them is a *donation*. The server
//! runs on the donation with the highest priority, the earliest among
//! equals (the caller it serves first). Donations chain: a server that
//! calls another while running on a client's context lends that client's
//! context onwards.
//!
//! A donation lives exactly as long as its client waits: the client
//! withdraws it when its call ends in any way (reply, error, timeout, its
//! own death), and the server withdraws it when it answers. Both are
//! idempotent. The current donor's context (its task and priority) is
//! read whole under the donations' lock, so no reader sees one caller's
//! id with another's priority; its id alone is also kept in an atomic,
//! for readers that only ask whether, or to whom, the task is lent.

use super::{TaskId, TaskShared};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A scheduling context: the task whose account and queue position are
/// used, and the priority it runs at.
#[derive(Debug, Clone)]
pub struct Context {
    /// The task whose context it is.
    pub task: Arc<TaskShared>,
    /// Its priority.
    pub priority: i32,
}

#[derive(Debug)]
struct Donation {
    client: TaskId,
    context: Context,
}

/// A task's side of CPU inheritance: its own priority and the contexts
/// lent to it.
#[derive(Debug)]
pub struct Inheritance {
    id: TaskId,
    enabled: bool,
    priority: i32,
    /// The current donor's id, 0 for none: the lock-free fast path for
    /// "does this task run on its own context?".
    lent: AtomicU64,
    donations: Mutex<Vec<Donation>>,
}

impl Inheritance {
    /// The inheritance state of task `id` with its own `priority`;
    /// `enabled` says whether it, as a server, runs on its callers'
    /// contexts.
    pub fn new(id: TaskId, enabled: bool, priority: i32) -> Self {
        Inheritance {
            id,
            enabled,
            priority,
            lent: AtomicU64::new(0),
            donations: Mutex::new(Vec::new()),
        }
    }

    /// Its own fixed priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Donation>> {
        self.donations.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of the task whose context it runs on, if not its own.
    pub fn donor_id(&self) -> Option<u64> {
        match self.lent.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// The context it runs on, if not its own.
    pub fn donor(&self) -> Option<Context> {
        self.donor_id()?;
        best(&self.lock()).map(|d| d.context.clone())
    }

    /// `client`, blocked in a call to this task, lends it `context`.
    pub fn lend(&self, client: TaskId, context: Context) {
        if !self.enabled || context.task.id == self.id {
            return;
        }
        let mut d = self.lock();
        d.push(Donation { client, context });
        self.choose(&d);
    }

    /// `client`'s call ended: its donation (if any) is withdrawn.
    pub fn withdraw(&self, client: TaskId) {
        // No donor: nothing lent to withdraw (the server's reply usually
        // withdrew it before the client's call ends).
        if !self.enabled || self.donor_id().is_none() {
            return;
        }
        let mut d = self.lock();
        let before = d.len();
        d.retain(|x| x.client != client);
        if d.len() != before {
            self.choose(&d);
        }
    }

    /// Publishes the best donation's task as the donor.
    fn choose(&self, d: &[Donation]) {
        let id = best(d).map_or(0, |x| x.context.task.id.0);
        self.lent.store(id, Ordering::Release);
    }
}

/// The highest-priority donation, the earliest among equals.
fn best(d: &[Donation]) -> Option<&Donation> {
    d.iter().reduce(|a, b| {
        if b.context.priority > a.context.priority {
            b
        } else {
            a
        }
    })
}

impl TaskShared {
    /// The context this task lends when it blocks in a call: the one lent
    /// to it, or its own.
    pub fn context(self: &Arc<Self>) -> Context {
        self.inherit.donor().unwrap_or_else(|| Context {
            task: self.clone(),
            priority: self.inherit.priority(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, priority: i32) -> Arc<TaskShared> {
        let mut t = TaskShared::new(TaskId(id), format!("t{id}"), None, None);
        t.inherit = Inheritance::new(TaskId(id), true, priority);
        Arc::new(t)
    }

    #[test]
    fn highest_priority_donor_wins_and_withdrawals_fall_back() {
        let server = task(1, 0);
        let (low, high, other) = (task(2, 1), task(3, 5), task(4, 1));
        server.inherit.lend(low.id, low.context());
        assert_eq!(server.inherit.donor_id(), Some(2));
        server.inherit.lend(high.id, high.context());
        server.inherit.lend(other.id, other.context());
        assert_eq!(server.inherit.donor_id(), Some(3));
        let c = server.context();
        assert_eq!((c.task.id.0, c.priority), (3, 5), "id and priority agree");
        server.inherit.withdraw(high.id);
        assert_eq!(server.inherit.donor_id(), Some(2), "earliest of equals");
        server.inherit.withdraw(low.id);
        server.inherit.withdraw(low.id);
        assert_eq!(server.inherit.donor_id(), Some(4));
        server.inherit.withdraw(other.id);
        assert_eq!(server.inherit.donor_id(), None);
        assert_eq!(server.context().task.id.0, 1);
    }

    #[test]
    fn donations_chain_and_never_point_home() {
        let (a, b, c) = (task(1, 0), task(2, 0), task(3, 0));
        b.inherit.lend(a.id, a.context());
        c.inherit.lend(b.id, b.context());
        assert_eq!(c.inherit.donor_id(), Some(1), "a's context reaches c");
        a.inherit.lend(c.id, c.context());
        assert_eq!(
            a.inherit.donor_id(),
            None,
            "a never runs on its own lent context"
        );
        let off = Inheritance::new(TaskId(9), false, 0);
        off.lend(a.id, a.context());
        assert_eq!(off.donor_id(), None);
    }
}

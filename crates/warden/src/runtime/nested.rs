//! Nested tasks (Alta): a task spawns children from modules it was
//! granted, with budgets carved out of its own.
//!
//! - Memory: the child's limit is reserved in the parent's budget for as
//!   long as the child lives, so a parent can never hand out more than it
//!   has, and a grandchild's comes out of its parent's in turn.
//! - CPU share: the child's stride share is taken from the parent's (the
//!   parent keeps at least 1); the parent's own share shrinks meanwhile.
//! - CPU time: the child's own limit applies to it, and its CPU also counts
//!   against every ancestor's limit.
//! - Handles and names: the child starts with exactly the handles the
//!   parent grants, sees the names the parent bound for it (which may be
//!   the parent's own portals: interposition) before the name service, and
//!   may look up at most what its parent may.
//! - A child's output goes where its parent's goes. When a task ends, its
//!   children are killed, and their reservations return to it.

use super::{Child, Inner, Runtime};
use crate::ipc::{Errno, Object};
use crate::task::{ChildBudget, Spawner, TaskId, TaskIpc, TaskShared};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Spawner for Inner {
    fn spawn_child(
        self: Arc<Self>,
        parent: &TaskIpc,
        module: &(String, PathBuf),
        args: Vec<String>,
        budget: ChildBudget,
        grants: Vec<Object>,
    ) -> Result<Arc<TaskShared>, Errno> {
        if budget.memory_limit == 0 || budget.cpu_share == 0 {
            return Err(Errno::Inval);
        }
        let p = &parent.shared;
        // Carve the share first (cheap to undo), then the memory.
        let mut given = p.share_given.load(Ordering::Acquire);
        loop {
            let left = p.share.saturating_sub(1).saturating_sub(given);
            if budget.cpu_share > left {
                return Err(Errno::Quota);
            }
            match p.share_given.compare_exchange(
                given,
                given + budget.cpu_share,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(g) => given = g,
            }
        }
        let undo_share = || {
            p.share_given.fetch_sub(budget.cpu_share, Ordering::AcqRel);
        };
        if !p.try_charge(budget.memory_limit) {
            undo_share();
            return Err(Errno::NoMem);
        }
        let mut spec = parent.spec.as_deref().ok_or(Errno::Denied)?.clone();
        let n = self.next_id.load(Ordering::Relaxed);
        spec.name = format!("{}/{}.{n}", p.name, module.0);
        spec.module = module.1.clone();
        spec.args = args;
        spec.dirs = Vec::new();
        spec.memory_limit = Some(budget.memory_limit);
        spec.cpu_limit =
            (budget.cpu_limit_ns != 0).then(|| Duration::from_nanos(budget.cpu_limit_ns));
        spec.sched.share = budget.cpu_share;
        spec.sched.tickets = budget.cpu_share.saturating_mul(100);
        spec.stdin_inherit = false;
        let child = Child {
            parent: p.clone(),
            carved_memory: budget.memory_limit,
            grants,
            names: parent.child_names.clone(),
            sinks: parent.sinks.clone(),
        };
        let rt = Runtime {
            inner: self.clone(),
        };
        match rt.spawn_with(&spec, Some(child)) {
            Ok(task) => {
                set_share(&self, p);
                Ok(task)
            }
            Err(e) => {
                p.refund(budget.memory_limit);
                undo_share();
                Err(match e {
                    super::Error::Full(_) => Errno::Quota,
                    _ => Errno::Inval,
                })
            }
        }
    }

    fn kill(&self, id: TaskId, reason: &str) -> bool {
        self.exec.kill(id, reason)
    }

    fn suspend(&self, id: TaskId) -> bool {
        self.exec.suspend(id)
    }

    fn resume(&self, id: TaskId) -> bool {
        self.exec.resume(id)
    }
}

/// The parent's own stride share: what it has not handed to children.
fn set_share(inner: &Inner, parent: &TaskShared) {
    let mut params = crate::sched::Params {
        share: parent.share,
        tickets: parent.share.saturating_mul(100),
        priority: parent.priority,
    };
    let given = parent.share_given.load(Ordering::Acquire);
    params.share = parent.share.saturating_sub(given).max(1);
    params.tickets = params.share.saturating_mul(100);
    inner.exec.set_params(parent.id, &params);
}

/// A child ended: its memory reservation and share return to its parent.
pub(super) fn child_ended(inner: &Inner, child: &TaskShared) {
    if let Some(parent) = &child.parent {
        parent.refund(child.carved_memory.load(Ordering::Relaxed));
        parent.share_given.fetch_sub(child.share, Ordering::AcqRel);
        set_share(inner, parent);
    }
}

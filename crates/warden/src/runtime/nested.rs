//! Nested tasks (Alta): a task spawns children from modules it was
//! granted, with budgets carved out of its own.
//!
//! - Memory: the child's limit is reserved in the parent's budget for as
//!   long as the child lives, so a parent can never hand out more than it
//!   has, and a grandchild's comes out of its parent's in turn.
//! - CPU share: a weight, not an amount. The parent's share covers its
//!   whole subtree, and the child's `cpu_share` is its weight among its
//!   parent and siblings inside it (the scheduler's subtree groups), so a
//!   parent with any share may have children with any shares.
//! - CPU time: the child's own limit applies to it, and its CPU also counts
//!   against every ancestor's limit.
//! - Handles and names: the child starts with exactly the handles the
//!   parent grants, sees the names the parent bound for it (which may be
//!   the parent's own portals: interposition) before the name service, and
//!   may look up at most what its parent may.
//! - A child's output goes where its parent's goes. When a task ends, its
//!   children are killed, and their reservations return to it.

use super::{Child, Inner, Runtime};
use crate::host::{Parent, Spawner};
use crate::ipc::{Errno, Object};
use crate::task::{ChildBudget, TaskId, TaskShared, TaskSpec};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

impl Spawner for Inner {
    fn spawn_child(
        self: Arc<Self>,
        parent: Parent<'_>,
        module: &(String, PathBuf),
        args: Vec<String>,
        budget: ChildBudget,
        grants: Vec<Object>,
    ) -> Result<Arc<TaskShared>, Errno> {
        if budget.memory_limit == 0 || budget.cpu_share == 0 {
            return Err(Errno::Inval);
        }
        let p = parent.shared;
        let mut spec = parent.spec.ok_or(Errno::Denied)?.clone();
        if !p.carve(budget.memory_limit) {
            return Err(Errno::NoMem);
        }
        let n = self.next_id.load(std::sync::atomic::Ordering::Relaxed);
        child_spec(&mut spec, p, n, module, args, budget);
        let child = Child {
            parent: p.clone(),
            carved_memory: budget.memory_limit,
            grants,
            names: parent.names,
            sinks: parent.sinks.clone(),
            net: parent.net,
        };
        let rt = Runtime {
            inner: self.clone(),
        };
        match rt.spawn_with(&spec, Some(child)) {
            Ok(task) => Ok(task),
            Err(e) => {
                p.release(budget.memory_limit);
                Err(match e {
                    super::Error::Full(_) | super::Error::Mappings(_) => Errno::Quota,
                    super::Error::Memory(_) => Errno::NoMem,
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

/// A child's spec, from its parent's (`spec`, changed in place): its
/// name (`n`, its number to be, after the root of its tree's), module,
/// arguments and budget, and nothing of its own that its parent has not.
fn child_spec(
    spec: &mut TaskSpec,
    parent: &TaskShared,
    n: u64,
    module: &(String, PathBuf),
    args: Vec<String>,
    budget: ChildBudget,
) {
    // Named after the root of its tree, not its whole ancestry: a name
    // costs the same at any depth.
    let mut root = parent;
    while let Some(up) = root.parent() {
        root = &**up;
    }
    spec.name = format!("{}/{}.{n}", root.name, module.0);
    spec.module = module.1.clone();
    spec.args = args;
    spec.dirs = Vec::new();
    spec.served_dirs = Vec::new();
    spec.limits.memory_limit = Some(budget.memory_limit);
    // Its memory is carved from its parent's; no guarantee of its own.
    spec.limits.memory_guarantee = 0;
    spec.limits.cpu_limit =
        (budget.cpu_limit_ns != 0).then(|| Duration::from_nanos(budget.cpu_limit_ns));
    spec.sched.params.share = budget.cpu_share;
    spec.sched.params.tickets = budget.cpu_share.saturating_mul(100);
    spec.stdio.stdin_inherit = false;
    spec.stdio.stdin_bytes = None;
    spec.stdio.stdin_stream = None;
    // Its grants are its parent's; its bandwidth is a part of the
    // parent's (its node hangs under the parent's), so no cap of its
    // own, and no listeners of its own made for it.
    spec.net.preopen_listeners.clear();
    spec.net.bandwidth_limit = None;
    spec.net.bandwidth_share = budget.cpu_share;
}

/// A child ended: its memory reservation returns to its parent.
pub(super) fn child_ended(child: &TaskShared) {
    if let Some(parent) = child.parent() {
        parent.release(child.family.carved());
    }
}

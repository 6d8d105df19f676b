//! The `warden` group's per-task state: its handle table, its calls, what
//! its manifest entry grants it, the names it sees and binds, and what it
//! may reach of the runtime to spawn and control children.

use crate::host::calls::InFlight;
use crate::ipc::service::{CallSlot, PortalRef};
use crate::ipc::{Errno, HandleTable, Kernel, Object, Owned};
use crate::task::{ChildBudget, TaskId, TaskShared, TaskSpec};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What a task's manifest entry allows it, as the host functions check it.
#[derive(Debug, Clone)]
pub(crate) struct Grants {
    /// Names it may register.
    pub(crate) provides: Vec<String>,
    /// Names it may look up.
    pub(crate) uses: Vec<String>,
    /// Names it registers that other nodes may call.
    pub(crate) export: Vec<String>,
    /// Per-message byte quota.
    pub(crate) max_message_bytes: u64,
    /// Per-message handle quota.
    pub(crate) max_message_handles: u64,
    /// Block devices it may open.
    pub(crate) devices: Vec<String>,
}

impl Grants {
    /// The grants in `spec`.
    pub(crate) fn of(spec: &TaskSpec) -> Self {
        Grants {
            provides: spec.ipc.provides.clone(),
            uses: spec.ipc.uses.clone(),
            export: spec.ipc.export.clone(),
            max_message_bytes: spec.ipc.max_message_bytes,
            max_message_handles: spec.ipc.max_message_handles,
            devices: spec.ipc.devices.clone(),
        }
    }
}

/// A task's state for the `warden` host functions.
pub(crate) struct TaskIpc {
    pub(crate) handles: HandleTable,
    /// The task's reusable call slot.
    pub(crate) call_slot: LazySlot,
    /// A call `call_fast` made and left for `call` to wait for.
    pub(crate) in_flight: Option<InFlight>,
    /// When the call under way began (ns since 1970) and its span's
    /// context, if the task is traced (see `traced`).
    pub(crate) traced_began: Option<(u64, crate::telemetry::Context)>,
    /// The traced call it received last and has not answered: its handle
    /// and the context the caller made it in. Calls it makes meanwhile
    /// are spans under that one (see `traced`).
    pub(crate) serving: Option<(i32, crate::telemetry::Context)>,
    pub(crate) grants: Grants,
    pub(crate) kernel: Arc<Kernel>,
    /// The runtime, for spawning and controlling children.
    pub(crate) spawner: std::sync::Weak<dyn Spawner>,
    /// Permits and memory objects it created, revoked before its memory
    /// is released.
    pub(crate) owned: Owned,
    /// The task's own spec, which its children's specs start from (kept
    /// only if it was granted modules to spawn from).
    pub(crate) spec: Option<Arc<TaskSpec>>,
    /// Handles its parent granted it at spawn, in order.
    pub(crate) granted: Vec<i32>,
    /// Names bound by its parent: a portal, or `None` for a hidden name.
    /// Looked up before the name service. `None` (no allocation) when the
    /// parent bound none, as most do.
    pub(crate) names: Option<Arc<NameMap>>,
    /// Names it binds for the children it spawns from now on.
    pub(crate) child_names: Bindings,
    /// `poll`'s buffers, kept between calls (made at the first).
    pub(crate) poll: Option<Box<super::poll::Scratch>>,
}

/// A task's call slot, made at its first call: most tasks never call,
/// and a slot is about 200 bytes of heap.
#[derive(Default)]
pub(crate) struct LazySlot(std::cell::OnceCell<Arc<CallSlot>>);

impl LazySlot {
    /// The slot, made now (owned by `owner`, the task) if it was not yet.
    pub(crate) fn get(&self, owner: &Arc<TaskShared>) -> &Arc<CallSlot> {
        self.0.get_or_init(|| CallSlot::new(owner.clone()))
    }
}

/// Names bound for children: a portal, or `None` for a hidden name.
pub(crate) type NameMap = HashMap<String, Option<PortalRef>>;

/// Bytes charged per binding, besides its name.
const BINDING_BYTES: u64 = 64;

/// The names a task binds for its children, shared with the children
/// spawned since the last change (copy on write). The binder pays for
/// every binding and for every copy a change after a spawn makes, until
/// it ends (its children, which hold the copies, end with it).
pub(crate) struct Bindings {
    /// `None` until the first binding.
    map: Option<Arc<NameMap>>,
    bytes: u64,
    charged: u64,
    owner: Arc<TaskShared>,
}

impl Bindings {
    /// No bindings, charged to `owner`.
    pub(crate) fn new(owner: Arc<TaskShared>) -> Self {
        Bindings {
            map: None,
            bytes: 0,
            charged: 0,
            owner,
        }
    }

    /// Binds `name`; `NoMem` if the owner's budget cannot pay for it.
    pub(crate) fn bind(&mut self, name: String, target: Option<PortalRef>) -> Result<(), Errno> {
        let entry = name.len() as u64 + BINDING_BYTES;
        let copy = if self.map.as_ref().is_some_and(|m| Arc::strong_count(m) > 1) {
            self.bytes
        } else {
            0
        };
        if !self.owner.try_charge(entry + copy) {
            return Err(Errno::NoMem);
        }
        self.charged += entry + copy;
        self.bytes += entry;
        Arc::make_mut(self.map.get_or_insert_with(Arc::default)).insert(name, target);
        Ok(())
    }

    /// The bindings as they are now, for a child.
    pub(crate) fn snapshot(&self) -> Option<Arc<NameMap>> {
        self.map.clone()
    }
}

impl Drop for Bindings {
    fn drop(&mut self) {
        self.owner.refund(self.charged);
    }
}

impl TaskIpc {
    /// The runtime, while it exists.
    pub(crate) fn spawner(&self) -> Result<Arc<dyn Spawner>, Errno> {
        self.spawner.upgrade().ok_or(Errno::PeerDied)
    }
}

/// What a parent gives a child at spawn, besides its module, arguments,
/// budget and handles.
pub(crate) struct Parent<'a> {
    /// The parent.
    pub(crate) shared: &'a Arc<TaskShared>,
    /// Its spec, which the child's starts from (`None`: it may spawn
    /// nothing).
    pub(crate) spec: Option<&'a TaskSpec>,
    /// The names it binds for its children.
    pub(crate) names: Option<Arc<NameMap>>,
    /// Its output streams, which the child shares.
    pub(crate) sinks: &'a (crate::output::Sink, crate::output::Sink),
    /// Its place on the link and receive budget.
    pub(crate) net: crate::host::ChildNet,
}

/// Installs `grants` in a new task's `handles`: the handles, in order.
pub(super) fn grant(handles: &mut HandleTable, grants: Vec<Object>) -> Result<Vec<i32>, String> {
    let mut granted = Vec::with_capacity(grants.len());
    for object in grants {
        let h = handles.insert(object);
        granted.push(h.map_err(|e| format!("granting handles: {e}"))?);
    }
    Ok(granted)
}

/// What the `warden` task functions need from the runtime.
pub(crate) trait Spawner: Send + Sync {
    /// Spawns a child of `parent`.
    fn spawn_child(
        self: Arc<Self>,
        parent: Parent<'_>,
        module: &(String, PathBuf),
        args: Vec<String>,
        budget: ChildBudget,
        grants: Vec<Object>,
    ) -> Result<Arc<TaskShared>, Errno>;
    /// Kills a task and its subtree.
    fn kill(&self, id: TaskId, reason: &str) -> bool;
    /// Suspends a task.
    fn suspend(&self, id: TaskId) -> bool;
    /// Resumes a task.
    fn resume(&self, id: TaskId) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every binding is paid for, and so is the copy a binding after a
    /// spawn makes; all of it returns when the binder's state goes.
    #[test]
    fn bindings_are_charged_to_the_binder() {
        let owner = Arc::new(TaskShared::new(TaskId(1), "p".into(), None, Some(1000)));
        let mut b = Bindings::new(owner.clone());
        assert!(b.snapshot().is_none(), "no map until the first binding");
        let entry = |name: &str| name.len() as u64 + BINDING_BYTES;
        b.bind("kv".into(), None).unwrap();
        b.bind("log".into(), None).unwrap();
        assert_eq!(owner.memory.current(), entry("kv") + entry("log"));
        let child_view = b.snapshot().unwrap();
        b.bind("db".into(), None).unwrap();
        let copied = entry("kv") + entry("log");
        assert_eq!(
            owner.memory.current(),
            copied + entry("kv") + entry("log") + entry("db")
        );
        assert_eq!(child_view.len(), 2, "the child keeps what it was given");
        let mut refused = 0;
        for i in 0..100 {
            if b.bind(format!("flood{i}"), None) == Err(Errno::NoMem) {
                refused += 1;
            }
        }
        assert!(refused > 0 && owner.memory.current() <= 1000);
        drop(b);
        assert_eq!(owner.memory.current(), 0);
    }
}

//! The task core: what a task *is* to the rest of the kernel, with no
//! dependency on Wasmtime, IPC, the executor or the host functions (they
//! all depend on this, never the other way round).
//!
//! - [`TaskId`], [`TaskStatus`]: identity, how it ended.
//! - [`spec`]: what to start — [`TaskSpec`], [`NetSpec`], [`GroupSpec`] —
//!   and the checks a spec must pass whoever made it.
//! - [`state`]: the lifecycle word — queued, running, blocked, parked,
//!   done; kill and suspend flags — with its numbered protocol.
//! - [`account`]: memory, CPU and IPC accounts.
//! - [`family`]: parent, carved budget, limit events, exit status.
//! - [`inherit`]: the scheduling contexts clients lend it (CPU inheritance).
//!
//! [`TaskShared`] puts them together: the state every thread may touch,
//! shared by the task's store, its worker, its peers and operators.
//!
//! # A task's life
//!
//! A task is one Wasmtime store holding one instance of a WASI command
//! module; the store lives inside the task's future, which the executor
//! runs a time slice at a time. The lifecycle word (see [`state`]) decides
//! who owns that future at every moment: a worker while it polls it, its
//! wakers while it is blocked, nobody once it is done. A task ends by
//! *exiting*, *trapping* or being *killed*; whoever moves the word to done
//! drops the future — and with it the store, its memories, tables, handles
//! and files — and records the report before anyone waiting is woken.
//! Kernel state is changed only between guest instructions (in host calls
//! and deadline callbacks), so a kill never leaves it half-updated.

pub mod account;
pub mod family;
pub mod handover;
pub mod inherit;
pub mod net;
pub mod root;
pub mod spec;
pub use warden_sync::state;

pub use crate::output::Output;
pub use account::{CpuAccount, DeviceCounters, IpcCounters, MemoryAccount};
pub use family::{Family, EVENT_CPU, EVENT_MEMORY};
pub use inherit::Inheritance;
pub use net::NetAccount;
pub use root::RootAccount;
pub use spec::{
    GroupSpec, Intensity, IpcSpec, Limits, NetSpec, Restart, SchedSpec, Stdio, Strategy,
    SupervisorSpec, TaskSpec, DEFAULT_MAX_HANDLES, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_MESSAGE_HANDLES, HTTP_HANDLER,
};
pub use state::State;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What happens when a task asks for memory beyond its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryPolicy {
    /// The request fails as the guest expects (`memory.grow` returns -1).
    #[default]
    Deny,
    /// The task is killed.
    Kill,
    /// The request fails (as with `Deny`) and the task's parent gets an
    /// event, and may raise the limit.
    Notify,
}

/// A task's identity, unique within a runtime and never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct TaskId(pub u64);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// `_start` returned (code 0) or the guest called `proc_exit(code)`.
    Exited(i32),
    /// The guest faulted, or could not be started; the text says why.
    Trapped(String),
    /// Killed by the kernel API, a limit or the operator; the text says why.
    Killed(String),
}

/// A server task that lives as long as its system's other tasks (a
/// passive task, a typed server): ended when only such tasks are left.
pub(crate) trait Serving: Send + Sync {
    /// Ends the server with `status` (unless it already ended).
    fn end(&self, status: TaskStatus);
    /// The WIT interfaces it serves (none for a byte service).
    fn interfaces(&self) -> Vec<String> {
        Vec::new()
    }
    /// Its typed calls so far, per function.
    fn typed_calls(&self) -> Vec<TypedCalls> {
        Vec::new()
    }
}

/// One served function's typed calls so far, as operators see them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TypedCalls {
    /// The interface (`example:kv/store@0.1.0`).
    pub interface: String,
    /// The function.
    pub function: String,
    /// Calls made.
    pub calls: u64,
    /// Calls that failed (the server failed, or a copy was refused).
    pub failures: u64,
    /// Bytes copied, arguments and results.
    pub bytes: u64,
    /// Time the calls took, as their callers waited, ms.
    pub ms: f64,
}

/// The error a deadline callback or limiter returns to end a task as
/// *killed* with the given reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct KillSignal(pub String);

/// A child's budget, carved out of its parent's.
#[derive(Debug, Clone, Copy)]
pub struct ChildBudget {
    /// Bytes, reserved in the parent's memory budget while the child lives.
    pub memory_limit: u64,
    /// The child's own CPU-time limit, ns (0: none; the parent's still applies).
    pub cpu_limit_ns: u64,
    /// The child's weight among its parent and siblings, inside the
    /// parent's share (hierarchical stride): a weight, not an amount.
    pub cpu_share: u32,
}

/// A scheduling group's shared accounting.
#[derive(Debug)]
pub struct GroupShared {
    /// The group's name.
    pub name: String,
    /// CPU used by all its members, ns.
    pub cpu_ns: AtomicU64,
    /// Total CPU the group may use, ns (0: no quota).
    pub quota_ns: u64,
    /// All its members' memory charges together, against its
    /// `memory_limit`.
    pub memory: MemoryAccount,
    /// Bytes reserved in the root for its members' surplus (see
    /// [`root`]): what they hold beyond their own guarantees is taken
    /// from here first, then from the root's.
    pub guarantee: u64,
    /// Its members' surplus that reached it, for a group with a
    /// guarantee.
    pub rooted: AtomicU64,
}

impl GroupShared {
    /// A group with a CPU quota (ns, 0: none), a memory limit and a
    /// memory guarantee (reserved in the root by the caller).
    pub fn new(name: String, quota_ns: u64, memory_limit: Option<u64>, guarantee: u64) -> Self {
        GroupShared {
            name,
            cpu_ns: AtomicU64::new(0),
            quota_ns,
            memory: MemoryAccount::new(memory_limit),
            guarantee,
            rooted: AtomicU64::new(0),
        }
    }
}

impl GroupShared {
    /// If the group's quota is used up, the kill reason.
    pub fn over_quota(&self) -> Option<String> {
        let used = self.cpu_ns.load(Ordering::Relaxed);
        (self.quota_ns != 0 && used > self.quota_ns).then(|| {
            format!(
                "group {} cpu quota exceeded: used {} ms of {} ms",
                self.name,
                used / 1_000_000,
                self.quota_ns / 1_000_000
            )
        })
    }
}

/// The state of a task that every thread may touch.
#[derive(Debug)]
pub struct TaskShared {
    /// The task's id.
    pub id: TaskId,
    /// The task's name.
    pub name: String,
    /// The lifecycle word.
    pub state: State,
    kill_reason: Mutex<Option<String>>,
    /// Memory charged against its budget.
    pub memory: MemoryAccount,
    /// The machine's budget (the root of the budget tree), charged with
    /// what `memory` is beyond `guarantee` (`None`: no root, as in unit
    /// tests).
    pub root: Option<Arc<RootAccount>>,
    /// Bytes reserved for it in the root at spawn (see [`root`]).
    pub guarantee: u64,
    /// Whose surplus is reclaimed first: the lowest priority's.
    pub memory_priority: i32,
    /// What its memory limit does, and what reclaiming its surplus does.
    pub memory_policy: MemoryPolicy,
    /// Its charges that reached the root's reckoning, for a task with a
    /// guarantee (the part beyond it is surplus).
    rooted: AtomicU64,
    /// Set when its surplus was reclaimed by `deny` or `notify`: it may
    /// grow no further beyond its guarantee.
    surplus_denied: AtomicBool,
    /// Bytes of its budget carved out for its children (they hold them).
    carved_out: AtomicU64,
    /// CPU it used and ran.
    pub cpu: CpuAccount,
    /// Portal traffic.
    pub ipc: IpcCounters,
    /// Sockets and network traffic.
    pub net: NetAccount,
    /// Block-device traffic, made when it first opens a device.
    pub device: std::sync::OnceLock<Box<DeviceCounters>>,
    /// Parent, carved budget, events, exit.
    pub family: Family,
    /// Contexts lent to it by blocked clients.
    pub inherit: Inheritance,
    /// The groups it belongs to, innermost first.
    pub groups: Vec<Arc<GroupShared>>,
    /// Epoch tick at which the current slice started.
    pub slice_start_tick: AtomicU64,
    /// Its recent output.
    pub log: Arc<crate::output::LogRing>,
    /// Where its events are written, if anywhere.
    pub event_log: Option<Arc<crate::events::EventLog>>,
    /// Its spec's label (see [`TaskSpec::label`]).
    pub label: Option<Arc<str>>,
    /// Its spec's trace context (see [`TaskSpec::trace`]).
    pub trace: Option<crate::telemetry::Context>,
    /// The task it replaces in a live upgrade (see [`TaskSpec::replaces`]).
    pub replaces: Option<TaskId>,
    /// Set when a live upgrade's new task took its names over: its end is
    /// the upgrade's doing, not a failure.
    pub replaced: AtomicBool,
    /// Its side of a live upgrade's hand-over, as the old task.
    pub handover: handover::HandOver,
    /// The state handed to it, as the new task, until its start takes it.
    pub handed: Mutex<Option<handover::Handed>>,
    /// Other objects' pages mapped into its memory, made at its first
    /// mapping (see `crate::mapping`).
    pub maps: std::sync::OnceLock<Arc<crate::mapping::Mappings>>,
    /// A server this task lent its context to (by a call) while the
    /// server sat in the run queue under its own key, 0 for none: when
    /// this task blocks, its worker files the server under this task's
    /// key instead (see `executor::queue`).
    pub lent_while_queued: AtomicU64,
    /// Time the kernel spent creating the task, ns: its spawn call and
    /// the instantiation of its module.
    pub create_ns: AtomicU64,
    /// Time the kernel spent releasing its store and pool slot once it
    /// ended, ns.
    pub teardown_ns: AtomicU64,
}

impl TaskShared {
    /// Fresh shared state of a root task (no parent, default priority,
    /// inheritance on).
    pub fn new(
        id: TaskId,
        name: String,
        cpu_limit: Option<Duration>,
        memory_limit: Option<u64>,
    ) -> Self {
        TaskShared {
            id,
            name,
            state: State::new(),
            kill_reason: Mutex::new(None),
            memory: MemoryAccount::new(memory_limit),
            root: None,
            guarantee: 0,
            memory_priority: 0,
            memory_policy: MemoryPolicy::Deny,
            rooted: AtomicU64::new(0),
            surplus_denied: AtomicBool::new(false),
            carved_out: AtomicU64::new(0),
            cpu: CpuAccount::new(cpu_limit, false),
            ipc: IpcCounters::default(),
            device: std::sync::OnceLock::new(),
            net: NetAccount::default(),
            family: Family::default(),
            inherit: Inheritance::new(id, true, 0),
            groups: Vec::new(),
            slice_start_tick: AtomicU64::new(0),
            log: Arc::default(),
            event_log: None,
            label: None,
            trace: None,
            replaces: None,
            replaced: AtomicBool::new(false),
            handover: handover::HandOver::default(),
            handed: Mutex::new(None),
            maps: std::sync::OnceLock::new(),
            lent_while_queued: AtomicU64::new(0),
            create_ns: AtomicU64::new(0),
            teardown_ns: AtomicU64::new(0),
        }
    }

    /// Makes it a child of `parent` holding `carved` bytes of the parent's
    /// memory budget (before it is shared).
    pub fn set_parent(&mut self, parent: Arc<TaskShared>, carved: u64) {
        let limit = self.cpu.limit_ns();
        self.cpu = CpuAccount::new(
            (limit != 0).then(|| Duration::from_nanos(limit)),
            parent.cpu.limited,
        );
        self.family.parent = Some(parent);
        self.family.carved_memory = AtomicU64::new(carved);
    }

    /// The task whose names it may take over (a live upgrade).
    pub fn replaces(&self) -> Option<TaskId> {
        self.replaces
    }

    /// The parent, if any.
    pub fn parent(&self) -> Option<&Arc<TaskShared>> {
        self.family.parent.as_ref()
    }

    /// Writes an event about this task to the event log, if there is one.
    pub fn event(&self, event: &str, fields: impl FnOnce() -> serde_json::Value) {
        if let Some(log) = &self.event_log {
            log.emit(event, self.id.0, &self.name, fields());
        }
    }

    /// Charges `ns` of CPU to the task's account, its groups and its
    /// ancestors' subtree totals.
    pub fn charge_cpu(&self, ns: u64) {
        self.cpu.add_charged(ns);
        for g in &self.groups {
            g.cpu_ns.fetch_add(ns, Ordering::Relaxed);
        }
        let mut t = Some(self);
        while let Some(task) = t {
            task.cpu.add_subtree(ns);
            t = task.parent().map(|p| &**p);
        }
    }

    /// Records `ns` of CPU this task ran on a client's account.
    pub fn charge_served(&self, ns: u64) {
        self.cpu.add_served(ns);
    }

    /// The task itself or the nearest ancestor whose CPU limit is exceeded,
    /// with the reason (killing it ends this task too). The task's own
    /// limit bounds all it executed (charged to it or served for others);
    /// an ancestor's bounds what its subtree was charged.
    pub fn cpu_breach(&self) -> Option<(&TaskShared, String)> {
        let own = self.cpu.subtree_ns() + self.cpu.served_ns();
        if let Some(reason) = self.cpu.over_limit(own) {
            return Some((self, reason));
        }
        let mut t = self.parent();
        while let Some(task) = t {
            if let Some(reason) = task.cpu.over_limit(task.cpu.subtree_ns()) {
                return Some((task, reason));
            }
            t = task.parent();
        }
        None
    }

    /// At the CPU limit with `notify_cpu`: suspend and tell the parent
    /// (once). Returns false if the task should be killed instead.
    pub fn cpu_limit_notify(&self) -> bool {
        if !self.family.notify_cpu || self.parent().is_none() {
            return false;
        }
        let mut ev = self.family.events();
        if !ev.cpu_pending {
            ev.cpu_pending = true;
            self.event(
                "limit",
                || serde_json::json!({ "limit": "cpu", "action": "suspended, parent notified" }),
            );
            ev.queue.push_back((EVENT_CPU, self.cpu.subtree_ns()));
            for w in ev.waiters.drain(..) {
                w.wake();
            }
        }
        self.state.suspend();
        true
    }

    /// Charges `bytes` to the task's memory budget and its groups', and
    /// what of them lies beyond its guarantee (and its groups') to the
    /// root, if they fit in all; returns whether they did. The first
    /// refusal of each account is written to the event log.
    pub fn try_charge(&self, bytes: u64) -> bool {
        if !self.try_reserve(bytes) {
            return false;
        }
        for (i, g) in self.groups.iter().enumerate() {
            if let Err(r) = g.memory.try_charge(bytes) {
                self.groups[..i].iter().for_each(|g| g.memory.refund(bytes));
                self.memory.refund(bytes);
                self.refused(&format!("group {} memory", g.name), &r);
                return false;
            }
        }
        let Some(root) = &self.root else {
            return true;
        };
        let charged = if self.guarantee == 0 {
            self.pass_up(root, 0, bytes)
        } else {
            root::charge_through(
                &self.rooted,
                self.guarantee,
                bytes,
                |beyond| self.pass_up(root, 0, beyond),
                |beyond| self.give_up(root, 0, beyond),
            )
        };
        let Err(refused) = charged else {
            return true;
        };
        self.groups.iter().for_each(|g| g.memory.refund(bytes));
        self.memory.refund(bytes);
        if let Some(r) = refused {
            self.refused("root memory", &r);
        }
        false
    }

    /// Charges `surplus` bytes (beyond the task's guarantee) through its
    /// groups from the `level`-th up: each group with a guarantee keeps
    /// what fits in it, the rest reaches the root. `Err(None)`: its
    /// surplus was reclaimed and it may have no more.
    fn pass_up(
        &self,
        root: &RootAccount,
        level: usize,
        surplus: u64,
    ) -> Result<(), Option<account::Refused>> {
        if surplus == 0 {
            return Ok(());
        }
        if level == 0 && self.surplus_denied.load(Ordering::Relaxed) {
            return Err(None);
        }
        match self.groups.get(level) {
            None => root.account().try_charge(surplus).map_err(Some),
            Some(g) if g.guarantee == 0 => self.pass_up(root, level + 1, surplus),
            Some(g) => root::charge_through(
                &g.rooted,
                g.guarantee,
                surplus,
                |beyond| self.pass_up(root, level + 1, beyond),
                |beyond| self.give_up(root, level + 1, beyond),
            ),
        }
    }

    /// Returns `surplus` bytes charged by [`TaskShared::pass_up`].
    fn give_up(&self, root: &RootAccount, level: usize, surplus: u64) {
        if surplus == 0 {
            return;
        }
        match self.groups.get(level) {
            None => root.account().refund(surplus),
            Some(g) if g.guarantee == 0 => self.give_up(root, level + 1, surplus),
            Some(g) => {
                let beyond = root::refund_through(&g.rooted, g.guarantee, surplus);
                self.give_up(root, level + 1, beyond);
            }
        }
    }

    /// Returns `bytes` charged by [`TaskShared::try_charge`].
    pub fn refund(&self, bytes: u64) {
        self.memory.refund(bytes);
        self.groups.iter().for_each(|g| g.memory.refund(bytes));
        let Some(root) = &self.root else {
            return;
        };
        let surplus = if self.guarantee == 0 {
            bytes
        } else {
            root::refund_through(&self.rooted, self.guarantee, bytes)
        };
        self.give_up(root, 0, surplus);
    }

    /// Its surplus: what it holds beyond its guarantee (not counting what
    /// it carved out for its children: they hold that).
    pub fn surplus(&self) -> u64 {
        if self.guarantee == 0 {
            let carved = self.carved_out.load(Ordering::Relaxed);
            self.memory.current().saturating_sub(carved)
        } else {
            self.rooted
                .load(Ordering::Relaxed)
                .saturating_sub(self.guarantee)
        }
    }

    /// Refuses it any further surplus (its surplus was reclaimed by
    /// `deny` or `notify`); true the first time.
    pub fn deny_surplus(&self) -> bool {
        !self.surplus_denied.swap(true, Ordering::Relaxed)
    }

    /// Whether its surplus was reclaimed and it may have no more.
    pub fn surplus_is_denied(&self) -> bool {
        self.surplus_denied.load(Ordering::Relaxed)
    }

    /// Charges `bytes` to the task's own budget only (the first half of
    /// [`TaskShared::try_charge`] and of [`TaskShared::carve`]).
    fn try_reserve(&self, bytes: u64) -> bool {
        match self.memory.try_charge(bytes) {
            Ok(()) => true,
            Err(r) => {
                self.refused("memory", &r);
                false
            }
        }
    }

    /// Writes the first refusal of an account (`limit` names it) to the
    /// event log.
    fn refused(&self, limit: &str, r: &account::Refused) {
        if r.first {
            self.event(
                "limit",
                || serde_json::json!({ "limit": limit, "limit_bytes": r.limit, "requested_bytes": r.wanted }),
            );
        }
    }

    /// Carves `bytes` out of its budget for a child (the child's own
    /// charges reach the root as it makes them); whether they fit.
    pub fn carve(&self, bytes: u64) -> bool {
        let fits = self.try_reserve(bytes);
        if fits {
            self.carved_out.fetch_add(bytes, Ordering::Relaxed);
        }
        fits
    }

    /// Returns bytes carved by [`TaskShared::carve`].
    pub fn release(&self, bytes: u64) {
        self.carved_out.fetch_sub(bytes, Ordering::Relaxed);
        self.memory.refund(bytes);
    }

    /// Records a kill request (the first reason given wins) and sets the
    /// kill flag; the caller then acts on what [`State::kill`] returned.
    pub fn request_kill(&self, reason: &str) -> state::Kill {
        {
            let mut r = self.kill_reason.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(reason.to_string());
            }
        }
        self.state.kill()
    }

    /// Whether a kill was requested.
    pub fn kill_requested(&self) -> bool {
        self.state.load().is_killed()
    }

    /// The reason given with the first kill request.
    pub fn kill_reason(&self) -> String {
        self.kill_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "killed".into())
    }
}

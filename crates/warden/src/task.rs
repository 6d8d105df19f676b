//! Tasks: one isolated program each.
//!
//! A task is one Wasmtime [`Store`] holding one instance of a WASI command
//! module, its linear memory (its heap), its globals, its WASI context
//! (args, env, stdio, preopened directories) and its [`MemoryBudget`]. The
//! store lives inside the task's future; the [`executor`](crate::executor)
//! runs that future a time slice at a time.
//!
//! # Lifecycle
//!
//! 1. **Queued.** [`Runtime::spawn`](crate::Runtime::spawn) builds the store
//!    and the future and hands them to the executor, which queues the task.
//!    Spawning charges the initial memory to the budget when the future
//!    first runs (instantiation); a module whose initial memory exceeds the
//!    budget ends as *trapped* without running any guest code.
//! 2. **Running.** Only an executor worker moves a task from Queued to
//!    Running, by popping it from the run queue; exactly one worker runs a
//!    task at a time. CPU time is measured with the worker's thread CPU
//!    clock around each poll and added to the task.
//! 3. **Back to Queued.** At each epoch tick the task's deadline callback
//!    checks its kill flag and CPU limit; once its slice is used up it
//!    yields and the worker queues it at the back.
//! 4. **Blocked.** When a host call cannot complete (a WASI sleep, stdin
//!    with no data), the future returns pending and the task is owned by
//!    nobody but its waker; the worker moves on. The waker (a timer, an I/O
//!    thread) moves it back to Queued.
//! 5. **Finished.** A task finishes by *exiting* (`_start` returns or
//!    `proc_exit`), by *trapping* (the guest's own fault, or instantiation
//!    failing) or by being *killed* (kernel API, a limit, Ctrl-C). Anyone
//!    may request a kill at any time: the request sets the kill flag, then
//!    a Queued or Blocked task is finished at once by the requester, while a
//!    Running task is finished by its worker at the next epoch tick. A
//!    single atomic state decides who finishes a task, so it happens once.
//! 6. **Released.** Finishing drops the future and with it the store: the
//!    instance, linear memories, tables, WASI handles and open files are
//!    released, and the memory returns to the system. The report (status,
//!    CPU, peak memory, times) is recorded before anyone waiting is woken.
//!
//! Kernel state is changed only between guest instructions (in host calls
//! and deadline callbacks), so a kill never leaves it half-updated.

use crate::ipc::service::{CallSlot, PortalRef};
use crate::ipc::{HandleTable, Kernel, Owned};
use crate::limiter::MemoryBudget;
pub use crate::limiter::MemoryPolicy;
pub use crate::output::Output;
use crate::sched::Params;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A task's identity, unique within a runtime and never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct TaskId(pub u64);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Everything needed to start a task.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// Unique name (for reports and output prefixes).
    pub name: String,
    /// The module file (`.wasm`, or `.wat` text).
    pub module: PathBuf,
    /// Arguments after argv\[0\] (argv\[0\] is the module's file name).
    pub args: Vec<String>,
    /// Environment variables; the task sees these and no others.
    pub env: Vec<(String, String)>,
    /// Preopened directories: guest path, host path.
    pub dirs: Vec<(String, PathBuf)>,
    /// Bytes of linear memory plus tables; `None` for no limit.
    pub memory_limit: Option<u64>,
    /// What a growth past `memory_limit` does.
    pub on_memory_limit: MemoryPolicy,
    /// CPU time after which the task is killed; `None` for no limit.
    pub cpu_limit: Option<Duration>,
    /// Where the task's stdout goes.
    pub stdout: Output,
    /// Where the task's stderr goes.
    pub stderr: Output,
    /// Whether the task reads the host's stdin (otherwise it reads nothing).
    pub stdin_inherit: bool,
    /// Names the task may register (exact, or a prefix ending in `*`).
    pub provides: Vec<String>,
    /// Names the task may look up.
    pub uses: Vec<String>,
    /// Most handles the task may hold at once.
    pub max_handles: usize,
    /// Largest message (request or reply) the task may send, bytes.
    pub max_message_bytes: u64,
    /// Most handles one message of the task may carry.
    pub max_message_handles: u64,
    /// The scheduling group it belongs to (`None`: the root).
    pub group: Option<String>,
    /// Its share, tickets and priority within its group.
    pub sched: Params,
    /// At most this fraction of one core (0 < cap ≤ 1).
    pub cap: Option<f64>,
    /// As a server, run on callers' scheduling contexts (default true).
    pub inheritance: bool,
    /// At its CPU limit, suspend and notify the parent instead of dying
    /// (only for children; a task without a parent is killed).
    pub on_cpu_limit_notify: bool,
    /// Modules it may spawn children from, by name.
    pub modules: Vec<(String, PathBuf)>,
}

/// Default for [`TaskSpec::max_handles`].
pub const DEFAULT_MAX_HANDLES: usize = 1024;
/// Default for [`TaskSpec::max_message_bytes`].
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 64 * 1024;
/// Default for [`TaskSpec::max_message_handles`].
pub const DEFAULT_MAX_MESSAGE_HANDLES: u64 = 16;

impl TaskSpec {
    /// A spec with defaults: no args, env, dirs or limits; output inherited.
    pub fn new(name: impl Into<String>, module: impl Into<PathBuf>) -> Self {
        TaskSpec {
            name: name.into(),
            module: module.into(),
            args: vec![],
            env: vec![],
            dirs: vec![],
            memory_limit: None,
            on_memory_limit: MemoryPolicy::Deny,
            cpu_limit: None,
            stdout: Output::Inherit,
            stderr: Output::Inherit,
            stdin_inherit: false,
            provides: vec![],
            uses: vec![],
            max_handles: DEFAULT_MAX_HANDLES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_message_handles: DEFAULT_MAX_MESSAGE_HANDLES,
            group: None,
            sched: Params::default(),
            cap: None,
            inheritance: true,
            on_cpu_limit_notify: false,
            modules: vec![],
        }
    }
}

/// What a task's manifest entry allows it, as the host functions check it.
#[derive(Debug, Clone)]
pub struct Grants {
    /// Names it may register.
    pub provides: Vec<String>,
    /// Names it may look up.
    pub uses: Vec<String>,
    /// Per-message byte quota.
    pub max_message_bytes: u64,
    /// Per-message handle quota.
    pub max_message_handles: u64,
}

impl Grants {
    /// The grants in `spec`.
    pub fn of(spec: &TaskSpec) -> Self {
        Grants {
            provides: spec.provides.clone(),
            uses: spec.uses.clone(),
            max_message_bytes: spec.max_message_bytes,
            max_message_handles: spec.max_message_handles,
        }
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

/// The error a deadline callback or limiter returns to end a task as
/// *killed* with the given reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct KillSignal(pub String);

/// Task state shared between the kernel, the executor and the task's own
/// store. Plain atomics: no Wasmtime types, so the executor can use it.
#[derive(Debug)]
pub struct TaskShared {
    /// The task's id.
    pub id: TaskId,
    /// The task's name.
    pub name: String,
    /// CPU time limit in ns, 0 for none (a parent may raise it).
    pub cpu_limit_ns: AtomicU64,
    /// Memory budget in bytes (`u64::MAX`: none): linear memories, tables
    /// and every kernel object charged to the task.
    pub memory_limit: AtomicU64,
    /// CPU time consumed so far, ns.
    pub cpu_ns: AtomicU64,
    /// Bytes currently charged against `memory_limit`.
    pub memory_current: AtomicU64,
    /// Highest `memory_current` seen.
    pub memory_peak: AtomicU64,
    /// Growth requests refused (or killed) for exceeding the limit.
    pub memory_denials: AtomicU64,
    /// Epoch tick at which the current slice started.
    pub slice_start_tick: AtomicU64,
    /// Id of the task whose scheduling context this one runs on (a client
    /// blocked in a call to it), 0 for its own (CPU inheritance).
    pub donor: AtomicU64,
    /// Priority of the donor, for priority inheritance.
    pub donor_priority: AtomicI32,
    /// Whether this task, as a server, runs on its clients' contexts.
    pub inherit: bool,
    /// Its own fixed priority (used when it lends its context).
    pub priority: i32,
    /// CPU it spent on behalf of donors (charged to them, not to it).
    pub served_ns: AtomicU64,
    /// Portal calls it made, and calls it received.
    pub ipc_calls: AtomicU64,
    /// Message bytes it sent (requests and replies).
    pub ipc_bytes_sent: AtomicU64,
    /// Message bytes it received.
    pub ipc_bytes_received: AtomicU64,
    /// Its recent output.
    pub log: Arc<crate::output::LogRing>,
    /// Where its events are written, if anywhere.
    pub event_log: Option<Arc<crate::events::EventLog>>,
    /// Suspended: not run until resumed.
    pub suspended: AtomicBool,
    /// Became runnable while suspended.
    pub(crate) wake_pending: AtomicBool,
    /// The groups it belongs to, innermost first.
    pub groups: Vec<Arc<GroupShared>>,
    /// The task that spawned it, if any.
    pub parent: Option<Arc<TaskShared>>,
    /// Memory reserved for it in its parent's budget (returned at its end).
    pub carved_memory: AtomicU64,
    /// Whether hitting its memory limit notifies its parent (growth is
    /// denied either way).
    pub notify_memory: bool,
    /// Whether hitting its CPU limit suspends it and notifies its parent
    /// instead of killing it.
    pub notify_cpu: bool,
    /// Events for its parent: limits hit.
    pub(crate) events: Mutex<Events>,
    /// Its stride share, and how much of it its children hold.
    pub share: u32,
    /// Share given to live children.
    pub share_given: std::sync::atomic::AtomicU32,
    /// CPU of it and all its descendants, ns (what its CPU limit bounds).
    pub tree_cpu_ns: AtomicU64,
    /// Whether it or an ancestor has a CPU limit (limits need exact figures).
    pub limited: bool,
    /// How it ended, for a parent waiting on it.
    pub(crate) exit: Mutex<ExitState>,
    killed: AtomicBool,
    kill_reason: Mutex<Option<String>>,
    owned: Mutex<Owned>,
}

/// Limit events a child posts for its parent (MVM's overuse callbacks).
#[derive(Debug, Default)]
pub struct Events {
    /// (kind, value): [`EVENT_MEMORY`] with the bytes asked for, or
    /// [`EVENT_CPU`] with the CPU used.
    pub queue: std::collections::VecDeque<(i32, u64)>,
    /// A CPU event is outstanding (the child is suspended for it).
    pub cpu_pending: bool,
    /// The parent waiting for an event.
    pub waiters: Vec<std::task::Waker>,
}

/// Event kind: a memory growth was denied at the limit.
pub const EVENT_MEMORY: i32 = 1;
/// Event kind: the CPU limit was reached; the task is suspended.
pub const EVENT_CPU: i32 = 2;

/// A task's end as its parent sees it.
#[derive(Debug, Default)]
pub struct ExitState {
    /// The exit code, or a negative status (-1 trapped, -2 killed).
    pub status: Option<i32>,
    /// Parents waiting.
    pub waiters: Vec<std::task::Waker>,
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

impl TaskShared {
    /// Fresh shared state.
    pub fn new(
        id: TaskId,
        name: String,
        cpu_limit: Option<Duration>,
        memory_limit: Option<u64>,
    ) -> Self {
        TaskShared {
            id,
            name,
            cpu_limit_ns: AtomicU64::new(
                cpu_limit.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
            ),
            memory_limit: AtomicU64::new(memory_limit.unwrap_or(u64::MAX)),
            cpu_ns: AtomicU64::new(0),
            memory_current: AtomicU64::new(0),
            memory_peak: AtomicU64::new(0),
            memory_denials: AtomicU64::new(0),
            slice_start_tick: AtomicU64::new(0),
            donor: AtomicU64::new(0),
            donor_priority: AtomicI32::new(0),
            inherit: true,
            priority: 0,
            served_ns: AtomicU64::new(0),
            ipc_calls: AtomicU64::new(0),
            ipc_bytes_sent: AtomicU64::new(0),
            ipc_bytes_received: AtomicU64::new(0),
            log: Arc::default(),
            event_log: None,
            suspended: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
            groups: Vec::new(),
            parent: None,
            carved_memory: AtomicU64::new(0),
            notify_memory: false,
            notify_cpu: false,
            events: Mutex::new(Events::default()),
            share: 1,
            share_given: std::sync::atomic::AtomicU32::new(0),
            tree_cpu_ns: AtomicU64::new(0),
            limited: cpu_limit.is_some_and(|d| !d.is_zero()),
            exit: Mutex::new(ExitState::default()),
            killed: AtomicBool::new(false),
            kill_reason: Mutex::new(None),
            owned: Mutex::new(Owned::default()),
        }
    }

    /// Writes an event about this task to the event log, if there is one.
    pub fn event(&self, event: &str, fields: serde_json::Value) {
        if let Some(log) = &self.event_log {
            log.emit(event, self.id.0, &self.name, fields);
        }
    }

    /// Counts `calls` calls and a message of `sent` and `received` bytes.
    pub(crate) fn count_message(&self, calls: u64, sent: usize, received: usize) {
        self.ipc_calls.fetch_add(calls, Ordering::Relaxed);
        self.ipc_bytes_sent
            .fetch_add(sent as u64, Ordering::Relaxed);
        self.ipc_bytes_received
            .fetch_add(received as u64, Ordering::Relaxed);
    }

    /// Charges `ns` of CPU to the task, its groups and its ancestors'
    /// subtree totals.
    pub fn charge_cpu(&self, ns: u64) {
        self.cpu_ns.fetch_add(ns, Ordering::Relaxed);
        for g in &self.groups {
            g.cpu_ns.fetch_add(ns, Ordering::Relaxed);
        }
        let mut t = Some(self);
        while let Some(task) = t {
            task.tree_cpu_ns.fetch_add(ns, Ordering::Relaxed);
            t = task.parent.as_deref();
        }
    }

    /// The task itself or the nearest ancestor whose CPU limit its subtree
    /// has exceeded, with the reason (killing it ends this task too).
    pub fn cpu_breach(&self) -> Option<(&TaskShared, String)> {
        let mut t = Some(self);
        while let Some(task) = t {
            if let Some(reason) = task.cpu_over_limit(task.tree_cpu_ns.load(Ordering::Relaxed)) {
                return Some((task, reason));
            }
            t = task.parent.as_deref();
        }
        None
    }

    /// Records how the task ended and wakes a waiting parent.
    pub(crate) fn set_exit(&self, status: i32) {
        let mut e = self.exit.lock().unwrap_or_else(|e| e.into_inner());
        e.status = Some(status);
        for w in e.waiters.drain(..) {
            w.wake();
        }
        drop(e);
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        for w in ev.waiters.drain(..) {
            w.wake();
        }
    }

    /// Posts a limit event for the parent; returns false if one of the
    /// same kind is already waiting (no flood of repeats).
    pub(crate) fn post_event(&self, kind: i32, value: u64) -> bool {
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if ev.queue.iter().any(|(k, _)| *k == kind) {
            return false;
        }
        ev.queue.push_back((kind, value));
        for w in ev.waiters.drain(..) {
            w.wake();
        }
        true
    }

    /// At the CPU limit with `notify_cpu`: suspend and tell the parent
    /// (once). Returns false if the task should be killed instead.
    pub(crate) fn cpu_limit_notify(&self) -> bool {
        if !self.notify_cpu || self.parent.is_none() {
            return false;
        }
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if !ev.cpu_pending {
            ev.cpu_pending = true;
            self.event(
                "limit",
                serde_json::json!({ "limit": "cpu", "action": "suspended, parent notified" }),
            );
            ev.queue
                .push_back((EVENT_CPU, self.tree_cpu_ns.load(Ordering::Relaxed)));
            for w in ev.waiters.drain(..) {
                w.wake();
            }
        }
        self.suspended.store(true, Ordering::SeqCst);
        true
    }

    /// The scheduling context this task lends when it blocks in a call:
    /// its own, or the one lent to it (donations pass along call chains).
    pub fn context(&self) -> (u64, i32) {
        match self.donor.load(Ordering::Acquire) {
            0 => (self.id.0, self.priority),
            d => (d, self.donor_priority.load(Ordering::Relaxed)),
        }
    }

    /// A client with `context` calls this task: lend its context to the
    /// task if it has none, or if the client's priority is higher (so a
    /// low-priority caller being served cannot hold up a high-priority one).
    pub fn lend(&self, (ctx, priority): (u64, i32), replace: bool) {
        if !self.inherit || ctx == self.id.0 {
            return;
        }
        let current = self.donor.load(Ordering::Acquire);
        if replace || current == 0 || priority > self.donor_priority.load(Ordering::Relaxed) {
            self.donor_priority.store(priority, Ordering::Relaxed);
            self.donor.store(ctx, Ordering::Release);
        }
    }

    /// The task stops running on a lent context.
    pub fn unlend(&self) {
        self.donor.store(0, Ordering::Release);
    }

    /// Permits and memory objects the task owns.
    pub(crate) fn owned(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Revokes every permit and memory object the task owns. Called before
    /// the task's store (and so its memory) is released.
    pub fn release_owned(&self) {
        self.owned().revoke_all();
    }

    /// Charges `bytes` to the task's memory budget if they fit; returns
    /// whether they did. Any thread may charge or refund.
    pub fn try_charge(&self, bytes: u64) -> bool {
        let mut cur = self.memory_current.load(Ordering::Relaxed);
        loop {
            let limit = self.memory_limit.load(Ordering::Relaxed);
            let Some(next) = cur.checked_add(bytes).filter(|&n| n <= limit) else {
                if self.memory_denials.fetch_add(1, Ordering::Relaxed) == 0 {
                    self.event(
                        "limit",
                        serde_json::json!({ "limit": "memory", "limit_bytes": limit, "requested_bytes": cur.saturating_add(bytes) }),
                    );
                }
                return false;
            };
            match self.memory_current.compare_exchange_weak(
                cur,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.memory_peak.fetch_max(next, Ordering::Relaxed);
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Returns `bytes` previously charged.
    pub fn refund(&self, bytes: u64) {
        self.memory_current.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Records a kill request; the first reason given wins. Returns whether
    /// this call was the first.
    pub fn request_kill(&self, reason: &str) -> bool {
        let mut r = self.kill_reason.lock().unwrap_or_else(|e| e.into_inner());
        let first = r.is_none();
        if first {
            *r = Some(reason.to_string());
        }
        self.killed.store(true, Ordering::SeqCst);
        first
    }

    /// Whether a kill was requested.
    pub fn kill_requested(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// The reason given with the first kill request.
    pub fn kill_reason(&self) -> Option<String> {
        self.kill_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// If the CPU limit is exceeded given `cpu_ns` total, the kill reason.
    pub fn cpu_over_limit(&self, cpu_ns: u64) -> Option<String> {
        let limit = self.cpu_limit_ns.load(Ordering::Relaxed);
        (limit != 0 && cpu_ns > limit).then(|| {
            format!(
                "cpu limit exceeded: used {} ms of {} ms",
                cpu_ns / 1_000_000,
                limit / 1_000_000
            )
        })
    }
}

/// The data of a task's store.
pub(crate) struct TaskData {
    pub(crate) wasi: wasmtime_wasi::p1::WasiP1Ctx,
    pub(crate) budget: MemoryBudget,
    pub(crate) ipc: TaskIpc,
}

/// A task's IPC state, used by the `warden` host functions.
pub(crate) struct TaskIpc {
    pub(crate) shared: Arc<TaskShared>,
    pub(crate) handles: HandleTable,
    /// The exported memory, once instantiated.
    pub(crate) memory: Option<wasmtime::Memory>,
    /// The task's reusable call slot.
    pub(crate) call_slot: Arc<CallSlot>,
    pub(crate) grants: Grants,
    pub(crate) kernel: Arc<Kernel>,
    /// Calls received and not yet answered.
    pub(crate) calls_in_progress: u32,
    /// The task's own spec, which its children's specs start from (kept
    /// only if it was granted modules to spawn from).
    pub(crate) spec: Option<Arc<TaskSpec>>,
    /// Handles its parent granted it at spawn, in order.
    pub(crate) granted: Vec<i32>,
    /// Names bound by its parent: a portal, or `None` for a hidden name.
    /// Looked up before the name service.
    pub(crate) names: std::collections::HashMap<String, Option<PortalRef>>,
    /// Names it binds for the children it spawns from now on.
    pub(crate) child_names: std::collections::HashMap<String, Option<PortalRef>>,
    /// Its output streams, which its children share.
    pub(crate) sinks: (crate::output::Sink, crate::output::Sink),
}

/// A child's budget, carved out of its parent's.
#[derive(Debug, Clone, Copy)]
pub struct ChildBudget {
    /// Bytes, reserved in the parent's memory budget while the child lives.
    pub memory_limit: u64,
    /// The child's own CPU-time limit, ns (0: none; the parent's still applies).
    pub cpu_limit_ns: u64,
    /// Stride share, taken from the parent's.
    pub cpu_share: u32,
}

/// What the `warden` task functions need from the runtime.
pub(crate) trait Spawner: Send + Sync {
    /// Spawns a child of the task whose IPC state is `parent`.
    fn spawn_child(
        self: Arc<Self>,
        parent: &TaskIpc,
        module: &(String, PathBuf),
        args: Vec<String>,
        budget: ChildBudget,
        grants: Vec<crate::ipc::Object>,
    ) -> Result<Arc<TaskShared>, crate::ipc::Errno>;
    /// Kills a task and its subtree.
    fn kill(&self, id: TaskId, reason: &str) -> bool;
    /// Suspends a task.
    fn suspend(&self, id: TaskId) -> bool;
    /// Resumes a task.
    fn resume(&self, id: TaskId) -> bool;
}

impl TaskIpc {
    /// A received call was answered or closed: with none left, the task
    /// runs on its own scheduling context again.
    pub(crate) fn call_finished(&mut self) {
        self.calls_in_progress = self.calls_in_progress.saturating_sub(1);
        if self.calls_in_progress == 0 {
            self.shared.unlend();
        }
    }
}

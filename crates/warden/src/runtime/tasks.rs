//! The task table: live tasks, finished tasks' reports and output, and
//! the waits on them.

use super::*;

/// Finished tasks whose output is kept for operators.
const FINISHED_LOGS_KEPT: usize = 256;

/// A live task's entry.
pub(super) struct Live {
    pub(super) shared: Arc<TaskShared>,
    pub(super) start_ms: f64,
    pub(super) memory_limit: Option<u64>,
    pub(super) parent: Option<TaskId>,
    /// Told the task's report when it finishes.
    pub(super) watch: Option<Watch>,
    /// A server living as long as the system (a passive task, a typed
    /// server), to end it when only such servers are left.
    pub(super) passive: Option<Arc<dyn crate::task::Serving>>,
    /// Whether it is such a server, counted in `passive_live` (not one
    /// serving other nodes, which keeps the system going).
    pub(super) background: bool,
}

impl Live {
    /// How many times its supervisor restarted it before (0 if it has
    /// none).
    pub(super) fn restarts(&self) -> u32 {
        match &self.watch {
            Some(Watch::Supervised { restarts, .. }) => *restarts,
            _ => 0,
        }
    }
}

/// Where a watched task's report goes when it finishes.
pub(crate) enum Watch {
    /// A waiter's channel.
    Once(tokio::sync::oneshot::Sender<TaskReport>),
    /// A supervisor: told the report under the table's lock, and
    /// whether the report comes with a hold on the table (see
    /// [`Table::held`]: none once the system is closing). A hold is
    /// taken if `tell` returns true (the supervisor has the report); the
    /// supervisor gives it back with [`Runtime::release_hold`] once it
    /// has restarted the task or decided not to.
    Supervised {
        restarts: u32,
        tell: Box<dyn FnOnce(TaskReport, bool) -> bool + Send>,
    },
}

impl From<tokio::sync::oneshot::Sender<TaskReport>> for Watch {
    fn from(tx: tokio::sync::oneshot::Sender<TaskReport>) -> Watch {
        Watch::Once(tx)
    }
}

/// What the table holds, under its one lock.
#[derive(Default)]
pub(super) struct Table {
    pub(super) live: crate::idmap::IdMap<TaskId, Live>,
    /// Reports kept, by id. Ordered rather than hashed: a full table
    /// drops one report for every one it takes, and a hash table's
    /// tombstones then made it rehash all of them every few thousand.
    /// Boxed: dropping the oldest shifts its node's entries, and the
    /// reports themselves took a quarter of a microsecond to move.
    pub(super) done: std::collections::BTreeMap<TaskId, Box<TaskReport>>,
    /// Ids in `done`, oldest first, for dropping beyond `max_reports`.
    pub(super) done_order: std::collections::VecDeque<TaskId>,
    /// Live children of each task that has any.
    pub(super) children: crate::idmap::IdMap<TaskId, Vec<TaskId>>,
    /// Output of the most recently finished tasks.
    pub(super) done_logs: std::collections::VecDeque<(TaskId, Arc<crate::output::LogRing>)>,
    /// Most tasks alive at once since the heap was last trimmed.
    pub(super) peak_live: usize,
    /// Threads waiting on `Tasks::changed` (finishing wakes nobody if 0).
    pub(super) waiters: usize,
    /// Threads waiting on `Tasks::empty`.
    pub(super) empty_waiters: usize,
    /// Live passive tasks (the system ends when only these are left).
    pub(super) passive_live: usize,
    /// Supervised tasks that ended and whose supervisor has not yet
    /// restarted them or let them go: the system has not ended while
    /// any is held.
    pub(super) held: usize,
    /// Set when the system is ending (every task killed, or only passive
    /// ones left): supervisors restart nothing more.
    pub(super) closing: bool,
    /// What creating and tearing down the finished tasks took.
    pub(super) setup: SetupStats,
}

/// Tells a finished task's watcher its report: a supervisor's report
/// holds the system open unless it is closing (see [`Watch::Supervised`]).
fn tell(t: &mut Table, watch: Option<Watch>, report: &TaskReport) {
    match watch {
        Some(Watch::Once(tx)) => drop(tx.send(report.clone())),
        Some(Watch::Supervised { tell, .. }) => {
            let hold = !t.closing;
            if tell(report.clone(), hold) && hold {
                t.held += 1;
            }
        }
        None => {}
    }
}

impl Table {
    /// Whether the system's own tasks have all ended: only passive ones
    /// are left, and no supervisor holds a restart.
    pub(super) fn ended(&self) -> bool {
        self.live.len() <= self.passive_live && self.held == 0
    }
}

/// What the kernel spent creating and tearing down tasks, summed over
/// every task that has finished (its report's `create_ms` and
/// `teardown_ms`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SetupStats {
    /// Tasks finished.
    pub tasks: u64,
    /// Their spawn calls and instantiations, seconds.
    pub create_seconds: f64,
    /// The release of their stores and pool slots, seconds.
    pub teardown_seconds: f64,
}

/// The task table, its settings, and the condition variables its
/// waiters sleep on.
pub(super) struct Tasks {
    pub(super) table: Mutex<Table>,
    pub(super) max_reports: usize,
    pub(super) on_report: Option<ReportSink>,
    /// Where each finished task's span goes, if tracing is on.
    pub(super) spans: Option<Arc<crate::telemetry::Exporter>>,
    pub(super) events: Option<Arc<crate::events::EventLog>>,
    pub(super) kernel: Arc<Kernel>,
    /// The machine's budget: every task's charges and
    /// [`super::machine::TASK_OVERHEAD`] per live task.
    pub(super) root: Arc<crate::task::RootAccount>,
    /// The runtime, for ending a dead task's children.
    pub(super) runtime: std::sync::OnceLock<std::sync::Weak<Inner>>,
    pub(super) changed: Condvar,
    /// Bumped (under the table lock) by every finish, so that a waiter can
    /// watch for one without the lock.
    pub(super) finished: std::sync::atomic::AtomicU64,
    /// Notified when the last live task finishes.
    pub(super) empty: Condvar,
    pub(super) epoch: Instant,
    /// `epoch` in nanoseconds since 1970, for spans.
    pub(super) epoch_unix_ns: u64,
    /// How a thread waiting for a finish looks for it before sleeping.
    pub(super) spin: Arc<crate::executor::IdleSpin>,
    /// How freed heap goes back to the system after a mass death.
    pub(super) trim: Arc<crate::trim::HeapTrim>,
}

impl Tasks {
    /// An empty table under `config`'s report settings.
    pub(super) fn new(
        config: &super::RuntimeConfig,
        events: Option<Arc<crate::events::EventLog>>,
        kernel: Arc<Kernel>,
        root: Arc<crate::task::RootAccount>,
        spans: Option<Arc<crate::telemetry::Exporter>>,
    ) -> Tasks {
        Tasks {
            spans,
            epoch_unix_ns: crate::telemetry::unix_ns(),
            table: Mutex::new(Table::default()),
            max_reports: config.max_reports,
            on_report: config.on_report.clone(),
            events,
            kernel,
            root,
            runtime: std::sync::OnceLock::new(),
            changed: Condvar::new(),
            finished: std::sync::atomic::AtomicU64::new(0),
            empty: Condvar::new(),
            epoch: Instant::now(),
            spin: Arc::new(crate::executor::IdleSpin::new(config.idle_spin)),
            trim: Arc::new(crate::trim::HeapTrim::new(config.heap_trim)),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn ms(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1e3
    }

    pub(super) fn finish(&self, shared: &TaskShared, status: TaskStatus) {
        let end_ms = self.ms();
        self.kernel.names.remove_owner(shared.id);
        // The child's budget returns to its parent before the parent can
        // be woken by its end, so an immediate respawn finds it there.
        nested::child_ended(shared);
        let mut t = self.lock();
        if let Some(live) = t.live.remove(&shared.id) {
            self.record_end(&mut t, shared, status, live, end_ms);
        }
        let children = t.children.remove(&shared.id).unwrap_or_default();
        if let Some(parent) = shared.parent().map(|p| p.id) {
            if let Some(siblings) = t.children.get_mut(&parent) {
                siblings.retain(|&c| c != shared.id);
            }
        }
        self.finished
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        let wake = t.waiters > 0;
        let wake_empty = t.empty_waiters > 0 && t.ended();
        let live = t.live.len();
        let trim = mass_death(&mut t.peak_live, live);
        drop(t);
        if trim {
            return_free_heap(&self.trim);
        }
        if wake {
            self.changed.notify_all();
        }
        if wake_empty {
            self.empty.notify_all();
        }
        if let Some(inner) = self.runtime.get().and_then(|w| w.upgrade()) {
            for child in children {
                inner.exec.kill(child, "its parent ended");
            }
        }
    }

    /// A live task's end, recorded: its budgets given back, its event
    /// and exit status, its report to the sink, its watcher and the
    /// table's finished reports, and its log kept a while.
    fn record_end(
        &self,
        t: &mut Table,
        shared: &TaskShared,
        status: TaskStatus,
        mut live: Live,
        end_ms: f64,
    ) {
        self.give_back(shared);
        if live.background {
            t.passive_live -= 1;
        }
        match &status {
            TaskStatus::Exited(c) => shared.event("exit", || serde_json::json!({ "code": c })),
            TaskStatus::Trapped(r) => shared.event("trap", || serde_json::json!({ "reason": r })),
            TaskStatus::Killed(r) => shared.event("kill", || serde_json::json!({ "reason": r })),
        }
        shared.handover.unwatch();
        shared.family.set_exit(match &status {
            TaskStatus::Exited(c) => *c,
            TaskStatus::Trapped(_) => -1,
            TaskStatus::Killed(_) => -2,
        });
        let mut report = TaskReport::new(shared, status, live.memory_limit, live.start_ms, end_ms);
        report.parent = live.parent;
        if let Some(Watch::Supervised { restarts, .. }) = &live.watch {
            report.supervised = true;
            report.restarts = *restarts;
        }
        t.setup.tasks += 1;
        t.setup.create_seconds += report.create_ms / 1e3;
        t.setup.teardown_seconds += report.teardown_ms / 1e3;
        if let Some(sink) = &self.on_report {
            (sink.0)(&report);
        }
        if let Some(spans) = &self.spans {
            spans.record(task_span(&report, shared.trace, self.epoch_unix_ns));
        }
        tell(t, live.watch.take(), &report);
        if t.done_order.len() >= self.max_reports {
            if let Some(old) = t.done_order.pop_front() {
                t.done.remove(&old);
            }
        }
        if self.max_reports > 0 {
            t.done_order.push_back(shared.id);
            t.done.insert(shared.id, Box::new(report));
        }
        if t.done_logs.len() >= FINISHED_LOGS_KEPT {
            t.done_logs.pop_front();
        }
        t.done_logs.push_back((shared.id, shared.log.clone()));
    }

    /// Enters a new task in the table, unless `room` says it is full.
    /// (Also keeps `peak_live`.)
    pub(super) fn enter(
        &self,
        shared: &Arc<TaskShared>,
        memory_limit: Option<u64>,
        room: super::setup::Room,
        watch: Option<Watch>,
        (passive, foreground): (Option<Arc<dyn crate::task::Serving>>, bool),
    ) -> Result<(), Error> {
        let mut t = self.lock();
        room.check(t.live.len())?;
        if t.closing && matches!(watch, Some(Watch::Supervised { .. })) {
            return Err(Error::Spawn {
                name: shared.name.clone(),
                message: "the system is ending: no task is restarted".into(),
            });
        }
        self.root
            .try_reserve(super::machine::TASK_OVERHEAD)
            .map_err(|r| super::Error::Memory(super::machine::refusal(&r)))?;
        let background = passive.is_some() && !foreground;
        t.passive_live += usize::from(background);
        t.peak_live = t.peak_live.max(t.live.len() + 1);
        let parent = shared.parent().map(|p| p.id);
        if let Some(p) = parent {
            t.children.entry(p).or_default().push(shared.id);
        }
        let live = Live {
            shared: shared.clone(),
            start_ms: self.ms(),
            memory_limit,
            parent,
            watch,
            passive,
            background,
        };
        t.live.insert(shared.id, live);
        Ok(())
    }

    /// Returns what a task leaving the table reserved in the root: its
    /// overhead and its guarantee (reserved before it entered).
    fn give_back(&self, shared: &TaskShared) {
        self.root.unreserve(super::machine::TASK_OVERHEAD);
        if shared.guarantee > 0 {
            self.root.release_guarantee(shared.guarantee);
        }
    }

    /// Takes a task that could not start out of the table again.
    pub(super) fn leave(&self, shared: &TaskShared) {
        let mut t = self.lock();
        if let Some(live) = t.live.remove(&shared.id) {
            self.give_back(shared);
            t.passive_live -= usize::from(live.background);
        }
        if let Some(siblings) = shared.parent().and_then(|p| t.children.get_mut(&p.id)) {
            siblings.retain(|&c| c != shared.id);
        }
    }

    /// Waits for a change (a task finishing), at most until `deadline`.
    pub(super) fn wait<'a>(
        &'a self,
        t: MutexGuard<'a, Table>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, Table> {
        use std::sync::atomic::Ordering::Acquire;
        // Watch for a finish awake for a moment before sleeping (see
        // `executor::IdleSpin`); finishes bump `finished` under the lock,
        // so one after `seen` is either seen here or wakes the sleep.
        let seen = self.finished.load(Acquire);
        drop(t);
        let came = self.spin.until(|| self.finished.load(Acquire) != seen);
        let mut t = self.lock();
        if came || self.finished.load(Acquire) != seen {
            return t;
        }
        t.waiters += 1;
        let mut t = match deadline {
            None => self.changed.wait(t).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                self.changed
                    .wait_timeout(t, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        t.waiters -= 1;
        t
    }
}

/// The span of a finished task's run: a child of `trace` (its request's
/// span) if it has one, else a trace of its own; with what the run cost.
fn task_span(
    report: &TaskReport,
    trace: Option<crate::telemetry::Context>,
    epoch_ns: u64,
) -> crate::telemetry::Span {
    use serde_json::json;
    let at = |ms: f64| epoch_ns + (ms.max(0.0) * 1e6) as u64;
    crate::telemetry::Span {
        at: trace.map_or_else(crate::telemetry::Context::root, |t| t.child()),
        parent: trace.map(|t| t.span),
        name: format!("task {}", report.name),
        kind: 1,
        start_ns: at(report.start_ms),
        end_ns: at(report.end_ms),
        attributes: vec![
            ("warden.task.id", json!(report.id.0)),
            ("warden.task.status", json!(report.status)),
            ("warden.task.cpu_ms", json!(report.cpu_ms)),
            (
                "warden.task.peak_memory_bytes",
                json!(report.peak_memory_bytes),
            ),
            (
                "warden.task.bytes_sent",
                json!(report.bytes_sent + report.net_bytes_sent),
            ),
            (
                "warden.task.bytes_received",
                json!(report.bytes_received + report.net_bytes_received),
            ),
            ("warden.task.ipc_calls", json!(report.ipc_calls)),
        ],
        error: report.status != "exited" || report.exit_code != Some(0),
    }
}

//! What the runtime does for supervisors: a supervised spawn whose end
//! holds the system open until its supervisor has dealt with it, the
//! closing that ends supervision, and the restart counts operators see.
//!
//! The supervisors themselves (which members a restart takes, when they
//! give up) are the system's: see `system::supervise`.

use super::{Error, Runtime, Watch};
use crate::report::TaskReport;
use crate::task::{TaskId, TaskSpec};
use std::sync::Mutex;

/// A supervised task's restarts, as operators see them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Restarts {
    /// Restarts so far.
    pub count: u32,
    /// Why the last restart was made: how the task's previous run ended.
    pub last_reason: Option<String>,
    /// Restarts by how the previous run ended: exited, trapped, killed.
    pub by_status: [u64; 3],
}

/// Restart counts by task name.
pub(super) type RestartTable = Mutex<std::collections::HashMap<String, Restarts>>;

/// What an operator asks of a system's task or per-request route, by
/// name (see `system::upgrade`).
#[derive(Debug, Clone, Copy)]
pub enum Operation<'a> {
    /// Replace its code with this module's while it serves.
    Upgrade(&'a std::path::Path),
    /// Put back the code it ran before its last upgrade.
    Rollback,
    /// Start it afresh from its spec, killing it first if it runs.
    Restart,
    /// Start this new task (named as the operation's name) under the
    /// system's root supervisor: a task spawned by an operator with a
    /// restart policy.
    Spawn(&'a crate::task::TaskSpec),
    /// Apply the manifest at this path (`None`: the one the system runs)
    /// to the running system; the operation's name is not used.
    Reload(Option<&'a std::path::Path>),
}

/// What carries out operations on a system's tasks and routes: to a line
/// saying what was done, or why nothing was. A system sets it.
pub type Operator =
    std::sync::Arc<dyn Fn(&Runtime, &str, Operation) -> Result<String, String> + Send + Sync>;

impl Runtime {
    /// Starts a task whose end is a supervisor's to judge: `tell` gets
    /// its report under the task table's lock (so it must only hand it
    /// on), with whether the report holds the system open. It does unless
    /// the runtime is closing: then no task ends while a supervisor
    /// decides, and the supervisor must give the hold back with
    /// [`Runtime::release_hold`]. `restarts` is how many times the task
    /// was restarted before (in its report). `tell` returns whether the
    /// report was taken; a report not taken holds nothing.
    pub fn spawn_supervised(
        &self,
        spec: &TaskSpec,
        restarts: u32,
        tell: impl FnOnce(TaskReport, bool) -> bool + Send + 'static,
    ) -> Result<TaskId, Error> {
        let watch = Watch::Supervised {
            restarts,
            tell: Box::new(tell),
        };
        self.spawn_with_watch(spec, watch).map(|s| s.id)
    }

    /// Gives back the hold a supervised task's report took (see
    /// [`Runtime::spawn_supervised`]).
    pub fn release_hold(&self) {
        let tasks = &self.inner.tasks;
        let mut t = tasks.lock();
        t.held = t.held.saturating_sub(1);
        let wake = t.empty_waiters > 0 && t.ended();
        drop(t);
        if wake {
            tasks.empty.notify_all();
        }
    }

    /// Closes the runtime as [`Runtime::kill_all`] does, killing nothing:
    /// supervised reports take no hold and supervised spawns are refused
    /// from now on (a system's supervision has stopped).
    pub fn close(&self) {
        self.inner.tasks.lock().closing = true;
    }

    /// Whether the runtime is closing: every task was killed
    /// ([`Runtime::kill_all`]) or [`Runtime::wait_all`] found only
    /// passive tasks left. Supervisors restart nothing once it is.
    pub fn closing(&self) -> bool {
        self.inner.tasks.lock().closing
    }

    /// Records that `name` was restarted (as task `id`) because a run
    /// ended with `status` ("exited", "trapped" or "killed") for
    /// `reason`: in the event log (a `restart` event) and in the counts
    /// operators see.
    pub fn note_restart(&self, name: &str, id: TaskId, status: &str, reason: &str) {
        let count = {
            let mut table = self
                .inner
                .restarts
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let r = table.entry(name.to_string()).or_default();
            r.count += 1;
            r.by_status[status_index(status)] += 1;
            r.last_reason = Some(reason.to_string());
            r.count
        };
        if let Some(log) = &self.inner.tasks.events {
            let fields = serde_json::json!({
                "restarts": count,
                "status": status,
                "reason": reason,
            });
            log.emit("restart", id.0, name, fields);
        }
    }

    /// Sets (or, with `None`, takes away) what carries out operations on
    /// the system's tasks.
    pub fn set_operator(&self, operator: Option<Operator>) {
        *self
            .inner
            .operator
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = operator;
    }

    /// Carries out `op` on the system's task or per-request route `name`.
    pub fn operate(&self, name: &str, op: Operation) -> Result<String, String> {
        let operator = self
            .inner
            .operator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match operator {
            Some(o) => o(self, name, op),
            None => Err("this needs a running system (warden run)".into()),
        }
    }

    /// Replaces the code of the system's task or per-request route
    /// `name` with `module` (`None`: the code it ran before its last
    /// upgrade) while it serves; see `system::upgrade`.
    pub fn upgrade(&self, name: &str, module: Option<&std::path::Path>) -> Result<String, String> {
        self.operate(name, module.map_or(Operation::Rollback, Operation::Upgrade))
    }

    /// The names task `id` holds in the name service, sorted.
    pub fn names_of(&self, id: TaskId) -> Vec<String> {
        self.inner.kernel.names.names_of(id)
    }

    /// The task holding `name` in the name service, if any.
    pub fn owner_of(&self, name: &str) -> Option<TaskId> {
        self.inner.kernel.names.owner_of(name)
    }

    /// Marks live task `id` as replaced by a live upgrade (its end is
    /// then no failure of the system's).
    pub fn mark_replaced(&self, id: TaskId) {
        if let Some(l) = self.inner.tasks.lock().live.get(&id) {
            l.shared
                .replaced
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Asks the live task `id` to hand its state over (at most `max`
    /// bytes) at its next `recv`; `false` if it is not live or a
    /// hand-over is under way (see `task::handover`).
    pub(crate) fn ask_handover(&self, id: TaskId, max: u64) -> bool {
        if !self.shared_of(id).is_some_and(|s| s.handover.ask(max)) {
            return false;
        }
        // Its `recv` waits on a service of its, not on the hand-over.
        let names = &self.inner.kernel.names;
        for name in names.names_of(id) {
            if let Some(portal) = names.lookup(&name) {
                portal.service().wake_receiver();
            }
        }
        true
    }

    /// What task `id` handed over, once it has (at most `limit`); `None`
    /// if it did not in time (or is not live): the hand-over is then
    /// cancelled.
    pub(crate) fn take_handover(
        &self,
        id: TaskId,
        limit: std::time::Duration,
    ) -> Option<crate::task::handover::Saved> {
        self.shared_of(id)?.handover.take(limit)
    }

    /// Cancels task `id`'s hand-over: it serves again.
    pub(crate) fn cancel_handover(&self, id: TaskId) {
        if let Some(s) = self.shared_of(id) {
            s.handover.cancel();
        }
    }

    /// Whether tasks of the core module at `path` take handed state.
    pub(crate) fn restores(&self, path: &std::path::Path) -> bool {
        match self.load_module(path).map(|m| m.core_module().cloned()) {
            Ok(Some(m)) => crate::host::handover::restores(&m),
            _ => false,
        }
    }

    fn shared_of(&self, id: TaskId) -> Option<std::sync::Arc<crate::task::TaskShared>> {
        let tasks = self.inner.tasks.lock();
        tasks.live.get(&id).map(|l| l.shared.clone())
    }

    /// Records a live upgrade of `name` in the event log.
    pub fn note_upgrade(&self, name: &str, id: TaskId, fields: serde_json::Value) {
        if let Some(log) = &self.inner.tasks.events {
            log.emit("upgrade", id.0, name, fields);
        }
    }

    /// `name`'s restarts, if it was ever restarted.
    pub fn restarts(&self, name: &str) -> Option<Restarts> {
        let table = self
            .inner
            .restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        table.get(name).cloned()
    }

    /// Every restarted task's restarts, by name, in name order.
    pub fn all_restarts(&self) -> Vec<(String, Restarts)> {
        let table = self
            .inner
            .restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = table.iter().map(|(n, r)| (n.clone(), r.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// The statuses a restart is counted by, in `Restarts::by_status` order.
pub const RESTART_STATUSES: [&str; 3] = ["exited", "trapped", "killed"];

fn status_index(status: &str) -> usize {
    RESTART_STATUSES
        .iter()
        .position(|s| *s == status)
        .unwrap_or(2)
}

//! How a task ends: its future dropped, its cell forgotten, the finish
//! callback told — and kills, which end a task that is not running at once.

use super::{FinishQueue, Shared, TaskCell, TaskFuture, FINISHING};
use crate::task::state::Kill;
use crate::task::{TaskId, TaskStatus};
use std::sync::Arc;

impl Shared {
    /// Drops the task's future, forgets the cell and reports the outcome.
    /// Called by whoever moved the task's word to done.
    ///
    /// Finishing a task may end others (its children), whose finishing
    /// ends theirs, and so on. So that no host stack grows with a depth a
    /// guest chooses, a finish that starts inside another on the same
    /// thread is only queued, and the outermost one works through the
    /// queue.
    pub(super) fn complete(&self, cell: &TaskCell, future: Option<TaskFuture>, status: TaskStatus) {
        debug_assert!(cell.shared.state.load().is_done());
        {
            let _tokio = self.tokio.enter();
            drop(future);
        }
        self.lock().forget(cell.shared.id.0);
        let outermost = FINISHING.with(|f| {
            let mut f = f.borrow_mut();
            let outermost = f.is_none();
            f.get_or_insert_with(FinishQueue::new)
                .push_back((cell.shared.clone(), status));
            outermost
        });
        if !outermost {
            return;
        }
        // Cleared however the loop ends, so the thread never queues for
        // a loop that is gone.
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                FINISHING.with(|f| *f.borrow_mut() = None);
            }
        }
        let _done = Done;
        while let Some((shared, status)) =
            FINISHING.with(|f| f.borrow_mut().as_mut().and_then(|q| q.pop_front()))
        {
            (self.finish)(&shared, status);
        }
    }
}

/// Requests a task's kill; if it was idle or queued, finishes it now.
pub(super) fn kill(cell: &Arc<TaskCell>, reason: &str) {
    match cell.shared.request_kill(reason) {
        Kill::Finish { queued } => finish_killed(cell, queued),
        // Its deadline callback sees the kill at its next epoch check.
        Kill::Running => (cell.exec.on_tick)(),
        Kill::AlreadyDone => {}
    }
}

/// Finishes a task whose word this thread moved to done on a kill.
pub(super) fn finish_killed(cell: &Arc<TaskCell>, queued: bool) {
    if queued {
        cell.exec.lock().remove(cell.shared.id.0);
    }
    let future = cell.future.lock().unwrap_or_else(|e| e.into_inner()).take();
    let reason = cell.shared.kill_reason();
    cell.exec.complete(cell, future, TaskStatus::Killed(reason));
}

/// Kills the live task `id`, if there is one.
pub(super) fn kill_id(exec: &Shared, id: TaskId, reason: &str) {
    let cell = exec.lock().cells.get(&id.0).cloned();
    if let Some(cell) = cell {
        kill(&cell, reason);
    }
}

/// Kills every task of a group that used up its CPU quota.
pub(super) fn kill_group(exec: &Arc<Shared>, group: &Arc<crate::task::GroupShared>) {
    let reason = group.over_quota().unwrap_or_default();
    let members: Vec<Arc<TaskCell>> = exec
        .lock()
        .cells
        .values()
        .filter(|c| c.shared.groups.iter().any(|g| Arc::ptr_eq(g, group)))
        .cloned()
        .collect();
    for cell in members {
        kill(&cell, &reason);
    }
}

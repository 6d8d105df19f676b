//! Every task's waker, and what a wake does: the task is made runnable
//! in this worker's hand-off slot or the run queue.

use super::{Shared, TaskCell, HANDOFF, POLLING};
use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Wake, Waker};

impl Shared {
    /// Makes a woken task runnable: into this worker's hand-off slot if
    /// the waker runs inside one of our polls, else into the run queue.
    pub(super) fn make_runnable(self: &Arc<Self>, cell: &Arc<TaskCell>) {
        if POLLING.with(|p| p.get()) == Arc::as_ptr(self) {
            let bumped = HANDOFF.with(|h| h.borrow_mut().replace(cell.clone()));
            if let Some(old) = bumped {
                self.enqueue(&old);
            }
        } else {
            self.enqueue(cell);
        }
    }
}

impl Wake for TaskCell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.shared.state.wake() {
            self.exec.make_runnable(self);
        }
    }
}

/// The waker a task is polled with: the task's own, borrowed from the
/// worker's reference for the poll rather than counted (two locked
/// instructions per poll). Clones, which outlive the poll, are counted.
pub(super) fn waker_ref(cell: &Arc<TaskCell>) -> std::mem::ManuallyDrop<Waker> {
    let raw = RawWaker::new(Arc::as_ptr(cell).cast(), &VTABLE);
    // SAFETY: the vtable's contract holds (see `VTABLE`); the borrowed
    // waker is never dropped (ManuallyDrop) and lives no longer than
    // `cell`'s reference, which the caller holds for the poll.
    std::mem::ManuallyDrop::new(unsafe { Waker::from_raw(raw) })
}

/// Every task's waker: its data is `Arc::as_ptr` of the task's cell, and
/// every waker but the borrowed one of [`waker_ref`] holds a counted
/// reference of its own, given up by `wake` or `drop`. A static, not a
/// const: one address, so that `will_wake` and [`hand_off`] know it.
pub(super) static VTABLE: RawWakerVTable = RawWakerVTable::new(
    |data| {
        // SAFETY (all four): as the vtable's doc says.
        unsafe { Arc::increment_strong_count(data.cast::<TaskCell>()) };
        RawWaker::new(data, &VTABLE)
    },
    |data| Wake::wake(unsafe { Arc::from_raw(data.cast::<TaskCell>()) }),
    |data| {
        let cell = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(data.cast::<TaskCell>()) });
        Wake::wake_by_ref(&*cell)
    },
    |data| drop(unsafe { Arc::from_raw(data.cast::<TaskCell>()) }),
);

//! Hand-offs: a woken server run at once by the thread that woke it —
//! nested in a worker's poll of its caller ([`hand_off`]), or by a thread
//! that is no worker ([`host_hand_off`]).

use super::{waker::VTABLE, worker, Shared, TaskCell, HANDOFF, LAST_POLL_END, NESTED, POLLING};
use crate::task::state::Start;
use crate::task::TaskShared;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

/// Direct hand-off: called by the task being polled with the waker of a
/// server it just gave a call. If the waker is a task of the executor
/// this worker polls for, the worker claims it (lifecycle rule 2, claim)
/// and runs its slice now, nested in the caller's poll, so that a server
/// waiting in `recv` answers before the caller's poll has even returned:
/// the caller neither suspends nor is woken, and no queue or hand-off
/// slot is touched. The server's slice is a slice like any other (its
/// epoch deadline, limits and lifecycle rules apply), metered separately
/// and charged as the CPU inheritance says. `lent` is the caller's own
/// task if that is the context it lent the server (it runs on no donor
/// itself): the slice then need not look the context up.
///
/// Only one level nests: a server running nested that calls another
/// service hands off through the slot, as usual (a plain wake), so the
/// host stack never holds more than two polls. A caller that wants the
/// server's answer within its own slice gets it; one whose server is
/// busy, suspended or another executor's task, or that is not itself
/// polled by a worker, wakes it as usual.
pub(crate) fn hand_off(waker: Waker, lent: Option<&Arc<TaskShared>>) {
    if NESTED.with(Cell::get) || !std::ptr::eq(waker.vtable(), &VTABLE) {
        return waker.wake();
    }
    // SAFETY: a waker with this vtable holds a counted reference to a
    // task cell (see `VTABLE`), which we take over from it.
    let cell = unsafe { Arc::from_raw(waker.data().cast::<TaskCell>()) };
    std::mem::forget(waker);
    if POLLING.with(Cell::get) != Arc::as_ptr(&cell.exec) {
        return cell.wake_by_ref();
    }
    if !cell.shared.state.claim() {
        return;
    }
    // Restored however the slice ends.
    struct Unnest(*const Shared);
    impl Drop for Unnest {
        fn drop(&mut self) {
            POLLING.with(|p| p.set(self.0));
            NESTED.with(|n| n.set(false));
        }
    }
    let _unnest = Unnest(POLLING.with(Cell::get));
    NESTED.with(|n| n.set(true));
    // Not a switch from the last poll: the caller's guest ran between.
    LAST_POLL_END.with(|l| l.set(0));
    crate::cpu::nest(|| worker::run_slice(&cell.exec, &cell, lent));
}

/// Host hand-off: called by a thread that is no worker (the web server's
/// threads, a cluster node's, an embedder's) with the waker of a server
/// it just gave a call (or of a client it just answered, see
/// [`crate::ipc::service::CallRef::reply_handing_off`]). If the server is a task of ours waiting to be woken and some
/// worker has no task to run, this thread claims the server and runs its
/// slice itself, as a worker would: a server waiting in `recv` answers
/// before this returns, and no worker is woken, nor the caller's thread
/// after it. Otherwise, or on a worker's thread, it wakes the server as
/// usual.
///
/// An idle worker is the condition because then the scheduler would have
/// run the server at once anyway: the slice takes no worker's turn from
/// another task. (Not so if the run queue may hold tasks back while
/// workers idle, as a CPU cap does: then there is no host hand-off.) It
/// is a slice like any other (its epoch deadline, limits and lifecycle
/// rules apply, the run queue's policy is charged for it), except that it
/// is charged its wall time as CPU (see [`crate::cpu`]). Nothing nests in
/// it: a call the server makes wakes its own server through the hand-off
/// slot.
///
/// A task the slice leaves runnable (the server itself, woken by another
/// client's call meanwhile, or one it woke) runs next on this thread too,
/// as from a worker's hand-off slot, while a worker is still idle, for at
/// most [`HOST_SLICES`] slices and [`HOST_BUDGET`] in all; then it goes
/// to the run queue.
pub(crate) fn host_hand_off(waker: Waker) {
    if !POLLING.with(Cell::get).is_null() || !std::ptr::eq(waker.vtable(), &VTABLE) {
        return waker.wake();
    }
    // SAFETY: a waker with this vtable holds a counted reference to a
    // task cell (see `VTABLE`), which we take over from it.
    let cell = unsafe { Arc::from_raw(waker.data().cast::<TaskCell>()) };
    std::mem::forget(waker);
    let exec = cell.exec.clone();
    if !host_may_run(&exec) {
        return cell.wake_by_ref();
    }
    if !cell.shared.state.claim() {
        return;
    }
    run_on_host(&exec, cell);
}

/// Whether this thread may run a task's slices itself: it is no worker,
/// and some worker has no task to run, nor may the run queue hold tasks
/// back while workers idle (as a CPU cap does).
pub(super) fn host_may_run(exec: &Shared) -> bool {
    POLLING.with(Cell::get).is_null()
        && exec.looking.load(Ordering::Acquire) > 0
        && !exec.throttles.load(Ordering::Relaxed)
}

/// Runs `cell`, which this thread (no worker) has taken (`RUNNING`), and
/// what its slice leaves in the hand-off slot, as a worker would: see
/// [`host_hand_off`].
pub(super) fn run_on_host(exec: &Arc<Shared>, cell: Arc<TaskCell>) {
    // Restored, and what the slices left in the hand-off slot queued,
    // however they end.
    struct Host<'a>(&'a Shared);
    impl Drop for Host<'_> {
        fn drop(&mut self) {
            NESTED.with(|n| n.set(false));
            LAST_POLL_END.with(|l| l.set(0));
            crate::cpu::wall_mode(false);
            if let Some(left) = HANDOFF.with(|h| h.borrow_mut().take()) {
                self.0.enqueue(&left);
            }
        }
    }
    let _tokio = exec.tokio.enter();
    let _host = Host(exec);
    NESTED.with(|n| n.set(true));
    crate::cpu::wall_mode(true);
    let start = crate::clock::ticks::now();
    let mut next = Some(cell);
    let mut slices = 0;
    while let Some(cell) = next.take() {
        exec.host_polls.fetch_add(1, Ordering::Relaxed);
        worker::run_slice(exec, &cell, None);
        slices += 1;
        let Some(again) = HANDOFF.with(|h| h.borrow_mut().take()) else {
            break;
        };
        let spent = crate::clock::ticks::ns_since(start);
        if slices >= HOST_SLICES
            || spent >= HOST_BUDGET.as_nanos() as u64
            || exec.looking.load(Ordering::Acquire) == 0
        {
            exec.enqueue(&again);
            break;
        }
        if let Start::Run = again.shared.state.start() {
            next = Some(again);
        }
    }
}

/// Most slices a host hand-off runs on the caller's thread.
pub const HOST_SLICES: u32 = 4;

/// Time after which a host hand-off leaves what is still runnable to the
/// workers.
pub const HOST_BUDGET: Duration = Duration::from_micros(100);

//! Spare workers: what keeps a worker stuck in a blocking host call from
//! stalling the tasks behind it.
//!
//! A task's slice ends at its epoch deadline, so a worker's poll that
//! lasts far longer than a slice is inside a host call that blocks the
//! thread: a file read on a FIFO or a device node someone placed in a
//! preopened directory (a task's file calls run on its worker, see
//! `runtime::disks`), a slow disk. The timer looks at every worker each
//! tick. While more workers than there are spares have been inside one
//! poll for [`STUCK`] (or four slices, if longer: see [`stuck_ticks`]) or
//! longer and tasks wait in the run queue, it starts
//! a spare thread, up to [`MAX_SPARES`]; a spare runs queued tasks as a
//! worker does and ends once the stuck workers are fewer than the spares,
//! or after it has found the queue empty for [`SPARE_IDLE`] (Go's runtime
//! hands a processor to another thread around a blocking system call the
//! same way).
//!
//! So at most the one task a stuck worker last woke into its hand-off
//! slot waits for the blocking call; every other task goes on as long as
//! fewer than [`MAX_SPARES`] workers are stuck at once. The blocked task
//! itself ends, if killed, when its call returns.

use super::{worker, Shared, HANDOFF, HANDOFF_LIMIT};
use crate::task::state::Start;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a worker stays inside one poll before it counts as stuck,
/// at least (ticks).
pub const STUCK: u64 = 20;

/// The ticks after which a worker inside one poll counts as stuck, for
/// slices of `slice`: [`STUCK`], or four slices if that is longer.
pub fn stuck_ticks(slice: Duration) -> u64 {
    let slice = (slice.as_nanos() / super::TICK.as_nanos()).max(1) as u64;
    STUCK.max(slice.saturating_mul(4))
}
/// The most spare threads at once.
pub const MAX_SPARES: usize = 64;
/// How long a spare waits for work before it ends.
const SPARE_IDLE: Duration = Duration::from_millis(20);

thread_local! {
    /// This thread's place in [`Slots`], if it is a worker or a spare.
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// One word per worker and spare: the tick its current poll began at
/// (0: none), and whether the place is taken.
pub(super) struct Slots {
    began: Box<[AtomicU64]>,
    taken: Box<[AtomicBool]>,
    /// Spares running.
    spares: AtomicUsize,
    /// Workers and spares stuck at the last tick.
    stuck: AtomicUsize,
    /// Ticks inside one poll that make a worker stuck.
    after: u64,
}

impl Slots {
    /// Places for `workers` workers (the first ones, taken) and the
    /// spares; a worker is stuck after `after` ticks in one poll.
    pub(super) fn new(workers: usize, after: u64) -> Slots {
        let n = workers + MAX_SPARES;
        Slots {
            began: (0..n).map(|_| AtomicU64::new(0)).collect(),
            taken: (0..n).map(|i| AtomicBool::new(i < workers)).collect(),
            spares: AtomicUsize::new(0),
            stuck: AtomicUsize::new(0),
            after,
        }
    }

    /// Spares running now.
    pub(super) fn spares(&self) -> usize {
        self.spares.load(Ordering::Relaxed)
    }
}

/// Makes this thread the worker in place `slot`.
pub(super) fn enter(slot: usize) {
    SLOT.with(|s| s.set(Some(slot)));
}

/// Runs `slice` as this worker's poll, seen by the timer while it lasts.
pub(super) fn timed(exec: &Shared, slice: impl FnOnce()) {
    let slot = SLOT.with(Cell::get);
    if let Some(i) = slot {
        exec.slots.began[i].store(exec.clock.now().max(1), Ordering::Relaxed);
    }
    slice();
    if let Some(i) = slot {
        exec.slots.began[i].store(0, Ordering::Relaxed);
    }
}

/// The timer's look at the workers, each tick: counts the stuck ones and
/// starts a spare if one is wanted.
pub(super) fn watch(exec: &Arc<Shared>) {
    let now = exec.clock.now();
    let stuck = exec
        .slots
        .began
        .iter()
        .map(|b| b.load(Ordering::Relaxed))
        .filter(|&b| b != 0 && now.saturating_sub(b) >= exec.slots.after)
        .count();
    exec.slots.stuck.store(stuck, Ordering::Relaxed);
    let spares = exec.slots.spares();
    if stuck > spares && spares < MAX_SPARES && exec.lock().policy.len() > 0 {
        start(exec);
    }
}

/// Starts a spare in a free place, if a thread can be had.
fn start(exec: &Arc<Shared>) {
    let Some(slot) = exec.slots.taken.iter().position(|t| {
        t.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }) else {
        return;
    };
    exec.slots.spares.fetch_add(1, Ordering::AcqRel);
    let s = exec.clone();
    let spawned = std::thread::Builder::new()
        .name("warden-spare".into())
        .spawn(move || run(&s, slot));
    if spawned.is_err() {
        leave(exec, slot);
    }
}

/// A spare's life: queued tasks, one slice each, while it is wanted.
fn run(exec: &Arc<Shared>, slot: usize) {
    let _tokio = exec.tokio.enter();
    enter(slot);
    let mut handoffs = 0u32;
    loop {
        let handed = HANDOFF.with(|h| h.borrow_mut().take());
        let next = match handed {
            Some(cell) if handoffs < HANDOFF_LIMIT => {
                handoffs += 1;
                Some(cell)
            }
            other => {
                handoffs = 0;
                if let Some(bumped) = other {
                    exec.enqueue(&bumped);
                }
                wanted(exec).then(|| next_queued(exec)).flatten()
            }
        };
        let Some(cell) = next else { break };
        if let Start::Run = cell.shared.state.start() {
            timed(exec, || worker::run_slice(exec, &cell, None));
        }
    }
    crate::cpu::settle();
    worker::charge_policy(exec);
    leave(exec, slot);
}

/// Whether spares are still wanted: as many workers stuck as spares.
fn wanted(exec: &Shared) -> bool {
    exec.slots.stuck.load(Ordering::Relaxed) >= exec.slots.spares()
}

/// A queued task, waiting up to [`SPARE_IDLE`] for one.
fn next_queued(exec: &Shared) -> Option<Arc<super::TaskCell>> {
    let mut q = exec.lock();
    if let Some(cell) = q.pop(crate::clock::now()) {
        return Some(cell);
    }
    if q.shutdown {
        return None;
    }
    q.idle += 1;
    q = exec
        .ready
        .wait_timeout(q, SPARE_IDLE)
        .unwrap_or_else(|e| e.into_inner())
        .0;
    q.idle -= 1;
    q.pop(crate::clock::now())
}

/// Gives a spare's place back.
fn leave(exec: &Shared, slot: usize) {
    exec.slots.began[slot].store(0, Ordering::Relaxed);
    exec.slots.spares.fetch_sub(1, Ordering::AcqRel);
    exec.slots.taken[slot].store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_running_out_a_long_slice_is_not_taken_for_a_stuck_worker() {
        assert_eq!(stuck_ticks(Duration::from_millis(4)), STUCK);
        assert_eq!(stuck_ticks(Duration::ZERO), STUCK);
        assert_eq!(stuck_ticks(Duration::from_millis(50)), 200);
    }
}

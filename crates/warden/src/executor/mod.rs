//! Warden's executor: runs task futures on N worker threads, a time slice
//! at a time, in the order a [`RunQueue`] policy decides.
//!
//! Each task is a `TaskCell`: its future and its shared state, whose
//! lifecycle word ([`crate::task::state`]) decides without locks who owns
//! the future at any moment — a worker while it polls it, its wakers while
//! it is blocked, whoever finished it once it is done — so a task is never
//! in the run queue twice, never polled by two workers, and finished once.
//!
//! A task woken by the task running on a worker (a client's call waking
//! its server, a reply waking the client) goes to that worker's hand-off
//! slot instead of the run queue: the worker runs it as soon as the
//! current poll returns, with no queue round trip and no other thread
//! woken. A worker takes at most [`HANDOFF_LIMIT`] hand-offs in a row
//! before it turns to the run queue again, so a chatty pair of tasks
//! cannot starve the rest.
//!
//! A call goes one step further (direct hand-off, [`hand_off`]): when it
//! finds its server waiting, the worker claims the server and runs its
//! slice at once, nested in the client's poll, with no slot or queue in
//! between. A server waiting in `recv` then answers before the client's
//! poll returns, and the client is never suspended or woken. Both tasks'
//! time still falls within the client's slice, which bounds the pair as a
//! whole.
//!
//! A thread that is no worker can do the same for a call it makes (host
//! hand-off, [`host_hand_off`]): the web server's thread giving a request
//! to a servlet waiting in `recv` runs the servlet's slice itself, if a
//! worker is idle (so the slice takes no worker's turn from anyone), and
//! has its answer without waking a worker or being woken by one.
//!
//! A timer thread advances a tick counter and the engine's epoch every
//! [`TICK`]; tasks compare ticks against the start of their slice. CPU
//! time is measured by each worker's `cpu` meter. The timer also starts
//! spare threads for workers stuck in a blocking host call ([`spare`]).
//!
//! # Locks
//!
//! Locks nest only in this order: a task's future lock (held by the
//! worker polling it) → another task's future lock (taken only to finish a
//! task that is idle or queued, never one that runs, or to poll a task
//! nested in a direct hand-off, which the worker owns by its state word:
//! nobody else takes that lock before the word says the task is done) →
//! the queue lock. A nested poll takes no third future lock to poll: hand-
//! offs do not nest.
//! Nothing holding the queue lock takes a future lock, wakes a task or
//! calls the finish callback, which runs with no queue lock held.

mod handoff;
mod harness;
mod idle;
mod queue;
mod spare;
mod spawn;
mod waker;
mod worker;

pub(crate) use handoff::{hand_off, host_hand_off};
use harness::kill;
pub use idle::{IdleSpin, IDLE_SPIN};
pub use spare::stuck_ticks;

use crate::task::{TaskId, TaskShared, TaskStatus};
use crate::trim::HeapTrim;
use queue::Queue;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Period of the epoch timer: the resolution of slices, kills and CPU limits.
pub const TICK: Duration = Duration::from_millis(1);

/// Consecutive hand-offs a worker takes before it serves the run queue.
pub const HANDOFF_LIMIT: u32 = 64;

thread_local! {
    /// When this worker's last poll ended, in [`crate::clock::ticks`] counts (0:
    /// it has idled since).
    static LAST_POLL_END: Cell<u64> = const { Cell::new(0) };
    /// The executor whose worker this thread is, while it polls a task.
    static POLLING: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
    /// This worker's hand-off slot.
    static HANDOFF: RefCell<Option<Arc<TaskCell>>> = const { RefCell::new(None) };
    /// Finishes queued while this thread runs the finish callback (see
    /// `Shared::complete`); `None` when it runs none.
    static FINISHING: RefCell<Option<FinishQueue>> = const { RefCell::new(None) };
    /// Whether this worker is running a slice handed off inside another
    /// task's poll (see [`hand_off`]).
    static NESTED: Cell<bool> = const { Cell::new(false) };
}

type FinishQueue = std::collections::VecDeque<(Arc<TaskShared>, TaskStatus)>;

/// The tick count of the executor whose worker is polling a task on this
/// thread, for that task's deadline callback; `None` outside a poll. The
/// callback reads it here rather than through a reference of its own, so
/// that spawning a task and ending it write no count shared by all tasks.
pub(crate) fn ticks_now() -> Option<u64> {
    let exec = POLLING.with(Cell::get);
    // SAFETY: POLLING holds an executor's address only while a worker of
    // it, holding a reference to it, polls a task on this thread (set just
    // before the poll and cleared, or restored after a nested one, just
    // after), so the executor is alive.
    (!exec.is_null()).then(|| unsafe { (*exec).clock.now() })
}

/// A task's future: it owns the task's store and resolves to how it ended.
pub type TaskFuture = Pin<Box<dyn Future<Output = TaskStatus> + Send>>;

/// Called once per task, on the thread that finished it, after its future
/// (and so its store) has been dropped.
pub type FinishFn = dyn Fn(&Arc<TaskShared>, TaskStatus) + Send + Sync;

/// The executor's tick counter, advanced by its timer thread; deadline
/// callbacks read it through [`ticks_now`].
#[derive(Debug, Default)]
pub struct Clock {
    ticks: AtomicU64,
}

impl Clock {
    /// Ticks since the executor started.
    pub fn now(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }
}

struct TaskCell {
    shared: Arc<TaskShared>,
    future: Mutex<Option<TaskFuture>>,
    exec: Arc<Shared>,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    clock: Clock,
    finish: Box<FinishFn>,
    tokio: tokio::runtime::Handle,
    stop_timer: AtomicBool,
    /// Advances the engine's epoch (the timer's work each tick): called
    /// at once for a kill, so a running task meets it at its next epoch
    /// check rather than the next tick.
    on_tick: Arc<dyn Fn() + Send + Sync>,
    /// Servers stranded under their own keys (see `queue`'s protocol).
    stranded: Arc<AtomicUsize>,
    /// Bumped (under the queue lock) by every push into the run queue, so
    /// that an idle worker can watch for work without the lock.
    pushes: AtomicU64,
    /// Workers that found the run queue empty and have not taken a task
    /// since (spinning or asleep): see [`host_hand_off`].
    looking: AtomicUsize,
    /// Completed slices (polls), for statistics.
    polls: AtomicU64,
    /// Of those, slices a host thread ran (see [`host_hand_off`]).
    host_polls: AtomicU64,
    /// Whether the run queue wants CPU charges after each poll.
    charges: AtomicBool,
    /// Whether the run queue may hold runnable tasks back (see
    /// [`RunQueue::throttles`]): then there is no host hand-off.
    throttles: AtomicBool,
    /// Back-to-back polls on a worker, and the time between them (the
    /// executor's own cost of switching from one task to the next).
    switches: AtomicU64,
    switch_ns: AtomicU64,
    /// How idle workers look for work before they sleep.
    spin: Arc<IdleSpin>,
    /// What idle workers do with free heap when asked.
    trim: Arc<HeapTrim>,
    /// Where the timer sees each worker's current poll, and the spares
    /// that stand in for stuck workers.
    slots: spare::Slots,
}

/// The executor's threads: how many workers, and how they idle.
#[derive(Debug, Clone)]
pub struct Threads {
    /// Worker threads (at least one is started).
    pub workers: usize,
    /// How long an idle worker looks for work awake before it sleeps.
    pub idle_spin: Arc<IdleSpin>,
    /// How workers hand free heap back to the system when a mass death
    /// asks them to.
    pub heap_trim: Arc<HeapTrim>,
    /// Ticks a worker stays inside one poll before it counts as stuck in
    /// a host call (see [`spare`]): at least [`spare::STUCK`], and well
    /// beyond the longest slice, so that no guest running out its slice
    /// is taken for one.
    pub stuck_ticks: u64,
}

#[cfg(test)]
impl Threads {
    /// `workers` threads, with the default idle spin and no heap trim
    /// of the program's allocator.
    pub fn new(workers: usize) -> Threads {
        Threads {
            workers,
            idle_spin: Arc::default(),
            heap_trim: Arc::default(),
            stuck_ticks: spare::STUCK,
        }
    }
}

/// Counters describing the executor's current load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// Tasks not yet finished.
    pub live: usize,
    /// Tasks waiting in the run queue.
    pub queued: usize,
    /// Polls performed so far.
    pub polls: u64,
    /// Of those, slices run by a host thread (`host_hand_off`).
    pub host_polls: u64,
    /// Polls that followed another on the same worker without idling.
    pub switches: u64,
    /// Total time between those polls, ns.
    pub switch_ns: u64,
    /// Spare threads standing in for workers stuck in a host call.
    pub spares: usize,
}

/// The executor: worker threads plus the epoch timer.
pub struct Executor {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
}

impl Executor {
    /// Requests that a task be killed. A queued or blocked task is finished
    /// before this returns; a running one at its next epoch check, which
    /// the kill brings forward by advancing the epoch at once. Returns
    /// false if the task is unknown or already finished.
    pub fn kill(&self, id: TaskId, reason: &str) -> bool {
        let cell = match self.shared.lock().cells.get(&id.0) {
            Some(c) => c.clone(),
            None => return false,
        };
        kill(&cell, reason);
        true
    }

    /// Suspends a task: it is not run again until resumed (a running task
    /// stops at its next epoch tick). False if the task is unknown.
    pub fn suspend(&self, id: TaskId) -> bool {
        match self.shared.lock().cells.get(&id.0) {
            Some(c) => c.shared.state.suspend(),
            None => false,
        }
    }

    /// Resumes a suspended task. False if the task is unknown.
    pub fn resume(&self, id: TaskId) -> bool {
        let cell = match self.shared.lock().cells.get(&id.0) {
            Some(c) => c.clone(),
            None => return false,
        };
        if cell.shared.state.resume() {
            self.shared.enqueue(&cell);
        }
        true
    }

    /// A live task's scheduling state: "running", "runnable", "blocked"
    /// or "suspended".
    pub fn task_state(&self, id: TaskId) -> Option<&'static str> {
        let q = self.shared.lock();
        let cell = q.cells.get(&id.0)?;
        let s = cell.shared.state.load();
        Some(if s.is_done() {
            "ending"
        } else if s.is_suspended() {
            "suspended"
        } else if s.is_running() {
            "running"
        } else if s.is_queued() {
            "runnable"
        } else {
            "blocked"
        })
    }

    /// Current load.
    pub fn stats(&self) -> ExecutorStats {
        let q = self.shared.lock();
        ExecutorStats {
            live: q.cells.len(),
            queued: q.policy.len(),
            polls: self.shared.polls.load(Ordering::Relaxed),
            host_polls: self.shared.host_polls.load(Ordering::Relaxed),
            switches: self.shared.switches.load(Ordering::Relaxed),
            switch_ns: self.shared.switch_ns.load(Ordering::Relaxed),
            spares: self.shared.slots.spares(),
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enqueue(&self, cell: &TaskCell) {
        let mut q = self.lock();
        q.push(&cell.shared);
        self.pushes.fetch_add(1, Ordering::Release);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;

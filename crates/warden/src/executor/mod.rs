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
//! time is measured by each worker's `cpu` meter.
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

mod queue;
mod worker;

use crate::sched::{RunQueue, TaskSched};
use crate::task::state::{Kill, Start};
use crate::task::{TaskId, TaskShared, TaskStatus};
use queue::Queue;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{RawWaker, RawWakerVTable, Wake, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// Period of the epoch timer: the resolution of slices, kills and CPU limits.
pub const TICK: Duration = Duration::from_millis(1);

/// Consecutive hand-offs a worker takes before it serves the run queue.
pub const HANDOFF_LIMIT: u32 = 64;

/// How long a thread about to sleep for want of work (an idle worker, a
/// host thread waiting for a report) first looks for it awake. A futex
/// sleep and wake-up cost tens of microseconds on some machines (virtual
/// ones above all), more than a whole task's spawn; work that comes within
/// this window is taken without either.
pub const IDLE_SPIN: Duration = Duration::from_micros(50);

/// The idle spin in nanoseconds, [`IDLE_SPIN`] unless set otherwise.
static SPIN_NS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(IDLE_SPIN.as_nanos() as u64);

/// Sets how long threads of every runtime in the process look for work
/// awake before they sleep ([`IDLE_SPIN`] by default; zero: they go
/// straight to sleep, as a thread blocking on a condition variable
/// does). For comparisons with peers that block at once.
pub fn set_idle_spin(spin: Duration) {
    let ns = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
    SPIN_NS.store(ns, std::sync::atomic::Ordering::Relaxed);
}

/// Polls `done` until it holds or the idle spin ([`set_idle_spin`]) has
/// passed; whether it held. Between polls the thread yields, so that on a
/// machine with more runnable threads than cores the spinning takes no
/// core from them.
pub(crate) fn spin_until(mut done: impl FnMut() -> bool) -> bool {
    let spin = Duration::from_nanos(SPIN_NS.load(std::sync::atomic::Ordering::Relaxed));
    if spin.is_zero() {
        return done();
    }
    let start = std::time::Instant::now();
    loop {
        for _ in 0..32 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= spin {
            return false;
        }
        std::thread::yield_now();
    }
}

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
    stranded: Arc<std::sync::atomic::AtomicUsize>,
    /// Bumped (under the queue lock) by every push into the run queue, so
    /// that an idle worker can watch for work without the lock.
    pushes: AtomicU64,
    /// Workers that found the run queue empty and have not taken a task
    /// since (spinning or asleep): see [`host_hand_off`].
    looking: std::sync::atomic::AtomicUsize,
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
}

/// The executor: worker threads plus the epoch timer.
pub struct Executor {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
}

impl Executor {
    /// Starts `workers` worker threads and the timer, which calls `on_tick`
    /// (advancing the engine's epoch) every [`TICK`], as does a kill of a
    /// running task. Worker threads enter `tokio` so that host calls can
    /// use its timers and blocking pool.
    pub fn start(
        workers: usize,
        policy: Box<dyn RunQueue>,
        tokio: tokio::runtime::Handle,
        on_tick: Arc<dyn Fn() + Send + Sync>,
        finish: Box<FinishFn>,
    ) -> std::io::Result<Executor> {
        // The CPU meter times polls by it (once per process, here rather
        // than in the first poll).
        crate::clock::ticks::calibrate();
        let stranded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::new(policy, stranded.clone())),
            stranded,
            ready: Condvar::new(),
            clock: Clock::default(),
            finish,
            tokio,
            stop_timer: AtomicBool::new(false),
            on_tick,
            pushes: AtomicU64::new(0),
            looking: std::sync::atomic::AtomicUsize::new(0),
            polls: AtomicU64::new(0),
            host_polls: AtomicU64::new(0),
            charges: AtomicBool::new(true),
            throttles: AtomicBool::new(true),
            switches: AtomicU64::new(0),
            switch_ns: AtomicU64::new(0),
        });
        let mut handles = Vec::new();
        for i in 0..workers.max(1) {
            let s = shared.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("warden-worker-{i}"))
                    .spawn(move || worker::run(&s))?,
            );
        }
        let s = shared.clone();
        let timer = std::thread::Builder::new()
            .name("warden-epoch".into())
            .spawn(move || {
                while !s.stop_timer.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    s.clock.ticks.fetch_add(1, Ordering::Relaxed);
                    (s.on_tick)();
                }
            })?;
        Ok(Executor {
            shared,
            workers: handles,
            timer: Some(timer),
        })
    }

    /// Queues a new task, scheduled as `sched` says.
    pub fn spawn(&self, shared: Arc<TaskShared>, future: TaskFuture, sched: &TaskSched) {
        self.admit(shared, future, sched, false);
    }

    /// [`Executor::spawn`], except that a task spawned by a thread that is
    /// no worker, while some worker has no task to run, starts at once on
    /// the spawning thread: the thread takes it as a worker takes a task
    /// from the queue (lifecycle rule 3) and runs its slices as a host
    /// hand-off does ([`host_hand_off`]: at most [`HOST_SLICES`] of them
    /// and [`HOST_BUDGET`] in all; what is still runnable then goes to the
    /// queue). Returns once the task has ended, blocked or been queued.
    ///
    /// The condition is a host hand-off's, for the same reason: the idle
    /// worker would have taken the task at once, so running it here takes
    /// no worker's turn from another task. It saves the task two thread
    /// switches (to the worker, and back to a thread waiting for its end)
    /// and the caches its spawn has just filled.
    pub fn spawn_here(&self, shared: Arc<TaskShared>, future: TaskFuture, sched: &TaskSched) {
        let hold = host_may_run(&self.shared);
        if let Some(cell) = self.admit(shared, future, sched, hold) {
            if let Start::Run = cell.shared.state.start() {
                run_on_host(&self.shared, cell);
            }
        }
    }

    /// Enters a new task in the run queue's table and queues it, unless
    /// `hold` (and its policy may not hold tasks back): then the task,
    /// `QUEUED` but in no queue, is returned for the caller to start.
    fn admit(
        &self,
        shared: Arc<TaskShared>,
        future: TaskFuture,
        sched: &TaskSched,
        hold: bool,
    ) -> Option<Arc<TaskCell>> {
        let id = shared.id.0;
        debug_assert!(shared.state.load().is_queued(), "a new task starts queued");
        let cell = Arc::new(TaskCell {
            shared,
            future: Mutex::new(Some(future)),
            exec: self.shared.clone(),
        });
        let mut q = self.shared.lock();
        q.policy.add(id, sched);
        let charges = q.policy.needs_charges();
        self.shared.charges.store(charges, Ordering::Relaxed);
        let throttles = q.policy.throttles();
        self.shared.throttles.store(throttles, Ordering::Relaxed);
        if hold && !throttles {
            q.cells.insert(id, cell.clone());
            return Some(cell);
        }
        q.push(&cell.shared);
        q.cells.insert(id, cell);
        self.shared.pushes.fetch_add(1, Ordering::Release);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.shared.ready.notify_one();
        }
        None
    }

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
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let ids: Vec<u64> = self.shared.lock().cells.keys().copied().collect();
        for id in ids {
            self.kill(TaskId(id), "runtime shut down");
        }
        self.shared.lock().shutdown = true;
        self.shared.ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.shared.stop_timer.store(true, Ordering::Relaxed);
        if let Some(t) = self.timer.take() {
            let _ = t.join();
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

    /// Makes a woken task runnable: into this worker's hand-off slot if
    /// the waker runs inside one of our polls, else into the run queue.
    fn make_runnable(self: &Arc<Self>, cell: &Arc<TaskCell>) {
        if POLLING.with(|p| p.get()) == Arc::as_ptr(self) {
            let bumped = HANDOFF.with(|h| h.borrow_mut().replace(cell.clone()));
            if let Some(old) = bumped {
                self.enqueue(&old);
            }
        } else {
            self.enqueue(cell);
        }
    }

    /// Drops the task's future, forgets the cell and reports the outcome.
    /// Called by whoever moved the task's word to done.
    ///
    /// Finishing a task may end others (its children), whose finishing
    /// ends theirs, and so on. So that no host stack grows with a depth a
    /// guest chooses, a finish that starts inside another on the same
    /// thread is only queued, and the outermost one works through the
    /// queue.
    fn complete(&self, cell: &TaskCell, future: Option<TaskFuture>, status: TaskStatus) {
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
fn waker_ref(cell: &Arc<TaskCell>) -> std::mem::ManuallyDrop<Waker> {
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
static VTABLE: RawWakerVTable = RawWakerVTable::new(
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
fn host_may_run(exec: &Shared) -> bool {
    POLLING.with(Cell::get).is_null()
        && exec.looking.load(Ordering::Acquire) > 0
        && !exec.throttles.load(Ordering::Relaxed)
}

/// Runs `cell`, which this thread (no worker) has taken (`RUNNING`), and
/// what its slice leaves in the hand-off slot, as a worker would: see
/// [`host_hand_off`].
fn run_on_host(exec: &Arc<Shared>, cell: Arc<TaskCell>) {
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

/// Requests a task's kill; if it was idle or queued, finishes it now.
fn kill(cell: &Arc<TaskCell>, reason: &str) {
    match cell.shared.request_kill(reason) {
        Kill::Finish { queued } => finish_killed(cell, queued),
        // Its deadline callback sees the kill at its next epoch check.
        Kill::Running => (cell.exec.on_tick)(),
        Kill::AlreadyDone => {}
    }
}

/// Finishes a task whose word this thread moved to done on a kill.
fn finish_killed(cell: &Arc<TaskCell>, queued: bool) {
    if queued {
        cell.exec.lock().remove(cell.shared.id.0);
    }
    let future = cell.future.lock().unwrap_or_else(|e| e.into_inner()).take();
    let reason = cell.shared.kill_reason();
    cell.exec.complete(cell, future, TaskStatus::Killed(reason));
}

/// Kills the live task `id`, if there is one.
fn kill_id(exec: &Shared, id: TaskId, reason: &str) {
    let cell = exec.lock().cells.get(&id.0).cloned();
    if let Some(cell) = cell {
        kill(&cell, reason);
    }
}

/// Kills every task of a group that used up its CPU quota.
fn kill_group(exec: &Arc<Shared>, group: &Arc<crate::task::GroupShared>) {
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

#[cfg(test)]
mod tests;

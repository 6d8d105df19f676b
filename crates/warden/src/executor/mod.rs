//! Warden's executor: runs task futures on N worker threads, a time slice
//! at a time, in the order a [`RunQueue`] policy decides.
//!
//! Each task is a `TaskCell`: its future, its shared accounting state and
//! one atomic scheduling state. The state machine decides, without locks,
//! who owns the future at any moment:
//!
//! ```text
//!            wake              pop (worker)
//!   IDLE ─────────────▶ QUEUED ────────────▶ RUNNING ──poll Ready──▶ DONE
//!    ▲                    ▲                   │  │
//!    │   poll Pending     │  poll Pending,    │  │ wake while polled
//!    └────────────────────┼───────────────────┘  ▼
//!                         └────────────────── NOTIFIED
//!   kill: IDLE or QUEUED ──▶ DONE (by the killer; RUNNING is left to the worker)
//! ```
//!
//! A wake that arrives while the task is being polled (which is how a task
//! yields at the end of its slice) marks it NOTIFIED and the worker requeues
//! it after the poll, so a task is never in the run queue twice and never
//! polled by two workers.
//!
//! A task woken by the task running on a worker (a client's call waking
//! its server, a reply waking the client) goes to that worker's hand-off
//! slot instead of the run queue: the worker runs it as soon as the
//! current poll returns, with no queue round trip and no other thread
//! woken. A worker takes at most [`HANDOFF_LIMIT`] hand-offs in a row
//! before it turns to the run queue again, so a chatty pair of tasks
//! cannot starve the rest.
//!
//! A timer thread advances a tick counter and the engine's epoch every
//! [`TICK`]; tasks compare ticks against the start of their slice. CPU
//! time is measured by each worker's `cpu` meter.

use crate::cpu;
use crate::sched::{RunQueue, TaskSched};
use crate::task::{TaskId, TaskShared, TaskStatus};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// Period of the epoch timer: the resolution of slices, kills and CPU limits.
pub const TICK: Duration = Duration::from_millis(1);

/// Consecutive hand-offs a worker takes before it serves the run queue.
pub const HANDOFF_LIMIT: u32 = 64;

thread_local! {
    /// When this worker's last poll ended (0: it has idled since).
    static LAST_POLL_END: Cell<u64> = const { Cell::new(0) };
    /// The executor whose worker this thread is, while it polls a task.
    static POLLING: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
    /// This worker's hand-off slot.
    static HANDOFF: RefCell<Option<Arc<TaskCell>>> = const { RefCell::new(None) };
}

/// A task's future: it owns the task's store and resolves to how it ended.
pub type TaskFuture = Pin<Box<dyn Future<Output = TaskStatus> + Send>>;

/// Called once per task, on the thread that finished it, after its future
/// (and so its store) has been dropped.
pub type FinishFn = dyn Fn(&Arc<TaskShared>, TaskStatus) + Send + Sync;

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// The global tick counter, shared with deadline callbacks.
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
    state: AtomicU8,
    future: Mutex<Option<TaskFuture>>,
    exec: Arc<Shared>,
}

struct Queue {
    policy: Box<dyn RunQueue>,
    cells: HashMap<u64, Arc<TaskCell>>,
    shutdown: bool,
    /// Workers waiting for work (only they need a notification).
    idle: usize,
    /// CPU inheritance: a blocked client's key, queued in the policy on
    /// behalf of the server it lends its context to (client → server).
    proxy: HashMap<u64, u64>,
    /// The reverse map (server → client).
    proxied: HashMap<u64, u64>,
}

impl Queue {
    /// Queues a runnable task: under the key of the blocked client that
    /// lends it its context, if any (CPU inheritance), else its own.
    fn push(&mut self, shared: &TaskShared) {
        let id = shared.id.0;
        // Someone queued under this task's key must move to its own key.
        if let Some(t) = self.proxy.remove(&id) {
            self.proxied.remove(&t);
            self.policy.remove(id);
            self.policy.push(t);
        }
        let donor = shared.donor.load(Ordering::Acquire);
        if donor != 0 && !self.proxy.contains_key(&donor) {
            let blocked = self
                .cells
                .get(&donor)
                .is_some_and(|c| c.state.load(Ordering::Acquire) == IDLE);
            if blocked {
                self.proxy.insert(donor, id);
                self.proxied.insert(id, donor);
                self.policy.push(donor);
                return;
            }
        }
        self.policy.push(id);
    }

    /// The next task to run and the key it was scheduled under.
    fn pop(&mut self, now: u64) -> Option<(Arc<TaskCell>, u64)> {
        loop {
            let key = self.policy.pop(now)?;
            let task = match self.proxy.remove(&key) {
                Some(t) => {
                    self.proxied.remove(&t);
                    t
                }
                None => key,
            };
            if let Some(c) = self.cells.get(&task) {
                return Some((c.clone(), key));
            }
        }
    }

    /// Dequeues a task (wherever it is queued); whether it was.
    fn remove(&mut self, task: u64) -> bool {
        match self.proxied.remove(&task) {
            Some(donor) => {
                self.proxy.remove(&donor);
                self.policy.remove(donor)
            }
            None => self.policy.remove(task),
        }
    }

    /// Forgets a finished task, handing anyone queued under its key back
    /// their own.
    fn forget(&mut self, task: u64) {
        if let Some(t) = self.proxy.remove(&task) {
            self.proxied.remove(&t);
            self.policy.remove(task);
            self.policy.push(t);
        }
        self.remove(task);
        self.policy.forget(task);
    }

    /// The key a running task's CPU is charged to, and whose account.
    fn account(&self, shared: &Arc<TaskShared>) -> (u64, Arc<TaskShared>) {
        let donor = shared.donor.load(Ordering::Acquire);
        match self.cells.get(&donor) {
            Some(c) if donor != 0 => (donor, c.shared.clone()),
            _ => (shared.id.0, shared.clone()),
        }
    }
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    clock: Arc<Clock>,
    finish: Box<FinishFn>,
    tokio: tokio::runtime::Handle,
    stop_timer: AtomicBool,
    /// Completed slices (polls), for statistics.
    polls: AtomicU64,
    /// Whether the run queue wants CPU charges after each poll.
    charges: AtomicBool,
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
    /// (advancing the engine's epoch) every [`TICK`]. Worker threads enter
    /// `tokio` so that host calls can use its timers and blocking pool.
    pub fn start(
        workers: usize,
        policy: Box<dyn RunQueue>,
        tokio: tokio::runtime::Handle,
        on_tick: Box<dyn Fn() + Send>,
        finish: Box<FinishFn>,
    ) -> std::io::Result<Executor> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                policy,
                cells: HashMap::new(),
                shutdown: false,
                idle: 0,
                proxy: HashMap::new(),
                proxied: HashMap::new(),
            }),
            ready: Condvar::new(),
            clock: Arc::new(Clock::default()),
            finish,
            tokio,
            stop_timer: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            charges: AtomicBool::new(true),
            switches: AtomicU64::new(0),
            switch_ns: AtomicU64::new(0),
        });
        let mut handles = Vec::new();
        for i in 0..workers.max(1) {
            let s = shared.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("warden-worker-{i}"))
                    .spawn(move || worker_loop(&s))?,
            );
        }
        let s = shared.clone();
        let timer = std::thread::Builder::new()
            .name("warden-epoch".into())
            .spawn(move || {
                while !s.stop_timer.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    s.clock.ticks.fetch_add(1, Ordering::Relaxed);
                    on_tick();
                }
            })?;
        Ok(Executor {
            shared,
            workers: handles,
            timer: Some(timer),
        })
    }

    /// The tick clock, for deadline callbacks.
    pub fn clock(&self) -> Arc<Clock> {
        self.shared.clock.clone()
    }

    /// Queues a new task, scheduled as `sched` says.
    pub fn spawn(&self, shared: Arc<TaskShared>, future: TaskFuture, sched: &TaskSched) {
        let id = shared.id.0;
        let cell = Arc::new(TaskCell {
            shared,
            state: AtomicU8::new(QUEUED),
            future: Mutex::new(Some(future)),
            exec: self.shared.clone(),
        });
        let mut q = self.shared.lock();
        q.policy.add(id, sched);
        let charges = q.policy.needs_charges();
        self.shared.charges.store(charges, Ordering::Relaxed);
        q.push(&cell.shared);
        q.cells.insert(id, cell);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.shared.ready.notify_one();
        }
    }

    /// Requests that a task be killed. A queued or blocked task is finished
    /// before this returns; a running one at its next epoch tick. Returns
    /// false if the task is unknown or already finished.
    pub fn kill(&self, id: TaskId, reason: &str) -> bool {
        let cell = match self.shared.lock().cells.get(&id.0) {
            Some(c) => c.clone(),
            None => return false,
        };
        cell.shared.request_kill(reason);
        try_reap(&cell);
        true
    }

    /// Suspends a task: it is not run again until resumed (a running task
    /// stops at its next epoch tick). False if the task is unknown.
    pub fn suspend(&self, id: TaskId) -> bool {
        match self.shared.lock().cells.get(&id.0) {
            Some(c) => {
                c.shared.suspended.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Resumes a suspended task. False if the task is unknown.
    pub fn resume(&self, id: TaskId) -> bool {
        let cell = match self.shared.lock().cells.get(&id.0) {
            Some(c) => c.clone(),
            None => return false,
        };
        cell.shared.suspended.store(false, Ordering::SeqCst);
        requeue_if_pending(&cell);
        true
    }

    /// A live task's scheduling state: "running", "runnable", "blocked"
    /// or "suspended".
    pub fn task_state(&self, id: TaskId) -> Option<&'static str> {
        let q = self.shared.lock();
        let cell = q.cells.get(&id.0)?;
        Some(match cell.state.load(Ordering::Acquire) {
            _ if cell.shared.suspended.load(Ordering::Relaxed) => "suspended",
            RUNNING | NOTIFIED => "running",
            QUEUED => "runnable",
            _ => "blocked",
        })
    }

    /// Changes a task's scheduling parameters.
    pub fn set_params(&self, id: TaskId, params: &crate::sched::Params) {
        self.shared.lock().policy.set_params(id.0, params);
    }

    /// Current load.
    pub fn stats(&self) -> ExecutorStats {
        let q = self.shared.lock();
        ExecutorStats {
            live: q.cells.len(),
            queued: q.policy.len(),
            polls: self.shared.polls.load(Ordering::Relaxed),
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
    fn complete(&self, cell: &TaskCell, future: Option<TaskFuture>, status: TaskStatus) {
        // Revoke what the task owns before its memory goes with the future.
        cell.shared.release_owned();
        {
            let _tokio = self.tokio.enter();
            drop(future);
        }
        let mut q = self.lock();
        q.cells.remove(&cell.shared.id.0);
        q.forget(cell.shared.id.0);
        drop(q);
        (self.finish)(&cell.shared, status);
    }
}

impl Wake for TaskCell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            let next = match s {
                IDLE => QUEUED,
                RUNNING => NOTIFIED,
                _ => return,
            };
            match self
                .state
                .compare_exchange(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => s = actual,
            }
        }
        if s == IDLE {
            self.exec.make_runnable(self);
        }
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
        cell.shared.request_kill(&reason);
        try_reap(&cell);
    }
}

/// Finishes a killed task if nobody is running it. Whoever moves the state
/// to DONE owns the future and finishes the task.
fn try_reap(cell: &Arc<TaskCell>) {
    let mut s = cell.state.load(Ordering::Acquire);
    loop {
        if s != IDLE && s != QUEUED {
            return; // running (the worker will see the flag) or done
        }
        match cell
            .state
            .compare_exchange(s, DONE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => break,
            Err(actual) => s = actual,
        }
    }
    if s == QUEUED {
        cell.exec.lock().remove(cell.shared.id.0);
    }
    let future = cell.future.lock().unwrap_or_else(|e| e.into_inner()).take();
    let reason = cell.shared.kill_reason().unwrap_or_else(|| "killed".into());
    cell.exec.complete(cell, future, TaskStatus::Killed(reason));
}

fn worker_loop(exec: &Arc<Shared>) {
    let _tokio = exec.tokio.enter();
    let mut handoffs = 0u32;
    loop {
        let next = HANDOFF.with(|h| h.borrow_mut().take());
        let cell = match next {
            Some(cell) if handoffs < HANDOFF_LIMIT => {
                handoffs += 1;
                cell
            }
            other => {
                handoffs = 0;
                if let Some(bumped) = other {
                    // Back of the run queue, behind whoever waits; this
                    // worker pops next, so no other needs waking.
                    exec.lock().push(&bumped.shared);
                }
                match next_queued(exec) {
                    Some(cell) => cell,
                    None => return,
                }
            }
        };
        if cell
            .state
            .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue; // killed while queued
        }
        if cell.shared.suspended.load(Ordering::SeqCst) {
            park(&cell);
            continue;
        }
        run_slice(exec, &cell);
    }
}

/// Sets a suspended task aside (runnable, but not run) until it resumes.
fn park(cell: &Arc<TaskCell>) {
    cell.shared.wake_pending.store(true, Ordering::SeqCst);
    cell.state.store(IDLE, Ordering::SeqCst);
    if !cell.shared.suspended.load(Ordering::SeqCst) {
        requeue_if_pending(cell); // resumed meanwhile
    }
    if cell.shared.kill_requested() {
        try_reap(cell);
    }
}

/// Queues a parked task whose pending wake-up has not been taken yet.
fn requeue_if_pending(cell: &Arc<TaskCell>) {
    if cell.shared.wake_pending.swap(false, Ordering::SeqCst)
        && cell
            .state
            .compare_exchange(IDLE, QUEUED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        cell.exec.enqueue(cell);
    }
}

/// The next task from the run queue, waiting for one; `None` at shutdown.
fn next_queued(exec: &Arc<Shared>) -> Option<Arc<TaskCell>> {
    let mut q = exec.lock();
    loop {
        if q.shutdown {
            return None;
        }
        if let Some((cell, _key)) = q.pop(cpu::now()) {
            return Some(cell);
        }
        // Idle: bring CPU figures up to date before sleeping.
        drop(q);
        LAST_POLL_END.with(|l| l.set(0));
        cpu::reconcile();
        q = exec.lock();
        if q.shutdown || !q.policy.is_empty() {
            continue;
        }
        q.idle += 1;
        q = match q.policy.next_release() {
            // Throttled tasks only: sleep until the first may run again.
            Some(at) => {
                let wait = Duration::from_nanos(at.saturating_sub(cpu::now()).max(1));
                exec.ready
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => exec.ready.wait(q).unwrap_or_else(|e| e.into_inner()),
        };
        q.idle -= 1;
    }
}

fn run_slice(exec: &Arc<Shared>, cell: &Arc<TaskCell>) {
    let shared = &cell.shared;
    let mut slot = cell.future.lock().unwrap_or_else(|e| e.into_inner());
    let Some(future) = slot.as_mut() else {
        return;
    };
    if shared.kill_requested() {
        let future = slot.take();
        drop(slot);
        cell.state.store(DONE, Ordering::Release);
        let reason = shared.kill_reason().unwrap_or_else(|| "killed".into());
        exec.complete(cell, future, TaskStatus::Killed(reason));
        return;
    }
    let waker = Waker::from(cell.clone());
    let mut cx = Context::from_waker(&waker);
    shared
        .slice_start_tick
        .store(exec.clock.now(), Ordering::Relaxed);
    // CPU inheritance: a server running for a blocked client is scheduled
    // and charged as that client.
    let (key, account) = if shared.donor.load(Ordering::Acquire) == 0 {
        (shared.id.0, shared.clone())
    } else {
        exec.lock().account(shared)
    };
    cpu::begin(&account);
    let last = LAST_POLL_END.with(|l| l.get());
    if last != 0 {
        exec.switches.fetch_add(1, Ordering::Relaxed);
        exec.switch_ns
            .fetch_add(cpu::now().saturating_sub(last), Ordering::Relaxed);
    }
    POLLING.with(|p| p.set(Arc::as_ptr(exec)));
    let result = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
    POLLING.with(|p| p.set(std::ptr::null()));
    let finished = !matches!(result, Ok(Poll::Pending));
    // A task with a CPU limit gets exact figures after each poll, so that
    // the limit is checked against real CPU time.
    let (wall, now) = cpu::end(finished || shared.limited || !shared.groups.is_empty());
    LAST_POLL_END.with(|l| l.set(now));
    exec.polls.fetch_add(1, Ordering::Relaxed);
    if exec.charges.load(Ordering::Relaxed) {
        exec.lock().policy.charge(key, wall, now);
    }
    if key != shared.id.0 {
        shared.served_ns.fetch_add(wall, Ordering::Relaxed);
    }
    if let Some(group) = shared.groups.iter().find(|g| g.over_quota().is_some()) {
        kill_group(exec, group);
    }
    let status = match result {
        Ok(Poll::Pending) => {
            drop(slot);
            if let Some((task, reason)) = shared.cpu_breach() {
                if task.id == shared.id {
                    if !shared.cpu_limit_notify() {
                        shared.request_kill(&reason);
                    }
                } else {
                    // An ancestor's budget ran out: it dies, and with it
                    // its subtree (this task included).
                    let ancestor = exec.lock().cells.get(&task.id.0).cloned();
                    if let Some(a) = ancestor {
                        a.shared.request_kill(&reason);
                        try_reap(&a);
                    }
                }
            }
            // Hand the task back: to the run queue if it was woken while
            // running (a yield), to its waker otherwise; set it aside if it
            // was suspended meanwhile.
            if cell
                .state
                .compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                if shared.suspended.load(Ordering::SeqCst) {
                    park(cell);
                } else {
                    cell.state.store(QUEUED, Ordering::Release);
                    exec.enqueue(cell);
                }
            }
            if shared.kill_requested() {
                try_reap(cell);
            }
            return;
        }
        Ok(Poll::Ready(status)) => status,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            TaskStatus::Trapped(format!("internal error while running task: {msg}"))
        }
    };
    let future = slot.take();
    drop(slot);
    cell.state.store(DONE, Ordering::Release);
    exec.complete(cell, future, status);
}

#[cfg(test)]
mod tests;

//! Starting the executor's threads, admitting tasks, and shutting down.

use super::handoff::{host_may_run, run_on_host};
use super::queue::Queue;
use super::{worker, Clock, Executor, FinishFn, Shared, TaskCell, TaskFuture, Threads, TICK};
use crate::sched::{RunQueue, TaskSched};
use crate::task::state::Start;
use crate::task::{TaskId, TaskShared};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

impl Executor {
    /// Starts the worker threads `threads` says and the timer, which calls
    /// `on_tick` (advancing the engine's epoch) every [`TICK`], as does a
    /// kill of a running task. Worker threads enter `tokio` so that host
    /// calls can use its timers and blocking pool.
    pub fn start(
        threads: Threads,
        policy: Box<dyn RunQueue>,
        tokio: tokio::runtime::Handle,
        on_tick: Arc<dyn Fn() + Send + Sync>,
        finish: Box<FinishFn>,
    ) -> std::io::Result<Executor> {
        // The CPU meter times polls by it (once per process, here rather
        // than in the first poll).
        crate::clock::ticks::calibrate();
        let stranded = Arc::new(AtomicUsize::new(0));
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
            looking: AtomicUsize::new(0),
            polls: AtomicU64::new(0),
            host_polls: AtomicU64::new(0),
            charges: AtomicBool::new(true),
            throttles: AtomicBool::new(true),
            switches: AtomicU64::new(0),
            switch_ns: AtomicU64::new(0),
            spin: threads.idle_spin,
            trim: threads.heap_trim,
            slots: super::spare::Slots::new(threads.workers.max(1), threads.stuck_ticks),
        });
        let mut handles = Vec::new();
        for i in 0..threads.workers.max(1) {
            let s = shared.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("warden-worker-{i}"))
                    .spawn(move || worker::run(&s, i))?,
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
                    super::spare::watch(&s);
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
    /// hand-off does ([`super::host_hand_off`]: at most [`super::handoff::HOST_SLICES`] of them
    /// and [`super::handoff::HOST_BUDGET`] in all; what is still runnable then goes to the
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

    /// Runs task `id` on this thread, which is about to wait for its end,
    /// if it is the only task queued and some worker has no task to run
    /// (the condition of [`Executor::spawn_here`]): it is then the task
    /// that worker would take next, so taking it here takes nobody's turn.
    /// Its slices run as a host hand-off's do, and what is still runnable
    /// after them goes back to the queue. Returns whether this thread took
    /// it.
    ///
    /// A task spawned and then waited for at once ends, this way, with no
    /// thread switch on its way (to the worker, and back to the waiter).
    pub fn run_waited(&self, id: TaskId) -> bool {
        if !host_may_run(&self.shared) {
            return false;
        }
        let cell = {
            let mut q = self.shared.lock();
            // Only it queued: a proxied or stranded key means a call in
            // flight, whose order the queue keeps.
            if q.policy.len() != 1 || !q.is_plain(id.0) || !q.remove(id.0) {
                return false;
            }
            match q.cells.get(&id.0) {
                Some(c) => c.clone(),
                None => return false,
            }
        };
        // Suspended or finished while queued: nothing to run, as for a
        // worker.
        if let Start::Run = cell.shared.state.start() {
            run_on_host(&self.shared, cell);
        }
        true
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

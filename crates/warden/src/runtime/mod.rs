//! The runtime: one engine, its compiled modules, the task table and the
//! executor. This is the kernel API the CLI, the control API and guests'
//! own task calls drive.
//!
//! # Locks
//!
//! Where locks nest, they are taken in this order and never the other way:
//! the module map → nothing; the task table (`Tasks::table`) → a task's
//! exit and event locks (waking a parent) → the executor's queue lock (a
//! woken task being queued) and the report sink's own lock; the task
//! table → a supervisor's channel (a supervised task's report is handed
//! on under it, see `supervised`); the task table → the restart counts
//! (operators' views). The executor never calls back into the runtime
//! while holding its queue lock; it finishes tasks with no lock held.
//! The name service's lock → a service's state → a call slot (a live
//! upgrade retires a service while registering its successor).

mod binds;
mod cluster;
mod disks;
mod heap;
pub mod machine;
mod modules;
mod nested;
mod net;
mod passive;
mod reclaim;
mod route_stats;
mod run;
mod setup;
mod spawn;
mod store;
mod supervised;
mod tasks;
mod views;

pub use route_stats::{RouteStats, BUCKETS};

pub use supervised::{Operation, Operator, Restarts, RESTART_STATUSES};
pub use views::{DeviceView, FileServiceView, TaskView};

use heap::{mass_death, return_free_heap};
use run::{on_tick, run};
pub(crate) use spawn::SERVLET_ACTIVE;
pub use tasks::SetupStats;
pub(crate) use tasks::Watch;
use tasks::{Live, Tasks};

use crate::cache::CodeCache;
use crate::executor::{Executor, ExecutorStats, TICK};
use crate::host::TaskData;
use crate::ipc::{Kernel, Object};
use crate::limiter::MemoryBudget;
use crate::module::{self, LoadedModule};
use crate::output::{HostStream, Sink};
use crate::report::TaskReport;
use crate::sched::PolicyKind;
use crate::task::GroupSpec;
use crate::task::{GroupShared, TaskId, TaskShared, TaskSpec, TaskStatus};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Largest table a module may declare, in elements.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Freed memory slots are returned to the system in batches of this many,
/// which amortises the cross-core TLB flush each return costs. Memories of
/// 1 MiB or more do not wait for the batch (`run::ReleaseOnDrop`).
const DECOMMIT_BATCH: usize = 128;

/// Runtime-wide settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Worker threads running tasks (default: number of cores).
    pub workers: usize,
    /// Time slice before a running task yields to the next (default 4 ms).
    pub slice: Duration,
    /// Compiled-code cache directory; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// The root scheduling policy (default round-robin).
    pub scheduler: PolicyKind,
    /// Scheduling groups, parents before children.
    pub groups: Vec<GroupSpec>,
    /// Write the structured event log (JSON lines) here.
    pub events: Option<PathBuf>,
    /// Most tasks alive at once (default 10,000). Instance, memory, table
    /// and stack slots for this many are reserved up front: 4 GiB of
    /// address space (not memory) per task, up to about 24,000 tasks; more
    /// get less each (100,000: 512 MiB), which is then the most its own
    /// memory can grow to (its budget, which also covers its children, may
    /// be larger), and its memory accesses are bounds-checked. Where
    /// [`RuntimeConfig::max_map_count`] cannot hold `max_tasks` tasks, the
    /// spawn past the last that fits is refused ([`Error::Mappings`]).
    pub max_tasks: u32,
    /// The kernel's limit on one process's memory mappings; `None` reads
    /// `/proc/sys/vm/max_map_count` (default). Each live task takes about
    /// five mappings, so Linux's usual 65,530 holds about 12,700 tasks.
    pub max_map_count: Option<u64>,
    /// Prefix each line a task writes to the host's stdout/stderr with
    /// `[name] ` (default false).
    pub prefix_output: bool,
    /// Reports of finished tasks kept in memory (default 10,000); older
    /// ones are dropped, so a long-running system does not grow without
    /// bound. [`RuntimeConfig::on_report`] sees every one.
    pub max_reports: usize,
    /// Called with every finished task's report, as it finishes.
    pub on_report: Option<ReportSink>,
    /// Where spans go (see `telemetry`): an OpenTelemetry collector's
    /// OTLP/HTTP endpoint and the service name, or `None` (default) for
    /// no tracing.
    pub otlp: Option<(String, String)>,
    /// The outgoing bandwidth the tasks share, bytes per second (`None`:
    /// unlimited, and only `bandwidth_limit` caps apply).
    pub link_rate: Option<u64>,
    /// Load precompiled modules (`.cwasm`) this runtime's cache did not
    /// record writing (default false): their native code runs unchecked.
    pub allow_precompiled: bool,
    /// Largest module file read (default [`crate::DEFAULT_MAX_MODULE_BYTES`]):
    /// a larger one is refused before any of it is read.
    pub max_module_bytes: u64,
    /// The most all tasks together may be charged, with Warden's own
    /// overhead per task (the root of the budget tree, see
    /// [`machine`]); `None` (default): what the machine or the process's
    /// cgroup has, less a reserve for the host process
    /// ([`machine::default_limit`]).
    pub memory_limit: Option<u64>,
    /// Block devices, opened at start, that tasks' `devices` may name
    /// (see [`crate::DeviceSpec`]).
    pub devices: Vec<crate::DeviceSpec>,
    /// How long a thread about to sleep for want of work (an idle worker,
    /// a thread waiting for a task's end) first looks for it awake, at
    /// most (default [`crate::IDLE_SPIN`]; zero: it sleeps at once, as a
    /// thread blocking on a condition variable does). Each look that
    /// finds nothing halves the next, down to a 64th; one that finds
    /// work gives the whole window back (see `executor::IdleSpin`).
    pub idle_spin: Duration,
    /// How a worker hands its free heap back to the system after a mass
    /// death of tasks, for an allocator with thread-local heaps (for
    /// mimalloc, `mi_collect(true)`); `None` (default): only the C
    /// allocator's `malloc_trim`.
    pub heap_trim: Option<fn()>,
    /// Turn transparent huge pages off for the whole process when the
    /// runtime starts (default false; the `warden` command turns them
    /// off). With them on, an allocator that asks for them on its arenas
    /// (mimalloc does) holds whole 2 MiB pages per thread of which it
    /// uses a few KiB.
    pub disable_huge_pages: bool,
    /// Raise the process's limit on open descriptors when the runtime
    /// starts, as servers do (default false; the `warden` command raises
    /// it): tasks together may hold half of it (see [`crate::descriptors`]).
    pub raise_descriptor_limit: bool,
}

/// A callback that receives every finished task's report (for example to
/// write them all to a file, however many there were).
#[derive(Clone)]
pub struct ReportSink(pub Arc<dyn Fn(&TaskReport) + Send + Sync>);

impl std::fmt::Debug for ReportSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReportSink")
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            slice: Duration::from_millis(4),
            cache_dir: CodeCache::default_dir(),
            prefix_output: false,
            max_tasks: 10_000,
            max_map_count: None,
            max_reports: 10_000,
            on_report: None,
            otlp: None,
            scheduler: PolicyKind::RoundRobin,
            groups: Vec::new(),
            events: None,
            link_rate: None,
            allow_precompiled: false,
            max_module_bytes: crate::module::DEFAULT_MAX_MODULE_BYTES,
            memory_limit: None,
            devices: Vec::new(),
            idle_spin: crate::executor::IDLE_SPIN,
            heap_trim: None,
            disable_huge_pages: false,
            raise_descriptor_limit: false,
        }
    }
}

/// A group as the runtime keeps it.
struct Group {
    index: usize,
    /// Its node on the link.
    link_node: crate::net::fair::NodeId,
    /// Its accounting and its ancestors', innermost first.
    chain: Vec<Arc<GroupShared>>,
}

/// Window over which CPU caps are measured.
const CAP_WINDOW: Duration = Duration::from_millis(100);

/// Errors of the kernel API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// a module could not be loaded: the message names the file
    #[error("{0}")]
    Module(String),
    /// a task could not be set up: the message says why
    #[error("task {name:?}: {message}")]
    Spawn {
        /// The task's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// no such live task
    #[error("no live task with id {0}")]
    NoSuchTask(TaskId),
    /// no such scheduling group
    #[error("no scheduling group named {0:?}")]
    NoSuchGroup(String),
    /// the runtime already runs its maximum number of tasks
    #[error("cannot spawn: {0} tasks are alive, the runtime's max_tasks")]
    Full(u32),
    /// as many tasks are alive as the kernel's limit on memory mappings
    /// (`vm.max_map_count`) lets the process hold; the message says how
    /// to raise it
    #[error("{0}")]
    Mappings(String),
    /// the runtime could not start
    #[error("cannot start runtime: {0}")]
    Start(String),
    /// a name could not be registered
    #[error("{0}")]
    Name(String),
    /// the cluster could not be joined: the message says why
    #[error("{0}")]
    Cluster(String),
    /// the machine's memory budget (the root) cannot pay for another task
    #[error("cannot spawn: {0}")]
    Memory(String),
}

/// What a child task gets from its parent at spawn.
pub(crate) struct Child {
    /// The parent.
    pub(crate) parent: Arc<TaskShared>,
    /// Memory reserved in the parent's budget for the child.
    pub(crate) carved_memory: u64,
    /// Objects installed in the child's table (see `warden_task_granted`).
    pub(crate) grants: Vec<Object>,
    /// Names bound for the child.
    pub(crate) names: Option<Arc<crate::host::NameMap>>,
    /// The parent's output streams.
    pub(crate) sinks: (Sink, Sink),
    /// The parent's place on the link and receive budget.
    pub(crate) net: crate::host::ChildNet,
}

/// Loaded modules by the paths they were loaded by.
type ModuleMap = Mutex<HashMap<PathBuf, Arc<LoadedModule>>>;

struct Inner {
    engine: Engine,
    /// How many tasks may be alive at once.
    room: setup::Room,
    /// The host functions, for each kind of task.
    linkers: setup::Linkers,
    /// Modules (and components) loaded for each entry (see `modules`).
    passive_modules: ModuleMap,
    http_components: ModuleMap,
    /// Host services' holder references (they live as long as the runtime).
    host_services: Mutex<Vec<crate::ipc::service::ServiceRef>>,
    config: RuntimeConfig,
    cache: Option<CodeCache>,
    modules: ModuleMap,
    tasks: Arc<Tasks>,
    kernel: Arc<Kernel>,
    next_id: AtomicU64,
    groups: HashMap<String, Group>,
    exec: Executor,
    /// The outgoing link tasks share.
    link: Arc<crate::net::link::Link>,
    /// Every HTTP route's counters, for operators.
    routes: Mutex<Vec<Arc<RouteStats>>>,
    /// Supervised tasks' restarts, by name (taken after the task table's
    /// lock where both are held).
    restarts: supervised::RestartTable,
    /// What carries out operators' upgrades and restarts, if a system
    /// set it.
    operator: Mutex<Option<supervised::Operator>>,
    /// The cluster it joined, if any (left before the executor stops).
    cluster: std::sync::OnceLock<crate::cluster::Cluster>,
    /// An empty directory: the placeholder Wasmtime holds for each
    /// preopened listener's and served directory's descriptor number.
    /// Made when a task first needs it.
    empty_dir: std::sync::OnceLock<PathBuf>,
    // Drives WASI's timers and blocking I/O; dropped after the executor.
    _tokio: setup::IoRuntime,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.link.stop();
        if let Some(dir) = self.empty_dir.get() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A Warden runtime. Cheap to clone; all clones are the same runtime.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Runtime {
    /// Starts a runtime: engine, worker threads and epoch timer.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, Error> {
        setup::process(&config);
        let map_count = config.max_map_count.or_else(setup::read_map_count);
        let mappable = setup::mappable_tasks(config.max_tasks, map_count)?;
        let (engine, linkers) = setup::engine(mappable)?;
        let cache = setup::cache(&config)?;
        let tokio = setup::io_runtime()?;
        let kernel = Arc::new(Kernel::default());
        let _ = kernel.devices.set(setup::devices(&config.devices)?);
        let link = crate::net::link::Link::new(config.link_rate);
        let root = Arc::new(crate::task::RootAccount::new(Some(machine::root_limit(
            &config,
        ))));
        let (tree, groups) = setup::groups(&config, &link, &root)?;
        let events = setup::event_log(&config)?;
        let spans = setup::spans(&config, &kernel)?;
        let tasks = Arc::new(Tasks::new(&config, events, kernel.clone(), root, spans));
        let exec = setup::executor(&config, &tasks, &engine, tree, &tokio)?;
        let runtime = Runtime {
            inner: Arc::new(Inner {
                engine,
                room: setup::Room {
                    max_tasks: config.max_tasks,
                    mappable,
                    map_count,
                },
                linkers,
                passive_modules: Mutex::default(),
                http_components: Mutex::default(),
                host_services: Mutex::default(),
                groups,
                exec,
                config,
                cache,
                modules: Mutex::new(HashMap::new()),
                tasks,
                kernel,
                next_id: AtomicU64::new(1),
                link,
                routes: Mutex::default(),
                restarts: Mutex::default(),
                operator: Mutex::default(),
                cluster: std::sync::OnceLock::new(),
                empty_dir: std::sync::OnceLock::new(),
                _tokio: tokio,
            }),
        };
        let _ = runtime
            .inner
            .tasks
            .runtime
            .set(Arc::downgrade(&runtime.inner));
        Ok(runtime)
    }

    /// Changes how long this runtime's idle threads look for work awake
    /// before they sleep ([`RuntimeConfig::idle_spin`]), from now on.
    pub fn set_idle_spin(&self, window: Duration) {
        self.inner.tasks.spin.set(window);
    }

    /// Where its spans go, if tracing is on (`RuntimeConfig::otlp`).
    pub fn spans(&self) -> Option<&Arc<crate::telemetry::Exporter>> {
        self.inner.tasks.spans.as_ref()
    }

    /// The runtime's settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// The Wasmtime engine this runtime's tasks run on, with Warden's
    /// settings (pooling allocator, copy-on-write memory images, epoch
    /// interruption, async stacks zeroed when freed). For tools that time
    /// Wasmtime alone on exactly these settings: a store made on it takes
    /// one of the runtime's pool slots while it lives.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Milliseconds since the runtime started.
    pub fn now_ms(&self) -> f64 {
        self.inner.tasks.ms()
    }

    /// Kills a live task (see the task lifecycle): a queued or blocked task
    /// is gone when this returns, a running one at its next epoch check
    /// (a function entry or loop header of its code).
    pub fn kill(&self, id: TaskId, reason: &str) -> Result<(), Error> {
        if self.inner.exec.kill(id, reason) {
            Ok(())
        } else {
            Err(Error::NoSuchTask(id))
        }
    }

    /// Suspends a live task: it does not run until resumed; a running
    /// task stops at its next epoch tick. Its memory and handles stay.
    pub fn suspend(&self, id: TaskId) -> Result<(), Error> {
        self.inner
            .exec
            .suspend(id)
            .then_some(())
            .ok_or(Error::NoSuchTask(id))
    }

    /// Resumes a suspended task.
    pub fn resume(&self, id: TaskId) -> Result<(), Error> {
        self.inner
            .exec
            .resume(id)
            .then_some(())
            .ok_or(Error::NoSuchTask(id))
    }

    /// Kills every live task, and closes the runtime: supervisors
    /// restart none of them (see [`Runtime::closing`]).
    pub fn kill_all(&self, reason: &str) {
        // Closed in the same hold of the lock the ids are taken in: a
        // supervised task entered after it is refused (see `Tasks::enter`).
        let ids: Vec<TaskId> = {
            let mut t = self.inner.tasks.lock();
            t.closing = true;
            t.live.keys().copied().collect()
        };
        for id in ids {
            let _ = self.kill(id, reason);
        }
    }

    /// Waits for a task to finish and returns its report (an error if it
    /// finished so long ago that its report was dropped; see
    /// [`RuntimeConfig::max_reports`]). If the task is still queued, the
    /// only task queued, while some worker has no task to run, the
    /// calling thread runs it as [`Runtime::run`] does (its first
    /// slices, for at most 100 µs; their wall time charged as CPU): the
    /// worker would have taken it next, and a short task spawned and
    /// waited for at once then ends with no thread switch.
    pub fn wait(&self, id: TaskId) -> Result<TaskReport, Error> {
        self.inner.exec.run_waited(id);
        self.wait_timeout(id, None)
            .map(|r| r.expect("no timeout given"))
    }

    /// Waits at most `timeout` (`None`: forever) for a task to finish;
    /// `Ok(None)` if it is still running.
    pub fn wait_timeout(
        &self,
        id: TaskId,
        timeout: Option<Duration>,
    ) -> Result<Option<TaskReport>, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let tasks = &self.inner.tasks;
        let mut t = tasks.lock();
        loop {
            if let Some(r) = t.done.get(&id) {
                return Ok(Some(TaskReport::clone(r)));
            }
            if !t.live.contains_key(&id) {
                return Err(Error::NoSuchTask(id));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            t = tasks.wait(t, deadline);
        }
    }

    /// Waits until every task that is not passive has ended, then ends
    /// the passive ones (they exit with 0: a passive service lives as long
    /// as the system does) and waits for them too; returns every report,
    /// in spawn order.
    pub fn wait_all(&self) -> Vec<TaskReport> {
        let tasks = &self.inner.tasks;
        let mut t = tasks.lock();
        loop {
            while !t.ended() {
                t.empty_waiters += 1;
                t = tasks.empty.wait(t).unwrap_or_else(|e| e.into_inner());
                t.empty_waiters -= 1;
            }
            if t.live.is_empty() {
                break;
            }
            // Only passive services are left: the system is ending, and
            // supervisors restart none of them.
            t.closing = true;
            let servers: Vec<_> = t.live.values().filter_map(|l| l.passive.clone()).collect();
            drop(t);
            for p in servers {
                p.end(TaskStatus::Exited(0));
            }
            t = tasks.lock();
            // Wait for the passive tasks to finish (a new task spawned
            // meanwhile sends the loop round again).
            while !t.live.is_empty() && t.live.len() == t.passive_live {
                t.waiters += 1;
                t = tasks.changed.wait(t).unwrap_or_else(|e| e.into_inner());
                t.waiters -= 1;
            }
        }
        drop(t);
        self.reports()
    }

    /// Reports of every finished task so far, in spawn order.
    pub fn reports(&self) -> Vec<TaskReport> {
        let mut v: Vec<TaskReport> = (self.inner.tasks.lock().done.values())
            .map(|r| TaskReport::clone(r))
            .collect();
        v.sort_by_key(|r| r.id);
        v
    }

    /// Registers an HTTP route's counters for operators.
    pub(crate) fn register_route(&self, stats: Arc<RouteStats>) {
        self.inner
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(stats);
    }

    /// Stops showing a route's counters (a reload removed or replaced it).
    pub(crate) fn unregister_route(&self, stats: &Arc<RouteStats>) {
        let mut routes = self.inner.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes.retain(|r| !Arc::ptr_eq(r, stats));
    }

    /// Every HTTP route's counters.
    pub fn http_routes(&self) -> Vec<Arc<RouteStats>> {
        self.inner
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A client of the tasks' services that is not a task (servers see
    /// it as a caller named `name` with an id no task has).
    pub(crate) fn host_client(&self, name: String) -> crate::ipc::client::HostClient {
        let id = TaskId(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        crate::ipc::client::HostClient::new(
            self.inner.kernel.clone(),
            id,
            name,
            crate::host::call_bytes,
        )
    }

    /// For a process about to exit once its system has shut down: removes
    /// what the runtime keeps outside the process (its empty directory)
    /// and leaves the rest — idle threads, the pools' reservations, the
    /// engine — to the process's exit, which takes them back at once,
    /// rather than tearing them down piece by piece first (joining each
    /// thread, unmapping and resetting each slot). A runtime left so is
    /// never dropped; call this only on the way out.
    pub fn leave(self) {
        if let Some(dir) = self.inner.empty_dir.get() {
            let _ = std::fs::remove_dir(dir);
        }
        std::mem::forget(self);
    }

    /// The executor's load figures.
    pub fn stats(&self) -> ExecutorStats {
        self.inner.exec.stats()
    }

    /// What creating and tearing down the tasks finished so far took.
    pub fn setup_stats(&self) -> SetupStats {
        self.inner.tasks.lock().setup
    }
}

//! Building a runtime: the engine and its linker, the scheduling groups,
//! and the check that the system can map as many tasks as asked for.

use super::{Error, Group, RuntimeConfig, CAP_WINDOW, DECOMMIT_BATCH, MAX_TABLE_ELEMENTS};
use crate::host::TaskData;
use crate::sched::{Cap, Tree};
use crate::task::GroupShared;
use std::collections::HashMap;
use std::sync::Arc;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig};

/// The host functions each kind of task is linked with.
pub(super) struct Linkers {
    /// A task's: WASI preview 1 and the `warden` functions.
    pub(super) task: Linker<TaskData>,
    /// A passive task's, whose functions never wait (see `host::direct`).
    pub(super) passive: Linker<TaskData>,
    /// A component task's: WASI 0.2.
    pub(super) component: wasmtime::component::Linker<TaskData>,
}

/// The engine, with slots for `tasks` tasks, and its [`Linkers`]. Each
/// task's memory gets the first of [`reservations`] whose pool maps.
pub(super) fn engine(tasks: u32) -> Result<(Engine, Linkers), Error> {
    let start = |e: wasmtime::Error| Error::Start(format!("{e:#}"));
    // Freed slots wait in batches before they are reused, so the pools
    // hold a batch more than `tasks`.
    let batch = decommit_batch(tasks);
    let slots = tasks.saturating_add(batch as u32);
    // Most likely a pool that fails did not fit the address space: the
    // next, smaller reservation is tried.
    let mut failure = String::new();
    // Before the first engine installs Wasmtime's signal handler, so that
    // Wasmtime passes faults outside compiled code on to ours.
    crate::mapping::install();
    let engine = reservations(slots)
        .find_map(|r| match Engine::new(&engine_config(slots, batch, r)) {
            Ok(engine) => Some(engine),
            Err(e) => {
                failure = format!("{e:#}");
                None
            }
        })
        .ok_or_else(|| {
            Error::Start(format!(
                "the slots of {tasks} tasks do not fit in this process's address space \
                 (lower max_tasks): {failure}"
            ))
        })?;
    let mut task: Linker<TaskData> = Linker::new(&engine);
    crate::host::add_to_linker(&mut task).map_err(start)?;
    let mut passive = Linker::new(&engine);
    crate::host::add_to_passive_linker(&mut passive).map_err(start)?;
    let mut component = wasmtime::component::Linker::new(&engine);
    crate::host::add_to_component_linker(&mut component).map_err(start)?;
    Ok((
        engine,
        Linkers {
            task,
            passive,
            component,
        },
    ))
}

/// Freed regions per decommit batch for a runtime of `tasks` tasks: an
/// eighth of them, at most [`DECOMMIT_BATCH`]. Every slot costs the
/// runtime's start a system call (its stack's guard page), so a small
/// runtime (a single program's) does not reserve a large batch.
fn decommit_batch(tasks: u32) -> usize {
    (tasks as usize / 8).clamp(1, DECOMMIT_BATCH)
}

fn engine_config(slots: u32, batch: usize, reservation: u64) -> Config {
    let mut wc = Config::new();
    wc.epoch_interruption(true);
    wc.memory_init_cow(true);
    // Tables filled at instantiation (see KEEP_TABLE).
    wc.table_lazy_init(false);
    // Task memories stay where they are: permits address them directly.
    wc.memory_may_move(false);
    wc.memory_reservation(reservation);
    let mut pool = PoolingAllocationConfig::new();
    // A component's core instances (a Python one has about 20) are
    // counted, not reserved: only memories, tables and stacks take
    // address space up front.
    pool.total_core_instances(slots.saturating_mul(CORE_INSTANCES_PER_TASK))
        .total_component_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .max_memory_size(reservation as usize)
        .table_elements(MAX_TABLE_ELEMENTS)
        .decommit_batch_size(batch)
        .linear_memory_keep_resident(KEEP_MEMORY)
        .table_keep_resident(KEEP_TABLE)
        .async_stack_keep_resident(KEEP_STACK)
        .pagemap_scan(wasmtime::Enabled::Auto);
    // A dead task's native stack is zeroed by returning it to the system
    // (in the decommit batches), so no task sees another's stack.
    wc.async_stack_zeroing(true);
    wc.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    wc
}

/// Core instances a task may have on average: a core module has one, a
/// component one per core module inside it.
const CORE_INSTANCES_PER_TASK: u32 = 32;

/// What a freed slot keeps resident for the next task in it.
///
/// A small task touches about nine pages of its slot. Returned to the
/// system, each costs its next task a page fault, and the first write to
/// a page it read first also flushes the TLB of every other core running
/// this process (at 64 connections, a per-request web route spent a fifth
/// of its time in those flushes). So:
///
/// - Memory: the first [`KEEP_MEMORY`] bytes the task *wrote* (found with
///   `PAGEMAP_SCAN`) are reset in place from the module's image, the rest
///   returned. Warm pages are bounded for the whole runtime by
///   [`WARM_MEMORY_BYTES`] (see [`may_stay_warm`]): after 10,000 tasks die
///   at once, at most that much stays resident in their slots.
/// - Tables are filled when their instance is made, not on first use
///   (`table_lazy_init(false)`): a lazily filled table's page is read
///   before it is written, so every new instance took a copy-on-write
///   fault and a TLB flush of every other core. Filled at once, the page
///   is written first: one plain fault, no flush. Freed tables are
///   returned whole.
/// - Stacks are returned whole (the first write to a fresh page needs no
///   flush).
const KEEP_MEMORY: usize = 64 << 10;
const KEEP_TABLE: usize = 0;
const KEEP_STACK: usize = 0;

/// The most memory the pool's free slots may keep resident between
/// them: 128 slots' worth of [`KEEP_MEMORY`].
pub(super) const WARM_MEMORY_BYTES: usize = 128 * KEEP_MEMORY;

/// What the pool's free slots keep resident now: memories, tables and
/// stacks.
pub(super) fn warm_bytes(engine: &Engine) -> u64 {
    engine.pooling_allocator_metrics().map_or(0, |m| {
        let stacks = m.unused_stack_bytes_resident().unwrap_or(0);
        (m.unused_memory_bytes_resident() + m.unused_table_bytes_resident() + stacks) as u64
    })
}

/// Whether a task's memory, freed now, may stay warm: whether the pool's
/// free slots keep less than [`WARM_MEMORY_BYTES`] between them, with
/// room for one more slot's [`KEEP_MEMORY`].
pub(super) fn may_stay_warm(engine: &Engine) -> bool {
    engine
        .pooling_allocator_metrics()
        .is_some_and(|m| m.unused_memory_bytes_resident() + KEEP_MEMORY <= WARM_MEMORY_BYTES)
}

/// The most address space one task's memory gets: a 32-bit memory's
/// whole range, so that Wasmtime needs no bounds checks.
const FULL_RESERVATION: u64 = 4 << 30;
/// The least: below this, shrinking the reservation further would not
/// make room for a useful number of tasks more.
const LEAST_RESERVATION: u64 = 64 << 20;
/// Address space the memory pool may take: 96 TiB of x86-64's 128 TiB
/// user half (the rest is for stacks, tables, code and the heap).
const MEMORY_ADDRESS_SPACE: u64 = 96 << 40;

/// The memory reservations to try for `slots` slots, largest first.
///
/// Each memory slot is its reservation plus Wasmtime's guard region
/// (32 MiB). Up to about 24,000 slots fit 4 GiB each in
/// [`MEMORY_ADDRESS_SPACE`]; more slots get the largest power of two that
/// fits, down to [`LEAST_RESERVATION`] (100,000 tasks: 512 MiB each).
/// Below 4 GiB Wasmtime bounds-checks memory accesses, which costs some
/// speed, and a task's memory can grow only to its reservation. Should
/// the pool still not map (a smaller address space, a `ulimit -v`), each
/// half is tried in turn.
fn reservations(slots: u32) -> impl Iterator<Item = u64> {
    const GUARD: u64 = 32 << 20;
    let per_slot = (MEMORY_ADDRESS_SPACE / u64::from(slots.max(1))).saturating_sub(GUARD);
    let first = if per_slot >= FULL_RESERVATION {
        FULL_RESERVATION
    } else {
        // The largest power of two not above `per_slot`.
        (per_slot.max(LEAST_RESERVATION) + 1).next_power_of_two() / 2
    };
    std::iter::successors(Some(first), |r| Some(r / 2)).take_while(|r| *r >= LEAST_RESERVATION)
}

/// The scheduling tree with the configured groups, and the groups by name.
/// Each group's memory guarantee is reserved in `root` here.
pub(super) fn groups(
    config: &RuntimeConfig,
    link: &crate::net::link::Link,
    root: &crate::task::RootAccount,
) -> Result<(Tree, HashMap<String, Group>), Error> {
    let mut tree = Tree::new(config.scheduler);
    let mut groups: HashMap<String, Group> = HashMap::new();
    for g in &config.groups {
        let (parent_index, mut chain, parent_node) = match &g.parent {
            None => (0, Vec::new(), None),
            Some(p) => {
                let parent = groups.get(p).ok_or_else(|| Error::NoSuchGroup(p.clone()))?;
                (parent.index, parent.chain.clone(), Some(parent.link_node))
            }
        };
        let link_node = link.add(parent_node, g.bandwidth_share.into(), g.bandwidth_limit);
        let cap = g.cap.map(|c| Cap::new(c, CAP_WINDOW.as_nanos() as u64));
        let index = tree.add_group(parent_index, g.policy, &g.params, cap);
        if g.memory_guarantee > 0 {
            root.reserve_guarantee(g.memory_guarantee).map_err(|_| {
                Error::Start(format!(
                    "group {}: memory guarantee of {} cannot be reserved: the root budget is {}",
                    g.name,
                    crate::units::format_size(g.memory_guarantee),
                    crate::units::format_size(root.account().limit())
                ))
            })?;
        }
        chain.insert(
            0,
            Arc::new(GroupShared::new(
                g.name.clone(),
                g.cpu_quota.map_or(0, |d| d.as_nanos() as u64),
                g.memory_limit,
                g.memory_guarantee,
            )),
        );
        groups.insert(
            g.name.clone(),
            Group {
                index,
                chain,
                link_node,
            },
        );
    }
    Ok((tree, groups))
}

/// The executor of a runtime whose task table is `tasks`: its worker
/// threads, run queue (`tree`) and epoch timer, which advances `engine`'s
/// epoch.
pub(super) fn executor(
    config: &RuntimeConfig,
    tasks: &Arc<super::Tasks>,
    engine: &Engine,
    tree: Tree,
    tokio: &IoRuntime,
) -> Result<crate::executor::Executor, Error> {
    let t = tasks.clone();
    let e = engine.clone();
    crate::executor::Executor::start(
        crate::executor::Threads {
            workers: config.workers,
            idle_spin: tasks.spin.clone(),
            heap_trim: tasks.trim.clone(),
            stuck_ticks: crate::executor::stuck_ticks(config.slice),
        },
        Box::new(tree),
        tokio.handle().clone(),
        Arc::new(move || e.increment_epoch()),
        Box::new(move |shared, status| t.finish(shared, status)),
    )
    .map_err(|e| Error::Start(e.to_string()))
}

/// The process-wide effects `config` asks for (see
/// [`RuntimeConfig::disable_huge_pages`] and
/// [`RuntimeConfig::raise_descriptor_limit`]), applied as the runtime
/// starts.
pub(super) fn process(config: &RuntimeConfig) {
    if config.disable_huge_pages {
        disable_huge_pages();
    }
    if config.raise_descriptor_limit {
        raise_descriptor_limit();
    }
}

/// Turns transparent huge pages off for this process.
///
/// With them on, an allocator that asks for them on its arenas (mimalloc
/// does) holds whole 2 MiB pages per thread of which it uses a few KiB:
/// compiling two modules in the `warden` command peaked at 100 MiB of RSS
/// with them and 38 without, and 10,000 idle tasks in one process took
/// 279 MiB of PSS with them and 264 without. Task memories, tables and
/// stacks are counted, kept resident and returned 4 KiB at a time (see
/// `KEEP_MEMORY`) and never ask for huge pages themselves. Best effort:
/// a kernel without the setting keeps its default.
fn disable_huge_pages() {
    // SAFETY: prctl with integer arguments only; it sets this process's
    // memory policy and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// Raises the process's limit on open descriptors as far as it may, as
/// servers do: to the kernel's `fs.nr_open` where the process is allowed
/// to raise its hard limit (as root), else the soft limit to the hard one.
/// Tasks together may hold half of it, files and sockets alike (see
/// [`crate::descriptors`]); the other half is Warden's own.
fn raise_descriptor_limit() {
    let nr_open: Option<libc::rlim_t> = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return;
        }
        if let Some(n) = nr_open.filter(|n| *n > l.rlim_max) {
            let raised = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return;
            }
        }
        if l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Makes the runtime's empty directory (see `Inner::empty_dir`): private
/// to this process, read-only, removed when the runtime goes.
pub(super) fn empty_dir() -> Result<std::path::PathBuf, Error> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("warden-empty-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir(&dir);
    std::fs::DirBuilder::new()
        .mode(0o500)
        .create(&dir)
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)))
        .map_err(|e| Error::Start(format!("cannot make {}: {e}", dir.display())))?;
    Ok(dir)
}

/// Memory mappings per reserved task slot (measured: about two, its
/// stack guard and the reserved memory and table regions).
const MAPPINGS_PER_SLOT: u64 = 2;
/// Further mappings per live task (measured: three for a C program, whose
/// memory, table and stack are split into accessible and guard parts; two
/// for a small WAT one).
const MAPPINGS_PER_LIVE_TASK: u64 = 3;
/// Mappings the process needs besides its tasks (code, heap, threads).
const MAPPINGS_BASE: u64 = 2_000;

/// Mappings needed with `max_tasks` slots, all of them live.
fn mappings_needed(max_tasks: u64) -> u64 {
    (max_tasks + DECOMMIT_BATCH as u64) * MAPPINGS_PER_SLOT
        + max_tasks * MAPPINGS_PER_LIVE_TASK
        + MAPPINGS_BASE
}

/// The `vm.max_map_count` to suggest for `max_tasks` live tasks.
fn map_count_for(max_tasks: u32) -> u64 {
    mappings_needed(u64::from(max_tasks)).next_power_of_two()
}

/// The largest number of live tasks that `limit` mappings can hold.
fn most_tasks(limit: u64) -> u64 {
    limit.saturating_sub(MAPPINGS_BASE + DECOMMIT_BATCH as u64 * MAPPINGS_PER_SLOT)
        / (MAPPINGS_PER_SLOT + MAPPINGS_PER_LIVE_TASK)
}

/// The kernel's limit on one process's memory mappings, if it says.
pub(super) fn read_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How many tasks can be alive at once: `max_tasks`, or fewer where the
/// mapping limit `limit` (`vm.max_map_count`) cannot hold that many.
/// Past `vm.max_map_count`, mapping a task's memory or stack would fail;
/// the pools are sized to what fits, and the spawn after the last that
/// fits is refused with [`mappings_error`].
pub(super) fn mappable_tasks(max_tasks: u32, limit: Option<u64>) -> Result<u32, Error> {
    let Some(limit) = limit else {
        return Ok(max_tasks);
    };
    let most = most_tasks(limit).min(u64::from(max_tasks)) as u32;
    if most == 0 {
        return Err(Error::Start(format!(
            "vm.max_map_count is {limit}, too few memory mappings for even one task; \
             raise it (sysctl -w vm.max_map_count={})",
            map_count_for(max_tasks)
        )));
    }
    Ok(most)
}

/// How many tasks may be alive at once, and why no more.
#[derive(Debug, Clone, Copy)]
pub(super) struct Room {
    /// The configured most.
    pub(super) max_tasks: u32,
    /// What the mapping limit holds (at most `max_tasks`).
    pub(super) mappable: u32,
    /// The mapping limit, if known.
    pub(super) map_count: Option<u64>,
}

impl Room {
    /// Ok if one more task fits beside `alive` live ones.
    pub(super) fn check(&self, alive: usize) -> Result<(), Error> {
        if alive >= self.max_tasks as usize {
            return Err(Error::Full(self.max_tasks));
        }
        match self.map_count {
            Some(limit) if alive >= self.mappable as usize => {
                Err(mappings_error(alive as u32, self.max_tasks, limit))
            }
            _ => Ok(()),
        }
    }
}

/// The refusal of a spawn past what `limit` mappings hold.
fn mappings_error(alive: u32, max_tasks: u32, limit: u64) -> Error {
    Error::Mappings(format!(
        "cannot spawn: {alive} tasks are alive, as many as vm.max_map_count = {limit} lets \
         one process map (each task takes about {} memory mappings); to run up to \
         max_tasks = {max_tasks}, raise it (sysctl -w vm.max_map_count={}) and restart",
        MAPPINGS_PER_SLOT + MAPPINGS_PER_LIVE_TASK,
        map_count_for(max_tasks)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last handle to a runtime may go on an async thread (a web
    /// server's request held it): dropping it there must not panic, as a
    /// tokio runtime's plain drop would.
    #[test]
    fn a_runtime_may_be_dropped_on_an_async_thread() {
        let rt = crate::Runtime::new(crate::RuntimeConfig {
            workers: 1,
            max_tasks: 16,
            cache_dir: None,
            ..Default::default()
        })
        .unwrap();
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        outer.block_on(async move { drop(rt) });
    }

    /// The guard's arithmetic: what it admits fits, one more does not, and
    /// the count that once started tasks that could not map (15,850 at the
    /// default limit of 65,530) is cut to what fits.
    #[test]
    fn the_mapping_guard_admits_only_what_fits() {
        let limit = 65_530;
        let most = most_tasks(limit);
        assert!(mappings_needed(most) <= limit);
        assert!(mappings_needed(most + 1) > limit);
        assert_eq!(mappable_tasks(15_850, Some(limit)).unwrap() as u64, most);
        assert_eq!(
            mappable_tasks(10_000, Some(limit)).unwrap(),
            10_000,
            "the default fits"
        );
        assert_eq!(mappable_tasks(100_000, None).unwrap(), 100_000);
        assert!(mappable_tasks(10, Some(100)).is_err());
        let room = Room {
            max_tasks: 100_000,
            mappable: most as u32,
            map_count: Some(limit),
        };
        assert!(room.check(most as usize - 1).is_ok());
        assert!(matches!(room.check(100_000), Err(Error::Full(100_000))));
        let refusal = room.check(most as usize).unwrap_err().to_string();
        assert!(refusal.contains("vm.max_map_count = 65530"), "{refusal}");
        assert!(
            refusal.contains("sysctl -w vm.max_map_count=524288"),
            "{refusal}"
        );
    }

    /// Reservations: 4 GiB (no bounds checks) while they fit, then the
    /// largest power of two that does, each smaller one after it.
    #[test]
    fn reservations_shrink_with_the_slot_count() {
        let first = |slots| reservations(slots).next().unwrap();
        assert_eq!(first(10_032), FULL_RESERVATION);
        assert_eq!(first(100_032), 512 << 20);
        assert_eq!(first(u32::MAX), LEAST_RESERVATION);
        let all: Vec<u64> = reservations(10_032).collect();
        assert_eq!(all.len(), 7, "4 GiB down to 64 MiB");
        assert!(all.windows(2).all(|w| w[1] * 2 == w[0]));
    }
}

/// The compiled-code cache in `config.cache_dir`, if any.
pub(super) fn cache(config: &RuntimeConfig) -> Result<Option<crate::cache::CodeCache>, Error> {
    let Some(dir) = &config.cache_dir else {
        return Ok(None);
    };
    crate::cache::CodeCache::new(dir)
        .map(Some)
        .map_err(|e| Error::Start(format!("cache {}: {e}", dir.display())))
}

/// The runtime's I/O thread: a one-worker tokio runtime for sockets,
/// timers and the cluster's broker connection.
pub(super) fn io_runtime() -> Result<IoRuntime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("warden-io")
        .enable_all()
        .build()
        .map(|rt| IoRuntime(Some(rt)))
        .map_err(|e| Error::Start(e.to_string()))
}

/// The I/O runtime, shut down without waiting when dropped: the last
/// handle to a Warden runtime may be let go on any thread, an async one
/// among them (a web server's, whose requests hold the runtime), where a
/// tokio runtime's plain drop, which waits for its blocking threads,
/// panics. By then the executor is gone, and no task's I/O is left.
pub(super) struct IoRuntime(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for IoRuntime {
    type Target = tokio::runtime::Runtime;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("taken only when dropped")
    }
}

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The block devices `specs` name, each opened (see `dev`).
pub(super) fn devices(specs: &[crate::DeviceSpec]) -> Result<crate::dev::Devices, Error> {
    let mut devices = crate::dev::Devices::new();
    for spec in specs {
        let device = crate::dev::Device::open(spec).map_err(Error::Start)?;
        if devices
            .insert(spec.name.clone(), Arc::new(device))
            .is_some()
        {
            return Err(Error::Start(format!("device {:?}: named twice", spec.name)));
        }
    }
    Ok(devices)
}

/// The event log `config.events` names, if any, created.
pub(super) fn event_log(
    config: &RuntimeConfig,
) -> Result<Option<std::sync::Arc<crate::events::EventLog>>, Error> {
    let Some(p) = &config.events else {
        return Ok(None);
    };
    crate::events::EventLog::create(p)
        .map(|log| Some(std::sync::Arc::new(log)))
        .map_err(|e| Error::Start(format!("event log {}: {e}", p.display())))
}

/// The exporter of the runtime's spans, if `config` turns tracing on;
/// `kernel` keeps it for traced tasks' calls.
pub(super) fn spans(
    config: &RuntimeConfig,
    kernel: &crate::ipc::Kernel,
) -> Result<Option<Arc<crate::telemetry::Exporter>>, Error> {
    let Some((endpoint, service)) = &config.otlp else {
        return Ok(None);
    };
    let spans =
        Arc::new(crate::telemetry::Exporter::start(endpoint, service).map_err(Error::Start)?);
    let _ = kernel.spans.set(spans.clone());
    Ok(Some(spans))
}

//! Building a runtime: the engine and its linker, the scheduling groups,
//! and the check that the system can map as many tasks as asked for.

use super::{Error, Group, RuntimeConfig, CAP_WINDOW, DECOMMIT_BATCH, MAX_TABLE_ELEMENTS};
use crate::host::TaskData;
use crate::sched::{Cap, Tree};
use crate::task::GroupShared;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig};

/// The engine, with slots for `max_tasks` tasks; a linker holding WASI
/// and the `warden` host functions; and the linker of passive tasks, whose
/// functions never wait (see `host::direct`).
pub(super) fn engine(
    max_tasks: u32,
) -> Result<(Engine, Linker<TaskData>, Linker<TaskData>), Error> {
    let start = |e: wasmtime::Error| Error::Start(format!("{e:#}"));
    let mut wc = Config::new();
    wc.epoch_interruption(true);
    wc.memory_init_cow(true);
    // Task memories stay where they are: permits address them directly.
    wc.memory_may_move(false);
    let mut pool = PoolingAllocationConfig::new();
    // Freed slots wait in batches of DECOMMIT_BATCH before they are
    // reused, so the pools hold that many more than `max_tasks`.
    let slots = max_tasks.saturating_add(DECOMMIT_BATCH as u32);
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .table_elements(MAX_TABLE_ELEMENTS)
        .decommit_batch_size(DECOMMIT_BATCH);
    // A dead task's native stack is returned to the system (in the
    // decommit batches) rather than kept resident in its pool slot.
    wc.async_stack_zeroing(true);
    wc.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&wc).map_err(start)?;
    let mut linker: Linker<TaskData> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |d: &mut TaskData| &mut d.wasi)
        .map_err(start)?;
    crate::host::add_wasi_bounds(&mut linker).map_err(start)?;
    crate::host::add_to_linker(&mut linker).map_err(start)?;
    crate::host::add_teavm_to_linker(&mut linker).map_err(start)?;
    let mut passive = Linker::new(&engine);
    crate::host::add_to_passive_linker(&mut passive).map_err(start)?;
    crate::host::add_teavm_to_linker(&mut passive).map_err(start)?;
    Ok((engine, linker, passive))
}

/// The scheduling tree with the configured groups, and the groups by name.
pub(super) fn groups(
    config: &RuntimeConfig,
    link: &crate::net::link::Link,
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
        chain.insert(
            0,
            Arc::new(GroupShared {
                name: g.name.clone(),
                cpu_ns: AtomicU64::new(0),
                quota_ns: g.cpu_quota.map_or(0, |d| d.as_nanos() as u64),
            }),
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

/// Raises the process's soft limit on open descriptors to the hard one,
/// as servers do: tasks together may hold half of it in files (see
/// [`crate::MAX_OPEN_FILES`]), and every socket a task holds is one. The
/// `warden` command does this at start; a program embedding many sockets'
/// worth of tasks may call it too.
pub fn raise_descriptor_limit() {
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
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

/// The largest `max_tasks` that `limit` mappings can hold.
fn most_tasks(limit: u64) -> u64 {
    limit.saturating_sub(MAPPINGS_BASE + DECOMMIT_BATCH as u64 * MAPPINGS_PER_SLOT)
        / (MAPPINGS_PER_SLOT + MAPPINGS_PER_LIVE_TASK)
}

/// Refuses a `max_tasks` the kernel's per-process mapping limit cannot
/// hold: past `vm.max_map_count`, mapping a task's memory would fail.
pub(super) fn check_map_count(max_tasks: u32) -> Result<(), Error> {
    let Ok(text) = std::fs::read_to_string("/proc/sys/vm/max_map_count") else {
        return Ok(());
    };
    let Ok(limit) = text.trim().parse::<u64>() else {
        return Ok(());
    };
    let needed = mappings_needed(u64::from(max_tasks));
    if needed > limit {
        return Err(Error::Start(format!(
            "max_tasks = {max_tasks} needs about {needed} memory mappings, but \
             vm.max_map_count is {limit}: lower max_tasks to at most {}, or raise the \
             limit (sysctl -w vm.max_map_count={})",
            most_tasks(limit),
            needed.next_power_of_two()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard's arithmetic: what it admits fits, one more does not, and
    /// the count that once started tasks that could not map (15,850 at the
    /// default limit of 65,530) is refused.
    #[test]
    fn the_mapping_guard_admits_only_what_fits() {
        let limit = 65_530;
        let most = most_tasks(limit);
        assert!(mappings_needed(most) <= limit);
        assert!(mappings_needed(most + 1) > limit);
        assert!(mappings_needed(15_850) > limit);
        assert!(mappings_needed(10_000) <= limit, "the default fits");
    }
}

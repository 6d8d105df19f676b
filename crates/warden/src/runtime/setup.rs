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

/// The engine, with slots for `max_tasks` tasks, and a linker holding
/// WASI and the `warden` host functions.
pub(super) fn engine(max_tasks: u32) -> Result<(Engine, Linker<TaskData>), Error> {
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
    crate::host::add_to_linker(&mut linker).map_err(start)?;
    Ok((engine, linker))
}

/// The scheduling tree with the configured groups, and the groups by name.
pub(super) fn groups(config: &RuntimeConfig) -> Result<(Tree, HashMap<String, Group>), Error> {
    let mut tree = Tree::new(config.scheduler);
    let mut groups: HashMap<String, Group> = HashMap::new();
    for g in &config.groups {
        let (parent_index, mut chain) = match &g.parent {
            None => (0, Vec::new()),
            Some(p) => {
                let parent = groups.get(p).ok_or_else(|| Error::NoSuchGroup(p.clone()))?;
                (parent.index, parent.chain.clone())
            }
        };
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
        groups.insert(g.name.clone(), Group { index, chain });
    }
    Ok((tree, groups))
}

/// Memory mappings each task slot may need: its stack and guard, and the
/// accessible part of its memory and table slots (measured: about four).
const MAPPINGS_PER_TASK: u64 = 4;

/// Refuses a `max_tasks` the kernel's per-process mapping limit cannot
/// hold: past `vm.max_map_count`, mapping a task's memory would fail.
pub(super) fn check_map_count(max_tasks: u32) -> Result<(), Error> {
    let Ok(text) = std::fs::read_to_string("/proc/sys/vm/max_map_count") else {
        return Ok(());
    };
    let Ok(limit) = text.trim().parse::<u64>() else {
        return Ok(());
    };
    let slots = u64::from(max_tasks) + DECOMMIT_BATCH as u64;
    let needed = slots * MAPPINGS_PER_TASK + 2_000;
    if needed > limit {
        return Err(Error::Start(format!(
            "max_tasks = {max_tasks} needs about {needed} memory mappings, but \
             vm.max_map_count is {limit}: lower max_tasks to at most {}, or raise the \
             limit (sysctl -w vm.max_map_count={})",
            limit.saturating_sub(2_000) / MAPPINGS_PER_TASK - DECOMMIT_BATCH as u64,
            needed.next_power_of_two()
        )));
    }
    Ok(())
}

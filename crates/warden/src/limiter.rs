//! A task's memory budget: an exact limit on the bytes of all its linear
//! memories and tables together.
//!
//! Wasmtime's stock `StoreLimits` caps each memory separately; a task's
//! budget must cover the sum, and also the kernel objects charged to the
//! task (handles, memory objects), which is why the count itself lives in
//! [`TaskShared`]. Every growth request (including the initial
//! allocation at instantiation) passes through [`MemoryBudget`], which
//! charges the growth before it happens and refunds it if the host then
//! fails to provide the memory.
//!
//! Tables are charged at [`TABLE_ELEMENT_BYTES`] per element, the size of
//! the host's representation of a function reference.
//!
//! Over the limit, the [`MemoryPolicy`] decides: `Deny` makes
//! `memory.grow` return -1 (so `malloc` returns NULL) and the task carries
//! on; `Kill` ends the task with a reason.

pub use crate::task::MemoryPolicy;
use crate::task::{KillSignal, TaskShared};
use crate::units::format_size;
use std::sync::Arc;

/// Bytes charged per table element.
pub const TABLE_ELEMENT_BYTES: u64 = 8;

/// The limiter installed in every task's store.
pub struct MemoryBudget {
    policy: MemoryPolicy,
    /// The last approved growth, refunded if the host then fails to grow.
    last_grant: u64,
    /// Everything approved and not refunded: the store's memories and
    /// tables, which go back to the task's budget and the root when the
    /// store is dropped.
    granted: u64,
    /// Memory growth requests seen, approved or not (see
    /// [`MemoryBudget::memory_grows`]).
    memory_grows: u64,
    /// Instances the store may hold: a module task has one; a
    /// component's has one per core instance inside it.
    instances: usize,
    shared: Arc<TaskShared>,
}

/// Core instances a component task may have (a Python component has
/// about twenty).
pub const MAX_COMPONENT_INSTANCES: usize = 1000;

impl MemoryBudget {
    /// The budget of the task `shared` describes.
    pub fn new(policy: MemoryPolicy, shared: Arc<TaskShared>) -> Self {
        Self {
            policy,
            last_grant: 0,
            granted: 0,
            memory_grows: 0,
            instances: 1,
            shared,
        }
    }

    /// The budget of a component task: as [`MemoryBudget::new`], with
    /// room for [`MAX_COMPONENT_INSTANCES`] core instances.
    pub fn for_component(policy: MemoryPolicy, shared: Arc<TaskShared>) -> Self {
        let mut budget = Self::new(policy, shared);
        budget.instances = MAX_COMPONENT_INSTANCES;
        budget
    }

    /// How many times one of the store's memories has asked to grow.
    /// Every growth passes through the limiter first, so while this count
    /// stands still, no memory of the store has changed size: host calls
    /// keep a memory's length from one call to the next on that promise.
    pub fn memory_grows(&self) -> u64 {
        self.memory_grows
    }

    /// Charges `delta` more bytes; `Ok(false)` denies, `Err` kills.
    /// `bytes` of the store's memory now hold another object's pages (a
    /// mapping, charged to the object's creator): they go back to the
    /// task's budget until [`MemoryBudget::reclaim`], so that no page is
    /// counted twice.
    pub fn lend(&mut self, bytes: u64) {
        let bytes = bytes.min(self.granted);
        self.granted -= bytes;
        self.shared.refund(bytes);
    }

    /// `bytes` lent are the task's own again (unmapped): charged as a
    /// growth is; `false` if its budget cannot take them.
    pub fn reclaim(&mut self, bytes: u64) -> bool {
        if !self.shared.try_charge(bytes) {
            return false;
        }
        self.granted += bytes;
        true
    }

    fn charge(&mut self, what: &str, delta: u64) -> wasmtime::Result<bool> {
        if self.shared.try_charge(delta) {
            self.last_grant = delta;
            self.granted += delta;
            return Ok(true);
        }
        match self.policy {
            MemoryPolicy::Deny => Ok(false),
            MemoryPolicy::Notify => {
                if self.shared.parent().is_some() {
                    let want = self.shared.memory.current().saturating_add(delta);
                    self.shared
                        .family
                        .post_event(crate::task::EVENT_MEMORY, want);
                }
                Ok(false)
            }
            MemoryPolicy::Kill => Err(KillSignal(self.refusal(what, delta)).into()),
        }
    }

    /// Why `delta` more bytes were refused: the task's own limit, or the
    /// machine's budget (the root) when the task's limit had room.
    fn refusal(&self, what: &str, delta: u64) -> String {
        let want = self.shared.memory.current().saturating_add(delta);
        match &self.shared.root {
            Some(root) if want <= self.shared.memory.limit() => format!(
                "the machine's memory budget is full: {what} of {} more refused with {} of {} charged to all tasks",
                format_size(delta),
                format_size(root.account().current()),
                format_size(root.account().limit())
            ),
            _ => format!(
                "memory limit exceeded: {what} would use {} of {}",
                format_size(want),
                format_size(self.shared.memory.limit())
            ),
        }
    }

    fn refund_last(&mut self) {
        self.shared.refund(self.last_grant);
        self.granted -= self.last_grant;
        self.last_grant = 0;
    }
}

/// The store is gone, and its memories and tables with it (a task's store
/// drops its linear memory's pages before its limiter: see
/// `runtime::run`): their bytes go back to the task's budget and the
/// machine's.
impl Drop for MemoryBudget {
    fn drop(&mut self) {
        self.shared.refund(self.granted);
    }
}

impl wasmtime::ResourceLimiter for MemoryBudget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.memory_grows += 1;
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        self.charge("memory.grow", desired.saturating_sub(current) as u64)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund_last();
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        let delta = (desired.saturating_sub(current) as u64).saturating_mul(TABLE_ELEMENT_BYTES);
        self.charge("table.grow", delta)
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund_last();
        Ok(())
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        100
    }

    fn memories(&self) -> usize {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    const PAGE: usize = 65536;

    fn budget(limit: u64, policy: MemoryPolicy) -> MemoryBudget {
        let shared = TaskShared::new(crate::task::TaskId(0), "t".into(), None, Some(limit));
        MemoryBudget::new(policy, Arc::new(shared))
    }

    fn used(b: &MemoryBudget) -> u64 {
        b.shared.memory.current()
    }

    #[test]
    fn a_dropped_store_returns_its_memories_to_the_root() {
        let root = Arc::new(crate::task::RootAccount::new(Some(4 * PAGE as u64)));
        let mut shared = TaskShared::new(crate::task::TaskId(0), "t".into(), None, None);
        shared.root = Some(root.clone());
        let shared = Arc::new(shared);
        let mut b = MemoryBudget::new(MemoryPolicy::Deny, shared.clone());
        assert!(b.memory_growing(0, 3 * PAGE, None).unwrap());
        assert!(
            !b.memory_growing(3 * PAGE, 5 * PAGE, None).unwrap(),
            "past the root"
        );
        assert_eq!(
            shared.memory.current(),
            3 * PAGE as u64,
            "refused at the root, refunded"
        );
        assert!(b.table_growing(0, 10, None).unwrap());
        b.memory_grow_failed(wasmtime::Error::msg("no")).ok();
        b.table_grow_failed(wasmtime::Error::msg("no")).ok();
        assert_eq!(root.account().current(), 3 * PAGE as u64);
        drop(b);
        assert_eq!((root.account().current(), shared.memory.current()), (0, 0));
    }

    #[test]
    fn only_growth_beyond_the_guarantee_reaches_the_root() {
        let root = Arc::new(crate::task::RootAccount::new(Some(3 * PAGE as u64)));
        root.reserve_guarantee(2 * PAGE as u64).unwrap();
        let mut shared = TaskShared::new(crate::task::TaskId(0), "t".into(), None, None);
        shared.root = Some(root.clone());
        shared.guarantee = 2 * PAGE as u64;
        let shared = Arc::new(shared);
        let mut b = MemoryBudget::new(MemoryPolicy::Deny, shared.clone());
        assert!(b.memory_growing(0, 2 * PAGE, None).unwrap());
        assert_eq!(
            (root.account().current(), root.surplus()),
            (2 * PAGE as u64, 0)
        );
        assert!(b.memory_growing(2 * PAGE, 3 * PAGE, None).unwrap());
        assert_eq!(shared.surplus(), PAGE as u64);
        assert!(
            !b.memory_growing(3 * PAGE, 4 * PAGE, None).unwrap(),
            "root full"
        );
        assert!(shared.deny_surplus());
        assert!(!shared.deny_surplus(), "once");
        drop(b);
        assert_eq!(
            root.account().current(),
            2 * PAGE as u64,
            "the guarantee stays"
        );
        root.release_guarantee(2 * PAGE as u64);
        assert_eq!(root.account().current(), 0);
    }

    #[test]
    fn exact_limit_sums_memories_and_tables() {
        let mut b = budget(3 * PAGE as u64, MemoryPolicy::Deny);
        assert!(b.memory_growing(0, PAGE, None).unwrap());
        assert!(b.memory_growing(0, PAGE, None).unwrap()); // a second memory
        assert!(b.memory_growing(PAGE, 2 * PAGE, None).unwrap());
        assert_eq!(used(&b), 3 * PAGE as u64);
        assert!(!b.memory_growing(2 * PAGE, 3 * PAGE, None).unwrap());
        assert!(!b.table_growing(0, 1, None).unwrap());
        assert_eq!(b.shared.memory.denials(), 2);
        assert_eq!(b.shared.memory.peak(), 3 * PAGE as u64);
    }

    #[test]
    fn tables_are_charged_per_element() {
        let mut b = budget(80, MemoryPolicy::Deny);
        assert!(b.table_growing(0, 10, None).unwrap());
        assert!(!b.table_growing(10, 11, None).unwrap());
    }

    #[test]
    fn kill_policy_errors_with_reason() {
        let mut b = budget(PAGE as u64, MemoryPolicy::Kill);
        assert!(b.memory_growing(0, PAGE, None).unwrap());
        let e = b.memory_growing(PAGE, 2 * PAGE, None).unwrap_err();
        let kill = e.downcast_ref::<KillSignal>().unwrap();
        assert!(kill.0.contains("memory limit exceeded"), "{}", kill.0);
    }

    #[test]
    fn failed_growth_is_refunded() {
        let mut b = budget(2 * PAGE as u64, MemoryPolicy::Deny);
        assert!(b.memory_growing(0, 2 * PAGE, None).unwrap());
        b.memory_grow_failed(wasmtime::format_err!("mmap failed"))
            .unwrap();
        assert_eq!(used(&b), 0);
        assert!(b.memory_growing(0, 2 * PAGE, None).unwrap());
    }

    #[test]
    fn module_maximum_is_respected() {
        let mut b = budget(u64::MAX, MemoryPolicy::Deny);
        assert!(!b.memory_growing(PAGE, 3 * PAGE, Some(2 * PAGE)).unwrap());
    }
}

//! The root of the budget tree: the machine's memory, shared out as
//! guarantees and surplus (MVM's reserved and surplus memory).
//!
//! Every task may have a **guarantee**: bytes set aside for it when it is
//! spawned, which it can always have, whatever others hold. The root's
//! account is charged with
//!
//! ```text
//! charged = Σ guarantees + Σ per-task overhead + Σ surplus
//! surplus of a task = max(0, its charges − its guarantee)
//! ```
//!
//! so a task's charges within its guarantee never touch the root (they
//! were paid for at spawn) and only what lies beyond it competes for
//! what is left. A group may have a guarantee too, reserved when the
//! runtime starts: its members' surplus is taken from it first, and
//! only what lies beyond it reaches the root (the same arithmetic one
//! level up: [`charge_through`]). Guarantees together can never exceed the root's limit
//! ([`RootAccount::reserve_guarantee`] refuses the one that would);
//! limits may (overcommit). When a new guarantee finds the root full of
//! others' surplus, the runtime takes surplus back by policy (see
//! [`reclaim_order`] and `runtime::reclaim`).

use super::account::{MemoryAccount, Refused};
use std::sync::atomic::{AtomicU64, Ordering};

/// The machine's budget: one memory account and what of it is reserved.
#[derive(Debug)]
pub struct RootAccount {
    account: MemoryAccount,
    /// Bytes of `account` that are reservations (guarantees and per-task
    /// overhead) rather than surplus.
    reserved: AtomicU64,
    /// Guarantees of live tasks, bytes (part of `reserved`).
    guaranteed: AtomicU64,
}

/// Why a guarantee could not be reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuaranteeRefused {
    /// Guarantees would add up to more than the root: what is left
    /// unreserved (the limit less guarantees and overheads).
    Unreserved(u64),
    /// The guarantee fits among the guarantees, but others' surplus fills
    /// the root now: the refused charge.
    Full(Refused),
}

impl RootAccount {
    /// A root of `limit` bytes (`None`: no limit).
    pub fn new(limit: Option<u64>) -> Self {
        RootAccount {
            account: MemoryAccount::new(limit),
            reserved: AtomicU64::new(0),
            guaranteed: AtomicU64::new(0),
        }
    }

    /// The account every charge reaches.
    pub fn account(&self) -> &MemoryAccount {
        &self.account
    }

    /// Bytes reserved: guarantees and per-task overhead.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Guarantees of live tasks, bytes.
    pub fn guaranteed(&self) -> u64 {
        self.guaranteed.load(Ordering::Relaxed)
    }

    /// Surplus in use: what is charged beyond the reservations.
    pub fn surplus(&self) -> u64 {
        self.account.current().saturating_sub(self.reserved())
    }

    /// Charges a reservation that is not a guarantee (a task's overhead).
    pub fn try_reserve(&self, bytes: u64) -> Result<(), Refused> {
        self.account.try_charge(bytes)?;
        self.reserved.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Returns a reservation made by [`RootAccount::try_reserve`].
    pub fn unreserve(&self, bytes: u64) {
        self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        self.account.refund(bytes);
    }

    /// Reserves a guarantee of `bytes`: refused at once if reservations
    /// would exceed the limit, and refused as `Full` (the caller may
    /// reclaim surplus and try again) if surplus fills the root now.
    pub fn reserve_guarantee(&self, bytes: u64) -> Result<(), GuaranteeRefused> {
        let limit = self.account.limit();
        let fits = |r: u64| r.checked_add(bytes).filter(|&n| n <= limit);
        // Claimed in `reserved` first, so that two spawns cannot both
        // take the last unreserved bytes.
        self.reserved
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits)
            .map_err(|r| GuaranteeRefused::Unreserved(limit.saturating_sub(r)))?;
        if let Err(r) = self.account.try_charge(bytes) {
            self.reserved.fetch_sub(bytes, Ordering::Relaxed);
            return Err(GuaranteeRefused::Full(r));
        }
        self.guaranteed.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Returns a guarantee reserved by [`RootAccount::reserve_guarantee`].
    pub fn release_guarantee(&self, bytes: u64) {
        self.guaranteed.fetch_sub(bytes, Ordering::Relaxed);
        self.unreserve(bytes);
    }
}

/// The part of a charge of `bytes` that is surplus, for a task with
/// `guarantee` bytes whose charges were `before` (or, for a refund, the
/// part of a refund that returns surplus, with `before` the charges
/// after it).
pub fn surplus_part(guarantee: u64, before: u64, bytes: u64) -> u64 {
    let after = before.saturating_add(bytes);
    after.saturating_sub(guarantee) - before.saturating_sub(guarantee)
}

/// Moves `counter` (charges held against `guarantee`) up by `bytes`,
/// charging the part beyond the guarantee with `charge` first; `counter`
/// moves only with the charge it was computed from (else that charge is
/// undone with `undo` and the move retried), so concurrent charges and
/// refunds stay exact.
pub fn charge_through<E>(
    counter: &AtomicU64,
    guarantee: u64,
    bytes: u64,
    charge: impl Fn(u64) -> Result<(), E>,
    undo: impl Fn(u64),
) -> Result<(), E> {
    let mut before = counter.load(Ordering::Relaxed);
    loop {
        let beyond = surplus_part(guarantee, before, bytes);
        charge(beyond)?;
        let after = before.saturating_add(bytes);
        match counter.compare_exchange_weak(before, after, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(now) => {
                undo(beyond);
                before = now;
            }
        }
    }
}

/// Moves `counter` down by `bytes` charged with [`charge_through`];
/// returns the part that lay beyond the guarantee (to refund further up).
pub fn refund_through(counter: &AtomicU64, guarantee: u64, bytes: u64) -> u64 {
    let before = counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            Some(c.saturating_sub(bytes))
        })
        .unwrap_or_else(|c| c);
    debug_assert!(
        before >= bytes,
        "refund of {bytes} bytes with {before} charged"
    );
    let bytes = bytes.min(before);
    surplus_part(guarantee, before - bytes, bytes)
}

/// A task holding surplus, as the reclaim sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Its `memory_priority`: lowest gives up its surplus first.
    pub priority: i32,
    /// Its surplus, bytes.
    pub surplus: u64,
    /// Its id (last tie-break: the youngest first).
    pub id: u64,
}

/// Orders holders for reclaim (lowest priority first, then largest
/// surplus, then youngest) and keeps the fewest whose surplus together
/// covers `need` bytes (all of them if they cannot).
pub fn reclaim_order(holders: &mut Vec<Holder>, need: u64) {
    holders.retain(|h| h.surplus > 0);
    holders.sort_by(|a, b| (a.priority, b.surplus, b.id).cmp(&(b.priority, a.surplus, a.id)));
    let mut covered = 0u64;
    let keep = holders
        .iter()
        .position(|h| {
            covered = covered.saturating_add(h.surplus);
            covered >= need
        })
        .map_or(holders.len(), |i| i + 1);
    holders.truncate(keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarantees_never_add_up_to_more_than_the_root() {
        let root = RootAccount::new(Some(100));
        assert!(root.try_reserve(10).is_ok(), "overhead");
        assert!(root.reserve_guarantee(60).is_ok());
        assert_eq!(
            root.reserve_guarantee(31),
            Err(GuaranteeRefused::Unreserved(30))
        );
        assert_eq!((root.guaranteed(), root.reserved()), (60, 70));
        root.release_guarantee(60);
        root.unreserve(10);
        assert_eq!((root.account().current(), root.reserved()), (0, 0));
    }

    #[test]
    fn surplus_in_the_way_is_full_not_unreserved() {
        let root = RootAccount::new(Some(100));
        root.account().try_charge(80).unwrap();
        assert_eq!(root.surplus(), 80);
        match root.reserve_guarantee(40) {
            Err(GuaranteeRefused::Full(r)) => assert_eq!(r.wanted, 120),
            other => panic!("{other:?}"),
        }
        assert_eq!(root.reserved(), 0, "a refused guarantee takes nothing");
        root.account().refund(30);
        assert!(root.reserve_guarantee(40).is_ok());
        assert_eq!((root.surplus(), root.reserved()), (50, 40));
    }

    #[test]
    fn only_what_lies_beyond_the_guarantee_is_surplus() {
        assert_eq!(surplus_part(0, 0, 5), 5, "no guarantee: all surplus");
        assert_eq!(surplus_part(10, 0, 8), 0);
        assert_eq!(surplus_part(10, 8, 5), 3);
        assert_eq!(surplus_part(10, 13, 5), 5);
        // Charges then refunds in any split return what they took.
        let took: u64 = [(0, 4), (4, 4), (8, 4)]
            .iter()
            .map(|&(b, n)| surplus_part(10, b, n))
            .sum();
        assert_eq!(took, surplus_part(10, 0, 12));
    }

    /// Charges and refunds of one guaranteed task from four threads at
    /// once (a task's own growth and its peers' message buffers): the
    /// root ends exactly where it began, and never held more surplus
    /// than the task's charges beyond its guarantee.
    #[test]
    fn concurrent_charges_of_a_guaranteed_task_stay_exact() {
        use crate::task::{TaskId, TaskShared};
        use std::sync::Arc;
        let root = Arc::new(RootAccount::new(Some(1 << 30)));
        root.reserve_guarantee(1000).unwrap();
        let mut t = TaskShared::new(TaskId(1), "t".into(), None, None);
        t.root = Some(root.clone());
        t.guarantee = 1000;
        let t = Arc::new(t);
        let threads: Vec<_> = (0..4u64)
            .map(|i| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for round in 0..20_000u64 {
                        let bytes = 1 + (round * 7 + i * 13) % 300;
                        if t.try_charge(bytes) {
                            t.refund(bytes);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert_eq!((t.memory.current(), t.surplus()), (0, 0));
        assert_eq!(root.account().current(), 1000, "only the guarantee is left");
        assert_eq!(root.surplus(), 0);
    }

    #[test]
    fn reclaim_takes_the_lowest_priority_then_the_largest_surplus() {
        let h = |priority, surplus, id| Holder {
            priority,
            surplus,
            id,
        };
        let mut holders = vec![
            h(0, 10, 1),
            h(-1, 5, 2),
            h(0, 30, 3),
            h(5, 100, 4),
            h(0, 0, 5),
        ];
        reclaim_order(&mut holders, 20);
        let ids: Vec<u64> = holders.iter().map(|h| h.id).collect();
        assert_eq!(ids, [2, 3], "priority -1 first, then the largest");
        let mut all = vec![h(1, 10, 1), h(1, 10, 2)];
        reclaim_order(&mut all, 1000);
        assert_eq!(all.len(), 2, "not enough: every holder");
        assert_eq!(all[0].id, 2, "equal: the youngest first");
    }
}

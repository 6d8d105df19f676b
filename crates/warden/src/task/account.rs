//! A task's accounts: memory, CPU and IPC counters.
//!
//! Each is a handful of atomics that any thread may update (a worker
//! charging CPU, a peer's host call charging a message buffer, an operator
//! raising a limit). Limits are read on every check, so a parent raising
//! a child's limit takes effect at the child's next charge.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes charged to a task against its exact limit: linear memories,
/// tables and every kernel object held on its behalf.
#[derive(Debug)]
pub struct MemoryAccount {
    limit: AtomicU64,
    current: AtomicU64,
    peak: AtomicU64,
    denials: AtomicU64,
    /// What the latest refused charge would have brought the account to.
    last_refused: AtomicU64,
}

/// What a refused charge was, for the event the caller may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The limit.
    pub limit: u64,
    /// What the charge would have brought the account to.
    pub wanted: u64,
    /// Whether this was the first refusal (the one worth reporting).
    pub first: bool,
}

impl MemoryAccount {
    /// An empty account with `limit` bytes (`None`: unlimited).
    pub fn new(limit: Option<u64>) -> Self {
        MemoryAccount {
            limit: AtomicU64::new(limit.unwrap_or(u64::MAX)),
            current: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            denials: AtomicU64::new(0),
            last_refused: AtomicU64::new(0),
        }
    }

    /// The limit (`u64::MAX`: none).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Sets the limit (a parent raising its child's).
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Release);
    }

    /// Bytes charged now.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// The highest charge so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Charges refused so far.
    pub fn denials(&self) -> u64 {
        self.denials.load(Ordering::Relaxed)
    }

    /// The latest refusal, if there was one: what that charge would have
    /// brought the account to (a trap right after it most likely comes
    /// from a program that did not check for failure).
    pub fn last_refused(&self) -> Option<u64> {
        Some(self.last_refused.load(Ordering::Relaxed)).filter(|_| self.denials() > 0)
    }

    /// Charges `bytes` if they fit under the limit. Any thread may charge.
    pub fn try_charge(&self, bytes: u64) -> Result<(), Refused> {
        let mut cur = self.current.load(Ordering::Relaxed);
        loop {
            let limit = self.limit();
            let Some(next) = cur.checked_add(bytes).filter(|&n| n <= limit) else {
                let wanted = cur.saturating_add(bytes);
                self.last_refused.store(wanted, Ordering::Relaxed);
                let first = self.denials.fetch_add(1, Ordering::Relaxed) == 0;
                return Err(Refused {
                    limit,
                    wanted,
                    first,
                });
            };
            match self.current.compare_exchange_weak(
                cur,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Read first: most charges stay below the peak, and a
                    // plain load is no locked instruction.
                    if next > self.peak.load(Ordering::Relaxed) {
                        self.peak.fetch_max(next, Ordering::Relaxed);
                    }
                    return Ok(());
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Returns `bytes` charged earlier. A refund of more than is charged is
    /// a kernel bug (something returned twice): it is caught in debug
    /// builds and clamps to zero in release builds rather than wrapping
    /// into an account that could never charge again.
    pub fn refund(&self, bytes: u64) {
        let prev = self
            .current
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_sub(bytes))
            })
            .unwrap_or_else(|c| c);
        debug_assert!(prev >= bytes, "refund of {bytes} bytes with {prev} charged");
    }
}

/// CPU time: what a task ran and on whose account.
///
/// `charged` is CPU charged to this task's account: its own running and
/// any server's running on its behalf (CPU inheritance). `served` is CPU
/// this task ran on its clients' accounts. `subtree` adds its
/// descendants' charges to its own, which is what an ancestor's limit
/// bounds. A task's own limit bounds everything it executed: `subtree +
/// served`, whoever paid for it.
#[derive(Debug)]
pub struct CpuAccount {
    limit_ns: AtomicU64,
    charged: AtomicU64,
    served: AtomicU64,
    subtree: AtomicU64,
    /// Whether it or an ancestor has a CPU limit (limits need exact figures).
    pub limited: bool,
}

impl CpuAccount {
    /// An empty account with an optional limit; `limited` also when an
    /// ancestor has one.
    pub fn new(limit: Option<Duration>, ancestor_limited: bool) -> Self {
        let limit_ns = limit.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64);
        CpuAccount {
            limit_ns: AtomicU64::new(limit_ns),
            charged: AtomicU64::new(0),
            served: AtomicU64::new(0),
            subtree: AtomicU64::new(0),
            limited: limit_ns != 0 || ancestor_limited,
        }
    }

    /// The limit in ns (0: none).
    pub fn limit_ns(&self) -> u64 {
        self.limit_ns.load(Ordering::Acquire)
    }

    /// Raises the limit.
    pub fn set_limit_ns(&self, ns: u64) {
        self.limit_ns.store(ns, Ordering::Release);
    }

    /// CPU charged to this task's account, ns.
    pub fn charged_ns(&self) -> u64 {
        self.charged.load(Ordering::Relaxed)
    }

    /// CPU it ran on others' accounts, ns.
    pub fn served_ns(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// CPU charged to it and its descendants, ns.
    pub fn subtree_ns(&self) -> u64 {
        self.subtree.load(Ordering::Relaxed)
    }

    pub(crate) fn add_charged(&self, ns: u64) {
        self.charged.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn add_subtree(&self, ns: u64) {
        self.subtree.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn add_served(&self, ns: u64) {
        self.served.fetch_add(ns, Ordering::Relaxed);
    }

    /// If `used` ns exceed the limit, the kill reason.
    pub fn over_limit(&self, used: u64) -> Option<String> {
        let limit = self.limit_ns();
        (limit != 0 && used > limit).then(|| {
            format!(
                "cpu limit exceeded: used {} ms of {} ms",
                used / 1_000_000,
                limit / 1_000_000
            )
        })
    }
}

/// Block-device traffic: a device's, and a task's to the devices it held
/// (see `dev`).
#[derive(Debug, Default)]
pub struct DeviceCounters {
    /// Reads done.
    pub reads: AtomicU64,
    /// Writes done.
    pub writes: AtomicU64,
    /// Bytes read.
    pub read_bytes: AtomicU64,
    /// Bytes written.
    pub written_bytes: AtomicU64,
    /// Flushes to the host file's storage.
    pub syncs: AtomicU64,
    /// Operations the host file failed.
    pub errors: AtomicU64,
}

impl DeviceCounters {
    /// Counts one read (`write`: a write) of `bytes`.
    pub fn count(&self, write: bool, bytes: u64) {
        let (ops, moved) = match write {
            true => (&self.writes, &self.written_bytes),
            false => (&self.reads, &self.read_bytes),
        };
        ops.fetch_add(1, Ordering::Relaxed);
        moved.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Portal traffic, for operators.
#[derive(Debug, Default)]
pub struct IpcCounters {
    /// Portal calls it made, and calls it received.
    pub calls: AtomicU64,
    /// Message bytes it sent (requests and replies).
    pub bytes_sent: AtomicU64,
    /// Message bytes it received.
    pub bytes_received: AtomicU64,
}

impl IpcCounters {
    /// Counts `calls` calls and a message of `sent` and `received` bytes.
    ///
    /// One writer at a time: the counters' task counts its own traffic
    /// from its own host calls, which never run at once (a passive task's
    /// from inside its service's lock). So each counter is read and
    /// written back, not added to atomically, which on the IPC paths costs
    /// three locked instructions per call. Readers (reports, metrics) see
    /// each counter grow and never tear.
    pub fn count(&self, calls: u64, sent: usize, received: usize) {
        fn add(c: &AtomicU64, n: u64) {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
        add(&self.calls, calls);
        add(&self.bytes_sent, sent as u64);
        add(&self.bytes_received, received as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_charges_are_exact_and_refunds_never_wrap() {
        let m = MemoryAccount::new(Some(100));
        assert!(m.try_charge(60).is_ok());
        assert_eq!(m.last_refused(), None);
        let refused = m.try_charge(41).unwrap_err();
        assert_eq!(
            (refused.limit, refused.wanted, refused.first),
            (100, 101, true)
        );
        assert!(!m.try_charge(u64::MAX).unwrap_err().first);
        assert!(m.try_charge(40).is_ok());
        assert_eq!((m.current(), m.peak(), m.denials()), (100, 100, 2));
        assert_eq!(m.last_refused(), Some(u64::MAX));
        m.refund(100);
        assert_eq!(m.current(), 0);
    }

    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "refund of"))]
    fn a_double_refund_is_caught_not_wrapped() {
        let m = MemoryAccount::new(Some(100));
        m.try_charge(10).unwrap();
        m.refund(10);
        m.refund(10);
        // Release builds: clamped, and the account still works.
        assert_eq!(m.current(), 0);
        assert!(m.try_charge(100).is_ok());
    }

    #[test]
    fn cpu_limit_reason() {
        let c = CpuAccount::new(Some(Duration::from_millis(300)), false);
        assert!(c.limited);
        assert_eq!(c.over_limit(300_000_000), None);
        let r = c.over_limit(301_000_000).unwrap();
        assert!(r.contains("used 301 ms of 300 ms"), "{r}");
        assert!(!CpuAccount::new(None, false).limited);
    }
}

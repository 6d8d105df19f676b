//! A node's counts of remote calls, per name, for `/metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counts for one name.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NameCounts {
    /// Calls this node's tasks made to other nodes.
    pub calls: u64,
    /// Of those, how many failed (an error, not a reply).
    pub failures: u64,
    /// Request bytes sent.
    pub bytes_out: u64,
    /// Reply bytes received.
    pub bytes_in: u64,
    /// Calls from other nodes this node served.
    pub served: u64,
    /// Of those, how many ended in an error.
    pub served_failures: u64,
    /// Calls from other nodes refused `busy`: too many bytes were
    /// waiting for the name, or from the calling node.
    pub busy: u64,
}

/// A node's counts of what it refused.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refusals {
    /// Frames dropped as malformed or oversized.
    pub dropped: u64,
    /// Frames refused for their seal: unsigned, signed by a stranger or
    /// with a wrong signature, replayed, or meant for another instance.
    pub forged: u64,
    /// Announcements refused: too often or too large, or past the bounds
    /// on nodes and names.
    pub announcements: u64,
    /// Frames dropped unread because the node held its most bytes of
    /// frames not yet checked (see `cluster::intake`).
    pub overflowed: u64,
}

/// Every name's counts and the frames refused.
#[derive(Debug, Default)]
pub struct Stats {
    names: Mutex<BTreeMap<String, NameCounts>>,
    dropped: AtomicU64,
    forged: AtomicU64,
    announcements: AtomicU64,
}

impl Stats {
    /// Adds one finished outgoing call.
    pub fn called(&self, name: &str, sent: usize, result: Result<usize, ()>) {
        self.with(name, |c| {
            c.calls += 1;
            c.bytes_out += sent as u64;
            match result {
                Ok(n) => c.bytes_in += n as u64,
                Err(()) => c.failures += 1,
            }
        })
    }

    /// Adds one served incoming call.
    pub fn served(&self, name: &str, ok: bool) {
        self.with(name, |c| {
            c.served += 1;
            c.served_failures += u64::from(!ok);
        })
    }

    /// Counts an incoming call refused `busy`.
    pub fn busy(&self, name: &str) {
        self.with(name, |c| c.busy += 1)
    }

    /// Counts a frame dropped because it was malformed or oversized.
    pub fn drop_frame(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a frame refused for its seal.
    pub fn forged(&self) {
        self.forged.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refused announcement.
    pub fn refuse_announcement(&self) {
        self.announcements.fetch_add(1, Ordering::Relaxed);
    }

    /// What was refused so far.
    pub fn refusals(&self) -> Refusals {
        Refusals {
            dropped: self.dropped.load(Ordering::Relaxed),
            forged: self.forged.load(Ordering::Relaxed),
            announcements: self.announcements.load(Ordering::Relaxed),
            overflowed: 0,
        }
    }

    /// Every name's counts, by name.
    pub fn names(&self) -> Vec<(String, NameCounts)> {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.iter().map(|(n, c)| (n.clone(), *c)).collect()
    }

    fn with(&self, name: &str, f: impl FnOnce(&mut NameCounts)) {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        match names.get_mut(name) {
            Some(c) => f(c),
            None => f(names.entry(name.to_string()).or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let s = Stats::default();
        s.called("kv", 10, Ok(4));
        s.called("kv", 3, Err(()));
        s.served("kv", true);
        s.served("log", false);
        s.drop_frame();
        let names = s.names();
        assert_eq!(names[0].0, "kv");
        let kv = names[0].1;
        assert_eq!(
            (kv.calls, kv.failures, kv.bytes_out, kv.bytes_in),
            (2, 1, 13, 4)
        );
        assert_eq!((kv.served, kv.served_failures), (1, 0));
        assert_eq!((names[1].1.served, names[1].1.served_failures), (1, 1));
        assert_eq!(s.refusals().dropped, 1);
    }
}

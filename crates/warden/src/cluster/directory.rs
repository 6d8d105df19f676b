//! Which nodes are alive and which names each serves, from their
//! announcements. Pure bookkeeping: the caller passes the time (ms).
//!
//! A node is alive while its last announcement is younger than the
//! directory's ttl. A node that announces a new instance number has
//! restarted: its old state is replaced.
//!
//! What announcements may cost is bounded before they are decoded: all
//! of them together [`CHECKS_PER_SECOND`] and [`BYTES_PER_SECOND`], before
//! their seals are checked ([`Directory::admit_bytes`]); each node
//! [`BURST`] at once and [`PER_SECOND`] a second after that
//! ([`Directory::admit`], in a keyed cluster once the seal has shown the
//! node sent it, so that nobody else spends a node's allowance); at most
//! [`MAX_NODES`] nodes are kept, each with
//! at most [`MAX_NAMES`] names. Past a bound, an announcement is refused
//! (and counted by the caller). Recording one ([`Directory::heard`]) costs
//! time linear in the names of that node before and after, and returns
//! what changed, so that the index of providers lookups read (kept by the
//! caller under its own lock) is updated with that much work too.

use super::wire::Announce;
use std::collections::{HashMap, HashSet};

/// Announcements one node may send at once.
pub const BURST: u64 = 8;
/// Announcements one node may send a second, past the burst (a node
/// announces 4 times a second, and at once when it exports a name).
pub const PER_SECOND: u64 = 10;
/// Announcement bytes heard a second from all nodes together (with as
/// much again at once).
pub const BYTES_PER_SECOND: u64 = 8 << 20;
/// Most nodes kept.
pub const MAX_NODES: usize = 1024;
/// Announcements heard a second from all nodes together (as many again
/// at once): what [`MAX_NODES`] nodes send, each every 250 ms. Each may
/// cost a signature's check.
pub const CHECKS_PER_SECOND: u64 = 4 * MAX_NODES as u64;
/// Most names kept for one node.
pub const MAX_NAMES: usize = 1024;

/// A node as last heard.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Its process's instance number.
    pub instance: u64,
    /// When it was last heard, ms.
    pub seen_ms: u64,
    /// The names it serves for the cluster.
    pub exports: Vec<String>,
}

/// Why an announcement was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its node, or all nodes together, announced too often or too much.
    Rate,
    /// It would be a node past [`MAX_NODES`].
    Nodes,
    /// It offers more than [`MAX_NAMES`] names.
    Names,
}

/// What an announcement changed about one node: names to add to the
/// providers' index, and names to take out of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The node's instance now.
    pub instance: u64,
    /// Names it serves now and did not before (all of them after a
    /// restart).
    pub added: Vec<String>,
    /// Names it served and no longer does (all of them after a restart).
    pub removed: Vec<String>,
}

/// A token bucket with an injected clock; levels in thousandths of a
/// token, so that refilling `rate` a second adds `rate` per ms exactly.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    milli: u64,
    at_ms: u64,
}

impl Bucket {
    pub(super) fn full(capacity: u64, now_ms: u64) -> Bucket {
        Bucket {
            milli: capacity * 1000,
            at_ms: now_ms,
        }
    }

    /// Takes `cost` tokens if there are that many, after refilling
    /// `rate` a second up to `capacity`.
    pub(super) fn take(&mut self, cost: u64, capacity: u64, rate: u64, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.milli = (self.milli + elapsed.saturating_mul(rate)).min(capacity * 1000);
        self.at_ms = now_ms.max(self.at_ms);
        let cost = cost * 1000;
        let ok = self.milli >= cost;
        if ok {
            self.milli -= cost;
        }
        ok
    }
}

/// The other nodes of the cluster.
#[derive(Debug)]
pub struct Directory {
    ttl_ms: u64,
    nodes: HashMap<String, NodeInfo>,
    rates: HashMap<String, Bucket>,
    bytes: Bucket,
    checks: Bucket,
}

impl Directory {
    /// An empty directory forgetting nodes silent for `ttl_ms`.
    pub fn new(ttl_ms: u64) -> Directory {
        Directory {
            ttl_ms,
            nodes: HashMap::new(),
            rates: HashMap::new(),
            bytes: Bucket::full(BYTES_PER_SECOND, 0),
            checks: Bucket::full(CHECKS_PER_SECOND, 0),
        }
    }

    /// Whether an announcement of `bytes` (from any node) may be checked
    /// now, within what all nodes' announcements may cost together.
    pub fn admit_bytes(&mut self, bytes: usize, now_ms: u64) -> Result<(), Refused> {
        let all = CHECKS_PER_SECOND;
        if !self.checks.take(1, all, all, now_ms) {
            return Err(Refused::Rate);
        }
        let all = BYTES_PER_SECOND;
        if !self.bytes.take(bytes as u64, all, all, now_ms) {
            return Err(Refused::Rate);
        }
        Ok(())
    }

    /// Whether an announcement from `node` may be decoded now, within
    /// that node's own rate and the bound on nodes kept.
    pub fn admit(&mut self, node: &str, now_ms: u64) -> Result<(), Refused> {
        if !self.nodes.contains_key(node) && self.nodes.len() >= MAX_NODES {
            return Err(Refused::Nodes);
        }
        if !self.rates.contains_key(node) {
            if self.rates.len() >= 2 * MAX_NODES {
                return Err(Refused::Nodes);
            }
            let full = Bucket::full(BURST, now_ms);
            self.rates.insert(node.to_string(), full);
        }
        let Some(rate) = self.rates.get_mut(node) else {
            return Err(Refused::Nodes);
        };
        if !rate.take(1, BURST, PER_SECOND, now_ms) {
            return Err(Refused::Rate);
        }
        Ok(())
    }

    /// Records an announcement heard at `now_ms`; what it changed.
    pub fn heard(&mut self, a: Announce, now_ms: u64) -> Result<Change, Refused> {
        if a.exports.len() > MAX_NAMES {
            return Err(Refused::Names);
        }
        if !self.nodes.contains_key(&a.node) && self.nodes.len() >= MAX_NODES {
            return Err(Refused::Nodes);
        }
        let mut change = Change {
            instance: a.instance,
            ..Change::default()
        };
        let before = self.nodes.get(&a.node);
        match before {
            Some(old) if old.instance == a.instance => {
                let old_names: HashSet<&str> = old.exports.iter().map(String::as_str).collect();
                let new_names: HashSet<&str> = a.exports.iter().map(String::as_str).collect();
                let gone = old
                    .exports
                    .iter()
                    .filter(|n| !new_names.contains(n.as_str()));
                change.removed = gone.cloned().collect();
                let new = a.exports.iter().filter(|n| !old_names.contains(n.as_str()));
                change.added = new.cloned().collect();
            }
            Some(old) => {
                change.removed = old.exports.clone();
                change.added = a.exports.clone();
            }
            None => change.added = a.exports.clone(),
        }
        change.added.sort();
        change.added.dedup();
        let info = NodeInfo {
            instance: a.instance,
            seen_ms: now_ms,
            exports: a.exports,
        };
        self.nodes.insert(a.node, info);
        Ok(change)
    }

    /// Forgets nodes silent past the ttl; returns them with the names
    /// they served.
    pub fn expire(&mut self, now_ms: u64) -> Vec<(String, Vec<String>)> {
        let ttl = self.ttl_ms;
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, i)| now_ms.saturating_sub(i.seen_ms) > ttl)
            .map(|(n, _)| n.clone())
            .collect();
        let gone: Vec<_> = gone
            .into_iter()
            .filter_map(|n| self.nodes.remove(&n).map(|i| (n, i.exports)))
            .collect();
        let nodes = &self.nodes;
        let stale = |r: &Bucket| now_ms.saturating_sub(r.at_ms) > ttl;
        self.rates.retain(|n, r| nodes.contains_key(n) || !stale(r));
        gone
    }

    /// Whether `node` is alive, and with which instance.
    #[cfg(test)]
    pub fn instance(&self, node: &str, now_ms: u64) -> Option<u64> {
        let i = self.nodes.get(node)?;
        (now_ms.saturating_sub(i.seen_ms) <= self.ttl_ms).then_some(i.instance)
    }

    /// Live nodes, sorted by name.
    pub fn nodes(&self, now_ms: u64) -> Vec<(String, NodeInfo)> {
        let mut v: Vec<_> = self
            .nodes
            .iter()
            .filter(|(_, i)| now_ms.saturating_sub(i.seen_ms) <= self.ttl_ms)
            .map(|(n, i)| (n.clone(), i.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announce(node: &str, instance: u64, exports: &[&str]) -> Announce {
        Announce {
            node: node.into(),
            instance,
            exports: exports.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn changes_are_what_an_announcement_adds_and_takes_away() {
        let mut d = Directory::new(1500);
        let c = d.heard(announce("a", 1, &["kv"]), 0).unwrap();
        assert_eq!((c.added, c.removed), (names(&["kv"]), vec![]));
        let c = d.heard(announce("a", 1, &["kv", "log"]), 100).unwrap();
        assert_eq!((c.added, c.removed), (names(&["log"]), vec![]));
        let c = d.heard(announce("a", 1, &["log"]), 200).unwrap();
        assert_eq!((c.added, c.removed), (vec![], names(&["kv"])));
        assert_eq!(
            d.heard(announce("a", 1, &["log"]), 300),
            Ok(Change {
                instance: 1,
                ..Change::default()
            })
        );
        // A restart replaces everything.
        let c = d.heard(announce("a", 2, &["log"]), 400).unwrap();
        assert_eq!(
            (c.instance, c.added, c.removed),
            (2, names(&["log"]), names(&["log"]))
        );
        d.heard(announce("b", 3, &["kv"]), 500).unwrap();
        assert_eq!(d.instance("a", 1900), Some(2));
        assert_eq!(d.instance("a", 1901), None, "past its ttl");
        assert_eq!(d.expire(1901), vec![("a".to_string(), names(&["log"]))]);
        assert_eq!(d.nodes(1901).len(), 1);
        let many: Vec<String> = (0..=MAX_NAMES).map(|i| i.to_string()).collect();
        let a = Announce {
            node: "c".into(),
            instance: 1,
            exports: many,
        };
        assert_eq!(d.heard(a, 2000), Err(Refused::Names));
    }

    #[test]
    fn announcements_are_bounded_in_rate_bytes_and_nodes() {
        let mut d = Directory::new(1500);
        for _ in 0..BURST {
            assert_eq!(d.admit("a", 0), Ok(()));
        }
        assert_eq!(d.admit("a", 0), Err(Refused::Rate), "past the burst");
        assert_eq!(d.admit("b", 0), Ok(()), "another node's own rate");
        assert_eq!(d.admit("a", 99), Err(Refused::Rate));
        assert_eq!(d.admit("a", 100), Ok(()), "one more each 100 ms");
        // All nodes' bytes together.
        let all = BYTES_PER_SECOND as usize;
        assert_eq!(d.admit_bytes(all, 100), Ok(()), "as much again at once");
        assert_eq!(d.admit_bytes(all, 100), Err(Refused::Rate));
        assert_eq!(d.admit_bytes(all / 2, 1100), Ok(()));
        // And their number, whoever they claim to be from.
        let mut d = Directory::new(1500);
        let checks = CHECKS_PER_SECOND as usize;
        assert!((0..checks).all(|_| d.admit_bytes(10, 0).is_ok()));
        assert_eq!(d.admit_bytes(10, 0), Err(Refused::Rate));
        assert_eq!(d.admit_bytes(10, 1), Ok(()), "4 more each ms");
        let mut d = Directory::new(1500);
        for i in 0..MAX_NODES {
            d.heard(announce(&i.to_string(), 1, &[]), 0).unwrap();
        }
        assert_eq!(d.admit("new", 0), Err(Refused::Nodes));
        assert_eq!(d.heard(announce("new", 1, &[]), 0), Err(Refused::Nodes));
        assert_eq!(d.admit("7", 0), Ok(()), "a kept node");
        assert_eq!(d.expire(2000).len(), MAX_NODES);
        assert_eq!(d.admit("new", 2000), Ok(()), "room again");
    }
}

//! Which nodes are alive and which names each serves, from their
//! announcements. Pure bookkeeping: the caller passes the time (ms).
//!
//! A node is alive while its last announcement is younger than
//! [`Directory::ttl_ms`]. A node that announces a new instance number has
//! restarted: its old state is replaced.

use super::wire::Announce;
use std::collections::HashMap;

/// A node as last heard.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Its process's instance number.
    #[cfg_attr(not(test), allow(dead_code))]
    pub instance: u64,
    /// When it was last heard, ms.
    pub seen_ms: u64,
    /// The names it serves for the cluster.
    pub exports: Vec<String>,
}

/// The other nodes of the cluster.
#[derive(Debug)]
pub struct Directory {
    ttl_ms: u64,
    nodes: HashMap<String, NodeInfo>,
}

impl Directory {
    /// An empty directory forgetting nodes silent for `ttl_ms`.
    pub fn new(ttl_ms: u64) -> Directory {
        Directory {
            ttl_ms,
            nodes: HashMap::new(),
        }
    }

    /// Records an announcement heard at `now_ms`. True if it brings a
    /// name that no live node served before (lookups waiting for it may
    /// now succeed).
    pub fn heard(&mut self, a: Announce, now_ms: u64) -> bool {
        let new_name = a.exports.iter().any(|n| !self.serves(n, now_ms));
        self.nodes.insert(
            a.node,
            NodeInfo {
                instance: a.instance,
                seen_ms: now_ms,
                exports: a.exports,
            },
        );
        new_name
    }

    /// Forgets nodes silent past the ttl; returns their names.
    pub fn expire(&mut self, now_ms: u64) -> Vec<String> {
        let ttl = self.ttl_ms;
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, i)| now_ms.saturating_sub(i.seen_ms) > ttl)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &gone {
            self.nodes.remove(n);
        }
        gone
    }

    /// Whether some live node serves `name`.
    pub fn serves(&self, name: &str, now_ms: u64) -> bool {
        self.live(now_ms)
            .any(|(_, i)| i.exports.iter().any(|e| e == name))
    }

    #[cfg(test)]
    /// Whether `node` is alive, and with which instance.
    fn instance(&self, node: &str, now_ms: u64) -> Option<u64> {
        self.live(now_ms)
            .find(|(n, _)| *n == node)
            .map(|(_, i)| i.instance)
    }

    /// Live nodes, sorted by name.
    pub fn nodes(&self, now_ms: u64) -> Vec<(String, NodeInfo)> {
        let mut v: Vec<_> = self
            .live(now_ms)
            .map(|(n, i)| (n.clone(), i.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn live(&self, now_ms: u64) -> impl Iterator<Item = (&String, &NodeInfo)> {
        self.nodes
            .iter()
            .filter(move |(_, i)| now_ms.saturating_sub(i.seen_ms) <= self.ttl_ms)
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

    #[test]
    fn names_appear_and_expire_with_their_node() {
        let mut d = Directory::new(1500);
        assert!(!d.serves("kv", 0));
        assert!(d.heard(announce("a", 1, &["kv"]), 0), "kv is new");
        assert!(
            !d.heard(announce("b", 2, &["kv"]), 100),
            "kv already served"
        );
        assert!(d.heard(announce("b", 2, &["kv", "log"]), 200), "log is new");
        assert!(d.serves("kv", 1500) && d.serves("log", 1700));
        // a falls silent: at 1501 it is past its ttl, b is not.
        assert_eq!(d.instance("a", 1501), None);
        assert!(d.serves("kv", 1501), "b still serves kv");
        assert_eq!(d.expire(1501), vec!["a".to_string()]);
        assert_eq!(d.nodes(1501).len(), 1);
        assert!(!d.serves("kv", 1701), "b is gone too");
        // A restarted node replaces its predecessor.
        d.heard(announce("b", 3, &[]), 1800);
        assert_eq!(d.instance("b", 1800), Some(3));
        assert!(!d.serves("log", 1800));
    }
}

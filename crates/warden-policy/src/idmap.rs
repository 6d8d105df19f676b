//! Hash maps keyed by the kernel's own ids: task ids and scheduler keys.
//!
//! The kernel hands these ids out itself (a counter), so nobody can choose
//! keys that collide, and the protection std's default hasher (SipHash)
//! buys against that is not needed here. It is not free: every spawn and
//! every task's end hash a task id into several of these maps (the task
//! table, the run queue's cells, the scheduler's group and parameters), and
//! SipHash took more time than the lookups themselves. Never key one of
//! these maps by a value a guest or a client chooses.
//!
//! The hash is one multiplication by an odd constant (as rustc's FxHash):
//! for consecutive ids the low bits, which pick the bucket, run through
//! every value, and the high bits, which the table keeps as a tag, differ
//! too.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by kernel-assigned ids (see the module's note).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A set of kernel-assigned ids (see the module's note).
pub type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// The multiplier: 2^64 over the golden ratio, rounded to odd.
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// Hashes integer ids by one multiplication (see the module's note).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(id: u64) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(id)
    }

    #[test]
    fn consecutive_ids_spread_over_buckets_and_tags() {
        // 1024 consecutive ids into 1024 buckets: every bucket once (the
        // multiplier is odd, so the low bits are a permutation).
        let buckets: HashSet<u64> = (1..=1024).map(|id| hash(id) & 1023).collect();
        assert_eq!(buckets.len(), 1024);
        // The table's 7-bit tags: all 128 appear.
        let tags: HashSet<u64> = (1..=1024).map(|id| hash(id) >> 57).collect();
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn maps_work_as_maps() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for id in 0..10_000 {
            m.insert(id, id * 2);
        }
        for id in (0..10_000).step_by(2) {
            assert_eq!(m.remove(&id), Some(id * 2));
        }
        assert_eq!(m.len(), 5_000);
        assert!((1..10_000).step_by(2).all(|id| m[&id] == id * 2));
    }
}

//! The four scheduling policies. Each orders the runnable children of one
//! node of the scheduling tree (tasks or groups, named by `u64` keys).

use super::{Params, Policy};
use crate::idmap::{IdMap, IdSet};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Nominal CPU quantum: what a lottery winner is expected to use.
pub const QUANTUM_NS: u64 = 4_000_000;

/// First in, first out: a child whose slice ended goes to the back.
///
/// Removal is O(1): a removed child's entry stays in the queue and is
/// skipped when it comes up.
#[derive(Default)]
pub struct RoundRobin {
    queue: VecDeque<u64>,
    queued: IdSet<u64>,
}

impl Policy for RoundRobin {
    fn add(&mut self, _key: u64, _params: &Params) {}
    fn forget(&mut self, key: u64) {
        self.remove(key);
    }
    fn enqueue(&mut self, key: u64) {
        if self.queued.insert(key) {
            self.queue.push_back(key);
        }
    }
    fn pick(&mut self) -> Option<u64> {
        while let Some(k) = self.queue.pop_front() {
            if self.queued.remove(&k) {
                return Some(k);
            }
        }
        None
    }
    fn remove(&mut self, key: u64) -> bool {
        let removed = self.queued.remove(&key);
        if self.queued.is_empty() {
            self.queue.clear();
        }
        removed
    }
}

/// Fixed priorities: always the highest runnable priority, round-robin
/// among equals. A lower priority never runs while a higher one is
/// runnable. Removal is O(1), as in [`RoundRobin`].
#[derive(Default)]
pub struct FixedPriority {
    priority: IdMap<u64, i32>,
    levels: BTreeMap<Reverse<i32>, VecDeque<u64>>,
    queued: IdSet<u64>,
}

impl Policy for FixedPriority {
    fn add(&mut self, key: u64, params: &Params) {
        self.priority.insert(key, params.priority);
    }
    fn forget(&mut self, key: u64) {
        self.remove(key);
        self.priority.remove(&key);
    }
    fn enqueue(&mut self, key: u64) {
        if self.queued.insert(key) {
            let p = self.priority.get(&key).copied().unwrap_or(0);
            self.levels.entry(Reverse(p)).or_default().push_back(key);
        }
    }
    fn pick(&mut self) -> Option<u64> {
        loop {
            let mut level = self.levels.first_entry()?;
            while let Some(k) = level.get_mut().pop_front() {
                if self.queued.remove(&k) {
                    if level.get().is_empty() {
                        level.remove();
                    }
                    return Some(k);
                }
            }
            level.remove();
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        let removed = self.queued.remove(&key);
        if self.queued.is_empty() {
            self.levels.clear();
        }
        removed
    }
    fn set_params(&mut self, key: u64, params: &Params) {
        // Takes effect from the child's next enqueue.
        self.priority.insert(key, params.priority);
    }
}

/// Stride scheduling (Waldspurger): each child advances its *pass* by
/// `used_ns / share` whenever it runs, and the runnable child with the
/// smallest pass runs next, so CPU time converges to the shares with an
/// error bounded by one quantum. A child waking after a sleep starts at
/// the current virtual time, so sleeping banks no credit.
#[derive(Default)]
pub struct Stride {
    children: IdMap<u64, StrideChild>,
    ready: BTreeSet<(u128, u64)>,
    virtual_time: u128,
}

struct StrideChild {
    share: u32,
    pass: u128,
    queued: bool,
}

/// Pass units per nanosecond at share 1.
const STRIDE_SCALE: u128 = 1 << 32;

impl Policy for Stride {
    fn add(&mut self, key: u64, params: &Params) {
        self.children.insert(
            key,
            StrideChild {
                share: params.share.max(1),
                pass: self.virtual_time,
                queued: false,
            },
        );
    }
    fn forget(&mut self, key: u64) {
        self.remove(key);
        self.children.remove(&key);
    }
    fn enqueue(&mut self, key: u64) {
        let vt = self.virtual_time;
        let c = self.children.entry(key).or_insert(StrideChild {
            share: 1,
            pass: vt,
            queued: false,
        });
        if c.queued {
            return;
        }
        c.pass = c.pass.max(vt);
        c.queued = true;
        self.ready.insert((c.pass, key));
    }
    fn pick(&mut self) -> Option<u64> {
        let (pass, key) = self.ready.pop_first()?;
        self.virtual_time = self.virtual_time.max(pass);
        if let Some(c) = self.children.get_mut(&key) {
            c.queued = false;
        }
        Some(key)
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.children.get_mut(&key) {
            Some(c) if c.queued => {
                c.queued = false;
                self.ready.remove(&(c.pass, key))
            }
            _ => false,
        }
    }
    fn charge(&mut self, key: u64, ns: u64) {
        if let Some(c) = self.children.get_mut(&key) {
            let queued = c.queued;
            if queued {
                self.ready.remove(&(c.pass, key));
            }
            c.pass += ns as u128 * STRIDE_SCALE / c.share as u128;
            if queued {
                self.ready.insert((c.pass, key));
            }
        }
    }
    fn set_params(&mut self, key: u64, params: &Params) {
        if let Some(c) = self.children.get_mut(&key) {
            c.share = params.share.max(1);
        }
    }
    fn uses_charges(&self) -> bool {
        true
    }
}

/// Lottery scheduling: a random draw weighted by tickets. A child that
/// used only a fraction of its quantum holds proportionally more tickets
/// at the next draw (compensation tickets), so short runners are not
/// shortchanged.
pub struct Lottery {
    tickets: IdMap<u64, (u32, u64)>, // tickets, ns used last time
    ready: Vec<u64>,
    /// Position of each ready child in `ready`.
    index: IdMap<u64, usize>,
    rng: u64,
}

impl Lottery {
    /// A lottery with a fixed seed (draws are reproducible).
    pub fn new(seed: u64) -> Self {
        Lottery {
            tickets: IdMap::default(),
            ready: Vec::new(),
            index: IdMap::default(),
            rng: seed | 1,
        }
    }

    fn weight(&self, key: u64) -> u128 {
        let (t, used) = self.tickets.get(&key).copied().unwrap_or((1, QUANTUM_NS));
        let used = used.clamp(QUANTUM_NS / 64, QUANTUM_NS);
        t.max(1) as u128 * QUANTUM_NS as u128 / used as u128
    }
}

impl Default for Lottery {
    fn default() -> Self {
        Lottery::new(0x9E37_79B9_7F4A_7C15)
    }
}

impl Policy for Lottery {
    fn add(&mut self, key: u64, params: &Params) {
        self.tickets
            .insert(key, (params.tickets.max(1), QUANTUM_NS));
    }
    fn forget(&mut self, key: u64) {
        self.remove(key);
        self.tickets.remove(&key);
    }
    fn enqueue(&mut self, key: u64) {
        if !self.index.contains_key(&key) {
            self.index.insert(key, self.ready.len());
            self.ready.push(key);
        }
    }
    fn pick(&mut self) -> Option<u64> {
        let total: u128 = self.ready.iter().map(|&k| self.weight(k)).sum();
        if total == 0 {
            return None;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let mut draw = self.rng as u128 % total;
        let mut winner = self.ready.len() - 1;
        for (i, &k) in self.ready.iter().enumerate() {
            let w = self.weight(k);
            if draw < w {
                winner = i;
                break;
            }
            draw -= w;
        }
        let key = self.ready[winner];
        self.remove(key);
        Some(key)
    }
    fn remove(&mut self, key: u64) -> bool {
        let Some(i) = self.index.remove(&key) else {
            return false;
        };
        self.ready.swap_remove(i);
        if let Some(&moved) = self.ready.get(i) {
            self.index.insert(moved, i);
        }
        true
    }
    fn charge(&mut self, key: u64, ns: u64) {
        if let Some(e) = self.tickets.get_mut(&key) {
            e.1 = ns;
        }
    }
    fn set_params(&mut self, key: u64, params: &Params) {
        if let Some(e) = self.tickets.get_mut(&key) {
            e.0 = params.tickets.max(1);
        }
    }
    fn uses_charges(&self) -> bool {
        true
    }
}

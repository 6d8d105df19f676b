//! Scheduling policy: which runnable task runs next.
//!
//! Policy is kept apart from mechanism. The executor tells a [`RunQueue`]
//! when a task becomes runnable and asks it which task to run when a worker
//! is free; the run queue never sees Wasm, threads or clocks, so a policy is
//! a plain data structure that can be tested in microseconds.
//!
//! Only round-robin exists for now; other policies implement the same trait.

use std::collections::VecDeque;

/// Identifies a task to the policy. The executor's task ids are used as is.
pub type TaskKey = u64;

/// The decision interface between the executor and a scheduling policy.
///
/// Each runnable task is pushed exactly once and popped exactly once per
/// run: the executor guarantees it never pushes a task that is already
/// queued or running. `remove` drops a queued task that was killed.
pub trait RunQueue: Send {
    /// `task` became runnable (new, woken, or its time slice ended).
    fn push(&mut self, task: TaskKey);
    /// Picks the next task to run, removing it from the queue.
    fn pop(&mut self) -> Option<TaskKey>;
    /// Forgets a queued task; returns whether it was queued.
    fn remove(&mut self, task: TaskKey) -> bool;
    /// Number of queued tasks.
    fn len(&self) -> usize;
    /// Whether no task is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// First in, first out: a task whose slice ended goes to the back.
#[derive(Debug, Default)]
pub struct RoundRobin {
    queue: VecDeque<TaskKey>,
}

impl RoundRobin {
    /// An empty run queue.
    pub fn new() -> Self {
        Self::default()
    }
}

impl RunQueue for RoundRobin {
    fn push(&mut self, task: TaskKey) {
        debug_assert!(!self.queue.contains(&task), "task {task} queued twice");
        self.queue.push_back(task);
    }

    fn pop(&mut self) -> Option<TaskKey> {
        self.queue.pop_front()
    }

    fn remove(&mut self, task: TaskKey) -> bool {
        match self.queue.iter().position(|&t| t == task) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_is_fifo_and_rotates() {
        let mut q = RoundRobin::new();
        for t in 1..=3 {
            q.push(t);
        }
        // Three slices: each task runs once, then goes to the back.
        let mut order = vec![];
        for _ in 0..6 {
            let t = q.pop().unwrap();
            order.push(t);
            q.push(t);
        }
        assert_eq!(order, [1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn remove_only_queued() {
        let mut q = RoundRobin::new();
        q.push(7);
        q.push(8);
        assert!(q.remove(7));
        assert!(!q.remove(7));
        assert_eq!(q.pop(), Some(8));
        assert_eq!(q.pop(), None);
        assert!(q.is_empty());
    }
}

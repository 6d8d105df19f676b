//! A task's family: its parent, what it carved from the parent's budget,
//! the limit events it posts for the parent, and how it ended.

use super::TaskShared;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

/// Event kind: a memory growth was denied at the limit.
pub const EVENT_MEMORY: i32 = 1;
/// Event kind: the CPU limit was reached; the task is suspended.
pub const EVENT_CPU: i32 = 2;

/// Limit events a child posts for its parent (MVM's overuse callbacks).
#[derive(Debug, Default)]
pub struct Events {
    /// (kind, value): [`EVENT_MEMORY`] with the bytes asked for, or
    /// [`EVENT_CPU`] with the CPU used.
    pub queue: VecDeque<(i32, u64)>,
    /// A CPU event is outstanding (the child is suspended for it).
    pub cpu_pending: bool,
    /// The parent waiting for an event.
    pub waiters: Vec<Waker>,
}

/// A task's end as its parent sees it.
#[derive(Debug, Default)]
pub struct ExitState {
    /// The exit code, or a negative status (-1 trapped, -2 killed).
    pub status: Option<i32>,
    /// Parents waiting.
    pub waiters: Vec<Waker>,
}

/// The parent side of a task.
#[derive(Debug, Default)]
pub struct Family {
    /// The task that spawned it, if any.
    pub parent: Option<Arc<TaskShared>>,
    /// Memory reserved for it in its parent's budget (returned at its end).
    pub carved_memory: AtomicU64,
    /// Whether hitting its memory limit notifies its parent.
    pub notify_memory: bool,
    /// Whether hitting its CPU limit suspends it and notifies its parent
    /// instead of killing it.
    pub notify_cpu: bool,
    events: Mutex<Events>,
    exit: Mutex<ExitState>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Family {
    /// Its pending events and the parent's wakers.
    pub fn events(&self) -> MutexGuard<'_, Events> {
        lock(&self.events)
    }

    /// How it ended, and the parents waiting for that.
    pub fn exit(&self) -> MutexGuard<'_, ExitState> {
        lock(&self.exit)
    }

    /// Whether it has ended.
    pub fn ended(&self) -> bool {
        self.exit().status.is_some()
    }

    /// Records how it ended and wakes a waiting parent (for its end and
    /// for its events, which end with it).
    pub fn set_exit(&self, status: i32) {
        let waiters = {
            let mut e = self.exit();
            e.status = Some(status);
            std::mem::take(&mut e.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
        let waiters = std::mem::take(&mut self.events().waiters);
        waiters.into_iter().for_each(Waker::wake);
    }

    /// Posts a limit event for the parent; returns false if one of the
    /// same kind is already waiting (no flood of repeats).
    pub fn post_event(&self, kind: i32, value: u64) -> bool {
        let mut ev = self.events();
        if ev.queue.iter().any(|(k, _)| *k == kind) {
            return false;
        }
        ev.queue.push_back((kind, value));
        let waiters = std::mem::take(&mut ev.waiters);
        drop(ev);
        waiters.into_iter().for_each(Waker::wake);
        true
    }

    /// Memory carved for it from its parent.
    pub fn carved(&self) -> u64 {
        self.carved_memory.load(Ordering::Acquire)
    }
}

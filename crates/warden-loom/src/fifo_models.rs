//! The fair lock's rules (`fifo.rs`) raced against each other: one holder
//! at a time, nobody left waiting for a free lock, and a waiter that gives
//! up (its future dropped) neither keeps the lock nor loses it for the
//! next.
//!
//! Each lock operation is several atomic steps and a mutex, so three
//! threads have too many interleavings to visit all; the models bound
//! preemptions (as Tokio's own loom tests do), which still covers every
//! schedule with up to that many forced switches.

use crate::fifo::FifoLock;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Runs `f` under every schedule with at most four preemptions (the
/// three models take about 10 s so; with five, about 100 s).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(4);
    builder.check(f);
}

/// Holds the lock for a moment, checking that nobody else holds it.
fn hold(lock: &FifoLock<usize>, inside: &AtomicUsize) {
    let mut guard = loom::future::block_on(lock.lock());
    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
    guard.with(|v| *v += 1);
    inside.fetch_sub(1, Ordering::SeqCst);
}

/// Three waiters at once: each gets the lock once, one at a time, and the
/// lock is free at the end.
#[test]
fn waiters_take_turns() {
    model(|| {
        let lock = Arc::new(FifoLock::new(0usize));
        let inside = Arc::new(AtomicUsize::new(0));
        let others: Vec<_> = (0..2)
            .map(|_| {
                let (lock, inside) = (lock.clone(), inside.clone());
                thread::spawn(move || hold(&lock, &inside))
            })
            .collect();
        hold(&lock, &inside);
        for t in others {
            t.join().unwrap();
        }
        let mut guard = lock.try_lock().expect("free at the end");
        assert_eq!(guard.with(|v| *v), 3);
    });
}

/// A waiter that gives up after queueing, while the holder unlocks and a
/// third party waits: the lock ends up free, and the third party got it.
#[test]
fn a_waiter_gives_up_while_the_lock_is_handed_on() {
    model(|| {
        let lock = Arc::new(FifoLock::new(0usize));
        let inside = Arc::new(AtomicUsize::new(0));
        let held = lock.try_lock().expect("free at first");
        let quitter = {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut waiting = pin!(lock.lock());
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(guard) = waiting.as_mut().poll(&mut cx) {
                    drop(guard);
                }
                // Dropped here: queued (given up) or granted (passed on).
            })
        };
        let waiter = {
            let (lock, inside) = (lock.clone(), inside.clone());
            thread::spawn(move || hold(&lock, &inside))
        };
        drop(held);
        quitter.join().unwrap();
        waiter.join().unwrap();
        let mut guard = lock.try_lock().expect("free at the end");
        assert_eq!(guard.with(|v| *v), 1, "the waiter had it once");
    });
}

/// `try_lock` never overtakes a queued waiter: once the holder unlocks
/// with someone waiting, the lock goes to the waiter.
#[test]
fn try_lock_does_not_overtake_a_waiter() {
    model(|| {
        let lock = Arc::new(FifoLock::new(0usize));
        let held = lock.try_lock().expect("free at first");
        let mut waiting = pin!(lock.lock());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        let barger = {
            let lock = lock.clone();
            thread::spawn(move || lock.try_lock().is_some())
        };
        drop(held);
        let barged = barger.join().unwrap();
        assert!(!barged, "a try_lock took the lock from a waiter");
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(_)));
    });
}

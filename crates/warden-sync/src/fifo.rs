//! A fair (first come, first served) asynchronous lock whose uncontended
//! lock and unlock are one compare-and-swap each.
//!
//! A passive service runs one call at a time and makes the others wait in
//! the order they came. Tokio's fair mutex does that, but every unlock
//! takes its waiters' lock, even with nobody waiting: a fifth of a whole
//! passive call. Here the waiters' queue is touched only when someone
//! waits.
//!
//! # Protocol
//!
//! The lock is one word: `FREE`, `LOCKED` (held, nobody waits) or
//! `LOCKED | WAITING` (held, and the queue has waiters). The queue lives
//! under its own mutex, and `WAITING` is set and cleared only by holders
//! of that mutex.
//!
//! 1. **Try** ([`FifoLock::try_lock`]): `FREE` → `LOCKED`. Fails whenever
//!    the lock is held, so nobody overtakes a waiter: while anyone waits
//!    the lock is never `FREE` (rule 3 hands it over without freeing it).
//! 2. **Wait** ([`FifoLock::lock`]): under the queue mutex, take the lock
//!    if it is `FREE`; otherwise set `WAITING` and join the back of the
//!    queue with a waker.
//! 3. **Unlock**: `LOCKED` → `FREE` if nobody waits. Otherwise, under the
//!    queue mutex, the first waiter is *granted* the lock (it stays held:
//!    ownership passes directly), `WAITING` is cleared if the queue is now
//!    empty, and the waiter is woken.
//! 4. **Give up** (a waiting future dropped: a timeout, a kill): under the
//!    queue mutex, a waiter not yet granted leaves the queue (clearing
//!    `WAITING` if it was the last); one already granted owns the lock, and
//!    unlocks it (rule 3) so the next waiter gets it.
//!
//! The models in the `loom` tests race these rules against each other.

use crate::loom::{Arc, AtomicBool, AtomicU8, Mutex, MutexGuard, Ordering, UnsafeCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

const FREE: u8 = 0;
const LOCKED: u8 = 1;
const WAITING: u8 = 2;

/// A fair asynchronous lock around a `T` (see the module docs).
pub struct FifoLock<T> {
    state: AtomicU8,
    queue: Mutex<VecDeque<(Arc<AtomicBool>, Waker)>>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives one holder at a time access to the value, as a
// mutex does.
unsafe impl<T: Send> Send for FifoLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for FifoLock<T> {}

/// Access to the value while the lock is held; unlocks when dropped.
pub struct FifoGuard<'a, T> {
    lock: &'a FifoLock<T>,
}

impl<T> FifoLock<T> {
    /// A free lock around `value`.
    pub fn new(value: T) -> Self {
        FifoLock {
            state: AtomicU8::new(FREE),
            queue: Mutex::new(VecDeque::new()),
            value: UnsafeCell::new(value),
        }
    }

    /// Rule 1: the lock, if it is free.
    pub fn try_lock(&self) -> Option<FifoGuard<'_, T>> {
        self.state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| FifoGuard { lock: self })
    }

    /// Rule 2: the lock, once everyone who waited before has had it.
    pub fn lock(&self) -> Lock<'_, T> {
        Lock {
            lock: self,
            ticket: None,
        }
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<(Arc<AtomicBool>, Waker)>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rule 3.
    fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, FREE, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        let mut queue = self.queue();
        // `WAITING` is set exactly while the queue has waiters, and both
        // change only under its mutex: an empty queue here means the last
        // waiter gave up after the exchange above failed (rule 4).
        let Some((granted, waker)) = queue.pop_front() else {
            self.state.store(FREE, Ordering::Release);
            return;
        };
        if queue.is_empty() {
            self.state.store(LOCKED, Ordering::Relaxed);
        }
        granted.store(true, Ordering::Release);
        drop(queue);
        waker.wake();
    }
}

/// The future of [`FifoLock::lock`].
pub struct Lock<'a, T> {
    lock: &'a FifoLock<T>,
    /// Set once queued: becomes true when the lock is granted.
    ticket: Option<Arc<AtomicBool>>,
}

impl<'a, T> Future for Lock<'a, T> {
    type Output = FifoGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FifoGuard<'a, T>> {
        let lock = self.lock;
        let Some(ticket) = &self.ticket else {
            if let Some(guard) = lock.try_lock() {
                return Poll::Ready(guard);
            }
            let mut queue = lock.queue();
            let mut state = lock.state.load(Ordering::Relaxed);
            loop {
                let (next, took) = match state {
                    FREE => (LOCKED, true),
                    _ => (LOCKED | WAITING, false),
                };
                match lock.state.compare_exchange_weak(
                    state,
                    next,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) if took => return Poll::Ready(FifoGuard { lock }),
                    Ok(_) => break,
                    Err(now) => state = now,
                }
            }
            let ticket = Arc::new(AtomicBool::new(false));
            queue.push_back((ticket.clone(), cx.waker().clone()));
            drop(queue);
            self.ticket = Some(ticket);
            return Poll::Pending;
        };
        if ticket.load(Ordering::Acquire) {
            self.ticket = None;
            return Poll::Ready(FifoGuard { lock });
        }
        let mut queue = lock.queue();
        // Granted meanwhile (under the queue mutex, so either it is
        // granted now or still queued).
        if ticket.load(Ordering::Acquire) {
            drop(queue);
            self.ticket = None;
            return Poll::Ready(FifoGuard { lock });
        }
        if let Some((_, waker)) = queue.iter_mut().find(|(t, _)| Arc::ptr_eq(t, ticket)) {
            if !waker.will_wake(cx.waker()) {
                *waker = cx.waker().clone();
            }
        }
        Poll::Pending
    }
}

impl<T> Drop for Lock<'_, T> {
    /// Rule 4.
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let mut queue = self.lock.queue();
        if ticket.load(Ordering::Acquire) {
            drop(queue);
            self.lock.unlock();
            return;
        }
        queue.retain(|(t, _)| !Arc::ptr_eq(t, &ticket));
        if queue.is_empty() {
            self.lock.state.store(LOCKED, Ordering::Relaxed);
        }
    }
}

#[cfg(loom)]
impl<T> FifoGuard<'_, T> {
    /// Runs `f` on the value (the models' way in; elsewhere the guard
    /// dereferences to it).
    pub fn with<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the guard is the lock's one holder.
        self.lock.value.with_mut(|v| f(unsafe { &mut *v }))
    }
}

#[cfg(not(loom))]
impl<T> std::ops::Deref for FifoGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard is the lock's one holder, for its lifetime.
        self.lock.value.with_mut(|v| unsafe { &*v })
    }
}

#[cfg(not(loom))]
impl<T> std::ops::DerefMut for FifoGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed mutably.
        self.lock.value.with_mut(|v| unsafe { &mut *v })
    }
}

impl<T> Drop for FifoGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::pin::pin;

    fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn waiters_get_the_lock_in_the_order_they_came() {
        let lock = FifoLock::new(Vec::new());
        let mut held = lock.try_lock().unwrap();
        // The second boxed, so that dropping it drops the future.
        let (mut a, mut b, mut c) = (pin!(lock.lock()), Box::pin(lock.lock()), pin!(lock.lock()));
        for f in [a.as_mut(), b.as_mut(), c.as_mut()] {
            assert!(poll(f).is_pending());
        }
        held.push('h');
        drop(held);
        assert!(lock.try_lock().is_none(), "a try_lock overtook the waiters");
        assert!(poll(c.as_mut()).is_pending() && poll(b.as_mut()).is_pending());
        let Poll::Ready(mut g) = poll(a.as_mut()) else {
            panic!("the first waiter was not granted the lock")
        };
        g.push('a');
        drop(g);
        // The second gives up: its turn passes to the third.
        drop(b);
        let Poll::Ready(mut g) = poll(c.as_mut()) else {
            panic!("the third waiter did not get the lock the second gave up")
        };
        g.push('c');
        drop(g);
        assert_eq!(*lock.try_lock().expect("free at the end"), ['h', 'a', 'c']);
    }
}

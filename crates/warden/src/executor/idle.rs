//! Waiting awake for a moment before sleeping.
//!
//! A futex sleep and wake-up cost tens of microseconds on some machines
//! (virtual ones above all), more than a whole task's spawn; work that
//! comes within a short window is taken without either. Whether the
//! window pays depends on the machine and the load (on two busy cores a
//! thread spinning takes a core from one that would run), so it is a
//! setting of each runtime ([`crate::RuntimeConfig::idle_spin`]), zero
//! meaning "sleep at once", as a thread blocking on a condition variable
//! does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The default idle spin: how long a thread about to sleep for want of
/// work first looks for it awake (see [`crate::RuntimeConfig::idle_spin`]).
pub const IDLE_SPIN: Duration = Duration::from_micros(50);

/// How long a thread about to sleep for want of work (an idle worker, a
/// host thread waiting for a report) first looks for it awake. One per
/// runtime, shared by its workers and its waiters; it may be changed
/// while they run ([`crate::Runtime::set_idle_spin`]).
#[derive(Debug)]
pub struct IdleSpin {
    ns: AtomicU64,
}

impl Default for IdleSpin {
    fn default() -> Self {
        IdleSpin::new(IDLE_SPIN)
    }
}

impl IdleSpin {
    /// A spin of `window` (zero: none).
    pub fn new(window: Duration) -> IdleSpin {
        IdleSpin {
            ns: AtomicU64::new(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX)),
        }
    }

    /// The window now.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.ns.load(Ordering::Relaxed))
    }

    /// Sets the window.
    pub fn set(&self, window: Duration) {
        let ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        self.ns.store(ns, Ordering::Relaxed);
    }

    /// Polls `done` until it holds or the window has passed; whether it
    /// held. Between rounds of polls the thread yields, so that on a
    /// machine with more runnable threads than cores the spinning takes
    /// no core from them.
    pub(crate) fn until(&self, mut done: impl FnMut() -> bool) -> bool {
        let window = self.window();
        if window.is_zero() {
            return done();
        }
        let start = Instant::now();
        loop {
            for _ in 0..32 {
                if done() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= window {
                return false;
            }
            std::thread::yield_now();
        }
    }
}

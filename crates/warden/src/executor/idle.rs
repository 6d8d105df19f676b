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
//!
//! The window adapts to what it finds. Each spin that finds nothing
//! halves the next (down to a 64th of the setting, [`MOST_HALVINGS`]):
//! where work comes seldom (a web route at one connection, whose next
//! request is a network round trip away), a spinning worker would only
//! take the core the server's own threads need, and a no-spin runtime
//! measured faster. A spin that finds work, or a sleep that ends with
//! work sooner than the whole window ([`IdleSpin::woke_after`]: a spin of
//! the whole window would have found it), gives the whole window back,
//! so that a portal round trip, whose answer comes within microseconds,
//! keeps its spin.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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
    /// The setting: the whole window.
    ns: AtomicU64,
    /// Spins in a row that found nothing, at most [`MOST_HALVINGS`]:
    /// the window now is the setting halved this many times.
    misses: AtomicU32,
}

/// The most times a window is halved: it never falls below a 64th of
/// its setting (under a microsecond of the default 50), so that work
/// coming again within that still finds a spinning thread and gives the
/// whole window back.
pub const MOST_HALVINGS: u32 = 6;

/// The window after `misses` spins in a row found nothing, of a setting
/// of `ns`.
fn shrunk(ns: u64, misses: u32) -> u64 {
    ns >> misses.min(MOST_HALVINGS)
}

/// The misses counted after one more spin that found nothing.
fn missed(misses: u32) -> u32 {
    (misses + 1).min(MOST_HALVINGS)
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
            misses: AtomicU32::new(0),
        }
    }

    /// The window as set (the most a spin lasts).
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.ns.load(Ordering::Relaxed))
    }

    /// The window the next spin lasts: the setting, halved once for each
    /// spin in a row that found nothing (see the module docs).
    pub fn current(&self) -> Duration {
        let misses = self.misses.load(Ordering::Relaxed);
        Duration::from_nanos(shrunk(self.ns.load(Ordering::Relaxed), misses))
    }

    /// Sets the window, whole again.
    pub fn set(&self, window: Duration) {
        let ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        self.ns.store(ns, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }

    /// A thread whose spin found nothing slept, and had work `gap` after
    /// it began to look: had the whole window been spun, the spin would
    /// have found it if `gap` is within the window, which is then given
    /// back whole.
    pub(crate) fn woke_after(&self, gap: Duration) {
        if gap <= self.window() && self.misses.load(Ordering::Relaxed) != 0 {
            self.misses.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a spin's outcome. (Spinning threads race on the count; a
    /// lost update only makes one window longer or shorter than it
    /// would have been.)
    fn found(&self, found: bool) -> bool {
        match found {
            // Read first: the word is shared by every worker, and a write
            // of the zero it already holds would still take its cache line
            // from the others on every spin that finds work.
            true if self.misses.load(Ordering::Relaxed) == 0 => {}
            true => self.misses.store(0, Ordering::Relaxed),
            false => {
                let m = self.misses.load(Ordering::Relaxed);
                self.misses.store(missed(m), Ordering::Relaxed);
            }
        }
        found
    }

    /// Polls `done` until it holds or the window has passed; whether it
    /// held. Between rounds of polls the thread yields, so that on a
    /// machine with more runnable threads than cores the spinning takes
    /// no core from them.
    pub(crate) fn until(&self, mut done: impl FnMut() -> bool) -> bool {
        let window = self.current();
        if window.is_zero() {
            return done();
        }
        let start = Instant::now();
        loop {
            for _ in 0..32 {
                if done() {
                    return self.found(true);
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= window {
                return self.found(false);
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_miss_halves_the_window_down_to_a_64th() {
        let spin = IdleSpin::new(Duration::from_micros(64));
        let windows: Vec<u64> = (0..9)
            .map(|_| {
                let w = spin.current().as_nanos() as u64;
                assert!(!spin.until(|| false));
                w
            })
            .collect();
        assert_eq!(
            windows,
            [64_000, 32_000, 16_000, 8_000, 4_000, 2_000, 1_000, 1_000, 1_000]
        );
        assert_eq!(
            spin.window(),
            Duration::from_micros(64),
            "the setting stays"
        );
    }

    #[test]
    fn work_found_gives_the_whole_window_back() {
        let spin = IdleSpin::new(Duration::from_micros(64));
        for _ in 0..4 {
            spin.until(|| false);
        }
        assert_eq!(spin.current(), Duration::from_micros(4));
        assert!(spin.until(|| true));
        assert_eq!(spin.current(), Duration::from_micros(64));
    }

    #[test]
    fn a_short_sleep_gives_the_window_back_and_a_long_one_does_not() {
        let spin = IdleSpin::new(Duration::from_micros(64));
        for _ in 0..3 {
            spin.until(|| false);
        }
        spin.woke_after(Duration::from_micros(200));
        assert_eq!(spin.current(), Duration::from_micros(8));
        spin.woke_after(Duration::from_micros(40));
        assert_eq!(spin.current(), Duration::from_micros(64));
    }

    #[test]
    fn setting_the_window_makes_it_whole_and_zero_never_spins() {
        let spin = IdleSpin::new(Duration::from_micros(64));
        spin.until(|| false);
        spin.set(Duration::from_micros(10));
        assert_eq!(spin.current(), Duration::from_micros(10));
        spin.set(Duration::ZERO);
        let mut polls = 0;
        assert!(!spin.until(|| {
            polls += 1;
            false
        }));
        assert_eq!(polls, 1, "a zero window polls once and returns");
    }

    /// Threads spinning and finding work at once leave the window within
    /// its bounds.
    #[test]
    fn racing_spins_keep_the_window_within_its_bounds() {
        let spin = std::sync::Arc::new(IdleSpin::new(Duration::from_micros(2)));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let spin = spin.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        spin.until(|| (i + t) % 3 == 0);
                        let w = spin.current();
                        assert!(w <= Duration::from_micros(2) && w >= Duration::from_nanos(31));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

//! A cheap clock for short intervals: the processor's time-stamp counter
//! where the kernel itself keeps time by it, otherwise the monotonic clock.
//!
//! A passive call is timed from start to end so its server can be held to
//! its CPU limits, and the CPU meter times every poll; two vDSO
//! `clock_gettime` readings were a quarter of a whole passive call. One
//! `rdtsc` costs about half of one. Readings are raw
//! counts ([`now`]); only their differences become nanoseconds
//! ([`to_ns`]), so the conversion factor need not be exact to the last
//! part per million, and a reading never has to agree with another clock.
//!
//! The counter is used only when the kernel's clocksource is `tsc`: the
//! kernel then vouches that it runs at a constant rate and agrees across
//! processors (otherwise it would have switched to another source). The
//! factor is measured once per process, against `CLOCK_MONOTONIC`, over
//! [`CALIBRATION_NS`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// How long the counter is measured against the monotonic clock: each
/// end of the measurement is known to within [`BRACKET_NS`], so the
/// factor is off by at most 2 × 200 ns in 250 µs, 0.16% (in practice a
/// reading pair brackets within about 50 ns: 0.04%). Every run of a
/// program spins this long once, so it is kept short.
const CALIBRATION_NS: u64 = 250_000;
/// How closely a counter reading must be bracketed by two readings of
/// the monotonic clock; after [`BRACKET_TRIES`] misses, within 1 µs.
const BRACKET_NS: u64 = 200;
const BRACKET_TRIES: u32 = 64;

/// Nanoseconds per count, as a 32.32 fixed-point number; [`MONOTONIC`]
/// when readings are the monotonic clock's nanoseconds, [`UNSET`] before
/// the first reading.
static FACTOR: AtomicU64 = AtomicU64::new(UNSET);
const MONOTONIC: u64 = 0;
const UNSET: u64 = u64::MAX;

/// A reading of the clock, in counts (never 0).
#[inline]
pub fn now() -> u64 {
    match FACTOR.load(Ordering::Relaxed) {
        MONOTONIC => super::now(),
        UNSET => {
            calibrated();
            now()
        }
        _ => counter().max(1),
    }
}

/// Nanoseconds in `counts`, a difference of two readings.
#[inline]
pub fn to_ns(counts: u64) -> u64 {
    match FACTOR.load(Ordering::Relaxed) {
        MONOTONIC | UNSET => counts,
        f => ((counts as u128 * f as u128) >> 32) as u64,
    }
}

/// Nanoseconds since the reading `start`.
#[inline]
pub fn ns_since(start: u64) -> u64 {
    to_ns(now().saturating_sub(start))
}

/// Calibrates the clock now rather than at its first reading.
pub fn calibrate() {
    calibrated();
}

fn calibrated() -> u64 {
    static ONCE: OnceLock<u64> = OnceLock::new();
    let f = *ONCE.get_or_init(measure);
    FACTOR.store(f, Ordering::Relaxed);
    f
}

/// The factor: the counter's counts against the monotonic clock's
/// nanoseconds over [`CALIBRATION_NS`] of spinning, or [`MONOTONIC`].
fn measure() -> u64 {
    let source = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let tsc = std::fs::read_to_string(source).is_ok_and(|s| s.trim() == "tsc");
    if !tsc || counter() == 0 {
        return MONOTONIC;
    }
    let (c0, n0) = pair();
    while super::now() < n0 + CALIBRATION_NS {
        std::hint::spin_loop();
    }
    let (c1, n1) = pair();
    match c1.checked_sub(c0) {
        Some(counts) if counts > 0 => (((n1 - n0) as u128) << 32).div_ceil(counts as u128) as u64,
        _ => MONOTONIC,
    }
    .clamp(1, UNSET - 1)
}

/// A counter reading and the monotonic time it was taken at, bracketed
/// closely enough (within [`BRACKET_NS`], or 1 µs on a machine too slow
/// for that) that preemption did not come between.
fn pair() -> (u64, u64) {
    let mut tries = 0;
    loop {
        let before = super::now();
        let c = counter();
        let after = super::now();
        let bound = if tries < BRACKET_TRIES {
            BRACKET_NS
        } else {
            1_000
        };
        if after - before < bound {
            return (c, before + (after - before) / 2);
        }
        tries += 1;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn counter() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor and has no
    // preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn counter() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_agree_with_the_monotonic_clock() {
        calibrate();
        for _ in 0..5 {
            let (c0, n0) = (now(), crate::clock::now());
            while crate::clock::now() < n0 + 5_000_000 {
                std::hint::spin_loop();
            }
            let (c1, n1) = (now(), crate::clock::now());
            let (ticks, mono) = (to_ns(c1 - c0) as f64, (n1 - n0) as f64);
            // Preemption between the two readings of a pair can skew one
            // interval by a little; the factor itself is within 0.1%.
            if (ticks / mono - 1.0).abs() < 0.01 {
                return;
            }
        }
        panic!("five 5 ms intervals all disagreed with the monotonic clock by over 1%");
    }

    #[test]
    fn readings_never_go_backwards_on_one_thread() {
        let mut last = now();
        for _ in 0..10_000 {
            let t = now();
            assert!(t >= last);
            last = t;
        }
    }
}

//! Warden's clocks, in one place: the monotonic clock ([`now`], the
//! scheduler's time), the calling thread's CPU clock ([`thread_cpu_ns`],
//! what CPU limits are measured with), time since the process first asked
//! ([`since_start_ns`], the network's receive budgets), and the cheap
//! counter for short intervals ([`ticks`]). (The executor's epoch count,
//! `executor::Clock`, is not a clock of time: it counts the timer's ticks
//! for deadline callbacks.)

pub mod ticks;

/// Nanoseconds on the system's monotonic clock (the scheduler's `now`;
/// never 0). Read directly rather than through `Instant`, whose
/// subtraction costs as much again as the (vDSO) reading itself.
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; every Linux has the clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time consumed by the calling thread so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // every Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the process first asked: the clock of the receive
/// budgets.
pub fn since_start_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

//! Facts about the machine a run happens on: its description for the
//! report, the core clock (to turn nanoseconds into cycles), whether
//! `perf stat` can count cycles, and memory readings of processes.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

/// The lines of a `/proc`-style `key: value` file whose key is `key`.
fn proc_field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    match Command::new(cmd).args(args).output() {
        Ok(o) => {
            let text = String::from_utf8_lossy(if o.stdout.is_empty() {
                &o.stderr
            } else {
                &o.stdout
            })
            .to_string();
            text.lines().next().unwrap_or("").trim().to_string()
        }
        Err(_) => "not found".into(),
    }
}

/// What the report states about the machine and the software measured.
pub fn describe(clock: &Clock, perf: bool) -> BTreeMap<String, String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mut m = BTreeMap::new();
    m.insert(
        "cpu model".into(),
        proc_field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into()),
    );
    m.insert(
        "cores".into(),
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .to_string(),
    );
    m.insert(
        "cpu MHz (/proc/cpuinfo)".into(),
        proc_field(&cpuinfo, "cpu MHz").unwrap_or_else(|| "not visible".into()),
    );
    m.insert(
        "core clock (measured)".into(),
        format!("{:.0} MHz", clock.hz / 1e6),
    );
    m.insert(
        "frequency governor".into(),
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "not visible".into()),
    );
    m.insert(
        "memory".into(),
        proc_field(&meminfo, "MemTotal").unwrap_or_else(|| "unknown".into()),
    );
    m.insert(
        "kernel".into(),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    );
    m.insert(
        "core-to-core round trip (measured at the end)".into(),
        core_to_core_ns().map_or_else(
            || "not measured (one core, or threads cannot be pinned)".into(),
            |ns| format!("{ns:.0} ns (an atomic passed between threads pinned to CPUs 0 and 1)"),
        ),
    );
    m.insert(
        "perf stat cycles".into(),
        if perf { "supported" } else { "not supported" }.into(),
    );
    m.extend(software());
    m
}

/// The versions of the software measured beside Warden.
fn software() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(
        "wasmtime".into(),
        "48.0.8 (crate, in-process and runner)".into(),
    );
    m.insert("cc".into(), first_line("cc", &["--version"]));
    m.insert("java".into(), first_line("java", &["-version"]));
    m.insert(
        "erlang".into(),
        first_line(
            "erl",
            &[
                "-noshell",
                "-eval",
                "io:format(\"OTP ~s~n\", [erlang:system_info(otp_release)]), halt().",
            ],
        ),
    );
    m
}

/// The core clock, measured.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub hz: f64,
    /// How it was obtained, for the report.
    pub how: &'static str,
}

impl Clock {
    /// Nanoseconds to cycles.
    pub fn cycles(&self, ns: f64) -> f64 {
        ns * self.hz / 1e9
    }
}

/// Measures the core clock by timing a chain of dependent additions, each
/// of which takes one cycle on any x86-64 core: ten per loop iteration, so
/// the loop's own decrement and branch run alongside and add nothing. The
/// fastest of several runs is taken (the one least disturbed). Elsewhere,
/// `/proc/cpuinfo` is read.
pub fn measure_clock() -> Clock {
    #[cfg(target_arch = "x86_64")]
    {
        let iters: u64 = 20_000_000;
        let mut best = f64::MAX;
        for _ in 0..7 {
            let t = Instant::now();
            // Register-to-register additions: recent Intel cores fold an
            // addition of an immediate into the next one at rename, so a
            // chain of `add x, 1` runs several to a cycle there.
            // SAFETY: register-only arithmetic and a counted loop.
            unsafe {
                std::arch::asm!(
                    "2:",
                    "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                    "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}", "add {x}, {y}",
                    "sub {n}, 1",
                    "jnz 2b",
                    x = inout(reg) 0u64 => _,
                    y = in(reg) std::hint::black_box(3u64),
                    n = inout(reg) iters => _,
                    options(nomem, nostack),
                );
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        Clock {
            hz: 10.0 * iters as f64 / best,
            how: "measured: a chain of dependent one-cycle additions, timed (fastest of 7 runs)",
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mhz: f64 = proc_field(&cpuinfo, "cpu MHz")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1000.0);
        Clock {
            hz: mhz * 1e6,
            how: "read from /proc/cpuinfo (no measured clock on this architecture)",
        }
    }
}

/// Parses the cycle count from `perf stat -x, -e cycles` output; `None`
/// when perf printed `<not supported>` or `<not counted>`.
pub fn parse_perf_cycles(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with("cycles")))
        .and_then(|l| l.split(',').next()?.trim().parse().ok())
}

/// Whether `perf stat` counts cycles on this machine.
pub fn perf_supported() -> bool {
    perf_cycles(Command::new("true")).is_some()
}

/// The cycles `cmd` takes, counted by `perf stat`, if the machine can.
pub fn perf_cycles(cmd: Command) -> Option<f64> {
    let mut perf = Command::new("perf");
    perf.args(["stat", "-x,", "-e", "cycles", "--"]);
    perf.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => perf.env(k, v),
            None => perf.env_remove(k),
        };
    }
    cmd.get_current_dir().map(|d| perf.current_dir(d));
    let out = perf.stdout(std::process::Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_perf_cycles(&String::from_utf8_lossy(&out.stderr))
}

/// A process's proportional set size in bytes (shared pages divided among
/// the processes sharing them), from `/proc/PID/smaps_rollup`.
pub fn pss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let kib: u64 = proc_field(&text, "Pss")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// This process's resident set in bytes, from `/proc/self/statm`.
pub fn self_rss_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Bytes the kernel says can still be allocated without swapping.
pub fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    proc_field(&text, "MemAvailable")
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(secs / 86_400)
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (Howard
/// Hinnant's algorithm: shift to years starting in March, so the leap day
/// ends the year, then count 400-year eras).
fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The round trip of a cache line between the first two cores, in
/// nanoseconds: two threads pinned to CPUs 0 and 1 pass an atomic back
/// and forth (100,000 times, or for 50 ms if that is shorter, as on a
/// busy machine where a pinned thread waits for its core), each spinning
/// on it without a pause instruction (which alone takes tens of
/// nanoseconds on some cores); the median of three runs. `None` on one
/// core or where the threads cannot be pinned.
///
/// On a virtual machine this moves as the host places the virtual CPUs
/// (measured here: about 80 ns on one part of the host's processor and
/// 130–410 ns across parts), and every figure that hands work between
/// threads moves with it, so the report gives it beside each table.
pub fn core_to_core_ns() -> Option<f64> {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    const TRIPS: u32 = 100_000;
    const LIMIT: std::time::Duration = std::time::Duration::from_millis(50);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let pin = |cpu: usize| -> bool {
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes
        // inside it, and sched_setaffinity reads it for the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    };
    let once = || -> Option<f64> {
        // Odd values are the first thread's, even ones the answers.
        let flag = AtomicU32::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let other = s.spawn(|| {
                let pinned = pin(1);
                let mut next = 1;
                while !stop.load(Ordering::Acquire) {
                    if flag.load(Ordering::Acquire) == next {
                        flag.store(next + 1, Ordering::Release);
                        next += 2;
                    }
                }
                pinned
            });
            // On a thread of its own: pinning the caller would pin the
            // harness for the rest of the run.
            let ours = s.spawn(|| {
                let pinned = pin(0);
                let t = Instant::now();
                let mut trips = 0;
                while trips < TRIPS && (trips % 1024 != 0 || t.elapsed() < LIMIT) {
                    flag.store(2 * trips + 1, Ordering::Release);
                    while flag.load(Ordering::Acquire) != 2 * trips + 2 {}
                    trips += 1;
                }
                let ns = t.elapsed().as_nanos() as f64 / f64::from(trips.max(1));
                stop.store(true, Ordering::Release);
                pinned.then_some(ns)
            });
            let ns = ours.join().ok()?;
            other.join().ok()?.then_some(())?;
            ns
        })
    };
    let mut runs = [once()?, once()?, once()?];
    runs.sort_by(f64::total_cmp);
    Some(runs[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_513), "2026-03-01");
        assert_eq!(civil_date(20_778), "2026-11-21");
    }

    #[test]
    fn perf_output() {
        assert_eq!(
            parse_perf_cycles("123456,,cycles,1000,100.00,,\n"),
            Some(123456.0)
        );
        assert_eq!(
            parse_perf_cycles("<not supported>,,cycles,0,100.00,,\n"),
            None
        );
        assert_eq!(parse_perf_cycles("42,,cycles:u,1,100.00,,\n"), Some(42.0));
        assert_eq!(parse_perf_cycles(""), None);
    }

    #[test]
    fn clock_is_plausible() {
        let c = measure_clock();
        assert!(c.hz > 2e8 && c.hz < 1e10, "{} Hz", c.hz);
        assert!((c.cycles(1.0) * 1e9 - c.hz).abs() < 1.0);
    }

    #[test]
    fn memory_readings() {
        assert!(self_rss_bytes() > 0);
        assert!(pss_bytes(std::process::id()).unwrap() > 0);
        assert!(mem_available() > 0);
    }
}

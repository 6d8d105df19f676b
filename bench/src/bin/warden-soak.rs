//! The soak test: a real `warden run` keeps up to ten thousand tasks
//! (100 workers x 100 children; about 8,000 alive at once on two cores)
//! spawning, calling a server and dying (exit, trap, kill) for a given
//! time, while this program samples the process's resident memory and
//! open descriptors every second from `/proc`.
//!
//! After warm-up (the first third of the run) nothing may grow: the
//! highest RSS of the last third may exceed that of the middle third by
//! at most 5% + 16 MiB, and the most descriptors by at most 8. Exits 1 if
//! either grew, printing the figures either way.
//!
//!   warden-soak [--seconds 600] [--workers 100] [--children 100] [--calls 20]

use clap::Parser;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warden_test_guests as guests;

#[derive(Parser)]
struct Args {
    /// How long the workers keep spawning.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Worker tasks, each with its own children.
    #[arg(long, default_value_t = 100)]
    workers: u32,
    /// Children each worker keeps alive per generation.
    #[arg(long, default_value_t = 100)]
    children: u32,
    /// Calls each child makes to the server before it ends.
    #[arg(long, default_value_t = 20)]
    calls: u32,
}

/// One sample of the process.
#[derive(Clone, Copy)]
struct Sample {
    at: f64,
    rss: u64,
    fds: usize,
    live: u64,
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temporary directory");
    let manifest = write_manifest(dir.path(), &args);
    let warden = std::env::current_exe()
        .expect("own path")
        .with_file_name("warden");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let control = format!("127.0.0.1:{port}");
    let mut child = Command::new(&warden)
        .args(["run", "--control", &control])
        .arg(&manifest)
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (build it: cargo build --release)",
                warden.display()
            )
        });
    let pid = child.id();
    let start = Instant::now();
    let mut samples = Vec::new();
    while child.try_wait().expect("wait").is_none() {
        if let Some(s) = sample(pid, &control, start) {
            samples.push(s);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let status = child.wait().expect("wait");
    std::process::exit(judge(&args, &samples, status.success()));
}

fn write_manifest(dir: &Path, a: &Args) -> std::path::PathBuf {
    let worker_kib = (a.children as u64 + 2) * 512;
    let budget_kib = 5 * 1024 + a.workers as u64 * worker_kib;
    let text = format!(
        "[runtime]\nmax_tasks = {max}\n\n\
         [[task]]\nname = 'soak'\nmodule = '{soak}'\n\
         args = ['main', '{secs}', '{workers}', '{children}', '{calls}']\n\
         provides = ['soak.echo']\nuses = ['soak.echo']\n\
         memory_limit = '{budget_kib}KiB'\nmodules = {{ self = '{soak}', echo = '{echo}' }}\n",
        max = a.workers * (a.children + 1) + 16,
        echo = guests::ECHO,
        soak = guests::SOAK,
        workers = a.workers,
        secs = a.seconds,
        children = a.children,
        calls = a.calls,
    );
    let path = dir.join("soak.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

fn sample(pid: u32, control: &str, start: Instant) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample {
        at: start.elapsed().as_secs_f64(),
        rss: kib * 1024,
        fds,
        live: live_tasks(control).unwrap_or(0),
    })
}

/// `warden_tasks_live` from the control API's metrics.
fn live_tasks(control: &str) -> Option<u64> {
    let mut s = std::net::TcpStream::connect(control).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {control}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("warden_tasks_live "))?
        .trim()
        .parse()
        .ok()
}

/// Prints the figures; 0 if nothing grew after warm-up, else 1.
fn judge(a: &Args, samples: &[Sample], exited_ok: bool) -> i32 {
    let third = a.seconds as f64 / 3.0;
    let window = |from: f64, to: f64| samples.iter().filter(move |s| s.at >= from && s.at < to);
    let max_rss = |from, to| window(from, to).map(|s| s.rss).max().unwrap_or(0);
    let max_fds = |from, to| window(from, to).map(|s| s.fds).max().unwrap_or(0);
    // RSS is judged by each third's median: a burst of children alive
    // at once lifts one sample by tens of MiB either way, while a leak
    // lifts them all.
    let median_rss = |from, to| {
        let mut v: Vec<u64> = window(from, to).map(|s| s.rss).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let (mid_rss, end_rss) = (max_rss(third, 2.0 * third), max_rss(2.0 * third, f64::MAX));
    let (mid_med, end_med) = (
        median_rss(third, 2.0 * third),
        median_rss(2.0 * third, f64::MAX),
    );
    let (mid_fds, end_fds) = (max_fds(third, 2.0 * third), max_fds(2.0 * third, f64::MAX));
    let peak_live = samples.iter().map(|s| s.live).max().unwrap_or(0);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "soak: {} s, {} workers x {} children, {} calls each",
        a.seconds, a.workers, a.children, a.calls
    );
    println!("  tasks: {peak_live} alive at most");
    println!(
        "  RSS:   {:.1} MiB median ({:.1} highest) in the middle third, {:.1} MiB ({:.1}) in the last",
        mib(mid_med),
        mib(mid_rss),
        mib(end_med),
        mib(end_rss)
    );
    println!("  fds:   {mid_fds} most in the middle third, {end_fds} in the last");
    let rss_grew = end_med as f64 > mid_med as f64 * 1.05 + (16u64 << 20) as f64;
    let fds_grew = end_fds > mid_fds + 8;
    // The load must have been there: at least a quarter of the children
    // the workers keep alive were alive at once in some sample.
    let too_few = peak_live < u64::from(a.workers) * u64::from(a.children) / 4;
    let mut failed = false;
    for (bad, what) in [
        (!exited_ok, "warden run did not exit 0"),
        (too_few, "too few tasks were alive at once"),
        (samples.len() < 6, "too few samples"),
        (rss_grew, "RSS grew after warm-up"),
        (fds_grew, "open descriptors grew after warm-up"),
    ] {
        if bad {
            println!("  FAILED: {what}");
            failed = true;
        }
    }
    if !failed {
        println!("  ok: nothing grew after warm-up");
    }
    failed as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 60 samples a second apart, RSS `rss(t)` MiB, 8,000 tasks alive.
    fn run(rss: impl Fn(u64) -> u64) -> i32 {
        let a = Args {
            seconds: 60,
            workers: 100,
            children: 100,
            calls: 20,
        };
        let samples: Vec<Sample> = (0..60)
            .map(|t| Sample {
                at: t as f64,
                rss: rss(t) << 20,
                fds: 15,
                live: 8_000,
            })
            .collect();
        judge(&a, &samples, true)
    }

    /// A steady leak fails the run; a few spikes of a burst of children
    /// in the last third, with the rest flat, do not.
    #[test]
    fn a_leak_fails_and_a_spike_does_not() {
        assert_eq!(run(|_| 400), 0);
        assert_eq!(run(|t| if t % 7 == 0 && t > 40 { 460 } else { 400 }), 0);
        assert_eq!(run(|t| 300 + 3 * t), 1, "3 MiB a second, steadily");
    }
}

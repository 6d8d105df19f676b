//! The hostile-guest suite: one attack per file, each run by a real
//! `warden run` process beside a bystander task that must finish with the
//! right answer. For every attack the host must not panic, abort or hang
//! (the process ends by itself, with an exit code), and its peak RSS must
//! stay within [`HOST_OVERHEAD`] plus the memory limits of its root tasks
//! (children's budgets are carved from their parents').
//!
//! The attacks from outside — clients of the web server and the control
//! API, tasks aiming at Warden's own endpoints — run against a served
//! system ([`site`]) with a bystander route that must keep answering, and
//! bound what the host holds by reading its RSS and live tasks.

mod args_bomb;
mod bad_modules;
mod call_self;
mod cgi_responses;
mod components;
mod deep_nesting;
mod descriptor_exhaustion;
mod dying_peers;
mod fd_flood;
mod header_spoofing;
mod http2_bodies;
mod http2_resets;
mod mass_death;
mod memory_bombs;
mod name_floods;
mod output_floods;
mod own_endpoints;
mod poll_flood;
mod portal_flood;
mod random_flood;
mod root_budget;
mod servlet_replies;
pub mod site;
mod spawn_bomb;
mod spawn_reads;
mod stack_and_cpu;
mod stream_stalls;
mod table_bomb;
mod wild_calls;

use crate::util::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// What the host itself may use beyond its tasks' memory limits: the
/// runtime, the compiler compiling the guests, stacks and buffers.
pub const HOST_OVERHEAD: u64 = 64 << 20;

/// Rounds of work the bystander does (about 200 ms of CPU and naps).
const BYSTANDER_ROUNDS: u64 = 200;

/// How a run ended.
pub struct Run {
    /// Every task's report, by name.
    pub reports: Vec<serde_json::Value>,
    /// The `warden run` process's exit code.
    pub code: i32,
    /// Its peak resident set, bytes.
    pub peak_rss: u64,
    pub dir: tempfile::TempDir,
}

impl Run {
    /// The report of the task named `name`.
    pub fn report(&self, name: &str) -> &serde_json::Value {
        self.reports
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no report for {name}: {:?}", self.reports))
    }

    /// The host's peak RSS stayed within [`HOST_OVERHEAD`] and `bytes`
    /// (which are `what`).
    pub fn rss_within(&self, bytes: u64, what: &str) {
        eprintln!(
            "host peak RSS {} MiB; {what} {} MiB",
            self.peak_rss >> 20,
            bytes >> 20
        );
        assert!(
            self.peak_rss <= HOST_OVERHEAD + bytes,
            "host peak RSS {} MiB > {} MiB overhead + {} MiB of {what}",
            self.peak_rss >> 20,
            HOST_OVERHEAD >> 20,
            bytes >> 20
        );
    }

    /// What task `name` wrote to stdout.
    pub fn out(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.out"))).unwrap_or_default()
    }

    /// Task `name` exited 0 and printed `want`.
    pub fn exited_saying(&self, name: &str, want: &str) {
        let r = self.report(name);
        let out = self.out(name);
        assert_eq!(
            (&r["status"], &r["exit_code"]),
            (&"exited".into(), &0.into()),
            "{name}: {r}\n{out}"
        );
        assert!(out.contains(want), "{name} printed {out:?}, not {want:?}");
    }
}

/// One `[[task]]` entry: `name` runs `module` with `args`, stdout to its
/// own file unless `extra` says otherwise, plus the `extra` lines.
pub fn task(name: &str, module: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let stdout = if extra.contains("stdout") {
        String::new()
    } else {
        format!("stdout = '{name}.out'\n")
    };
    format!(
        "[[task]]\nname = '{name}'\nmodule = '{module}'\nargs = [{}]\n{stdout}{extra}\n",
        args.join(", ")
    )
}

/// Runs `tasks` (and `runtime` settings) next to the bystander, and
/// checks the host survived: the bystander's answer, a normal exit, the
/// RSS bound.
pub fn attack(runtime: &str, tasks: &str) -> Run {
    let run = survive(runtime, tasks);
    let limits: u64 = run
        .reports
        .iter()
        .filter(|r| r["parent"].is_null())
        .map(|r| {
            r["memory_limit_bytes"]
                .as_u64()
                .expect("every task has a limit")
        })
        .sum();
    run.rss_within(limits, "task limits");
    run
}

/// Runs `tasks` (and `runtime` settings) next to the bystander, and
/// checks the bystander's answer and a normal exit.
pub fn survive(runtime: &str, tasks: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let bystander = task(
        "bystander",
        guests::HOSTILE,
        &["bystander", &BYSTANDER_ROUNDS.to_string()],
        "memory_limit = '2MiB'",
    );
    let m = manifest(
        dir.path(),
        &format!("[runtime]\n{runtime}\n{bystander}{tasks}"),
    );
    let report = dir.path().join("report.json");
    // Reaped by `wait_for_peak`.
    #[allow(clippy::zombie_processes)]
    let child = warden()
        .args(["run", "--control", "off", "--report"])
        .arg(&report)
        .arg(&m)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (code, peak_rss) = wait_for_peak(child.id() as i32, Duration::from_secs(180));
    let reports: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&report).expect("a report was written")).unwrap();
    let run = Run {
        reports,
        code,
        peak_rss,
        dir,
    };
    run.exited_saying(
        "bystander",
        &format!("bystander ok {}", checksum(BYSTANDER_ROUNDS)),
    );
    // 0, or 1 when an attacker did not exit 0; 2 would be Warden's own error.
    assert!(run.code <= 1, "warden run exited {}", run.code);
    run
}

/// The bystander's answer, computed here as the guest computes it.
fn checksum(rounds: u64) -> u64 {
    let mut x: u64 = 88172645463325252;
    for _ in 0..rounds * 100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Waits for process `pid` (failing, after killing it, past `limit`);
/// its exit code (a death by signal fails the test) and peak RSS.
///
/// The peak is the process's own high-water mark (`VmHWM`), read while
/// it runs: the kernel's `ru_maxrss` would also count the test binary's
/// pages the child had between fork and exec.
fn wait_for_peak(pid: i32, limit: Duration) -> (i32, u64) {
    let t = Instant::now();
    let mut peak = 0;
    loop {
        peak = peak.max(proc_status_bytes(&pid.to_string(), "VmHWM").unwrap_or(0));
        let mut status = 0;
        // SAFETY: plain waitpid on our own child with an out-pointer to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(
                libc::WIFEXITED(status),
                "warden run died of signal {} (a host crash)",
                libc::WTERMSIG(status)
            );
            return (libc::WEXITSTATUS(status), peak);
        }
        if t.elapsed() > limit {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("warden run still running after {limit:?} (a host hang)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A module file written into `dir`.
pub fn module_file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

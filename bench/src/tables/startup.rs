//! A program's whole process: `warden run` beside `wasmtime run`, the
//! command users would otherwise reach for, each starting, running one
//! small program from its compiled-code cache and exiting.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::model::{Samples, Table};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use warden_test_guests as guests;

const WARDEN: &str = "warden run";
const WASMTIME: &str = "wasmtime run";
const HELLO_WALL: &str = "hello: wall";
const HELLO_CPU: &str = "hello: CPU";
const MIB_WALL: &str = "1 MiB touched: wall";
const MIB_CPU: &str = "1 MiB touched: CPU";

/// The programs: a module and its arguments, and the columns they fill.
const PROGRAMS: [(&str, &[&str], &str, &str); 2] = [
    (guests::HELLO, &[], HELLO_WALL, HELLO_CPU),
    (guests::TOUCH, &["1"], MIB_WALL, MIB_CPU),
];

pub fn run(ctx: &Ctx) -> Table {
    let runs: usize = ctx.pick(15, 5);
    let mut t = Table::new(
        "startup",
        "A program's whole process: warden run beside wasmtime run",
        "issue: fast serving (start like wasmtime run)",
        &[
            (HELLO_WALL, "ms"),
            (HELLO_CPU, "ms"),
            (MIB_WALL, "ms"),
            (MIB_CPU, "ms"),
        ],
    );
    t.method = format!(
        "Each command runs a program as a user would type it, as a child process of the \
         harness with its output discarded: `warden run prog.wasm` (no control port, no \
         servers) and `{}` `run prog.wasm`, both with their compiled-code caches filled by \
         an untimed run first. hello prints one line; the 1 MiB program allocates 1 MiB, \
         writes every byte and exits. Wall: from spawning the process to reaping it. CPU: the \
         child's user and system time (getrusage of reaped children). Each round runs each \
         command {runs} times per program, in turn with the other, and takes the median.",
        super::components::cli_version()
    );
    let warden = match super::mass_death::warden_command() {
        Ok(w) => w,
        Err(why) => {
            t.notes.push(format!("Not measured: {why}"));
            return t;
        }
    };
    // Without the CLI the peer's row says why, as the components table's.
    let wasmtime = super::components::wasmtime_cli();
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).runs(|s| times(s, WARDEN, &warden, runs)),
            Contestant::peer(WASMTIME).runs(|s| {
                let cli = wasmtime.as_ref().map_err(Clone::clone)?;
                times(s, WASMTIME, cli, runs)
            }),
        ],
    );
    t.notes.push(
        "Target: warden run costs at most wasmtime run's wall and CPU time for the same \
         cached module (ratios at or below 1×)."
            .into(),
    );
    m.finish(t)
}

/// One round of `system`: each program run `runs` times by `command`
/// (after one untimed run), the medians pushed.
fn times(s: &mut Samples, system: &str, command: &Path, runs: usize) -> Result<(), String> {
    for (module, args, wall_col, cpu_col) in PROGRAMS {
        once(command, module, args)?;
        let mut walls = Vec::with_capacity(runs);
        let mut cpus = Vec::with_capacity(runs);
        for _ in 0..runs {
            let (wall, cpu) = once(command, module, args)?;
            walls.push(wall);
            cpus.push(cpu);
        }
        s.push(&format!("{system}/{wall_col}"), median(walls));
        s.push(&format!("{system}/{cpu_col}"), median(cpus));
    }
    Ok(())
}

/// `command run module args`: its wall and CPU milliseconds.
fn once(command: &Path, module: &str, args: &[&str]) -> Result<(f64, f64), String> {
    let before = children_cpu_ms();
    let start = Instant::now();
    let status = Command::new(command)
        .arg("run")
        .arg(module)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{}: {e}", command.display()))?;
    let wall = start.elapsed().as_secs_f64() * 1e3;
    if !status.success() {
        return Err(format!("{} run {module}: {status}", command.display()));
    }
    Ok((wall, children_cpu_ms() - before))
}

/// User and system time of this process's reaped children, in ms.
fn children_cpu_ms() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(u.ru_utime) + ms(u.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

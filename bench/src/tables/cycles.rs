//! Seeds 001 and 002 (JX), Table 1: the null IPC round trip in processor
//! cycles, beside the microkernels and Java systems the papers list. With
//! `perf stat` able to count cycles, Warden's and the pipes' figures are
//! counted; otherwise the round trips measured for the process table are
//! converted with the measured core clock, and the table says so.

use super::finish;
use super::process::{
    ERLANG, JVM, PROCESSES, PROCESSES_PINNED, THREADS, THREADS_PINNED, WARDEN_1, WARDEN_2,
};
use crate::harness::Ctx;
use crate::inproc;
use crate::machine::perf_cycles;
use crate::model::{key, Cell, Kind, Samples, Table};
use std::collections::BTreeMap;
use std::process::Command;

const COLUMN: &str = "null IPC round trip";

pub fn run(ctx: &Ctx, process: &Samples) -> Table {
    let mut t = Table::new(
        "cycles",
        "Null IPC round trip in cycles",
        "seeds 001 and 002 (JX), Table 1",
        &[(COLUMN, "cycles")],
    );
    let counted = if ctx.perf {
        counted(ctx)
    } else {
        Ok(BTreeMap::new())
    };
    let counted = counted.unwrap_or_else(|e| {
        t.notes.push(format!(
            "perf stat failed, so every figure is converted: {e}"
        ));
        BTreeMap::new()
    });
    t.method = method(ctx, !counted.is_empty());
    let us_to_cycles = ctx.clock.cycles(1e3);
    for (system, kind) in [
        (WARDEN_1, Kind::Warden),
        (WARDEN_2, Kind::Warden),
        (PROCESSES, Kind::Peer),
        (PROCESSES_PINNED, Kind::Peer),
        (THREADS, Kind::Peer),
        (THREADS_PINNED, Kind::Peer),
        (JVM, Kind::Peer),
        (ERLANG, Kind::Peer),
    ] {
        let cell = counted.get(system).cloned().or_else(|| {
            process
                .cell(&key(system, "null IPC"))
                .map(|c| c.scaled(us_to_cycles))
        });
        t.row(system, kind, vec![cell]);
    }
    for (system, cycles) in [
        ("L4Ka (paper, PIII, sysenter/sysexit)", 800.0),
        ("Fiasco/L4 (paper, PIII 450 MHz)", 2610.0),
        (
            "J-Kernel (paper, LRMI, PPro 200 MHz; no thread switch)",
            440.0,
        ),
        ("Alta/KaffeOS (paper, PII 300 MHz)", 27270.0),
        ("JX hosted on Linux (paper, PIII 500 MHz)", 7100.0),
        ("JX native (paper, PIII 500 MHz)", 650.0),
    ] {
        t.paper(system, &[Some(cycles)]);
    }
    t.notes.push(
        "Cycles on different processors measure different work per cycle; the papers' systems also \
         differ in what a round trip includes (J-Kernel switches no thread)."
            .into(),
    );
    finish(t, &BTreeMap::new())
}

fn method(ctx: &Ctx, counted: bool) -> String {
    if !counted {
        format!(
            "perf stat cannot count cycles on this machine, so the round trips of the process table \
             (same run) are converted to cycles with the core clock, {:.0} MHz ({}).",
            ctx.clock.hz / 1e6,
            ctx.clock.how
        )
    } else {
        format!(
            "Warden (1 worker) and the pipes are counted with perf stat: the cycles of a run of 2N \
             round trips less those of a run of N, over N (Warden's client makes each run's calls \
             twice, the first to warm up, so its difference is over 2N). The other rows, the \
             pinned pairs (both sides on one core, as Warden's one worker) among them, convert \
             the process table's round trips with the core clock, {:.0} MHz ({}).",
            ctx.clock.hz / 1e6,
            ctx.clock.how
        )
    }
}

/// Cycles per round trip counted by perf: Warden (in a child process of
/// this binary) and the pipe ping-pong.
fn counted(ctx: &Ctx) -> Result<BTreeMap<&'static str, Cell>, String> {
    let n: u64 = ctx.pick(100_000, 10_000);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let pipe = ctx.peers.native("pipe_pingpong")?.to_path_buf();
    // `made` round trips are made per `k` asked for: Warden's client
    // makes each kind's calls twice (the first run warms up), the pipe
    // ping-pong once.
    let per_trip = |made: f64, make: &dyn Fn(u64) -> Command| -> Result<f64, String> {
        let a = perf_cycles(make(n)).ok_or("perf stat gave no cycles")?;
        let b = perf_cycles(make(2 * n)).ok_or("perf stat gave no cycles")?;
        Ok((b - a) / (made * n as f64))
    };
    let (mut w, mut p) = (vec![], vec![]);
    for _ in 0..ctx.rounds {
        w.push(per_trip(2.0, &|k| {
            let mut c = Command::new(&exe);
            c.args(["child-ipc", &k.to_string()]);
            c
        })?);
        p.push(per_trip(1.0, &|k| {
            let mut c = Command::new(&pipe);
            c.args([&k.to_string(), "1"]);
            c
        })?);
    }
    let mut out = BTreeMap::new();
    out.insert(WARDEN_1, Cell::of(w).ok_or("no samples")?);
    out.insert(PROCESSES, Cell::of(p).ok_or("no samples")?);
    Ok(out)
}

/// The child side of [`counted`]: `n` round trips of each of `kinds`
/// (comma-separated) on one worker.
pub fn child_ipc(n: u64, server: &str, kinds: &str) -> Result<(), String> {
    let server = match server {
        "active" => inproc::Server::Active,
        "passive" => inproc::Server::Passive,
        "host" => inproc::Server::Host,
        other => return Err(format!("unknown server {other:?}: active, passive or host")),
    };
    let kinds: Vec<&str> = kinds.split(',').collect();
    let f = inproc::ipc_to(server, 1, n, &kinds)?;
    println!("{f:?}");
    Ok(())
}

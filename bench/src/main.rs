//! Warden's benchmark harness: the papers' tables reproduced with Warden,
//! beside today's ways of isolating programs, measured in one run.
//!
//! ```text
//! scripts/bench [--quick]        # installs the peers, builds, runs this
//! warden-bench [--quick] [--out DIR] [--rounds N]
//! ```
//!
//! A run writes `DIR/results/<date>.json` (every sample), `DIR/plots/*.png`
//! and `DIR/REPORT.md`, then checks that every table has its figures and
//! exits 1 if one does not. `DIR` is `bench/` for a full run,
//! `target/bench-quick/` for `--quick` (a few minutes) and
//! `target/bench-only/` for `--only`.

mod harness;
mod inproc;
mod machine;
mod model;
mod peers;
mod report;
mod tables;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// mimalloc, as the `warden` command: a task's spawn and
/// end allocate and free on different threads, where glibc's arenas took
/// a quarter of a per-request web route's time (the in-process peers, raw
/// Wasmtime and hyper, share it; the report's method says so).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "warden-bench",
    about = "Warden's benchmarks beside today's alternatives, in one run"
)]
struct Cli {
    /// A short run for smoke tests: fewer rounds, iterations and copies.
    #[arg(long)]
    quick: bool,
    /// Where to write results/, plots/ and REPORT.md.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Counted rounds per figure (default 5, or 3 with --quick).
    #[arg(long)]
    rounds: Option<usize>,
    /// Only the tables whose step title contains this text (for example
    /// "network"); the report then holds only those (written, unless
    /// --out says otherwise, to target/bench-only/).
    #[arg(long)]
    only: Option<String>,
    #[command(subcommand)]
    child: Option<Child>,
}

/// Roles this binary plays as a child of a run (or for profiling); the
/// names are the subcommands' (`child-ipc`, …).
#[derive(Subcommand)]
#[allow(clippy::enum_variant_names)]
enum Child {
    /// N tasks of MODULE asleep in one runtime; "ready", then sleep until killed.
    #[command(hide = true)]
    ChildCopies {
        n: usize,
        module: String,
        /// Compiled-code cache directory (none: compile at start).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// N portal round trips on one worker, to an active task's service, a
    /// passive one's, or a host service.
    #[command(hide = true)]
    ChildIpc {
        n: u64,
        #[arg(long, default_value = "active")]
        server: String,
        /// Which requests, comma-separated (ipc_bench's kinds: null, int3,
        /// str100, ...).
        #[arg(long, default_value = "null")]
        kinds: String,
    },
    /// N null tasks spawned and waited for one at a time, on one worker
    /// (of the smallest module, or of the module or component given).
    #[command(hide = true)]
    ChildSpawn { n: usize, module: Option<String> },
    /// The web table's native hyper server, alone: prints its two URLs,
    /// then serves until killed (to profile it beside `warden run`).
    #[command(hide = true)]
    ChildHyper,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // As the `warden` command does, before the allocator's first arena:
    // transparent huge pages off for the whole process (mimalloc would
    // hold whole 2 MiB pages per thread of which it uses a few KiB).
    // SAFETY: prctl with integer arguments only sets this process's
    // memory policy.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    let child = match cli.child {
        Some(Child::ChildCopies { n, module, cache }) => {
            Some(tables::child_copies(n, &module, cache))
        }
        Some(Child::ChildIpc { n, server, kinds }) => Some(tables::child_ipc(n, &server, &kinds)),
        Some(Child::ChildSpawn { n, module }) => Some(tables::child_spawn(n, module.as_deref())),
        Some(Child::ChildHyper) => Some(tables::child_hyper()),
        None => None,
    };
    if let Some(result) = child {
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("warden-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Only a full run of every table replaces bench/REPORT.md.
    let out = cli.out.unwrap_or_else(|| {
        if cli.quick {
            manifest_dir.join("../target/bench-quick")
        } else if cli.only.is_some() {
            manifest_dir.join("../target/bench-only")
        } else {
            manifest_dir.to_path_buf()
        }
    });
    match run(
        cli.quick,
        cli.rounds.unwrap_or(if cli.quick { 3 } else { 5 }),
        &out,
        cli.only.as_deref(),
    ) {
        Ok(problems) if problems.is_empty() => ExitCode::SUCCESS,
        Ok(problems) => {
            eprintln!("warden-bench: the report is incomplete:");
            for p in problems {
                eprintln!("  {p}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("warden-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every table and writes the results; the problems found in them.
fn run(quick: bool, rounds: usize, out: &Path, only: Option<&str>) -> Result<Vec<String>, String> {
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let started = Instant::now();
    let date = machine::today();
    eprintln!(
        "warden-bench: {} run, {rounds} rounds, writing to {}",
        if quick { "quick" } else { "full" },
        out.display()
    );
    let build = tempfile::tempdir().map_err(|e| e.to_string())?;
    let clock = machine::measure_clock();
    let ctx = harness::Ctx {
        quick,
        rounds,
        peers: peers::Peers::build(build.path()),
        clock,
        perf: machine::perf_supported(),
    };
    let missing = ctx.peers.missing();
    for m in &missing {
        eprintln!("  missing peer: {m}");
    }
    let tables = tables::run_all(&ctx, only);
    let run = model::Run {
        date,
        quick,
        rounds,
        seconds: started.elapsed().as_secs_f64(),
        machine: machine::describe(&clock, ctx.perf),
        tables,
        missing,
    };
    write(&run, out, started)
}

/// Writes `run`'s results, plots and report under `out`; the problems
/// found in them.
fn write(run: &model::Run, out: &Path, started: Instant) -> Result<Vec<String>, String> {
    let results = out.join("results");
    std::fs::create_dir_all(&results).map_err(|e| format!("{}: {e}", results.display()))?;
    let json_name = format!("{}.json", run.date);
    let json = results.join(&json_name);
    let text = serde_json::to_string_pretty(run).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("{}: {e}", json.display()))?;
    let plots = out.join("plots");
    let mut problems: Vec<String> = run.tables.iter().flat_map(|t| t.problems()).collect();
    problems.extend(run.missing.iter().cloned());
    if let Err(e) = plot(&json, &plots) {
        problems.push(format!("plots: {e}"));
    }
    for t in &run.tables {
        if !plots.join(format!("{}.png", t.id)).exists() {
            problems.push(format!("{}: no plot", t.id));
        }
    }
    let report = out.join("REPORT.md");
    std::fs::write(&report, report::render(run, &json_name, &plots))
        .map_err(|e| format!("{}: {e}", report.display()))?;
    eprintln!(
        "warden-bench: wrote {}, {} and {} in {:.0} s",
        json.display(),
        plots.display(),
        report.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(problems)
}

/// Draws every table with `plot.py` (matplotlib), under the first Python
/// that has matplotlib: `$WARDEN_BENCH_PYTHON`, Debian's, then `python3`.
fn plot(json: &Path, dir: &Path) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("plot.py");
    let candidates: Vec<String> = std::env::var("WARDEN_BENCH_PYTHON")
        .into_iter()
        .chain(["/usr/bin/python3".to_string(), "python3".to_string()])
        .collect();
    let python = candidates
        .iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import matplotlib"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or("no Python with matplotlib (install python3-matplotlib)")?;
    peers::run_quiet(Command::new(python).arg(&script).arg(json).arg(dir)).map(|_| ())
}

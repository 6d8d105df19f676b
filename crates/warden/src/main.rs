//! `warden`: the command-line front end.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use warden::units::{parse_duration, parse_size};
use warden::{Manifest, MemoryPolicy, Output, Runtime, RuntimeConfig, TaskReport, TaskSpec};

#[derive(Parser)]
#[command(
    name = "warden",
    version,
    about = "Run many WebAssembly programs as isolated tasks in one process"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a system of tasks from a manifest (.toml), or one module (.wasm/.wat).
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// A manifest (.toml) or a module (.wasm, .wat).
    target: PathBuf,
    /// Memory limit for a single module, e.g. 64MiB.
    #[arg(long, value_parser = parse_size)]
    memory_limit: Option<u64>,
    /// Kill (instead of deny growth) when the memory limit is hit.
    #[arg(long)]
    kill_on_memory_limit: bool,
    /// CPU-time limit for a single module, e.g. 500ms, 2s.
    #[arg(long, value_parser = parse_duration)]
    cpu_limit: Option<Duration>,
    /// Worker threads (default: manifest, else number of cores).
    #[arg(long)]
    workers: Option<usize>,
    /// Time slice in ms (default: manifest, else 4).
    #[arg(long)]
    slice_ms: Option<u64>,
    /// Do not use the on-disk compiled-code cache.
    #[arg(long)]
    no_cache: bool,
    /// Write a JSON report of every task to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print a one-line summary per task on stderr when it ends.
    #[arg(long, short)]
    verbose: bool,
    /// Arguments for a single module (after `--`).
    #[arg(last = true)]
    args: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => match run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("warden: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn run(args: RunArgs) -> Result<ExitCode, String> {
    let is_manifest = args.target.extension().is_some_and(|e| e == "toml");
    let mut config = RuntimeConfig::default();
    let specs = if is_manifest {
        if args.memory_limit.is_some() || args.cpu_limit.is_some() || !args.args.is_empty() {
            return Err(
                "--memory-limit, --cpu-limit and module arguments apply to a single module; \
                        set limits in the manifest instead"
                    .into(),
            );
        }
        let m = Manifest::load(&args.target)?;
        config.workers = m.runtime.workers.unwrap_or(config.workers);
        config.slice = m.runtime.slice.unwrap_or(config.slice);
        if m.runtime.cache == Some(false) {
            config.cache_dir = None;
        }
        config.prefix_output = m.tasks.len() > 1;
        config.scheduler = m.runtime.scheduler;
        config.groups = m.groups.clone();
        let n = u32::try_from(m.tasks.len()).unwrap_or(u32::MAX);
        config.max_tasks = m.runtime.max_tasks.unwrap_or(config.max_tasks.max(n));
        m.tasks
    } else {
        if !args.target.is_file() {
            return Err(format!("module not found: {}", args.target.display()));
        }
        let name = args
            .target
            .file_stem()
            .map_or("main".into(), |s| s.to_string_lossy().into_owned());
        let mut spec = TaskSpec::new(name, &args.target);
        spec.args = args.args.clone();
        spec.memory_limit = args.memory_limit;
        if args.kill_on_memory_limit {
            spec.on_memory_limit = MemoryPolicy::Kill;
        }
        spec.cpu_limit = args.cpu_limit;
        spec.stdin_inherit = true;
        spec.stdout = Output::Inherit;
        vec![spec]
    };
    if let Some(w) = args.workers {
        if w == 0 {
            return Err("--workers must be at least 1".into());
        }
        config.workers = w;
    }
    if let Some(ms) = args.slice_ms {
        if ms == 0 {
            return Err("--slice-ms must be at least 1".into());
        }
        config.slice = Duration::from_millis(ms);
    }
    if args.no_cache {
        config.cache_dir = None;
    }
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;

    // Compile every distinct module before starting any task, so a bad
    // module stops the system before anything runs.
    let mut seen = std::collections::HashSet::new();
    for s in &specs {
        if seen.insert(s.module.clone()) {
            rt.load_module(&s.module).map_err(|e| e.to_string())?;
        }
    }
    let handler_rt = rt.clone();
    let _ = ctrlc::set_handler(move || handler_rt.kill_all("interrupted (Ctrl-C)"));

    for s in &specs {
        if let Err(e) = rt.spawn(s) {
            rt.kill_all("system start failed");
            rt.wait_all();
            return Err(e.to_string());
        }
    }
    let reports = rt.wait_all();
    if args.verbose || is_manifest {
        for r in &reports {
            eprintln!("{}", summary(r));
        }
    }
    if let Some(path) = &args.report {
        write_report(path, &reports)?;
    }
    Ok(if reports.iter().all(TaskReport::succeeded) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn summary(r: &TaskReport) -> String {
    let how = match (r.status, r.exit_code, &r.reason) {
        ("exited", Some(c), _) => format!("exited {c}"),
        (s, _, Some(reason)) => format!("{s}: {reason}"),
        (s, _, _) => s.to_string(),
    };
    format!(
        "warden: task {} ({}) {how}; cpu {:.1} ms, peak memory {}",
        r.id,
        r.name,
        r.cpu_ms,
        warden::units::format_size(r.peak_memory_bytes)
    )
}

fn write_report(path: &Path, reports: &[TaskReport]) -> Result<(), String> {
    let json = serde_json::to_string_pretty(reports).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n")
        .map_err(|e| format!("cannot write report {}: {e}", path.display()))
}

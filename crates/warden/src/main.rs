//! `warden`: the command-line front end.

mod client;

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
    /// List the tasks of a running system (a tree: children under parents).
    Ps {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Include tasks that have ended.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Show the live tasks, refreshed every second.
    Top {
        /// Sort by "cpu" or "memory".
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "memory"])]
        sort: String,
        /// Stop after this many refreshes.
        #[arg(long)]
        iterations: Option<u32>,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Kill a task (by id or name) and its children.
    Kill {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Suspend a task.
    Suspend {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Resume a suspended task.
    Resume {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Print a task's recent output.
    Logs {
        task: String,
        /// Keep printing new output.
        #[arg(long, short)]
        follow: bool,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Print the web dashboard's address, with the control token that lets
    /// it kill tasks.
    Dashboard {
        #[command(flatten)]
        control: ControlArg,
    },
    /// Start a task in a running system.
    Spawn {
        module: PathBuf,
        #[arg(long)]
        memory_limit: Option<String>,
        #[arg(long)]
        cpu_limit: Option<String>,
        #[command(flatten)]
        control: ControlArg,
        /// Arguments for the module (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args)]
struct ControlArg {
    /// The control API of the running system.
    #[arg(long = "control", default_value = warden::control::DEFAULT_ADDR)]
    addr: String,
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
    /// Write the event log (JSON lines: spawn, exit, trap, kill, limit) here.
    #[arg(long)]
    events: Option<PathBuf>,
    /// Serve the control API on this address, or "off" (default: the
    /// manifest's `control`, else 127.0.0.1:7474). Off loopback, every
    /// request needs the control token.
    #[arg(long)]
    control: Option<String>,
    /// Stop after this long (e.g. 10s): every task is killed, servers
    /// stop. Without it, a system with [[http]] servers runs until Ctrl-C.
    #[arg(long = "for", value_parser = parse_duration)]
    run_for: Option<Duration>,
    /// Arguments for a single module (after `--`).
    #[arg(last = true)]
    args: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Ps { json, all, control } => {
            client::ps(&control.addr, json, all).map(|()| ExitCode::SUCCESS)
        }
        Command::Top {
            sort,
            iterations,
            control,
        } => client::top(&control.addr, &sort, iterations).map(|()| ExitCode::SUCCESS),
        Command::Kill { task, control } => {
            client::act(&control.addr, "kill", &task).map(|()| ExitCode::SUCCESS)
        }
        Command::Suspend { task, control } => {
            client::act(&control.addr, "suspend", &task).map(|()| ExitCode::SUCCESS)
        }
        Command::Resume { task, control } => {
            client::act(&control.addr, "resume", &task).map(|()| ExitCode::SUCCESS)
        }
        Command::Logs {
            task,
            follow,
            control,
        } => client::logs(&control.addr, &task, follow).map(|()| ExitCode::SUCCESS),
        Command::Dashboard { control } => {
            client::dashboard(&control.addr).map(|()| ExitCode::SUCCESS)
        }
        Command::Spawn {
            module,
            memory_limit,
            cpu_limit,
            control,
            args,
        } => client::spawn(
            &control.addr,
            &module.to_string_lossy(),
            memory_limit.as_deref(),
            cpu_limit.as_deref(),
            &args,
        )
        .map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: RunArgs) -> Result<ExitCode, String> {
    warden::raise_descriptor_limit();
    let is_manifest = args.target.extension().is_some_and(|e| e == "toml");
    let (mut config, specs, control, http) = if is_manifest {
        manifest_system(&args)?
    } else {
        let (config, specs, control) = single_module(&args)?;
        (config, specs, control, vec![])
    };
    apply_flags(&args, &mut config)?;
    // Before the runtime starts its threads, so that they inherit it.
    let signals = block_stop_signals();
    // Every report reaches the outcome as its task ends, however many the
    // runtime itself keeps.
    let outcome = Outcome::default();
    let keep = match (args.report.is_some() || args.verbose, is_manifest) {
        (true, _) => Keep::All,
        (false, true) => Keep::Roots,
        (false, false) => Keep::None,
    };
    config.on_report = Some(outcome.sink(keep));
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    compile_all(&rt, &specs)?;
    let control = serve_control(&rt, control);
    let ends = on_stop_signal(signals);
    start_all(&rt, &specs)?;
    let servers = start_http(&rt, &http)?;
    if !servers.is_empty() {
        announce(&servers, control.as_ref());
    } else {
        // A system without servers ends when its last task does.
        let (rt, ends) = (rt.clone(), ends.0.clone());
        std::thread::spawn(move || {
            rt.wait_all();
            let _ = ends.send(None);
        });
    }
    let why = match args.run_for {
        Some(d) => ends
            .1
            .recv_timeout(d)
            .unwrap_or(Some("its run time (--for) is over")),
        None => ends.1.recv().unwrap_or(None),
    };
    // Servers stop first: requests in flight still have their tasks.
    drop(servers);
    if let Some(why) = why {
        rt.kill_all(why);
    }
    rt.wait_all();
    outcome.finish(args.report.as_deref(), args.verbose || is_manifest)
}

/// Starts every `[[http]]` server; if one cannot start, ends the system.
fn start_http(
    rt: &Runtime,
    http: &[warden::http::HttpSpec],
) -> Result<Vec<warden::http::HttpServer>, String> {
    let mut servers = Vec::new();
    for spec in http {
        match warden::http::HttpServer::start(rt, spec) {
            Ok(s) => servers.push(s),
            Err(e) => {
                drop(servers);
                rt.kill_all("system start failed");
                rt.wait_all();
                return Err(e);
            }
        }
    }
    Ok(servers)
}

/// Where the servers and the dashboard are, on stderr.
fn announce(servers: &[warden::http::HttpServer], control: Option<&Control>) {
    for s in servers {
        eprintln!("warden: serving http://{}/", s.addr());
    }
    if let Some(server) = control.and_then(|c| c.server.as_ref()) {
        eprintln!(
            "warden: dashboard at http://{}/#token={}",
            server.addr,
            server.token().as_str()
        );
    }
    eprintln!("warden: Ctrl-C stops the system");
}

/// The runtime settings, tasks and control address a manifest describes.
#[allow(clippy::type_complexity)]
fn manifest_system(
    args: &RunArgs,
) -> Result<
    (
        RuntimeConfig,
        Vec<TaskSpec>,
        Option<String>,
        Vec<warden::http::HttpSpec>,
    ),
    String,
> {
    if args.memory_limit.is_some() || args.cpu_limit.is_some() || !args.args.is_empty() {
        return Err(
            "--memory-limit, --cpu-limit and module arguments apply to a single module; \
                    set limits in the manifest instead"
                .into(),
        );
    }
    let m = Manifest::load(&args.target)?;
    let mut config = RuntimeConfig::default();
    config.workers = m.runtime.workers.unwrap_or(config.workers);
    config.slice = m.runtime.slice.unwrap_or(config.slice);
    if m.runtime.cache == Some(false) {
        config.cache_dir = None;
    }
    config.prefix_output = m.tasks.len() > 1 || !m.http.is_empty();
    config.scheduler = m.runtime.scheduler;
    config.link_rate = m.runtime.link_rate;
    config.groups = m.groups.clone();
    let n = u32::try_from(m.tasks.len()).unwrap_or(u32::MAX);
    config.max_tasks = m.runtime.max_tasks.unwrap_or(config.max_tasks.max(n));
    let control = args.control.clone().or(m.runtime.control.clone());
    Ok((config, m.tasks, control, m.http))
}

/// One module run as `wasmtime run` would, with the flags' limits.
fn single_module(args: &RunArgs) -> Result<(RuntimeConfig, Vec<TaskSpec>, Option<String>), String> {
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
    Ok((RuntimeConfig::default(), vec![spec], args.control.clone()))
}

/// Command-line settings, which override the manifest's.
fn apply_flags(args: &RunArgs, config: &mut RuntimeConfig) -> Result<(), String> {
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
    config.events = args.events.clone();
    Ok(())
}

/// Compiles every distinct module — the tasks' and those they may spawn
/// children from — before any task starts, so a bad module stops the
/// system before anything runs.
fn compile_all(rt: &Runtime, specs: &[TaskSpec]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    let modules: Vec<&PathBuf> = specs
        .iter()
        .flat_map(|s| std::iter::once(&s.module).chain(s.modules.iter().map(|(_, m)| m)))
        .filter(|m| seen.insert(*m))
        .collect();
    let mut progress = Progress::new("compiling modules", modules.len());
    for (i, m) in modules.iter().enumerate() {
        progress.show(i);
        rt.load_module(m).map_err(|e| e.to_string())?;
    }
    progress.done();
    Ok(())
}

/// The control API and its token file; a busy address is reported, not
/// fatal. Dropping it stops the server and removes the file.
struct Control {
    server: Option<warden::control::ControlServer>,
    token_file: Option<PathBuf>,
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Some(f) = &self.token_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn serve_control(rt: &Runtime, control: Option<String>) -> Option<Control> {
    let control = control.unwrap_or_else(|| warden::control::DEFAULT_ADDR.to_string());
    if control == "off" {
        return None;
    }
    let mut token_file = None;
    let publish = |addr, token: &warden::control::Token| {
        let Some(f) = warden::control::token_file(addr) else {
            eprintln!("warden: control token not written (set HOME or XDG_RUNTIME_DIR); kill, suspend, resume and spawn will be refused");
            return;
        };
        match warden::control::write_token_file(&f, token) {
            Ok(()) => token_file = Some(f),
            Err(e) => eprintln!(
                "warden: control token not written ({}: {e}); kill, suspend, resume and spawn will be refused",
                f.display()
            ),
        }
    };
    let server = warden::control::ControlServer::start(rt.clone(), &control, publish);
    let control = Control {
        token_file,
        server: server
            .map_err(|e| eprintln!("warden: control API not served: {e}"))
            .ok(),
    };
    // Without a server, dropping `control` removes the token file.
    control.server.is_some().then_some(control)
}

/// Blocks SIGINT and SIGTERM in this thread and every thread it starts
/// from now on; `on_stop_signal` then takes them one at a time.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain calls on a sigset_t this function owns.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// How a run ends: `Some(reason)` to kill every task for `reason` (a
/// signal, the `--for` bound), `None` when its tasks have all ended.
type Ends = (
    std::sync::mpsc::Sender<Option<&'static str>>,
    std::sync::mpsc::Receiver<Option<&'static str>>,
);

/// Ctrl-C (SIGINT) or SIGTERM ends the run as an operator's kill would:
/// every task is killed, and the report says which signal it was.
fn on_stop_signal(set: libc::sigset_t) -> Ends {
    let (tx, rx) = std::sync::mpsc::channel();
    let ends = tx.clone();
    let _ = std::thread::Builder::new()
        .name("warden-signals".into())
        .spawn(move || loop {
            let mut sig = 0;
            // SAFETY: `set` is a valid signal set; these signals are blocked
            // in every thread, so only this wait receives them.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                return;
            }
            let reason = if sig == libc::SIGTERM {
                "terminated (SIGTERM)"
            } else {
                "interrupted (Ctrl-C)"
            };
            let _ = tx.send(Some(reason));
        });
    (ends, rx)
}

/// Starts every task; if one cannot start, ends the others.
fn start_all(rt: &Runtime, specs: &[TaskSpec]) -> Result<(), String> {
    let mut progress = Progress::new("starting tasks", specs.len());
    for (i, s) in specs.iter().enumerate() {
        progress.show(i);
        if let Err(e) = rt.spawn(s) {
            rt.kill_all("system start failed");
            rt.wait_all();
            return Err(e.to_string());
        }
    }
    progress.done();
    Ok(())
}

/// How the run went: whether every task the run started itself succeeded
/// (its tasks' children are theirs to judge), and the reports kept.
#[derive(Default, Clone)]
struct Outcome(std::sync::Arc<std::sync::Mutex<(Vec<TaskReport>, bool)>>);

/// Which reports a run keeps until its end. A long-running system spawns
/// children without end, so their reports are kept only when asked for
/// (`--report`, `--verbose`).
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    All,
    Roots,
    None,
}

impl Outcome {
    fn sink(&self, keep: Keep) -> warden::ReportSink {
        let outcome = self.0.clone();
        warden::ReportSink(std::sync::Arc::new(move |r: &TaskReport| {
            // Per-request handlers are the servers' business, not the run's.
            let root = r.parent.is_none() && r.route.is_none();
            let mut o = outcome.lock().unwrap_or_else(|e| e.into_inner());
            o.1 |= root && !r.succeeded();
            if keep == Keep::All || (keep == Keep::Roots && root) {
                o.0.push(r.clone());
            }
        }))
    }

    fn finish(self, report: Option<&Path>, summaries: bool) -> Result<ExitCode, String> {
        let mut o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        o.0.sort_by_key(|r| r.id);
        if summaries {
            for r in &o.0 {
                eprintln!("{}", summary(r));
            }
        }
        if let Some(path) = report {
            write_report(path, &o.0)?;
        }
        Ok(if o.1 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// A one-line progress count on a terminal's stderr, for long operations
/// (more than 50 items); silent when stderr is not a terminal.
struct Progress {
    what: &'static str,
    total: usize,
    on: bool,
    last: std::time::Instant,
}

impl Progress {
    fn new(what: &'static str, total: usize) -> Self {
        use std::io::IsTerminal;
        Progress {
            what,
            total,
            on: total > 50 && std::io::stderr().is_terminal(),
            last: std::time::Instant::now(),
        }
    }

    fn show(&mut self, done: usize) {
        if self.on && (done == 0 || self.last.elapsed() > Duration::from_millis(100)) {
            self.last = std::time::Instant::now();
            eprint!("\rwarden: {} {done}/{}", self.what, self.total);
        }
    }

    fn done(&mut self) {
        if self.on {
            eprintln!("\rwarden: {} {}/{}", self.what, self.total, self.total);
            self.on = false;
        }
    }
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

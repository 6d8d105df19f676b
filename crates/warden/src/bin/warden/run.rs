//! `warden run`: a system from a manifest, or one program, until its
//! tasks end, its servers are stopped (Ctrl-C, SIGTERM) or `--for` is over.

use crate::cli::{RunArgs, SystemArgs};
use crate::outcome::{Keep, Outcome, Shown};
use crate::program;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use warden::{Manifest, Runtime, RuntimeConfig, TaskSpec};

pub fn run(args: RunArgs) -> Result<ExitCode, String> {
    warden::raise_descriptor_limit();
    let is_manifest = args.target.extension().is_some_and(|e| e == "toml");
    let sys = &args.system;
    let (mut config, specs, control, http, cluster) = if is_manifest {
        manifest_system(&args)?
    } else {
        let spec = program::task(&args.target, &args.args, &args.program)?;
        // A single program opens no port unless asked to, as `wasmtime
        // run` opens none.
        let control = sys.control.clone().or_else(|| Some("off".into()));
        (RuntimeConfig::default(), vec![spec], control, vec![], None)
    };
    apply_flags(sys, &mut config)?;
    // Before the runtime starts its threads, so that they inherit it.
    let signals = block_stop_signals();
    // Every report reaches the outcome as its task ends, however many the
    // runtime itself keeps.
    let outcome = Outcome::default();
    let keep = match (sys.report.is_some() || sys.verbose, is_manifest) {
        (true, _) => Keep::All,
        (false, true) => Keep::Roots,
        (false, false) => Keep::None,
    };
    config.on_report = Some(outcome.sink(keep));
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    compile_all(&rt, &specs)?;
    if let Some(spec) = &cluster {
        rt.join_cluster(spec).map_err(|e| e.to_string())?;
        eprintln!(
            "warden: node {:?} joined the cluster at {}",
            spec.node,
            spec.nats.join(", ")
        );
    }
    // Every listener is bound before any task starts: a port in use ends
    // the run before a task has run or printed anything.
    let control = serve_control(&rt, control);
    let servers = start_http(&rt, &http)?;
    let ends = on_stop_signal(signals);
    start_all(&rt, &specs)?;
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
    let why = match sys.run_for {
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
    // Answers to other nodes' calls that the last tasks gave still go out.
    if let Some(cluster) = rt.cluster() {
        cluster.drain();
    }
    let shown = match (is_manifest, sys.verbose) {
        (_, true) | (true, false) => Shown::Summaries,
        (false, false) => Shown::Failure,
    };
    outcome.finish(sys.report.as_deref(), shown, !is_manifest)
}

/// Starts every `[[http]]` server (before any task starts); if one cannot
/// start, those started stop.
fn start_http(
    rt: &Runtime,
    http: &[warden::http::HttpSpec],
) -> Result<Vec<warden::http::HttpServer>, String> {
    http.iter()
        .map(|spec| warden::http::HttpServer::start(rt, spec))
        .collect()
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
        Option<warden::ClusterSpec>,
    ),
    String,
> {
    if program::any(&args.program) || !args.args.is_empty() {
        return Err("program flags and arguments apply to a single module; \
                    set them in the manifest's [[task]] instead"
            .into());
    }
    let m = Manifest::load(&args.target)?;
    let control = args.system.control.clone().or(m.runtime.control.clone());
    Ok((manifest_config(&m), m.tasks, control, m.http, m.cluster))
}

/// The runtime a manifest's system runs on.
pub fn manifest_config(m: &Manifest) -> RuntimeConfig {
    let mut config = RuntimeConfig::default();
    config.workers = m.runtime.workers.unwrap_or(config.workers);
    config.slice = m.runtime.slice.unwrap_or(config.slice);
    if m.runtime.cache == Some(false) {
        config.cache_dir = None;
    }
    config.prefix_output = m.tasks.len() > 1 || !m.http.is_empty();
    config.scheduler = m.runtime.scheduler;
    config.link_rate = m.runtime.link_rate;
    if let Some(n) = m.runtime.max_module_bytes {
        config.max_module_bytes = n;
    }
    config.memory_limit = m.runtime.memory_limit.or(config.memory_limit);
    config.groups = m.groups.clone();
    let n = u32::try_from(m.tasks.len()).unwrap_or(u32::MAX);
    config.max_tasks = m.runtime.max_tasks.unwrap_or(config.max_tasks.max(n));
    config
}

/// Command-line settings, which override the manifest's.
pub fn apply_flags(sys: &SystemArgs, config: &mut RuntimeConfig) -> Result<(), String> {
    if let Some(w) = sys.workers {
        if w == 0 {
            return Err("--workers must be at least 1".into());
        }
        config.workers = w;
    }
    if let Some(ms) = sys.slice_ms {
        if ms == 0 {
            return Err("--slice-ms must be at least 1".into());
        }
        config.slice = Duration::from_millis(ms);
    }
    if sys.no_cache {
        config.cache_dir = None;
    }
    config.allow_precompiled = sys.allow_precompiled;
    if let Some(s) = &sys.max_module_size {
        config.max_module_bytes = match warden::units::parse_size(s) {
            Ok(0) | Err(_) => {
                return Err(format!(
                    "--max-module-size {s:?}: expected a size such as 256MiB"
                ))
            }
            Ok(n) => n,
        };
    }
    if let Some(s) = &sys.runtime_memory_limit {
        config.memory_limit = match warden::units::parse_size(s) {
            Ok(0) | Err(_) => {
                return Err(format!(
                    "--runtime-memory-limit {s:?}: expected a size such as 8GiB"
                ))
            }
            Ok(n) => Some(n),
        };
    }
    config.events = sys.events.clone();
    Ok(())
}

/// Compiles every distinct module — the tasks' and those they may spawn
/// children from — before any task starts, so a bad module stops the
/// system before anything runs.
fn compile_all(rt: &Runtime, specs: &[TaskSpec]) -> Result<(), String> {
    let modules = modules(specs);
    let mut progress = Progress::new("compiling modules", modules.len());
    for (i, m) in modules.iter().enumerate() {
        progress.show(i);
        load(rt, m).map_err(|e| e.to_string())?;
    }
    progress.done();
    Ok(())
}

/// A module of a system: its path, and whether a passive task runs it.
pub type SystemModule<'a> = (&'a PathBuf, bool);

/// Every distinct module of `specs`, in order: the tasks' own and those
/// they may spawn children from.
pub fn modules<'a>(specs: impl IntoIterator<Item = &'a TaskSpec>) -> Vec<SystemModule<'a>> {
    let mut seen = std::collections::HashSet::new();
    specs
        .into_iter()
        .flat_map(|s| {
            std::iter::once((&s.module, s.passive)).chain(s.modules.iter().map(|(_, m)| (m, false)))
        })
        .filter(|m| seen.insert(*m))
        .collect()
}

/// Loads a system's module as the tasks that run it need it.
pub fn load(rt: &Runtime, (path, passive): &SystemModule) -> Result<(), warden::Error> {
    match passive {
        true => rt.load_passive_module(path).map(drop),
        false => rt.load_module(path).map(drop),
    }
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

//! `warden run`: a system from a manifest, or one program, until its
//! tasks end, its servers are stopped (Ctrl-C, SIGTERM) or `--for` is over.

use crate::cli::{RunArgs, SystemArgs};
use crate::outcome::{Keep, Outcome, Shown};
use crate::program;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use warden::{RuntimeConfig, Step, System, SystemSpec};

pub fn run(args: RunArgs) -> Result<ExitCode, String> {
    let is_manifest = args.target.extension().is_some_and(|e| e == "toml");
    let sys = &args.system;
    let spec = if is_manifest {
        manifest_system(&args)?
    } else {
        SystemSpec::program(program::task(&args.target, &args.args, &args.program)?)
    };
    run_system(spec, sys, is_manifest)
}

/// Runs `spec` as the system flags `sys` say, until its tasks end (a
/// single program, unless `is_manifest`) or it is stopped.
pub fn run_system(
    mut spec: SystemSpec,
    sys: &SystemArgs,
    is_manifest: bool,
) -> Result<ExitCode, String> {
    if sys.control.is_some() {
        spec.control = sys.control.clone();
    }
    spec.insecure_control |= sys.insecure_control;
    apply_flags(sys, &mut spec.config)?;
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
    spec.config.on_report = Some(outcome.sink(keep));
    let cluster = spec.cluster.clone();
    let mut progress = Progress::default();
    let starting = Arc::new(Starting::default());
    let running = Arc::new(std::sync::OnceLock::new());
    let ends = on_stop_signal(signals, starting.clone(), running.clone());
    // A top supervisor that gives up ends the run, status 1.
    let given_up = ends.0.clone();
    spec.on_failure = Some(warden::FailureSink(Arc::new(move |why: &str| {
        let _ = given_up.send(Some(why.to_string()));
    })));
    let system = System::start_with(spec, |step, done, total| {
        starting.at(step, total);
        progress.show(step, done, total)
    })?;
    starting.done();
    if is_manifest {
        let _ = running.set(system.runtime().clone());
    }
    if let Some(c) = cluster {
        say!(
            "warden: node {:?} joined the cluster at {}",
            c.node,
            c.nats.join(", ")
        );
    }
    announce(&system);
    if system.servers().is_empty() {
        // A system without servers ends when its last task does.
        let (rt, ends) = (system.runtime().clone(), ends.0.clone());
        std::thread::spawn(move || {
            rt.wait_all();
            let _ = ends.send(None);
        });
    }
    let why = match sys.run_for {
        Some(d) => ends
            .1
            .recv_timeout(d)
            .unwrap_or(Some("its run time (--for) is over".into())),
        None => ends.1.recv().unwrap_or(None),
    };
    let failure = system.failure();
    let rt = system.runtime().clone();
    system.shutdown(why.as_deref());
    // Every task has ended and the process exits next: its exit takes the
    // runtime's threads and memory back faster than a teardown would.
    rt.leave();
    if failure.is_some() {
        outcome.fail();
    }
    let shown = match (is_manifest, sys.verbose) {
        (_, true) | (true, false) => Shown::Summaries,
        (false, false) => Shown::Failure,
    };
    outcome.finish(sys.report.as_deref(), shown, !is_manifest)
}

/// Where the servers and the dashboard are, on stderr (the addresses
/// bound, for those given port 0), if there are any.
fn announce(system: &System) {
    for s in system.servers() {
        match s.tls_fingerprint() {
            None => say!("warden: serving http://{}/", s.addr()),
            Some(f) => say!(
                "warden: serving https://{}/ (certificate SHA-256 {f})",
                s.addr()
            ),
        }
    }
    if let Some((addr, token)) = system.control() {
        match system.control_tls_fingerprint() {
            None => say!(
                "warden: dashboard at http://{addr}/#token={}",
                token.as_str()
            ),
            Some(f) => say!(
                "warden: dashboard at https://{addr}/#token={} (certificate SHA-256 {f})",
                token.as_str()
            ),
        }
    }
    if !system.servers().is_empty() || system.control().is_some() {
        say!("warden: Ctrl-C stops the system");
    }
}

/// The system a manifest describes.
fn manifest_system(args: &RunArgs) -> Result<SystemSpec, String> {
    if program::any(&args.program) || !args.args.is_empty() {
        return Err("program flags and arguments apply to a single module; \
                    set them in the manifest's [[task]] instead"
            .into());
    }
    SystemSpec::from_manifest_file(&args.target)
}

/// Command-line settings, which override the manifest's.
pub fn apply_flags(sys: &SystemArgs, config: &mut RuntimeConfig) -> Result<(), String> {
    // The command owns its process: as a server does, it raises its
    // descriptor limit, and its allocator's heaps are trimmed after a
    // mass death.
    config.raise_descriptor_limit = true;
    config.heap_trim = Some(crate::heap_trim);
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
    match sys.max_tasks {
        Some(0) => return Err("--max-tasks must be at least 1".into()),
        Some(n) => config.max_tasks = n,
        None => {}
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

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread it starts
/// from now on; `on_stop_signal` then takes them one at a time.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain calls on a sigset_t this function owns.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// How a run ends: `Some(reason)` to kill every task for `reason` (a
/// top supervisor giving up,
/// signal, the `--for` bound), `None` when its tasks have all ended.
type Ends = (
    std::sync::mpsc::Sender<Option<String>>,
    std::sync::mpsc::Receiver<Option<String>>,
);

/// How far a system's start has come, for the signal thread: a signal
/// before its tasks run ends the process at once (Wasmtime's compiler
/// cannot be interrupted, and nothing of the system's has run), and a
/// compilation that takes over a second is said on stderr.
#[derive(Default)]
struct Starting {
    /// 0: compiling, 1: starting tasks, 2: running.
    phase: AtomicU8,
    modules: AtomicUsize,
}

impl Starting {
    fn at(&self, step: Step, total: usize) {
        let phase = match step {
            Step::Compiling => 0,
            Step::Starting => 1,
        };
        self.phase.store(phase, Ordering::Release);
        if step == Step::Compiling {
            self.modules.store(total, Ordering::Release);
        }
    }

    fn done(&self) {
        self.phase.store(2, Ordering::Release);
    }
}

/// Ctrl-C (SIGINT) or SIGTERM ends the run as an operator's kill would:
/// every task is killed, and the report says which signal it was. Before
/// the tasks run, it ends the process at once, status 130 (SIGINT) or 143.
/// SIGHUP has the web servers read their certificate files again, and a
/// manifest's system (`running`, once it runs) reload its manifest.
fn on_stop_signal(
    set: libc::sigset_t,
    starting: Arc<Starting>,
    running: Arc<std::sync::OnceLock<warden::Runtime>>,
) -> Ends {
    let (tx, rx) = std::sync::mpsc::channel();
    let ends = tx.clone();
    let _ = std::thread::Builder::new()
        .name("warden-signals".into())
        .spawn(move || {
            let mut said = false;
            loop {
                let Some(sig) = wait_signal(&set, !said) else {
                    if starting.phase.load(Ordering::Acquire) == 0 {
                        let n = starting.modules.load(Ordering::Acquire);
                        let plural = if n == 1 { "" } else { "s" };
                        say!("warden: compiling {n} module{plural} (Ctrl-C stops)");
                    }
                    said = true;
                    continue;
                };
                if sig == libc::SIGHUP {
                    // The web servers read their certificates again.
                    warden::reload_certificates();
                    if let Some(rt) = running.get() {
                        reload(rt);
                    }
                    continue;
                }
                if starting.phase.load(Ordering::Acquire) < 2 {
                    say!("warden: interrupted while starting the system");
                    std::process::exit(128 + sig);
                }
                let reason = if sig == libc::SIGTERM {
                    "terminated (SIGTERM)"
                } else {
                    "interrupted (Ctrl-C)"
                };
                let _ = tx.send(Some(reason.to_string()));
            }
        });
    (ends, rx)
}

/// A SIGHUP's reload of the system's manifest, said on stderr line by
/// line.
fn reload(rt: &warden::Runtime) {
    let (said, lines) = match rt.operate("", warden::Operation::Reload(None)) {
        Ok(done) => ("reloaded", done),
        Err(why) => ("reload failed", why),
    };
    say!("warden: manifest {said} (SIGHUP)");
    for line in lines.lines() {
        say!("warden: {line}");
    }
}

/// The next signal of `set`; `None` after a second without one, if
/// `timed`.
fn wait_signal(set: &libc::sigset_t, timed: bool) -> Option<i32> {
    let second = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: `set` is a valid signal set; its signals are blocked in
        // every thread, so only this wait receives them.
        let sig = unsafe {
            match timed {
                true => libc::sigtimedwait(set, std::ptr::null_mut(), &second),
                false => libc::sigwaitinfo(set, std::ptr::null_mut()),
            }
        };
        if sig > 0 {
            return Some(sig);
        }
        let err = std::io::Error::last_os_error().raw_os_error();
        if timed && err == Some(libc::EAGAIN) {
            return None;
        }
    }
}

/// A one-line progress count on a terminal's stderr, for long steps
/// (more than 50 modules or tasks); silent when stderr is not a terminal.
#[derive(Default)]
struct Progress {
    last: Option<std::time::Instant>,
}

impl Progress {
    fn show(&mut self, step: Step, done: usize, total: usize) {
        use std::io::IsTerminal;
        if total <= 50 || !std::io::stderr().is_terminal() {
            return;
        }
        let what = match step {
            Step::Compiling => "compiling modules",
            Step::Starting => "starting tasks",
        };
        if done == total {
            say!("\rwarden: {what} {total}/{total}");
            self.last = None;
        } else if self
            .last
            .is_none_or(|t| t.elapsed() > Duration::from_millis(100))
        {
            self.last = Some(std::time::Instant::now());
            eprint!("\rwarden: {what} {done}/{total}");
        }
    }
}

//! A system: one runtime with its tasks, web servers, control API and
//! cluster membership, started from a manifest in the order that makes a
//! failed start harmless — every module compiled and every listener bound
//! before any task runs. The `warden` command runs its systems with this;
//! so can a program that embeds Warden:
//!
//! ```
//! use warden::{Manifest, System, SystemSpec};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("seven.wat"), r#"(module
//!     (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
//!     (memory (export "memory") 1)
//!     (func (export "_start") (call $exit (i32.const 7))))"#)?;
//! let manifest = Manifest::parse(r#"
//!     [runtime]
//!     control = "off"
//!     cache = false
//!
//!     [[task]]
//!     name = "seven"
//!     module = "seven.wat"
//!     memory_limit = "1MiB"
//! "#, dir.path())?;
//! let system = System::start(SystemSpec::from_manifest(manifest))?;
//! let reports = system.runtime().wait_all();
//! assert_eq!(reports[0].exit_code, Some(7));
//! system.shutdown(None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod reload;
mod supervise;
mod upgrade;

pub use supervise::FailureSink;

use crate::control::{self, ControlServer, Token};
use crate::http::{HttpServer, HttpSpec};
use crate::{ClusterSpec, Manifest, Runtime, RuntimeConfig, TaskSpec};
use std::path::PathBuf;

/// What a system is made of: the runtime's settings, the tasks started
/// in it, and what it serves.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SystemSpec {
    /// The runtime's settings.
    pub config: RuntimeConfig,
    /// The tasks started, in order.
    pub tasks: Vec<TaskSpec>,
    /// The control API's address: `None` for [`control::DEFAULT_ADDR`],
    /// `"off"` for none.
    pub control: Option<String>,
    /// TLS for the control API; without it, an address other than
    /// loopback is refused unless `insecure_control`.
    pub control_tls: Option<crate::TlsSpec>,
    /// Serve the control API in the clear on any address.
    pub insecure_control: bool,
    /// Refuse to start if a task's or route's memory limit is below what
    /// its module starts with (see [`misfits`]): for a single program,
    /// whose run could only fail. A manifest's system starts its other
    /// tasks, and the misfit's start traps.
    pub strict_limits: bool,
    /// The web servers.
    pub http: Vec<HttpSpec>,
    /// The cluster the runtime joins, if any.
    pub cluster: Option<ClusterSpec>,
    /// Supervisors of its tasks (see `system::supervise`).
    pub supervisors: Vec<crate::SupervisorSpec>,
    /// Told why, if a top supervisor gives up and so ends the system.
    pub on_failure: Option<FailureSink>,
    /// The manifest it was made from and the file it is in, if any: what
    /// a reload (`warden reload`) compares a changed one with.
    pub manifest: Option<(PathBuf, Manifest)>,
}

impl SystemSpec {
    /// The system a manifest describes.
    pub fn from_manifest(m: Manifest) -> SystemSpec {
        SystemSpec {
            config: runtime_config(&m),
            control: m.runtime.control.clone(),
            control_tls: m.runtime.control_tls.clone(),
            insecure_control: false,
            strict_limits: false,
            tasks: m.tasks,
            http: m.http,
            cluster: m.cluster,
            supervisors: m.supervisors,
            on_failure: None,
            manifest: None,
        }
    }

    /// The system the manifest in the file at `path` describes, which
    /// `warden reload` may change while it runs.
    pub fn from_manifest_file(path: &std::path::Path) -> Result<SystemSpec, String> {
        let m = Manifest::load(path)?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut spec = SystemSpec::from_manifest(m.clone());
        spec.manifest = Some((path, m));
        Ok(spec)
    }

    /// One task on a default runtime with room for 64 tasks (the
    /// program and its children), serving nothing (as `wasmtime run`
    /// opens no port).
    pub fn program(task: TaskSpec) -> SystemSpec {
        SystemSpec {
            config: RuntimeConfig {
                max_tasks: PROGRAM_MAX_TASKS,
                ..RuntimeConfig::default()
            },
            tasks: vec![task],
            control: Some("off".into()),
            control_tls: None,
            insecure_control: false,
            strict_limits: true,
            http: vec![],
            cluster: None,
            supervisors: vec![],
            on_failure: None,
            manifest: None,
        }
    }
}

/// Most tasks alive at once in a single program's system (the program
/// and the children it spawns): a runtime sets up every task's slot when
/// it starts (a stack's guard page alone is a system call), which for
/// the default 10,000 took a single program's run about 25 ms, and 256
/// about 1 ms more of CPU than 64 (`warden run hello.wasm`: 6.4 ms
/// against 5.5 ms).
const PROGRAM_MAX_TASKS: u32 = 64;

/// The runtime a manifest's system runs on.
pub fn runtime_config(m: &Manifest) -> RuntimeConfig {
    let mut config = RuntimeConfig::default();
    config.workers = m.runtime.workers.unwrap_or(config.workers);
    config.slice = m.runtime.slice.unwrap_or(config.slice);
    if m.runtime.cache == Some(false) {
        config.cache_dir = None;
    }
    config.prefix_output = m.tasks.len() > 1 || !m.http.is_empty();
    config.scheduler = m.runtime.scheduler;
    config.link_rate = m.runtime.link_rate;
    config.otlp = m.telemetry.clone();
    if let Some(n) = m.runtime.max_module_bytes {
        config.max_module_bytes = n;
    }
    config.memory_limit = m.runtime.memory_limit.or(config.memory_limit);
    config.groups = m.groups.clone();
    config.devices = m.devices.clone();
    let n = u32::try_from(m.tasks.len()).unwrap_or(u32::MAX);
    config.max_tasks = m.runtime.max_tasks.unwrap_or(config.max_tasks.max(n));
    config
}

/// How a system's module is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModuleUse {
    /// Its tasks run it (a command module or component).
    Task,
    /// A passive task runs it.
    Passive,
    /// A route runs it per request: a WAGI module.
    Wagi,
    /// A route runs it per request: a `wasi:http/proxy` component.
    HttpComponent,
}

/// A module of a system: its path, and how it is used.
pub type SystemModule<'a> = (&'a PathBuf, ModuleUse);

/// Every distinct module of `specs` and of the routes of `http`, in
/// order: the tasks' own, those they may spawn children from, and the
/// routes' per-request modules and components.
pub fn modules<'a>(
    specs: impl IntoIterator<Item = &'a TaskSpec>,
    http: &'a [HttpSpec],
) -> Vec<SystemModule<'a>> {
    let mut seen = std::collections::HashSet::new();
    let passive = |s: &TaskSpec| match s.passive && s.serves.is_empty() {
        true => ModuleUse::Passive,
        false if s.serves_http() => ModuleUse::HttpComponent,
        false => ModuleUse::Task,
    };
    let routes = http
        .iter()
        .flat_map(|h| &h.routes)
        .filter_map(|r| match &r.handler {
            crate::http::Handler::Module(t) => Some((&t.module, ModuleUse::Wagi)),
            crate::http::Handler::Component(t) => Some((&t.module, ModuleUse::HttpComponent)),
            crate::http::Handler::Service(_) => None,
        });
    specs
        .into_iter()
        .flat_map(|s| {
            std::iter::once((&s.module, passive(s)))
                .chain(s.ipc.modules.iter().map(|(_, m)| (m, ModuleUse::Task)))
        })
        .chain(routes)
        .filter(|m| seen.insert(*m))
        .collect()
}

/// Loads a system's module as the tasks that run it need it.
pub fn load(rt: &Runtime, (path, used): &SystemModule) -> Result<(), crate::Error> {
    match used {
        ModuleUse::Passive => rt.load_passive_module(path).map(drop),
        ModuleUse::Task | ModuleUse::Wagi => rt.load_module(path).map(drop),
        ModuleUse::HttpComponent => rt.load_http_component(path).map(drop),
    }
}

/// Every task and route of a system whose memory limit is below what its
/// module starts with, as (`task "name"` or `route "/path"`, why): each
/// could only fail at start. Modules that do not load are left to
/// [`load`] to report.
pub fn misfits(rt: &Runtime, tasks: &[TaskSpec], http: &[HttpSpec]) -> Vec<(String, String)> {
    let why = |e: crate::Error| match e {
        crate::Error::Spawn { message, .. } => Some(message),
        _ => None,
    };
    let mut all = Vec::new();
    for t in tasks {
        if let Some(m) = rt.check_fits(t).err().and_then(why) {
            all.push((format!("task {:?}", t.name), m));
        }
    }
    for r in http.iter().flat_map(|h| &h.routes) {
        let fits = match &r.handler {
            crate::http::Handler::Module(t) => rt.check_route_fits(t, false),
            crate::http::Handler::Component(t) => rt.check_route_fits(t, true),
            crate::http::Handler::Service(_) => Ok(()),
        };
        if let Some(m) = fits.err().and_then(why) {
            all.push((format!("route {:?}", r.path), m));
        }
    }
    all
}

/// Every typed import of a task of `tasks` that is left unbound, or
/// whose server (a task of `tasks` serving under the bound name) exports
/// a different type: one line each, `task "client": …`. A service
/// registered some other way is checked when the task starts.
pub fn bind_mismatches(rt: &Runtime, tasks: &[TaskSpec]) -> Vec<String> {
    let mut all = Vec::new();
    for t in tasks {
        if let Err(e) = rt.check_binds(t, tasks) {
            let why = match e {
                crate::Error::Spawn { message, .. } => message,
                other => other.to_string(),
            };
            all.push(format!("task {:?}: {why}", t.name));
        }
    }
    all
}

/// A step of [`System::start_with`] that reports its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Compiling the system's modules.
    Compiling,
    /// Starting its tasks.
    Starting,
}

/// A running system. Dropping it stops its servers; its tasks run on
/// until [`System::shutdown`] (or the runtime's last handle goes).
pub struct System {
    // Field order is drop order: servers stop before the control API,
    // and supervision before the runtime.
    servers: Vec<HttpServer>,
    control: Option<Control>,
    supervision: supervise::Supervision,
    rt: Runtime,
}

impl System {
    /// Starts `spec`'s system (see [`System::start_with`]).
    pub fn start(spec: SystemSpec) -> Result<System, String> {
        Self::start_with(spec, |_, _, _| {})
    }

    /// Starts `spec`'s system: the runtime, then every module compiled,
    /// the cluster joined, the control API and the web servers bound, and
    /// only then the tasks. If a step fails, what was started stops.
    /// `progress(step, done, total)` is called as modules compile and
    /// tasks start.
    pub fn start_with(
        spec: SystemSpec,
        mut progress: impl FnMut(Step, usize, usize),
    ) -> Result<System, String> {
        let rt = Runtime::new(spec.config.clone()).map_err(|e| e.to_string())?;
        let modules = modules(&spec.tasks, &spec.http);
        for (i, m) in modules.iter().enumerate() {
            progress(Step::Compiling, i, modules.len());
            load(&rt, m).map_err(|e| e.to_string())?;
        }
        progress(Step::Compiling, modules.len(), modules.len());
        if let Some(why) = bind_mismatches(&rt, &spec.tasks).into_iter().next() {
            return Err(why);
        }
        if spec.strict_limits {
            if let Some((who, why)) = misfits(&rt, &spec.tasks, &spec.http).into_iter().next() {
                return Err(format!("{who}: {why}"));
            }
        }
        if let Some(c) = &spec.cluster {
            rt.join_cluster(c).map_err(|e| e.to_string())?;
        }
        let tls = (spec.control_tls.clone(), spec.insecure_control);
        let control = serve_control(&rt, spec.control.clone(), tls)?;
        let servers = spec
            .http
            .iter()
            .map(|s| HttpServer::start(&rt, s))
            .collect::<Result<Vec<_>, _>>()?;
        let supervision = start_tasks(&rt, &spec, &mut progress)?;
        let routes = servers.iter().map(|s| s.routes().clone()).collect();
        let upgrades = upgrade::Upgrades::new(
            &spec.tasks,
            routes,
            spec.manifest.clone(),
            supervision.handle(),
        );
        rt.set_operator(Some(std::sync::Arc::new(
            move |rt: &Runtime, name: &str, op: crate::Operation| upgrades.operate(rt, name, op),
        )));
        Ok(System {
            servers,
            control,
            supervision,
            rt,
        })
    }

    /// Why the system ended early, if it did: a top supervisor gave up
    /// (the system's tasks were then all killed for this reason).
    pub fn failure(&self) -> Option<String> {
        self.supervision.failure()
    }

    /// The system's runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The web servers, in the order of the spec's.
    pub fn servers(&self) -> &[HttpServer] {
        &self.servers
    }

    /// The control API's address and token, if it is served.
    pub fn control(&self) -> Option<(std::net::SocketAddr, &Token)> {
        let server = self.control.as_ref()?.server.as_ref()?;
        Some((server.addr, server.token()))
    }

    /// The control API's certificate fingerprint, if it is served over
    /// TLS.
    pub fn control_tls_fingerprint(&self) -> Option<&str> {
        self.control
            .as_ref()?
            .server
            .as_ref()?
            .fingerprint
            .as_deref()
    }

    /// Ends the system: the web servers stop first (requests in flight
    /// still have their tasks), then, if `why` is given, every task is
    /// killed for it; returns when every task has ended and the answers
    /// the last ones gave to other nodes' calls have gone out.
    pub fn shutdown(mut self, why: Option<&str>) {
        self.rt.set_operator(None);
        self.servers.clear();
        if let Some(why) = why {
            self.rt.kill_all(why);
        }
        self.rt.wait_all();
        self.supervision.stop();
        if let Some(cluster) = self.rt.cluster() {
            cluster.drain();
        }
        // The last tasks' spans leave before the process may.
        if let Some(spans) = self.rt.spans() {
            spans.flush();
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.rt.set_operator(None);
    }
}

/// Starts `spec`'s tasks in order, the supervised ones under their
/// supervisors, whose thread then runs; if one cannot start, every task
/// is killed.
fn start_tasks(
    rt: &Runtime,
    spec: &SystemSpec,
    progress: &mut impl FnMut(Step, usize, usize),
) -> Result<supervise::Supervision, String> {
    let supervised: Vec<TaskSpec> = (spec.tasks.iter())
        .filter(|t| supervise::supervised(t, &spec.supervisors))
        .cloned()
        .collect();
    let (mut supervision, mut starter) =
        supervise::Supervision::build(rt, &supervised, &spec.supervisors, spec.on_failure.clone());
    for (i, task) in spec.tasks.iter().enumerate() {
        progress(Step::Starting, i, spec.tasks.len());
        let started = match starter.has(&task.name) {
            true => starter.start(&task.name),
            false => rt.spawn(task).map(drop),
        };
        if let Err(e) = started {
            rt.kill_all("system start failed");
            rt.wait_all();
            return Err(e.to_string());
        }
    }
    progress(Step::Starting, spec.tasks.len(), spec.tasks.len());
    starter.run(&mut supervision);
    Ok(supervision)
}

/// The control API and its token file; dropping it stops the server and
/// removes the file.
struct Control {
    server: Option<ControlServer>,
    token_file: Option<PathBuf>,
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Some(f) = &self.token_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Serves the control API at `addr` (the default if `None`; none if
/// "off") and writes its token file. An address the spec names that
/// cannot be served is an error, so that no operator command reaches
/// another system on it; the default address taken, or an unwritable
/// token file, is reported on stderr and the system runs without.
fn serve_control(
    rt: &Runtime,
    named: Option<String>,
    (tls, insecure): (Option<crate::TlsSpec>, bool),
) -> Result<Option<Control>, String> {
    let addr = named
        .clone()
        .unwrap_or_else(|| control::DEFAULT_ADDR.to_string());
    if addr == "off" {
        return Ok(None);
    }
    let loopback = addr
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback());
    if !loopback && tls.is_none() && !insecure {
        return Err(format!(
            "control API on {addr}: an address other than loopback needs TLS \
             ([runtime] control_tls_cert and control_tls_key, or control_tls = \"self-signed\"), \
             or --insecure-control to send its token in the clear"
        ));
    }
    let mut token_file = None;
    let publish = |at, token: &Token, stamp, fingerprint: Option<&str>| {
        const REFUSED: &str = "kill, suspend, resume and spawn will be refused";
        let Some(f) = control::token_file(at) else {
            say!("warden: control token not written (set HOME or XDG_RUNTIME_DIR); {REFUSED}");
            return;
        };
        match control::write_token_file(&f, token, stamp, at, fingerprint) {
            Ok(()) => token_file = Some(f),
            Err(e) => say!(
                "warden: control token not written ({}: {e}); {REFUSED}",
                f.display()
            ),
        }
    };
    let server = match ControlServer::start(rt.clone(), &addr, tls.as_ref(), publish) {
        Ok(server) => Some(server),
        Err(e) if named.is_some() => {
            return Err(format!(
                "control API not served: {e} (another system may hold it: \
                 name a free address with --control or [runtime] control, or \"off\")"
            ))
        }
        Err(e) => {
            say!("warden: control API not served: {e}");
            None
        }
    };
    let control = Control { token_file, server };
    // Without a server, dropping `control` removes the token file.
    Ok(control.server.is_some().then_some(control))
}

//! The manifest: a TOML file describing a system of tasks.
//!
//! ```toml
//! [runtime]
//! workers = 2          # worker threads (default: number of cores)
//! slice_ms = 4         # time slice (default 4)
//! cache = true         # compiled-code cache on disk (default true)
//! max_tasks = 10000    # most tasks alive at once (default: 10,000 or the
//!                      # number of tasks in the manifest, if larger;
//!                      # see RuntimeConfig::max_tasks past 24,000)
//! control = "127.0.0.1:7474" # control API address, or "off"
//! control_tls_cert = "c.pem" # HTTPS for it, with control_tls_key (or
//!                      # control_tls = "self-signed"; control_tls_client_ca);
//!                      # needed on an address other than loopback
//! max_module_size = "256MiB" # largest module file read (default 256MiB)
//! memory_limit = "8GiB" # the most all tasks together may use (default:
//!                      # the machine's or cgroup's memory less a reserve)
//! scheduler = "stride" # root policy: round-robin (default), priority,
//!                      # stride, lottery
//!
//! [[group]]            # a scheduling group (parents before children)
//! name = "tenant-a"
//! parent = "org"       # default: the root
//! policy = "priority"  # how the group orders its members
//! share = 2            # its stride share in its parent (default 1);
//! tickets = 200        # its lottery tickets (default 100);
//! priority = 1         # its fixed priority (default 0)
//! cap = 0.5            # at most half a core
//! cpu_quota = "10s"    # total CPU; all members are killed past it
//! memory_limit = "1GiB" # all members' memory together
//! memory_guarantee = "256MiB" # reserved at start; members' surplus
//!                      # (beyond their own guarantees) is taken from it first
//!
//! [[task]]
//! name = "hello"
//! module = "hello.wasm"            # relative to the manifest
//! args = ["--greeting", "hi"]      # argv[1..]; argv[0] is the module's file name
//! env = { LANG = "C" }
//! dirs = { "/data" = "data" }      # guest path -> host path (relative to the manifest),
//!                                  # or "service:fs": served by the file-system task "fs"
//! memory_limit = "64MiB"           # linear memories + tables
//! on_memory_limit = "deny"         # or "kill", or "notify" (its parent);
//!                                  # also what reclaiming its surplus does
//! memory_guarantee = "16MiB"       # reserved at spawn, always its (default 0)
//! memory_priority = 0              # surplus is reclaimed from the lowest first
//! cpu_limit = "2s"
//! on_cpu_limit = "kill"            # or "notify": suspend, tell the parent
//! count = 1                        # N copies named hello.0 .. hello.N-1
//!                                  # ("{name}" and "{index}" in args and env
//!                                  # values become each copy's name and index)
//! stdout = "inherit"               # or "null", or a file path
//! stderr = "inherit"
//! stdin = "null"                   # or "inherit"
//! provides = ["kv"]                # names it may register ("log.*": a prefix)
//! uses = ["log.*"]                 # names it may look up
//! export = ["kv"]                  # of those it provides, the names other
//!                                  # nodes of the cluster may call
//! max_handles = 1024               # handle table size
//! max_message_bytes = "64KiB"      # per-message quota: bytes ...
//! max_message_handles = 16         # ... and handles
//! group = "tenant-a"               # scheduling group (default: the root)
//! share = 1                        # stride share (default 1)
//! tickets = 100                    # lottery tickets (default 100)
//! priority = 0                     # fixed priority, higher first (default 0)
//! cap = 0.25                       # at most a quarter of a core
//! inheritance = true               # as a server, run on callers' contexts
//! passive = false                  # a reactor whose handler runs on its
//!                                  # callers' threads (see below)
//! call_cpu_limit = "1s"            # passive only: CPU per call
//! modules = { worker = "w.wasm" }  # modules it may spawn children from
//! restart = "temporary"            # or "permanent", "transient" (OTP's):
//!                                  # whether its supervisor restarts it
//! drain = "5s"                     # live upgrade: the old task's time to
//!                                  # answer what it had received
//! ```
//!
//! Supervisors restart tasks as Erlang/OTP's do (see
//! `manifest/supervisor.rs`):
//!
//! ```toml
//! [[supervisor]]
//! name = "storage"
//! strategy = "one_for_one"         # or "one_for_all", "rest_for_one"
//! max_restarts = 5                 # at most 5 restarts ...
//! within = "10s"                   # ... in any 10 s, else it gives up
//! backoff = "50ms"                 # first delay, doubling, at most 5 s
//! cpu_limit = "1s"                 # CPU its restarts may cost
//! members = ["fs", "nfs"]          # tasks and supervisors, in order
//! ```
//!
//! A system may join a cluster of Warden nodes (see `manifest/cluster.rs`):
//!
//! ```toml
//! [cluster]
//! nats = "nats://127.0.0.1:4222"   # the broker, or a list of URLs
//! node = "a"                       # unique within the cluster
//! name = "prod"                    # the cluster (default "default")
//! creds = "a.creds"                # or nkey = "a.nk", user = "a" with
//!                                  # password_file or password_env, or
//!                                  # token_file or token_env
//! tls_ca = "ca.pem"                # and tls_cert, tls_key, tls_required
//! key = "a.nk"                     # this node's key, with members: every
//! members = "members.toml"         # member's public key (or inline
//!                                  # { a = "N…" }); frames are signed
//! open = true                      # no key and members on a broker not
//!                                  # on this machine: required, so that
//!                                  # an open cluster is never an accident
//! ```
//!
//! Traces go to an OpenTelemetry collector if a `[telemetry]` section
//! names one (see `telemetry`):
//!
//! ```toml
//! [telemetry]
//! otlp = "http://127.0.0.1:4318"   # OTLP/HTTP
//! service = "shop"                 # service.name (default "warden")
//! ```
//!
//! Parsing is strict: unknown keys, bad sizes and durations, missing module
//! files or directories and duplicate task names are errors that name the
//! offending key or file.

mod cluster;
mod device;
mod http;
mod locate;
mod runtime;
mod shape;
mod supervisor;
mod task;

use task::{task_specs, RawTask};

use crate::ipc::handle::MAX_HANDLES;
use crate::sched::{Params, PolicyKind};
use crate::task::GroupSpec;
use crate::task::{
    MemoryPolicy, Output, TaskSpec, DEFAULT_MAX_HANDLES, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_MESSAGE_HANDLES,
};
use crate::units::{parse_limit_duration, parse_rate, parse_size};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A parsed and validated manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Runtime-wide settings.
    pub runtime: RuntimeSection,
    /// Scheduling groups, parents before children.
    pub groups: Vec<GroupSpec>,
    /// One entry per task to start (copies already expanded).
    pub tasks: Vec<TaskSpec>,
    /// HTTP servers, bound before any task starts (see `manifest/http.rs`
    /// and `System::start_with`).
    pub http: Vec<crate::http::HttpSpec>,
    /// The cluster the system joins, if any (see `manifest/cluster.rs`).
    pub cluster: Option<crate::cluster::ClusterSpec>,
    /// Block devices (see `manifest/device.rs`).
    pub devices: Vec<crate::DeviceSpec>,
    /// Where spans go (`[telemetry]`): the OTLP/HTTP endpoint and the
    /// service name; `None`: no tracing.
    pub telemetry: Option<(String, String)>,
    /// Supervisors of its tasks (see `manifest/supervisor.rs`).
    pub supervisors: Vec<crate::task::SupervisorSpec>,
}

/// The `[runtime]` section.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSection {
    /// Worker threads; `None` means one per core.
    pub workers: Option<usize>,
    /// Time slice; `None` means the default.
    pub slice: Option<Duration>,
    /// Whether to use the on-disk compiled-code cache; `None` means default.
    pub cache: Option<bool>,
    /// Most tasks alive at once; `None` means the default.
    pub max_tasks: Option<u32>,
    /// The root scheduling policy.
    pub scheduler: PolicyKind,
    /// The control API address ("off" to disable); `None` means default.
    pub control: Option<String>,
    /// TLS for the control API (`control_tls_cert`, `control_tls_key`,
    /// `control_tls = "self-signed"`, `control_tls_client_ca`).
    pub control_tls: Option<crate::serving::tls::TlsSpec>,
    /// The outgoing bandwidth tasks share, bytes per second (`None`:
    /// unlimited).
    pub link_rate: Option<u64>,
    /// Largest module file read; `None` means the default.
    pub max_module_bytes: Option<u64>,
    /// The root memory budget; `None` means the machine's.
    pub memory_limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    runtime: RawRuntime,
    #[serde(default)]
    group: Vec<RawGroup>,
    #[serde(default)]
    task: Vec<RawTask>,
    #[serde(default)]
    http: Vec<http::RawHttp>,
    cluster: Option<cluster::RawCluster>,
    telemetry: Option<RawTelemetry>,
    #[serde(default)]
    device: Vec<device::RawDevice>,
    #[serde(default)]
    supervisor: Vec<supervisor::RawSupervisor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    parent: Option<String>,
    policy: Option<String>,
    share: Option<u32>,
    tickets: Option<u32>,
    priority: Option<i32>,
    cap: Option<f64>,
    cpu_quota: Option<String>,
    bandwidth_share: Option<u32>,
    bandwidth_limit: Option<String>,
    memory_limit: Option<String>,
    memory_guarantee: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    workers: Option<usize>,
    slice_ms: Option<u64>,
    cache: Option<bool>,
    max_tasks: Option<u32>,
    scheduler: Option<String>,
    control: Option<String>,
    control_tls: Option<String>,
    control_tls_cert: Option<String>,
    control_tls_key: Option<String>,
    control_tls_client_ca: Option<String>,
    link_rate: Option<String>,
    max_module_size: Option<String>,
    memory_limit: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    otlp: String,
    service: Option<String>,
}

/// `[telemetry]`: the collector's endpoint, checked, and the service
/// name (default "warden").
fn telemetry(raw: Option<RawTelemetry>) -> Result<Option<(String, String)>, String> {
    let Some(t) = raw else { return Ok(None) };
    crate::telemetry::check_endpoint(&t.otlp)?;
    let service = t.service.unwrap_or_else(|| "warden".into());
    if service.is_empty() {
        return Err("telemetry.service: must not be empty".into());
    }
    Ok(Some((t.otlp, service)))
}

/// Largest `max_message_bytes` accepted.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;

/// Largest `count` accepted for one `[[task]]` entry.
pub const MAX_COUNT: u32 = 1_000_000;

impl Manifest {
    /// Reads and validates the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read manifest {}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, base).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses manifest text; relative paths are resolved against `base`.
    ///
    /// Errors are one line, starting with the line of the manifest they
    /// point at when it can be found (`line 12: task[1] ("web"): …`).
    pub fn parse(text: &str, base: &Path) -> Result<Manifest, String> {
        match Self::parse_all(text, base) {
            Ok((m, problems)) if problems.is_empty() => Ok(m),
            Ok((_, mut problems)) | Err(mut problems) => Err(problems.swap_remove(0)),
        }
    }

    /// As [`parse`](Self::parse), with every problem found rather than the
    /// first, in the order of the lines they point at: keys unknown (with
    /// the nearest known key suggested), mistyped or missing, bad values,
    /// duplicate names. Each key and entry is checked on its own, and the
    /// manifest returned holds the entries that passed. An `Err` holds
    /// the problems of text that is not TOML enough to go on.
    pub fn parse_all(text: &str, base: &Path) -> Result<(Manifest, Vec<String>), Vec<String>> {
        let (raw, shape, dropped): (RawManifest, _, _) = shape::raw(text)?;
        let (m, problems) = Self::from_raw(raw, base);
        let mut all: Vec<(usize, String)> =
            shape.into_iter().map(|p| (leading_line(&p), p)).collect();
        for e in problems {
            let e = dropped.renumber(e);
            all.push(match locate::line_of(text, &e) {
                Some(line) => (line, format!("line {line}: {e}")),
                None => (usize::MAX, e),
            });
        }
        all.sort_by_key(|(line, _)| *line);
        Ok((m, all.into_iter().map(|(_, p)| p).collect()))
    }

    /// One task from the keys of a `[[task]]` entry, checked exactly as in
    /// a manifest file (`count` is refused): how `warden run prog.wasm`
    /// turns its flags into a task. Relative paths are resolved against
    /// `base`.
    pub fn task(keys: toml::Table, base: &Path) -> Result<TaskSpec, String> {
        if keys.contains_key("count") {
            return Err("count: not for a single task".into());
        }
        let raw: RawTask = toml::Value::Table(keys)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().replace('\n', " "))?;
        let mut specs = task_specs(raw, base).map_err(|mut all| all.swap_remove(0))?;
        Ok(specs.remove(0))
    }

    fn from_raw(raw: RawManifest, base: &Path) -> (Manifest, Vec<String>) {
        let mut problems = Vec::new();
        let runtime = runtime::section(raw.runtime, base).unwrap_or_else(|e| {
            problems.push(e);
            RuntimeSection::default()
        });
        let mut groups: Vec<GroupSpec> = Vec::new();
        for (i, g) in raw.group.into_iter().enumerate() {
            let at = format!("group[{i}] ({:?})", g.name);
            match group_spec(g, &groups) {
                Ok(spec) => groups.push(spec),
                Err(e) => problems.push(format!("{at}: {e}")),
            }
        }
        let empty = raw.task.is_empty() && raw.http.is_empty();
        let tasks = tasks(raw.task, base, &groups, &mut problems);
        let devices = device::devices(raw.device, base, &mut problems);
        let supervisors = supervisor::supervisors(raw.supervisor, &tasks, &mut problems);
        device::check_grants(&tasks, &devices, &mut problems);
        let group_names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        let http = http::servers(raw.http, base, &group_names, &mut problems);
        if empty {
            problems.push("no [[task]] or [[http]] entries".into());
        }
        let cluster = raw
            .cluster
            .and_then(|c| cluster::spec(c, base).map_err(|e| problems.push(e)).ok());
        let telemetry = telemetry(raw.telemetry).unwrap_or_else(|e| {
            problems.push(e);
            None
        });
        let m = Manifest {
            runtime,
            groups,
            tasks,
            http,
            cluster,
            devices,
            telemetry,
            supervisors,
        };
        (m, problems)
    }
}

/// The tasks of the `[[task]]` entries; each bad one is a problem.
fn tasks(
    raw: Vec<RawTask>,
    base: &Path,
    groups: &[GroupSpec],
    problems: &mut Vec<String>,
) -> Vec<TaskSpec> {
    let mut tasks = Vec::new();
    let mut names = HashSet::new();
    for (i, t) in raw.into_iter().enumerate() {
        let at = format!("task[{i}] ({:?})", t.name);
        let no_group = t
            .group
            .as_ref()
            .filter(|g| !groups.iter().any(|x| &x.name == *g))
            .map(|g| format!("{at}: group: no [[group]] named {g:?}"));
        let specs = task_specs(t, base);
        problems.extend(no_group.clone());
        let specs = match specs {
            Ok(specs) if no_group.is_none() => specs,
            Ok(_) => continue,
            Err(all) => {
                problems.extend(all.into_iter().map(|e| format!("{at}: {e}")));
                continue;
            }
        };
        for spec in specs {
            if !names.insert(spec.name.clone()) {
                problems.push(format!("{at}: duplicate task name {:?}", spec.name));
                break;
            }
            tasks.push(spec);
        }
    }
    tasks
}

fn params(
    share: Option<u32>,
    tickets: Option<u32>,
    priority: Option<i32>,
) -> Result<Params, String> {
    let d = Params::default();
    if share == Some(0) {
        return Err("share: must be at least 1".into());
    }
    if tickets == Some(0) {
        return Err("tickets: must be at least 1".into());
    }
    Ok(Params {
        share: share.unwrap_or(d.share),
        tickets: tickets.unwrap_or(d.tickets),
        priority: priority.unwrap_or(d.priority),
    })
}

fn cap(cap: Option<f64>) -> Result<Option<f64>, String> {
    match cap {
        Some(c) if !(c > 0.0 && c <= 1.0) => {
            Err(format!("cap: {c} is not a fraction of a core in (0, 1]"))
        }
        c => Ok(c),
    }
}

fn group_spec(g: RawGroup, earlier: &[GroupSpec]) -> Result<GroupSpec, String> {
    if g.name.is_empty() || earlier.iter().any(|x| x.name == g.name) {
        return Err("name: must be non-empty and unique".into());
    }
    if let Some(p) = &g.parent {
        if !earlier.iter().any(|x| &x.name == p) {
            return Err(format!("parent: no earlier [[group]] named {p:?}"));
        }
    }
    Ok(GroupSpec {
        name: g.name,
        parent: g.parent,
        policy: match g.policy.as_deref() {
            None => PolicyKind::RoundRobin,
            Some(p) => PolicyKind::parse(p).map_err(|e| format!("policy: {e}"))?,
        },
        params: params(g.share, g.tickets, g.priority)?,
        cap: cap(g.cap)?,
        cpu_quota: g
            .cpu_quota
            .as_deref()
            .map(parse_limit_duration)
            .transpose()
            .map_err(|e| format!("cpu_quota: {e}"))?,
        bandwidth_share: share("bandwidth_share", g.bandwidth_share)?,
        bandwidth_limit: rate("bandwidth_limit", g.bandwidth_limit.as_deref())?,
        memory_limit: size("memory_limit", g.memory_limit.as_deref())?,
        memory_guarantee: size("memory_guarantee", g.memory_guarantee.as_deref())?.unwrap_or(0),
    })
}

/// A weight: at least 1, default 1.
fn share(key: &str, v: Option<u32>) -> Result<u32, String> {
    match v {
        Some(0) => Err(format!("{key}: must be at least 1")),
        v => Ok(v.unwrap_or(1)),
    }
}

fn rate(key: &str, v: Option<&str>) -> Result<Option<u64>, String> {
    v.map(parse_rate)
        .transpose()
        .map_err(|e| format!("{key}: {e}"))
}

fn size(key: &str, v: Option<&str>) -> Result<Option<u64>, String> {
    v.map(parse_size)
        .transpose()
        .map_err(|e| format!("{key}: {e}"))
}

/// The line a problem starts with (`line 12…`), or past the end.
fn leading_line(problem: &str) -> usize {
    problem
        .strip_prefix("line ")
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// A TOML error as one line: position and message.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let mut start = span.start.min(text.len());
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let before = &text[..start];
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let col = before.len() - line_start + 1;
            // Quote the line, so a type error shows its key.
            let src: String = text[line_start..]
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .take(60)
                .collect();
            format!("line {line}, column {col} (`{src}`): {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with_module() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.wasm"), b"\0asm\x01\0\0\0").unwrap();
        std::fs::create_dir(d.path().join("data")).unwrap();
        d
    }

    #[test]
    fn full_manifest() {
        let d = dir_with_module();
        let m = Manifest::parse(
            r#"
            [runtime]
            workers = 3
            slice_ms = 2
            [[task]]
            name = "a"
            module = "m.wasm"
            args = ["x", "{name}/{index}"]
            env = { K = "V", WHO = "{name}" }
            dirs = { "/data" = "data" }
            memory_limit = "1MiB"
            on_memory_limit = "kill"
            cpu_limit = "250ms"
            count = 3
            "#,
            d.path(),
        )
        .unwrap();
        assert_eq!(m.runtime.workers, Some(3));
        assert_eq!(m.runtime.slice, Some(Duration::from_millis(2)));
        let names: Vec<_> = m.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a.0", "a.1", "a.2"]);
        let t = &m.tasks[1];
        assert_eq!(t.limits.memory_limit, Some(1 << 20));
        assert_eq!(t.limits.on_memory_limit, MemoryPolicy::Kill);
        assert_eq!(t.limits.cpu_limit, Some(Duration::from_millis(250)));
        assert_eq!(t.args, ["x", "a.1/1"]);
        assert_eq!(
            t.env,
            [
                ("K".to_string(), "V".to_string()),
                ("WHO".to_string(), "a.1".to_string())
            ]
        );
        assert_eq!(t.dirs[0].0, "/data");
        assert!(t.module.ends_with("m.wasm"));
    }

    fn err(text: &str) -> String {
        let d = dir_with_module();
        Manifest::parse(text, d.path()).unwrap_err()
    }

    #[test]
    fn passive_keys() {
        let d = dir_with_module();
        let base = "[[task]]\nname='p'\nmodule='m.wasm'\n";
        let m = Manifest::parse(
            &format!("{base}passive=true\nprovides=['kv']\ncall_cpu_limit='20ms'"),
            d.path(),
        )
        .unwrap();
        assert!(m.tasks[0].passive);
        assert_eq!(m.tasks[0].call_cpu_limit, Duration::from_millis(20));
        let m = Manifest::parse(&format!("{base}passive=true\nprovides=['kv']"), d.path()).unwrap();
        assert_eq!(
            m.tasks[0].call_cpu_limit,
            crate::task::spec::DEFAULT_CALL_CPU_LIMIT
        );
        for (extra, want) in [
            ("passive=true", "needs a `provides` name"),
            ("passive=true\nprovides=['kv.*']", "not a pattern"),
            (
                "passive=true\nprovides=['kv']\ndirs={'/d'='.'}",
                "cannot have `dirs`",
            ),
            ("passive=true\nprovides=['kv']\ncount=2", "count must be 1"),
            (
                "passive=true\nprovides=['kv']\ncall_cpu_limit='0s'",
                "more than zero",
            ),
            ("call_cpu_limit='1s'", "only a passive task"),
        ] {
            let e = err(&format!("{base}{extra}"));
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn errors_name_the_key_or_file() {
        assert!(
            err("[[task]]\nname='a'\nmodule='m.wasm'\nmemroy_limit='1MiB'")
                .contains("memroy_limit")
        );
        assert!(
            err("[runtime]\nworkerz=1\n[[task]]\nname='a'\nmodule='m.wasm'").contains("workerz")
        );
        assert!(
            err("[[task]]\nname='a'\nmodule='m.wasm'\nmemory_limit='lots'")
                .contains("memory_limit")
        );
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\ncpu_limit='5'").contains("cpu_limit"));
        assert!(err("[[task]]\nname='a'\nmodule='nope.wasm'").contains("nope.wasm"));
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\ndirs={'/x'='nodir'}").contains("nodir"));
        assert!(
            err("[[task]]\nname='a'\nmodule='m.wasm'\non_memory_limit='explode'")
                .contains("on_memory_limit")
        );
        let over = err(
            "[[task]]\nname='a'\nmodule='m.wasm'\nmemory_limit='1MiB'\nmemory_guarantee='2MiB'",
        );
        assert!(
            over.contains("memory_guarantee: more than memory_limit"),
            "{over}"
        );
        assert!(
            err("[[task]]\nname='a'\nmodule='m.wasm'\nmemory_guarantee='some'")
                .contains("memory_guarantee")
        );
        let dup = err("[[task]]\nname='a'\nmodule='m.wasm'\n[[task]]\nname='a'\nmodule='m.wasm'");
        assert!(dup.contains("duplicate task name \"a\""), "{dup}");
        let dup = err(
            "[[task]]\nname='a.1'\nmodule='m.wasm'\n[[task]]\nname='a'\ncount=2\nmodule='m.wasm'",
        );
        assert!(dup.contains("duplicate task name \"a.1\""), "{dup}");
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\ncount=0").contains("count"));
        assert!(
            err("[runtime]\nworkers=0\n[[task]]\nname='a'\nmodule='m.wasm'").contains("workers")
        );
        assert!(err("").contains("no [[task]]"));
        assert!(
            err("[runtime]\nscheduler='fair'\n[[task]]\nname='a'\nmodule='m.wasm'")
                .contains("runtime.scheduler")
        );
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\ngroup='g'")
            .contains("no [[group]] named \"g\""));
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\ncap=1.5").contains("cap"));
        assert!(err("[[task]]\nname='a'\nmodule='m.wasm'\nshare=0").contains("share"));
        assert!(
            err("[[group]]\nname='g'\nparent='h'\n[[task]]\nname='a'\nmodule='m.wasm'")
                .contains("parent")
        );
        assert!(
            err("[[group]]\nname='g'\ncpu_quota='soon'\n[[task]]\nname='a'\nmodule='m.wasm'")
                .contains("cpu_quota")
        );
        assert!(err("[[task]]\nname='a'").contains("module"));
        let e = err("[[task]]\nname='a'\nmodule='m.wasm'\nbogus=1");
        assert!(
            e.starts_with("line 4, column 1 (`bogus=1`): unknown key `bogus`, expected one of"),
            "{e}"
        );
        let e = err("[runtime]\nslice_ms = 'x'\n[[task]]\nname='a'\nmodule='m.wasm'");
        assert!(
            e.starts_with("line 2, column 12 (`slice_ms = 'x'`): invalid type"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        assert!(err("this is not toml").starts_with("line 1"));
    }

    #[test]
    fn network_keys_are_checked() {
        let task = |extra: &str| err(&format!("[[task]]\nname='a'\nmodule='m.wasm'\n{extra}"));
        assert!(task("listen=['localhost:80']").starts_with("line 4: task[0] (\"a\"): listen: "));
        assert!(task("connect=['127.0.0.1:99999']").contains("connect: "));
        assert!(task("preopen_listeners=['127.0.0.1:*']").contains("preopen_listeners"));
        assert!(task("bandwidth_limit='5MB'").contains("bandwidth_limit: bad rate"));
        assert!(task("receive_limit='0MB/s'").contains("receive_limit"));
        assert!(task("bandwidth_share=0").contains("bandwidth_share"));
        assert!(task("socket_buffer='1KiB'").contains("socket_buffer"));
        assert!(
            task("preopen_listeners=['127.0.0.1:1','127.0.0.1:2']\nmax_sockets=1")
                .contains("max_sockets")
        );
        assert!(task("preopen_listeners=['127.0.0.1:8080']\ncount=2").contains("count"));
        assert!(
            err("[runtime]\nlink_rate='fast'\n[[task]]\nname='a'\nmodule='m.wasm'")
                .contains("runtime.link_rate")
        );
        assert!(err(
            "[[group]]\nname='g'\nbandwidth_limit='1GiB'\n[[task]]\nname='a'\nmodule='m.wasm'"
        )
        .contains("bandwidth_limit"));
        let d = dir_with_module();
        let m = Manifest::parse(
            "[runtime]\nlink_rate='1GiB/s'\n[[task]]\nname='a'\nmodule='m.wasm'\n\
             preopen_listeners=['127.0.0.1:0']\ncount=2\nsocket_buffer='256KiB'",
            d.path(),
        )
        .unwrap();
        assert_eq!(m.runtime.link_rate, Some(1 << 30));
        assert_eq!(m.tasks[1].net.socket_buffer, 256 << 10);
    }
}

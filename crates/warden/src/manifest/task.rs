//! A `[[task]]` entry: its keys, checked, as one or more task specs.

use super::*;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) name: String,
    pub(super) module: String,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) dirs: BTreeMap<String, String>,
    pub(super) memory_limit: Option<String>,
    pub(super) on_memory_limit: Option<String>,
    pub(super) memory_guarantee: Option<String>,
    pub(super) memory_priority: Option<i32>,
    pub(super) cpu_limit: Option<String>,
    pub(super) on_cpu_limit: Option<String>,
    pub(super) count: Option<u32>,
    pub(super) stdout: Option<String>,
    pub(super) stderr: Option<String>,
    pub(super) stdin: Option<String>,
    #[serde(default)]
    pub(super) provides: Vec<String>,
    #[serde(default)]
    pub(super) uses: Vec<String>,
    #[serde(default)]
    pub(super) export: Vec<String>,
    pub(super) max_handles: Option<usize>,
    pub(super) max_message_bytes: Option<String>,
    pub(super) max_message_handles: Option<u64>,
    pub(super) group: Option<String>,
    pub(super) share: Option<u32>,
    pub(super) tickets: Option<u32>,
    pub(super) priority: Option<i32>,
    pub(super) cap: Option<f64>,
    pub(super) inheritance: Option<bool>,
    #[serde(default)]
    pub(super) modules: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) listen: Vec<String>,
    #[serde(default)]
    pub(super) connect: Vec<String>,
    #[serde(default)]
    pub(super) preopen_listeners: Vec<String>,
    pub(super) bandwidth_share: Option<u32>,
    pub(super) bandwidth_limit: Option<String>,
    pub(super) receive_limit: Option<String>,
    pub(super) max_sockets: Option<u32>,
    pub(super) socket_buffer: Option<String>,
    pub(super) passive: Option<bool>,
    pub(super) call_cpu_limit: Option<String>,
    #[serde(default)]
    pub(super) devices: Vec<String>,
    pub(super) restart: Option<String>,
    pub(super) drain: Option<String>,
    #[serde(default)]
    pub(super) serves: Vec<String>,
    #[serde(default)]
    pub(super) binds: BTreeMap<String, String>,
    pub(super) call_timeout: Option<String>,
}

/// Network grants, preopened listeners and bandwidth.
fn task_net(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    for (key, list) in [
        ("listen", &t.listen),
        ("connect", &t.connect),
        ("preopen_listeners", &t.preopen_listeners),
    ] {
        for g in list {
            crate::net::Grant::parse(g).map_err(|e| format!("{key}: {e}"))?;
        }
    }
    for a in &t.preopen_listeners {
        a.parse::<std::net::SocketAddr>().map_err(|_| {
            format!("preopen_listeners: {a:?} is not an address such as \"127.0.0.1:8080\"")
        })?;
    }
    let max_sockets = match t.max_sockets {
        Some(n) if (n as usize) < t.preopen_listeners.len() => {
            return Err(format!(
                "max_sockets: {n} is fewer than its {} preopened listeners",
                t.preopen_listeners.len()
            ))
        }
        n => n.unwrap_or(crate::task::net::DEFAULT_MAX_SOCKETS),
    };
    spec.net = crate::task::NetSpec {
        listen: t.listen.clone(),
        connect: t.connect.clone(),
        preopen_listeners: t.preopen_listeners.clone(),
        bandwidth_share: share("bandwidth_share", t.bandwidth_share)?,
        bandwidth_limit: rate("bandwidth_limit", t.bandwidth_limit.as_deref())?,
        receive_limit: rate("receive_limit", t.receive_limit.as_deref())?,
        max_sockets,
        socket_buffer: match t.socket_buffer.as_deref() {
            None => crate::net::socket::BUFFER,
            Some(text) => {
                let n = parse_size(text).map_err(|e| format!("socket_buffer: {e}"))?;
                let range = crate::net::socket::BUFFER_RANGE;
                if !range.contains(&(n as usize)) {
                    return Err(format!("socket_buffer: {text:?} is not from 4KiB to 16MiB"));
                }
                n as usize
            }
        },
    };
    Ok(())
}

/// The tasks of a `[[task]]` entry (its copies); every problem of the
/// entry if it has any.
pub(super) fn task_specs(t: RawTask, base: &Path) -> Result<Vec<TaskSpec>, Vec<String>> {
    let template = task_template_all(&t, base)?;
    task_copies(t, template).map_err(|e| vec![e])
}

/// The copies `count` asks for, named and filled in.
fn task_copies(t: RawTask, template: TaskSpec) -> Result<Vec<TaskSpec>, String> {
    let fixed = template
        .net
        .preopen_listeners
        .iter()
        .find(|a| !a.ends_with(":0"));
    if let (Some(n), Some(a)) = (t.count.filter(|&n| n > 1), fixed) {
        return Err(format!(
            "count: {n} copies cannot all listen on {a} (preopen_listeners); use port 0"
        ));
    }
    let names: Vec<String> = match t.count {
        None => vec![t.name.clone()],
        Some(0) => return Err("count: must be at least 1".into()),
        Some(n) if n > MAX_COUNT => return Err(format!("count: at most {MAX_COUNT}")),
        Some(n) => (0..n).map(|i| format!("{}.{i}", t.name)).collect(),
    };
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(index, name)| {
            let fill = |v: &String| {
                v.replace("{name}", &name)
                    .replace("{index}", &index.to_string())
            };
            TaskSpec {
                args: t.args.iter().map(fill).collect(),
                env: t.env.iter().map(|(k, v)| (k.clone(), fill(v))).collect(),
                name: name.clone(),
                ..template.clone()
            }
        })
        .collect())
}

/// Everything of a `[[task]]` entry but its copies' names, args and env;
/// the first problem if it has any.
pub(super) fn task_template(t: &RawTask, base: &Path) -> Result<TaskSpec, String> {
    task_template_all(t, base).map_err(|mut all| all.swap_remove(0))
}

/// As [`task_template`], with every problem of the entry.
fn task_template_all(t: &RawTask, base: &Path) -> Result<TaskSpec, Vec<String>> {
    let mut problems = Vec::new();
    let mut keep = |r: Result<(), String>| {
        if let Err(e) = r {
            problems.push(e);
        }
    };
    if t.name.is_empty() || t.name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        keep(Err(
            "name: must be non-empty, without spaces or control characters".into(),
        ));
    }
    let module = base.join(&t.module);
    if !module.is_file() {
        keep(Err(format!("module: file not found: {}", module.display())));
    }
    let mut spec = TaskSpec::new(t.name.clone(), module);
    keep(task_dirs(&t.dirs, base).map(|dirs| (spec.dirs, spec.served_dirs) = dirs));
    for (name, file) in &t.modules {
        let path = base.join(file);
        match path.is_file() {
            true => spec.ipc.modules.push((name.clone(), path)),
            false => keep(Err(format!(
                "modules.{name}: file not found: {}",
                path.display()
            ))),
        }
    }
    spec.ipc.devices = t.devices.clone();
    keep(task_memory(t, &mut spec));
    keep(task_cpu(t, &mut spec));
    keep(task_stdio(t, base, &mut spec));
    keep(task_ipc(t, &mut spec));
    keep(task_net(t, &mut spec));
    keep(task_sched(t, &mut spec));
    keep(task_passive(t, &mut spec));
    keep(task_typed(t, &mut spec));
    keep(super::supervisor::restart(t.restart.as_deref()).map(|r| spec.restart = r));
    if let Some(d) = &t.drain {
        keep(
            parse_limit_duration(d)
                .map(|d| spec.drain = d)
                .map_err(|e| format!("drain: {e}")),
        );
    }
    match problems.is_empty() {
        true => Ok(spec),
        false => Err(problems),
    }
}

/// `stdout`, `stderr` and `stdin`.
fn task_stdio(t: &RawTask, base: &Path, spec: &mut TaskSpec) -> Result<(), String> {
    spec.stdio.stdout = output(t.stdout.as_deref(), base).map_err(|e| format!("stdout: {e}"))?;
    spec.stdio.stderr = output(t.stderr.as_deref(), base).map_err(|e| format!("stderr: {e}"))?;
    spec.stdio.stdin_inherit = choice(
        "stdin",
        t.stdin.as_deref(),
        &[("null", false), ("inherit", true)],
    )?;
    Ok(())
}

/// Scheduling: `share`, `tickets`, `priority`, `cap`, `group`,
/// `inheritance`.
fn task_sched(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    spec.sched.params = params(t.share, t.tickets, t.priority)?;
    spec.sched.cap = cap(t.cap)?;
    spec.sched.group = t.group.clone();
    spec.sched.inheritance = t.inheritance.unwrap_or(true);
    Ok(())
}

/// `passive` and `call_cpu_limit`.
fn task_passive(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    spec.passive = t.passive.unwrap_or(false);
    if let Some(limit) = &t.call_cpu_limit {
        if !spec.passive {
            return Err("call_cpu_limit: only a passive task (passive = true) has one".into());
        }
        spec.call_cpu_limit =
            parse_limit_duration(limit).map_err(|e| format!("call_cpu_limit: {e}"))?;
    }
    if spec.passive {
        if t.count.is_some_and(|n| n > 1) {
            return Err("passive: a passive service runs as one task (count must be 1)".into());
        }
        spec.check_passive()?;
    }
    Ok(())
}

/// `serves`, `binds` and `call_timeout` (typed services, see
/// `host::typed`).
fn task_typed(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    for iface in t.serves.iter().chain(t.binds.keys()) {
        check_iface(iface)?;
    }
    if !t.serves.is_empty() {
        if t.count.is_some_and(|n| n > 1) {
            return Err("serves: a typed server runs as one task (count must be 1)".into());
        }
        match spec.ipc.provides.first() {
            None => {
                return Err(
                    "serves: a typed server needs a `provides` name to serve under \
                                (the first)"
                        .into(),
                )
            }
            Some(n) if n.ends_with('*') => {
                return Err(format!(
                    "serves: the first `provides` name is the service's name, \
                                    not a pattern ({n:?})"
                ))
            }
            Some(_) => {}
        }
    }
    for (iface, service) in &t.binds {
        if !crate::ipc::name_allowed(&spec.ipc.uses, service) {
            return Err(format!(
                "binds.{iface:?}: {service:?} is not among the names `uses` grants"
            ));
        }
    }
    spec.serves = t.serves.clone();
    if spec.passive && spec.serves_http() {
        return Err(crate::runtime::SERVLET_ACTIVE.into());
    }
    spec.binds = t
        .binds
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(d) = &t.call_timeout {
        spec.call_timeout =
            Some(parse_limit_duration(d).map_err(|e| format!("call_timeout: {e}"))?);
    }
    Ok(())
}

/// Whether `iface` is an interface's name: `namespace:package/interface`,
/// with an optional `@version`.
pub(crate) fn check_iface(iface: &str) -> Result<(), String> {
    let path = iface.split('@').next().unwrap_or("");
    let well_formed = path
        .split_once(':')
        .and_then(|(ns, rest)| rest.split_once('/').map(|(p, i)| [ns, p, i]))
        .is_some_and(|parts| {
            parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        });
    match well_formed && !iface.ends_with('@') {
        true => Ok(()),
        false => Err(format!(
            "{iface:?} is not an interface name such as \"example:kv/store\" or \
             \"example:kv/store@0.1.0\""
        )),
    }
}

/// One of a key's allowed values (the first is the default).
fn choice<T: Copy>(key: &str, value: Option<&str>, options: &[(&str, T)]) -> Result<T, String> {
    let Some(value) = value else {
        return Ok(options[0].1);
    };
    options
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            format!("{key}: {value:?} is not one of {}", names.join(", "))
        })
}

/// A task's `dirs`: host directories, and directories a file-system
/// task serves (`"service:NAME"`).
fn task_dirs(
    dirs: &std::collections::BTreeMap<String, String>,
    base: &Path,
) -> Result<(Vec<(String, PathBuf)>, Vec<(String, String)>), String> {
    let (mut host, mut served) = (Vec::new(), Vec::new());
    for (guest, value) in dirs {
        if guest.is_empty() || guest.contains('\0') {
            return Err(format!("dirs: bad guest path {guest:?}"));
        }
        if let Some(name) = value.strip_prefix(SERVICE_PREFIX) {
            if name.is_empty() || name.ends_with('*') || name.contains('\0') {
                return Err(format!(
                    "dirs.{guest:?}: {value:?} names no service (write \"service:NAME\")"
                ));
            }
            served.push((guest.clone(), name.to_string()));
            continue;
        }
        let host_path = base.join(value);
        if !host_path.is_dir() {
            return Err(format!(
                "dirs.{guest:?}: directory not found: {}",
                host_path.display()
            ));
        }
        host.push((guest.clone(), host_path));
    }
    Ok((host, served))
}

/// A `dirs` value naming a file-system task's service rather than a
/// host directory: `"service:fs"`.
const SERVICE_PREFIX: &str = "service:";

/// Memory and CPU limits and what happens at them.
/// `memory_limit`, `memory_guarantee`, `memory_priority`, `on_memory_limit`.
fn task_memory(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    spec.limits.memory_limit = t
        .memory_limit
        .as_deref()
        .map(parse_size)
        .transpose()
        .map_err(|e| format!("memory_limit: {e}"))?;
    spec.limits.memory_guarantee = match t.memory_guarantee.as_deref().map(parse_size) {
        None => 0,
        Some(Ok(g)) if spec.limits.memory_limit.is_some_and(|l| g > l) => {
            return Err("memory_guarantee: more than memory_limit".into())
        }
        Some(Ok(g)) => g,
        Some(Err(e)) => return Err(format!("memory_guarantee: {e}")),
    };
    spec.limits.memory_priority = t.memory_priority.unwrap_or(0);
    spec.limits.on_memory_limit = choice(
        "on_memory_limit",
        t.on_memory_limit.as_deref(),
        &[
            ("deny", MemoryPolicy::Deny),
            ("kill", MemoryPolicy::Kill),
            ("notify", MemoryPolicy::Notify),
        ],
    )?;
    Ok(())
}

/// `cpu_limit` and `on_cpu_limit`.
fn task_cpu(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    spec.limits.cpu_limit = t
        .cpu_limit
        .as_deref()
        .map(parse_limit_duration)
        .transpose()
        .map_err(|e| format!("cpu_limit: {e}"))?;
    spec.limits.on_cpu_limit_notify = choice(
        "on_cpu_limit",
        t.on_cpu_limit.as_deref(),
        &[("kill", false), ("notify", true)],
    )?;
    Ok(())
}

/// Handle and message quotas, and the names it may register and look up.
fn task_ipc(t: &RawTask, spec: &mut TaskSpec) -> Result<(), String> {
    spec.ipc.max_handles = match t.max_handles {
        None => DEFAULT_MAX_HANDLES,
        Some(n) if n == 0 || n > MAX_HANDLES => {
            return Err(format!("max_handles: must be between 1 and {MAX_HANDLES}"))
        }
        Some(n) => n,
    };
    spec.ipc.max_message_bytes = match t.max_message_bytes.as_deref().map(parse_size).transpose() {
        Err(e) => return Err(format!("max_message_bytes: {e}")),
        Ok(Some(n)) if n > MAX_MESSAGE_BYTES => {
            return Err(format!(
                "max_message_bytes: at most {MAX_MESSAGE_BYTES} bytes"
            ))
        }
        Ok(n) => n.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES),
    };
    spec.ipc.max_message_handles = t.max_message_handles.unwrap_or(DEFAULT_MAX_MESSAGE_HANDLES);
    for (key, list) in [
        ("provides", &t.provides),
        ("uses", &t.uses),
        ("export", &t.export),
    ] {
        if let Some(bad) = list.iter().find(|n| n.is_empty() || n.len() > 256) {
            return Err(format!("{key}: bad name {bad:?} (1 to 256 bytes)"));
        }
    }
    if let Some(bad) = t.export.iter().find(|n| !within(&t.provides, n)) {
        return Err(format!(
            "export: {bad:?} is not among the names the task provides"
        ));
    }
    spec.ipc.provides = t.provides.clone();
    spec.ipc.uses = t.uses.clone();
    spec.ipc.export = t.export.clone();
    Ok(())
}

/// Whether every name `pattern` matches is matched by `patterns` too.
fn within(patterns: &[String], pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        None => crate::ipc::name_allowed(patterns, pattern),
        Some(prefix) => patterns
            .iter()
            .any(|p| p.strip_suffix('*').is_some_and(|q| prefix.starts_with(q))),
    }
}

fn output(value: Option<&str>, base: &Path) -> Result<Output, String> {
    Ok(match value {
        None | Some("inherit") => Output::Inherit,
        Some("null") => Output::Null,
        Some("") => return Err("empty path".into()),
        Some(path) => {
            let p: PathBuf = base.join(path);
            match p.parent() {
                Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
                    return Err(format!("directory not found: {}", dir.display()))
                }
                _ => Output::File(p),
            }
        }
    })
}

//! `warden run prog.wasm`: the flags of one program become the keys of a
//! manifest `[[task]]`, checked by the same code as a manifest file.

use crate::cli::{ProgramArgs, SpawnArgs};
use std::path::Path;
use toml::{Table, Value};
use warden::{Manifest, TaskSpec};

/// The task `warden run target args…` runs.
pub fn task(target: &Path, args: &[String], p: &ProgramArgs) -> Result<TaskSpec, String> {
    Manifest::task(keys(target, args, p)?, Path::new(".")).map_err(as_flag)
}

/// The keys of the task `warden spawn` asks a running system for, its
/// paths absolute (the system's working directory is not this one), and
/// checked as `warden run` checks its program's.
pub fn spawn_keys(s: &SpawnArgs) -> Result<Table, String> {
    let absolute = |p: &str| {
        std::path::absolute(p)
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|e| format!("{p}: {e}"))
    };
    let module = absolute(&s.module.to_string_lossy())?;
    let mut keys = keys(Path::new(&module), &s.args, &s.program)?;
    for key in ["dirs", "modules"] {
        if let Some(Value::Table(t)) = keys.get_mut(key) {
            for (_, v) in t.iter_mut() {
                *v = absolute(v.as_str().unwrap_or_default())?.into();
            }
        }
    }
    if s.program.stdin.is_none() {
        keys.insert("stdin".into(), "null".into());
    }
    if !s.provides.is_empty() || !keys.contains_key("provides") {
        keys.insert("provides".into(), strings(&s.provides));
    }
    let mut uses = s.uses.clone();
    if let Some(Value::Array(bound)) = keys.get("uses") {
        uses.extend(bound.iter().filter_map(|v| v.as_str().map(String::from)));
    }
    keys.insert("uses".into(), strings(&uses));
    keys.insert("export".into(), strings(&s.export));
    keys.insert("devices".into(), strings(&s.devices));
    Manifest::task(keys.clone(), Path::new(".")).map_err(as_flag)?;
    Ok(keys)
}

/// The manifest keys of a program's flags.
fn keys(target: &Path, args: &[String], p: &ProgramArgs) -> Result<Table, String> {
    if !target.is_file() {
        return Err(format!("module not found: {}", target.display()));
    }
    let name = p.name.clone().unwrap_or_else(|| {
        target
            .file_stem()
            .map_or("main".into(), |s| s.to_string_lossy().into_owned())
    });
    let mut keys = Table::new();
    let mut put = |key: &str, v: Value| keys.insert(key.into(), v);
    put("name", name.clone().into());
    put("module", target.to_string_lossy().into_owned().into());
    put("args", strings(args));
    put("env", Value::Table(env(&p.env)?));
    put("dirs", Value::Table(dirs(&p.dir)?));
    put("modules", Value::Table(pairs("--module", &p.module)?));
    put("preopen_listeners", strings(&p.listen));
    put("connect", strings(&p.allow_connect));
    put("listen", strings(&p.allow_listen));
    put("serves", strings(&p.serves));
    let binds = pairs("--binds", &p.binds)?;
    // A single program serves under its own name, and may use what it binds.
    if !p.serves.is_empty() {
        put("provides", strings(std::slice::from_ref(&name)));
    }
    let bound: Vec<String> = binds
        .values()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    put("uses", strings(&bound));
    put("binds", Value::Table(binds));
    put("stdin", p.stdin.as_deref().unwrap_or("inherit").into());
    let on_memory_limit = match p.kill_on_memory_limit {
        true => Some("kill".to_string()),
        false => p.on_memory_limit.clone(),
    };
    for (key, value) in [
        ("memory_limit", &p.memory_limit),
        ("on_memory_limit", &on_memory_limit),
        ("cpu_limit", &p.cpu_limit),
        ("on_cpu_limit", &p.on_cpu_limit),
        ("bandwidth_limit", &p.bandwidth_limit),
        ("receive_limit", &p.receive_limit),
        ("socket_buffer", &p.socket_buffer),
        ("max_message_bytes", &p.max_message_bytes),
        ("restart", &p.restart),
        ("call_timeout", &p.call_timeout),
    ] {
        if let Some(v) = value {
            put(key, v.as_str().into());
        }
    }
    for (key, value) in [
        ("max_sockets", p.max_sockets.map(u64::from)),
        ("max_handles", p.max_handles),
    ] {
        if let Some(n) = value {
            put(key, Value::Integer(i64::try_from(n).unwrap_or(i64::MAX)));
        }
    }
    Ok(keys)
}

/// Whether any program flag was given (they do not apply to manifests).
pub fn any(p: &ProgramArgs) -> bool {
    let ProgramArgs {
        dir,
        env,
        listen,
        stdin,
        name,
        memory_limit,
        on_memory_limit,
        kill_on_memory_limit,
        cpu_limit,
        on_cpu_limit,
        bandwidth_limit,
        receive_limit,
        max_sockets,
        socket_buffer,
        allow_connect,
        allow_listen,
        max_handles,
        max_message_bytes,
        module,
        restart,
        serves,
        binds,
        call_timeout,
    } = p;
    let lists = [
        dir,
        env,
        listen,
        allow_connect,
        allow_listen,
        module,
        serves,
        binds,
    ];
    let strings = [
        restart,
        call_timeout,
        stdin,
        name,
        memory_limit,
        on_memory_limit,
        cpu_limit,
        on_cpu_limit,
        bandwidth_limit,
        receive_limit,
        socket_buffer,
        max_message_bytes,
    ];
    lists.iter().any(|l| !l.is_empty())
        || strings.iter().any(|s| s.is_some())
        || *kill_on_memory_limit
        || max_sockets.is_some()
        || max_handles.is_some()
}

pub fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(|s| s.as_str().into()).collect())
}

/// `--env NAME=VALUE` sets; `--env NAME` passes the host's value on.
pub fn env(flags: &[String]) -> Result<Table, String> {
    let mut env = Table::new();
    for flag in flags {
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (flag.as_str(), std::env::var(flag).ok()),
        };
        if name.is_empty() || name.contains('\0') {
            return Err(format!("--env: bad variable name in {flag:?}"));
        }
        if let Some(value) = value {
            env.insert(name.into(), value.into());
        }
    }
    Ok(env)
}

/// `--dir HOST[::GUEST]`, as guest path → host path.
pub fn dirs(flags: &[String]) -> Result<Table, String> {
    let mut dirs = Table::new();
    for flag in flags {
        let (host, guest) = flag.split_once("::").unwrap_or((flag, flag));
        if host.is_empty() || guest.is_empty() {
            return Err(format!("--dir: {flag:?} is not HOST or HOST::GUEST"));
        }
        if dirs.insert(guest.into(), host.into()).is_some() {
            return Err(format!("--dir: guest path {guest:?} given twice"));
        }
    }
    Ok(dirs)
}

/// `NAME=VALUE` flags as a table.
fn pairs(flag: &str, values: &[String]) -> Result<Table, String> {
    let mut table = Table::new();
    for v in values {
        let Some((name, value)) = v
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
        else {
            let shape = if flag == "--binds" {
                "IFACE=NAME"
            } else {
                "NAME=PATH"
            };
            return Err(format!("{flag}: {v:?} is not {shape}"));
        };
        table.insert(name.into(), value.into());
    }
    Ok(table)
}

/// A manifest key's error, named by the flag that set it.
fn as_flag(error: String) -> String {
    let end = error
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(error.len());
    let (key, rest) = error.split_at(end);
    let flag = match key {
        "dirs" => "--dir".to_string(),
        "preopen_listeners" => "--listen".into(),
        "connect" => "--allow-connect".into(),
        "listen" => "--allow-listen".into(),
        "modules" => "--module".into(),
        "module" => return error,
        _ => format!("--{}", key.replace('_', "-")),
    };
    match rest.strip_prefix('.') {
        Some(rest) => format!("{flag} {rest}"),
        None => format!("{flag}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag lands in its own field of the task: the keys' effects
    /// are tested through manifests, so this is what is left to check.
    #[test]
    fn every_flag_reaches_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("m.wasm");
        std::fs::write(&module, b"\0asm").unwrap();
        let s = |v: &str| Some(v.to_string());
        let v = |v: &str| vec![v.to_string()];
        let p = ProgramArgs {
            dir: v(&format!("{}::/data", dir.path().display())),
            env: v("A=1"),
            listen: v("127.0.0.1:0"),
            stdin: s("null"),
            name: s("prog"),
            memory_limit: s("2MiB"),
            on_memory_limit: s("notify"),
            kill_on_memory_limit: false,
            cpu_limit: s("3s"),
            on_cpu_limit: s("notify"),
            bandwidth_limit: s("1MB/s"),
            receive_limit: s("2MB/s"),
            max_sockets: Some(7),
            socket_buffer: s("8KiB"),
            allow_connect: v("127.0.0.1:80"),
            allow_listen: v("127.0.0.1:*"),
            max_handles: Some(9),
            max_message_bytes: s("1KiB"),
            module: v(&format!("child={}", module.display())),
            restart: s("transient"),
            serves: v("example:kv/store"),
            binds: v("example:log/sink=logger"),
            call_timeout: s("2s"),
        };
        assert!(any(&p));
        let t = task(&module, &["x".into()], &p).unwrap();
        assert_eq!(
            (t.name.as_str(), t.args.as_slice()),
            ("prog", &["x".to_string()][..])
        );
        assert_eq!(
            t.dirs,
            vec![("/data".to_string(), dir.path().to_path_buf())]
        );
        assert_eq!(t.env, vec![("A".to_string(), "1".to_string())]);
        assert!(!t.stdio.stdin_inherit);
        assert_eq!(t.limits.memory_limit, Some(2 << 20));
        assert_eq!(t.limits.on_memory_limit, warden::MemoryPolicy::Notify);
        assert_eq!(t.limits.cpu_limit, Some(std::time::Duration::from_secs(3)));
        assert!(t.limits.on_cpu_limit_notify);
        assert_eq!(t.restart, warden::Restart::Transient);
        assert_eq!(
            (t.net.bandwidth_limit, t.net.receive_limit),
            (Some(1_000_000), Some(2_000_000))
        );
        assert_eq!((t.net.max_sockets, t.net.socket_buffer), (7, 8 << 10));
        assert_eq!(t.net.preopen_listeners, v("127.0.0.1:0"));
        assert_eq!(
            (t.net.connect.clone(), t.net.listen.clone()),
            (v("127.0.0.1:80"), v("127.0.0.1:*"))
        );
        assert_eq!((t.ipc.max_handles, t.ipc.max_message_bytes), (9, 1 << 10));
        assert_eq!(t.ipc.modules, vec![("child".to_string(), module.clone())]);
        assert_eq!(t.serves, v("example:kv/store"));
        let bind = ("example:log/sink".to_string(), "logger".to_string());
        assert_eq!(t.binds, vec![bind]);
        assert_eq!(t.call_timeout, Some(std::time::Duration::from_secs(2)));
        // Serving under its own name, using what it binds.
        assert_eq!(
            (t.ipc.provides.clone(), t.ipc.uses.clone()),
            (v("prog"), v("logger"))
        );
        // Defaults for a program: stdin inherited, named after its file.
        let t = task(&module, &[], &ProgramArgs::default()).unwrap();
        assert!(t.stdio.stdin_inherit && t.name == "m");
        assert!(!any(&ProgramArgs::default()));
    }

    #[test]
    fn errors_name_flags() {
        assert_eq!(
            as_flag("socket_buffer: \"1\" is not from 4KiB to 16MiB".into()),
            "--socket-buffer: \"1\" is not from 4KiB to 16MiB"
        );
        assert_eq!(
            as_flag("dirs.\"/x\": directory not found: y".into()),
            "--dir \"/x\": directory not found: y"
        );
        assert_eq!(
            as_flag("module: file not found: m".into()),
            "module: file not found: m"
        );
    }

    #[test]
    fn dirs_and_env() {
        let d = dirs(&["a::/x".into(), "/tmp".into()]).unwrap();
        assert_eq!(d["/x"].as_str(), Some("a"));
        assert_eq!(d["/tmp"].as_str(), Some("/tmp"));
        assert!(dirs(&["a::/x".into(), "b::/x".into()]).is_err());
        assert!(dirs(&["::/x".into()]).is_err());
        let e = env(&["A=1=2".into(), "WARDEN_SURELY_UNSET_VAR".into()]).unwrap();
        assert_eq!(e["A"].as_str(), Some("1=2"));
        assert_eq!(e.len(), 1);
        assert!(env(&["=x".into()]).is_err());
    }
}

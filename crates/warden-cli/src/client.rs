//! The operator commands that talk to a running `warden run` through its
//! control API (see the library's `control` module).

use crate::tables::{self, is_ended};
use serde_json::Value;
use std::io::{Read, Write};
use std::time::Duration;

/// How long `warden spawn` waits for the system's answer: the module is
/// compiled first, which for a large component on a busy machine takes
/// more than the other commands' wait.
const SPAWN_ANSWER_WITHIN: Duration = Duration::from_secs(300);

/// One HTTP request to the control API, its answer waited for at most
/// `wait`; the status and JSON body.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    wait: Duration,
) -> Result<(u16, Value), String> {
    let body = body.unwrap_or("");
    let found = warden::control::find_system(addr);
    let mut s = warden::control::connect_within(addr, found.as_ref(), wait)?;
    let auth = found.as_ref().map_or(String::new(), |f| {
        format!("Authorization: Bearer {}\r\n", f.token)
    });
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("control API at {addr}: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "control API at {addr}: no answer within {} s",
            wait.as_secs()
        ),
        _ => format!("control API at {addr}: {e}"),
    })?;
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or("control API: malformed answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("control API: malformed status")?;
    // Every answer of a Warden control API is JSON, errors included: a
    // server that is no Warden at all is said to be that first (whatever
    // system a stale token file for its address names).
    let json: Value = serde_json::from_str(payload).map_err(|_| {
        let kind = head
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            })
            .map_or("no content type", |(_, v)| v.trim());
        format!(
            "{addr} is not a Warden control API (it answered HTTP {status}, {kind}); \
             pass the address `warden run` serves it on with --control"
        )
    })?;
    if let Some((meant, file)) = found.as_ref().and_then(|f| f.system.as_ref()) {
        same_system(addr, head, *meant, file)?;
    }
    Ok((status, json))
}

/// Whether the answer's head names the system the token file does; if
/// not, one line saying which system answered and which was meant.
fn same_system(
    addr: &str,
    head: &str,
    meant: warden::control::Stamp,
    file: &std::path::Path,
) -> Result<(), String> {
    let answered = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(warden::control::STAMP_HEADER)
            .then(|| warden::control::Stamp::parse(v))
            .flatten()
    });
    match answered {
        Some(s) if s == meant => Ok(()),
        Some(s) => Err(format!(
            "{addr} is served by another system (pid {}, started {}) than the one {} names \
             (pid {}, started {}), which has ended; pass the address of the system you mean \
             with --control",
            s.pid,
            local_time(s.started_ms),
            file.display(),
            meant.pid,
            local_time(meant.started_ms)
        )),
        None => Err(format!(
            "{addr} did not say which system it is, so it is not the one {} names \
             (pid {}, started {}); pass the address of the system you mean with --control",
            file.display(),
            meant.pid,
            local_time(meant.started_ms)
        )),
    }
}

/// Unix milliseconds as this machine's local time, `YYYY-MM-DD HH:MM:SS`.
fn local_time(ms: u64) -> String {
    let t = (ms / 1000) as libc::time_t;
    // SAFETY: localtime_r writes only the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return format!("at {ms} ms since 1970");
    }
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

pub fn ok(addr: &str, method: &str, path: &str, body: Option<&str>) -> Result<Value, String> {
    ok_within(addr, method, path, body, warden::control::ANSWER_WITHIN)
}

/// [`ok`], waiting for the answer at most `wait`.
fn ok_within(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    wait: Duration,
) -> Result<Value, String> {
    let (status, json) = request(addr, method, path, body, wait)?;
    if status == 200 {
        Ok(json)
    } else {
        Err(json["error"]
            .as_str()
            .map_or_else(|| json.to_string(), str::to_string))
    }
}

/// `warden dashboard`: the dashboard's address with the token in its
/// fragment (which browsers do not send to the server).
pub fn dashboard(addr: &str) -> Result<(), String> {
    ok(addr, "GET", "/api/tasks", None)?;
    let found = warden::control::find_system(addr);
    let scheme = match found.as_ref().is_some_and(|f| f.tls.is_some()) {
        true => "https",
        false => "http",
    };
    match found.map(|f| f.token) {
        Some(token) => println!("{scheme}://{addr}/#token={token}"),
        None => {
            println!("{scheme}://{addr}/");
            say!("warden: no control token found for {addr}: the dashboard will show tasks but not kill them");
        }
    }
    Ok(())
}

/// `warden ps`: live tasks, or with `all` ended ones too; the columns
/// that fit 100 columns, or (`wide`) all of them.
pub fn ps(addr: &str, as_json: bool, all: bool, wide: bool) -> Result<(), String> {
    let mut tasks = ok(addr, "GET", "/api/tasks", None)?;
    if let (Value::Array(list), false) = (&mut tasks, all) {
        list.retain(|t| !is_ended(t));
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&tasks).unwrap());
        return Ok(());
    }
    print!(
        "{}",
        tables::memory_line(&ok(addr, "GET", "/api/memory", None)?)
    );
    print!("{}", tables::tasks(&tasks, None, wide));
    print!("{}", tables::groups(&ok(addr, "GET", "/api/groups", None)?));
    print!("{}", tables::routes(&ok(addr, "GET", "/api/routes", None)?));
    print!(
        "{}",
        tables::devices(&ok(addr, "GET", "/api/devices", None)?)
    );
    let services = ok(addr, "GET", "/api/file-services", None)?;
    print!("{}", tables::file_services(&services));
    Ok(())
}

/// `warden ps --cluster`: every node of the system's cluster with its
/// live tasks (or with `all` ended ones too).
pub fn ps_cluster(addr: &str, as_json: bool, all: bool, wide: bool) -> Result<(), String> {
    let mut nodes = ok(addr, "GET", "/api/cluster", None)?;
    for node in nodes.as_array_mut().into_iter().flatten() {
        if let (Value::Array(list), false) = (&mut node["tasks"], all) {
            list.retain(|t| !is_ended(t));
        }
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&nodes).unwrap());
        return Ok(());
    }
    for (i, node) in nodes.as_array().into_iter().flatten().enumerate() {
        let tasks = node["tasks"].as_array().map_or(0, Vec::len);
        let sep = if i > 0 { "\n" } else { "" };
        println!(
            "{sep}NODE {} ({tasks} tasks)",
            node["node"].as_str().unwrap_or("?")
        );
        print!("{}", tables::tasks(&node["tasks"], None, wide));
    }
    Ok(())
}

/// `warden kill|suspend|resume <task>`.
pub fn act(addr: &str, action: &str, task: &str) -> Result<(), String> {
    let r = ok(
        addr,
        "POST",
        &format!("/api/tasks/{}/{action}", encode(task)),
        None,
    )?;
    println!("{action}: task {}", r["id"]);
    Ok(())
}

/// The file at `m` as the system is to read it: by its absolute path
/// (the system's working directory is not this command's); `not_one`
/// says why a path that is not a regular file is refused.
fn system_file(m: &std::path::Path, not_one: &str) -> Result<std::path::PathBuf, String> {
    let full = std::path::absolute(m).map_err(|e| format!("{}: {e}", m.display()))?;
    match full.is_file() {
        true => Ok(full),
        false => Err(format!("{}: {not_one}", m.display())),
    }
}

/// `warden upgrade <task> <module>` (`None`: `--rollback`). The module's
/// path is made absolute here: the system reads it.
pub fn upgrade(addr: &str, task: &str, module: Option<&std::path::Path>) -> Result<(), String> {
    let body = match module {
        Some(m) => serde_json::json!({ "module": system_file(m, "no such file")? }).to_string(),
        None => serde_json::json!({ "rollback": true }).to_string(),
    };
    let path = format!("/api/tasks/{}/upgrade", encode(task));
    let r = ok(addr, "POST", &path, Some(&body))?;
    println!("{}", r["done"].as_str().unwrap_or("upgraded"));
    Ok(())
}

/// `warden reload [manifest]`: the manifest's path is made absolute
/// here (the system reads it); without one, the system reads its own
/// again.
pub fn reload(addr: &str, manifest: Option<&std::path::Path>) -> Result<(), String> {
    let body = match manifest {
        Some(m) => {
            let full = system_file(m, "not a manifest file")?;
            serde_json::json!({ "manifest": full }).to_string()
        }
        None => "{}".to_string(),
    };
    // Every problem on a line of its own.
    let r =
        ok(addr, "POST", "/api/reload", Some(&body)).map_err(|e| e.replace('\n', "\nwarden: "))?;
    println!("{}", r["done"].as_str().unwrap_or("reloaded"));
    Ok(())
}

/// `warden restart <task>`.
pub fn restart(addr: &str, task: &str) -> Result<(), String> {
    let path = format!("/api/tasks/{}/restart", encode(task));
    let r = ok(addr, "POST", &path, None)?;
    println!("{}", r["done"].as_str().unwrap_or("restarted"));
    Ok(())
}

/// `warden logs <task> [--follow]`.
pub fn logs(addr: &str, task: &str, follow: bool) -> Result<(), String> {
    let mut from = 0u64;
    loop {
        let r = ok(
            addr,
            "GET",
            &format!("/api/tasks/{}/logs?from={from}", encode(task)),
            None,
        )?;
        print!("{}", r["data"].as_str().unwrap_or(""));
        std::io::stdout().flush().ok();
        from = r["next"].as_u64().unwrap_or(from);
        if !follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `warden spawn <module> [flags] [-- args]`: the task's keys, checked
/// here first (each error named by its flag), sent to the running system.
pub fn spawn(args: &crate::cli::SpawnArgs) -> Result<(), String> {
    let keys = crate::program::spawn_keys(args)?;
    let body = serde_json::json!({ "task": keys });
    let r = ok_within(
        &args.control.addr,
        "POST",
        "/api/spawn",
        Some(&body.to_string()),
        SPAWN_ANSWER_WITHIN,
    )?;
    println!("spawned task {}", r["id"]);
    Ok(())
}

/// Percent-encodes a task name for a URL path segment.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

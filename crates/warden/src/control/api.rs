//! The control API's endpoints, as plain functions from a request to a
//! [`Reply`]; `serve` does the HTTP.

use super::metrics::metrics;
use super::samples::{Sample, Samples};
use crate::runtime::Runtime;
use crate::task::{TaskId, TaskSpec};
use crate::units::{parse_limit_duration, parse_size};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// An answer: status, content type, body.
pub(super) struct Reply {
    pub status: u16,
    pub kind: &'static str,
    pub body: Vec<u8>,
}

fn json(status: u16, body: serde_json::Value) -> Reply {
    Reply {
        status,
        kind: "application/json",
        body: body.to_string().into_bytes(),
    }
}

fn asset(kind: &'static str, body: &'static str) -> Reply {
    Reply {
        status: 200,
        kind,
        body: body.as_bytes().to_vec(),
    }
}

/// `{"error": message}` with `status`.
pub(super) fn error(status: u16, message: impl Into<String>) -> Reply {
    json(status, serde_json::json!({ "error": message.into() }))
}

/// `POST /api/spawn`: either `task`, the keys of a manifest `[[task]]`
/// (checked as a manifest's are; relative paths are the server's), or
/// the short form of `module` with a few keys beside it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnRequest {
    task: Option<toml::Table>,
    module: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    name: Option<String>,
    memory_limit: Option<String>,
    cpu_limit: Option<String>,
}

/// Answers one admitted request.
pub(super) fn route(
    rt: &Runtime,
    samples: &Mutex<Samples>,
    method: &hyper::Method,
    path: &str,
    query: &str,
    body: &[u8],
) -> Reply {
    let decoded: Vec<String> = path.trim_matches('/').split('/').map(decode).collect();
    let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
    use hyper::Method;
    match (method, parts.as_slice()) {
        (&Method::GET, ["api", "tasks"]) => task_list(rt, samples),
        (&Method::POST, ["api", "tasks", who, "upgrade"]) => upgrade(rt, who, body),
        (&Method::POST, ["api", "tasks", who, "restart"]) => restart(rt, who),
        (&Method::POST, ["api", "reload"]) => reload(rt, body),
        (&Method::POST, ["api", "tasks", who, action]) => act(rt, who, action),
        (&Method::GET, ["api", "tasks", who, "logs"]) => logs(rt, who, query),
        (&Method::POST, ["api", "spawn"]) => match spawn(rt, body) {
            Ok(id) => json(200, serde_json::json!({ "id": id })),
            Err(e) => error(400, e),
        },
        (&Method::GET, ["api", "history"]) => history(samples),
        (&Method::GET, ["api", "groups"]) => {
            let rates = samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .rates
                .clone();
            json(200, super::groups::tree(rt, &rates))
        }
        (&Method::GET, ["api", "routes"]) => json(200, super::routes::list(rt)),
        (&Method::GET, ["api", "devices"]) => json(200, super::devices::list(rt)),
        (&Method::GET, ["api", "file-services"]) => json(200, super::devices::file_services(rt)),
        (&Method::GET, ["api", "memory"]) => json(
            200,
            serde_json::to_value(rt.root_memory()).unwrap_or_default(),
        ),
        (&Method::GET, ["api", "cluster"]) => match super::cluster::nodes(rt) {
            Some(nodes) => json(200, nodes),
            None => error(404, "this system is not in a cluster"),
        },
        (&Method::GET, [file]) if dashboard_file(file).is_some() => {
            let (kind, text) = dashboard_file(file).unwrap_or_default();
            asset(kind, text)
        }
        (&Method::GET, ["metrics"]) => Reply {
            status: 200,
            kind: "text/plain; version=0.0.4",
            body: metrics(rt).into_bytes(),
        },
        _ => error(404, format!("no such endpoint: {method} {path}")),
    }
}

/// The dashboard's files: each name's content type and text.
fn dashboard_file(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "" => (
            "text/html; charset=utf-8",
            include_str!("../dashboard/index.html"),
        ),
        "dashboard.js" => ("text/javascript", include_str!("../dashboard/dashboard.js")),
        "uplot.js" => (
            "text/javascript",
            include_str!("../dashboard/vendor/uPlot.iife.min.js"),
        ),
        "uplot.css" => (
            "text/css",
            include_str!("../dashboard/vendor/uPlot.min.css"),
        ),
        _ => return None,
    })
}

/// `GET /api/tasks`: every task with its CPU share and network rates of
/// the last second.
fn task_list(rt: &Runtime, samples: &Mutex<Samples>) -> Reply {
    let rates = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .rates
        .clone();
    let tasks: Vec<serde_json::Value> = rt
        .task_views()
        .into_iter()
        .map(|v| {
            let mut j = serde_json::to_value(&v).unwrap();
            let r = rates.get(&v.id).copied().unwrap_or_default();
            j["cpu_pct"] = rounded(r.cpu_pct, 1).into();
            j["net_tx_rate"] = r.net_tx_rate.round().into();
            j["net_rx_rate"] = r.net_rx_rate.round().into();
            j
        })
        .collect();
    json(200, tasks.into())
}

/// `v` to `digits` decimals, as the API's figures are given (so that a
/// millisecond reads `8.649`, not `8.649000000000001`).
pub(super) fn rounded(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// `POST /api/tasks/<who>/<kill|suspend|resume>`.
fn act(rt: &Runtime, who: &str, action: &str) -> Reply {
    let Some(id) = rt.find(who) else {
        return error(404, format!("no task {who:?}"));
    };
    let r = match action {
        "kill" => rt.kill(id, "killed by the operator"),
        "suspend" => rt.suspend(id),
        "resume" => rt.resume(id),
        _ => return error(404, format!("no action {action:?}")),
    };
    match r {
        Ok(()) => json(200, serde_json::json!({ "ok": true, "id": id })),
        Err(e) => error(404, e.to_string()),
    }
}

/// `POST /api/tasks/<who>/upgrade`: `{"module": PATH}` (a path on the
/// server's machine) or `{"rollback": true}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpgradeRequest {
    module: Option<String>,
    #[serde(default)]
    rollback: bool,
}

/// Replaces the code of the task or per-request route `who` (by name)
/// while it serves (see `system::upgrade`): 200 with what was done, 409
/// with why nothing was (the old code keeps serving).
fn upgrade(rt: &Runtime, who: &str, body: &[u8]) -> Reply {
    let req: UpgradeRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return error(400, format!("bad upgrade request: {e}")),
    };
    let module = match (req.module, req.rollback) {
        (Some(m), false) if !m.is_empty() => Some(std::path::PathBuf::from(m)),
        (None, true) => None,
        _ => return error(400, "give either \"module\" (a path) or \"rollback\": true"),
    };
    match rt.upgrade(who, module.as_deref()) {
        Ok(done) => json(200, serde_json::json!({ "ok": true, "done": done })),
        Err(why) => error(409, why),
    }
}

/// `POST /api/tasks/<who>/restart`: the system's task `who` (by name, or
/// the id of one of its tasks) started afresh from its spec.
fn restart(rt: &Runtime, who: &str) -> Reply {
    let name = match who.parse::<u64>() {
        Ok(id) => match rt.task_views().into_iter().find(|v| v.id.0 == id) {
            Some(v) => v.name,
            None => return error(404, format!("no task {who:?}")),
        },
        Err(_) => who.to_string(),
    };
    match rt.operate(&name, crate::runtime::Operation::Restart) {
        Ok(done) => json(200, serde_json::json!({ "ok": true, "done": done })),
        Err(why) => error(409, why),
    }
}

/// `POST /api/reload`: `{}` (the manifest the system runs, read again)
/// or `{"manifest": PATH}` (a path on the server's machine).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReloadRequest {
    manifest: Option<String>,
}

/// Applies a changed manifest to the running system (see
/// `system::reload`): 200 with what was done, 409 with every problem of a
/// manifest that changed nothing, or what failed.
fn reload(rt: &Runtime, body: &[u8]) -> Reply {
    let body = if body.is_empty() { b"{}" } else { body };
    let req: ReloadRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return error(400, format!("bad reload request: {e}")),
    };
    let path = req.manifest.map(std::path::PathBuf::from);
    if let Some(p) = path.as_ref().filter(|p| !p.is_absolute()) {
        return error(
            400,
            format!("{}: name the manifest by an absolute path", p.display()),
        );
    }
    match rt.operate("", crate::runtime::Operation::Reload(path.as_deref())) {
        Ok(done) => json(200, serde_json::json!({ "ok": true, "done": done })),
        Err(why) => error(409, why),
    }
}

/// `GET /api/tasks/<who>/logs?from=N`: output from offset N on.
fn logs(rt: &Runtime, who: &str, query: &str) -> Reply {
    let from = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("from="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let Some(id) = rt.find(who) else {
        return error(404, format!("no task {who:?}"));
    };
    match rt.log(id, from) {
        None => error(404, format!("no output kept for task {who:?}")),
        Some((data, next)) => json(
            200,
            serde_json::json!({ "data": String::from_utf8_lossy(&data), "next": next }),
        ),
    }
}

/// `GET /api/history`: the last five minutes of samples per task.
fn history(samples: &Mutex<Samples>) -> Reply {
    let s = samples.lock().unwrap_or_else(|e| e.into_inner());
    let h: HashMap<String, &std::collections::VecDeque<Sample>> = s
        .history
        .iter()
        .map(|(id, v)| (id.to_string(), v))
        .collect();
    json(200, serde_json::to_value(h).unwrap())
}

/// Decodes %XX escapes in a URL path segment.
fn decode(s: &str) -> String {
    String::from_utf8_lossy(&crate::serving::percent_decode(s)).into_owned()
}

fn spawn(rt: &Runtime, body: &[u8]) -> Result<TaskId, String> {
    let mut r: SpawnRequest =
        serde_json::from_slice(body).map_err(|e| format!("bad request: {e}"))?;
    let short = !r.args.is_empty() || r.name.is_some();
    let short = short || r.memory_limit.is_some() || r.cpu_limit.is_some();
    let spec = match (r.task.take(), r.module.take()) {
        (Some(_), None) if short => {
            return Err("bad request: with \"task\", every key goes inside it".into())
        }
        (Some(keys), None) => crate::Manifest::task(keys, std::path::Path::new("."))?,
        (None, Some(module)) => short_spec(r, module)?,
        _ => return Err("bad request: give either \"task\" or \"module\"".into()),
    };
    if spec.restart == crate::task::Restart::Temporary {
        return rt.spawn(&spec).map_err(|e| e.to_string());
    }
    // A restart policy: the system's root supervisor takes it.
    let name = spec.name.clone();
    rt.operate(&name, crate::runtime::Operation::Spawn(&spec))?;
    (rt.live_tasks().into_iter())
        .filter(|v| v.name == name)
        .map(|v| v.id)
        .max()
        .ok_or_else(|| format!("task {name:?} ended at once"))
}

/// The task of a short spawn request: `module` with a few keys beside it.
fn short_spec(r: SpawnRequest, module: String) -> Result<TaskSpec, String> {
    let path = std::path::PathBuf::from(module);
    let name = r.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("task".into(), |s| s.to_string_lossy().into_owned())
    });
    let mut spec = TaskSpec::new(name, &path);
    spec.args = r.args;
    spec.limits.memory_limit = r.memory_limit.as_deref().map(parse_size).transpose()?;
    spec.limits.cpu_limit = r
        .cpu_limit
        .as_deref()
        .map(parse_limit_duration)
        .transpose()?;
    if !path.is_file() {
        return Err(format!("module not found: {}", path.display()));
    }
    Ok(spec)
}

//! The control API: JSON over HTTP on a loopback address, served by a
//! running `warden run` for the operator tools (`warden ps`, `kill`, …).
//!
//! It listens on 127.0.0.1 (or another loopback address) only and refuses
//! any other address, so only users of the local machine can reach it.
//!
//! | request | answer |
//! |---|---|
//! | `GET /api/tasks` | every task: [`TaskView`] plus `cpu_pct` (last second) |
//! | `POST /api/tasks/{id or name}/kill` (or `suspend`, `resume`) | `{"ok": true}` |
//! | `GET /api/tasks/{id or name}/logs?from=N` | `{"data": "…", "next": M}` |
//! | `POST /api/spawn` with `{"module", "args", "memory_limit", "cpu_limit"}` | `{"id": n}` |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /api/history` | per live task, the last 300 s of CPU %, memory and IPC rate |
//! | `GET /` | the web dashboard (its chart library is served from here too) |
//!
//! Errors are `{"error": "…"}` with status 400 or 404.
//!
//! A web page in the operator's browser can send requests to a loopback
//! address too, so the API answers only requests that name it by a
//! loopback host (`Host`: no DNS rebinding) and that come from no other
//! origin (`Origin`, sent by browsers with every cross-site POST: no
//! forged kill from a page); anything else gets 403.

use crate::runtime::{Runtime, TaskView};
use crate::task::{TaskId, TaskSpec};
use crate::units::{parse_duration, parse_size};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default control address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7474";

/// Seconds of history kept per task for the dashboard's charts.
const HISTORY_SECS: usize = 300;

/// One second of a task's life, for the charts.
#[derive(Clone, serde::Serialize)]
struct Sample {
    /// Unix time, s.
    t: f64,
    cpu_pct: f64,
    memory_bytes: u64,
    ipc_rate: f64,
}

/// Recent CPU use per task, sampled every second, and its history.
#[derive(Default)]
struct Samples {
    last: HashMap<TaskId, (f64, u64)>,
    pct: HashMap<TaskId, f64>,
    history: HashMap<TaskId, std::collections::VecDeque<Sample>>,
    at: Option<Instant>,
}

/// A running control server; stops when dropped.
pub struct ControlServer {
    server: Arc<tiny_http::Server>,
    threads: Vec<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl ControlServer {
    /// Serves `rt` on `addr`, which must be a loopback address.
    pub fn start(rt: Runtime, addr: &str) -> Result<ControlServer, String> {
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| format!("control address {addr:?}: expected IP:PORT"))?;
        if !addr.ip().is_loopback() {
            return Err(format!(
                "control address {addr}: only loopback addresses are served"
            ));
        }
        let server = Arc::new(
            tiny_http::Server::http(addr).map_err(|e| format!("control address {addr}: {e}"))?,
        );
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let samples = Arc::new(Mutex::new(Samples::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut threads = Vec::new();
        let (s, r, st) = (samples.clone(), rt.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                sample(&r, &s);
                std::thread::sleep(Duration::from_millis(250));
            }
        }));
        let srv = server.clone();
        threads.push(std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                handle(&rt, &samples, req);
            }
        }));
        Ok(ControlServer {
            server,
            threads,
            stop,
            addr,
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.server.unblock();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn sample(rt: &Runtime, samples: &Mutex<Samples>) {
    let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if s.at
        .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
    {
        return;
    }
    let elapsed_ms =
        s.at.map_or(0.0, |at| now.duration_since(at).as_secs_f64() * 1e3);
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let views = rt.task_views();
    let mut pct = HashMap::new();
    let mut last = HashMap::new();
    for v in views.iter().filter(|v| !is_finished(v)) {
        let (cpu, rate) = match (s.last.get(&v.id), elapsed_ms > 0.0) {
            (Some(&(prev_cpu, prev_calls)), true) => (
                ((v.cpu_ms - prev_cpu) / elapsed_ms * 100.0).max(0.0),
                v.ipc_calls.saturating_sub(prev_calls) as f64 / elapsed_ms * 1e3,
            ),
            _ => (0.0, 0.0),
        };
        pct.insert(v.id, cpu);
        last.insert(v.id, (v.cpu_ms, v.ipc_calls));
        let h = s.history.entry(v.id).or_default();
        if h.len() >= HISTORY_SECS {
            h.pop_front();
        }
        h.push_back(Sample {
            t: unix,
            cpu_pct: cpu,
            memory_bytes: v.memory_bytes,
            ipc_rate: rate,
        });
    }
    s.history.retain(|id, _| last.contains_key(id));
    s.last = last;
    s.pct = pct;
    s.at = Some(now);
}

fn is_finished(v: &TaskView) -> bool {
    matches!(v.state.as_str(), "exited" | "trapped" | "killed")
}

fn json(status: u16, body: serde_json::Value) -> Response {
    let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
    tiny_http::Response::from_data(body.to_string().into_bytes())
        .with_status_code(status)
        .with_header(header)
}

fn asset(kind: &str, body: &'static str) -> Response {
    let header = tiny_http::Header::from_bytes("Content-Type", kind).unwrap();
    tiny_http::Response::from_data(body.as_bytes().to_vec()).with_header(header)
}

fn error(status: u16, message: impl Into<String>) -> Response {
    json(status, serde_json::json!({ "error": message.into() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnRequest {
    module: String,
    #[serde(default)]
    args: Vec<String>,
    name: Option<String>,
    memory_limit: Option<String>,
    cpu_limit: Option<String>,
}

type Response = tiny_http::Response<std::io::Cursor<Vec<u8>>>;

fn handle(rt: &Runtime, samples: &Mutex<Samples>, mut req: tiny_http::Request) {
    if let Err(why) = same_origin(&req) {
        let _ = req.respond(error(403, why));
        return;
    }
    let url = req.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let decoded: Vec<String> = path.trim_matches('/').split('/').map(decode).collect();
    let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let method = req.method().clone();
    use tiny_http::Method::{Get, Post};
    let response = match (&method, parts.as_slice()) {
        (Get, ["api", "tasks"]) => task_list(rt, samples),
        (Post, ["api", "tasks", who, action]) => act(rt, who, action),
        (Get, ["api", "tasks", who, "logs"]) => logs(rt, who, query),
        (Post, ["api", "spawn"]) => {
            let mut body = String::new();
            let _ = req.as_reader().read_to_string(&mut body);
            match spawn(rt, &body) {
                Ok(id) => json(200, serde_json::json!({ "id": id })),
                Err(e) => error(400, e),
            }
        }
        (Get, ["api", "history"]) => history(samples),
        (Get, [""]) => asset(
            "text/html; charset=utf-8",
            include_str!("dashboard/index.html"),
        ),
        (Get, ["dashboard.js"]) => asset("text/javascript", include_str!("dashboard/dashboard.js")),
        (Get, ["uplot.js"]) => asset(
            "text/javascript",
            include_str!("dashboard/vendor/uPlot.iife.min.js"),
        ),
        (Get, ["uplot.css"]) => asset("text/css", include_str!("dashboard/vendor/uPlot.min.css")),
        (Get, ["metrics"]) => {
            let header =
                tiny_http::Header::from_bytes("Content-Type", "text/plain; version=0.0.4").unwrap();
            tiny_http::Response::from_data(metrics(rt).into_bytes()).with_header(header)
        }
        _ => error(404, format!("no such endpoint: {method} {path}")),
    };
    let _ = req.respond(response);
}

/// Refuses a request that names a host other than a loopback one, or
/// comes from an origin other than this server as named in `Host`.
fn same_origin(req: &tiny_http::Request) -> Result<(), String> {
    let header = |name: &'static str| {
        req.headers()
            .iter()
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_string())
    };
    let host = header("Host");
    if let Some(host) = &host {
        if !loopback_authority(host) {
            return Err(format!("refused: Host {host:?} is not a loopback address"));
        }
    }
    if let Some(origin) = header("Origin") {
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|authority| Some(authority) == host.as_deref());
        if !same {
            return Err(format!("refused: request from origin {origin:?}"));
        }
    }
    Ok(())
}

/// Whether `authority` (`host[:port]`) names this machine by loopback.
fn loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `GET /api/tasks`: every task with its CPU share of the last second.
fn task_list(rt: &Runtime, samples: &Mutex<Samples>) -> Response {
    let pct = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pct
        .clone();
    let tasks: Vec<serde_json::Value> = rt
        .task_views()
        .into_iter()
        .map(|v| {
            let mut j = serde_json::to_value(&v).unwrap();
            j["cpu_pct"] = pct.get(&v.id).copied().unwrap_or(0.0).into();
            j
        })
        .collect();
    json(200, tasks.into())
}

/// `POST /api/tasks/<who>/<kill|suspend|resume>`.
fn act(rt: &Runtime, who: &str, action: &str) -> Response {
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

/// `GET /api/tasks/<who>/logs?from=N`: output from offset N on.
fn logs(rt: &Runtime, who: &str, query: &str) -> Response {
    let from = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("from="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    match rt.find(who).and_then(|id| rt.log(id, from)) {
        None => error(404, format!("no output kept for task {who:?}")),
        Some((data, next)) => json(
            200,
            serde_json::json!({ "data": String::from_utf8_lossy(&data), "next": next }),
        ),
    }
}

/// `GET /api/history`: the last five minutes of samples per task.
fn history(samples: &Mutex<Samples>) -> Response {
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
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn spawn(rt: &Runtime, body: &str) -> Result<TaskId, String> {
    let r: SpawnRequest = serde_json::from_str(body).map_err(|e| format!("bad request: {e}"))?;
    let path = std::path::PathBuf::from(&r.module);
    let name = r.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("task".into(), |s| s.to_string_lossy().into_owned())
    });
    let mut spec = TaskSpec::new(name, &path);
    spec.args = r.args;
    spec.memory_limit = r.memory_limit.as_deref().map(parse_size).transpose()?;
    spec.cpu_limit = r.cpu_limit.as_deref().map(parse_duration).transpose()?;
    if !path.is_file() {
        return Err(format!("module not found: {}", path.display()));
    }
    rt.spawn(&spec).map_err(|e| e.to_string())
}

/// A task's metric: name, Prometheus type, help text, its value.
type TaskMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&TaskView) -> Option<f64>,
);

/// One series per task for each of these.
const TASK_METRICS: &[TaskMetric] = &[
    (
        "warden_task_cpu_seconds_total",
        "counter",
        "CPU time used by the task.",
        |v| Some(v.cpu_ms / 1e3),
    ),
    (
        "warden_task_memory_bytes",
        "gauge",
        "Memory charged to the task now.",
        |v| Some(v.memory_bytes as f64),
    ),
    (
        "warden_task_memory_peak_bytes",
        "gauge",
        "Highest memory charged to the task.",
        |v| Some(v.peak_memory_bytes as f64),
    ),
    (
        "warden_task_memory_limit_bytes",
        "gauge",
        "The task's memory limit.",
        |v| v.memory_limit_bytes.map(|m| m as f64),
    ),
    (
        "warden_task_ipc_calls_total",
        "counter",
        "Portal calls made and received.",
        |v| Some(v.ipc_calls as f64),
    ),
    (
        "warden_task_ipc_sent_bytes_total",
        "counter",
        "Message bytes sent.",
        |v| Some(v.bytes_sent as f64),
    ),
    (
        "warden_task_ipc_received_bytes_total",
        "counter",
        "Message bytes received.",
        |v| Some(v.bytes_received as f64),
    ),
    (
        "warden_task_running",
        "gauge",
        "1 while the task is alive.",
        |v| Some(if is_finished(v) { 0.0 } else { 1.0 }),
    ),
    (
        "warden_task_traps_total",
        "counter",
        "1 if the task trapped.",
        |v| Some((v.state == "trapped") as u8 as f64),
    ),
    (
        "warden_task_kills_total",
        "counter",
        "1 if the task was killed.",
        |v| Some((v.state == "killed") as u8 as f64),
    ),
];

/// The Prometheus text exposition of every task and the runtime.
pub fn metrics(rt: &Runtime) -> String {
    let views = rt.task_views();
    let mut out = String::new();
    let label = |v: &TaskView| {
        let name = v.name.replace('\\', "\\\\").replace('"', "\\\"");
        format!("{{task=\"{name}\",id=\"{}\"}}", v.id)
    };
    for (name, kind, help, value) in TASK_METRICS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for v in &views {
            if let Some(x) = value(v) {
                let _ = writeln!(out, "{name}{} {x}", label(v));
            }
        }
    }
    let count = |state: &str| views.iter().filter(|v| v.state == state).count();
    let _ = writeln!(
        out,
        "# HELP warden_tasks_live Tasks alive now.\n# TYPE warden_tasks_live gauge"
    );
    let _ = writeln!(
        out,
        "warden_tasks_live {}",
        views.iter().filter(|v| !is_finished(v)).count()
    );
    let _ = writeln!(
        out,
        "# HELP warden_tasks_ended_total Tasks that ended, by how.\n# TYPE warden_tasks_ended_total counter"
    );
    for state in ["exited", "trapped", "killed"] {
        let _ = writeln!(
            out,
            "warden_tasks_ended_total{{status=\"{state}\"}} {}",
            count(state)
        );
    }
    let stats = rt.stats();
    let _ = writeln!(
        out,
        "# HELP warden_polls_total Time slices run.\n# TYPE warden_polls_total counter\nwarden_polls_total {}",
        stats.polls
    );
    out
}

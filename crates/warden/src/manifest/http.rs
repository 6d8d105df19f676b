//! The `[[http]]` sections: servers and their routes.
//!
//! ```toml
//! [[http]]
//! listen = "127.0.0.1:8080"
//! max_connections = 1024       # open at once (default 1024)
//! max_buffered = "256MiB"      # request heads, bodies and answers held at
//!                              # once, all connections (default 256MiB);
//!                              # past it, 503
//! max_buffered_per_connection = "32MiB" # the same for one connection
//!                              # (default 32MiB); both at least the
//!                              # largest route's max_body + max_response
//!
//! [[http.route]]
//! path = "/hello"              # exact; "/api/*" is a prefix
//! name = "hello"               # in metrics and task names (default: the path)
//! module = "hello.wasm"        # per request: a fresh task (WAGI)
//! memory_limit = "16MiB"       # per request (and the other [[task]] keys
//! cpu_limit = "100ms"          # args, env, dirs, on_memory_limit,
//!                              # memory_guarantee (reserved per request,
//!                              # else 503), memory_priority, stderr, uses,
//!                              # connect, group, share, tickets, priority,
//!                              # cap, bandwidth_share/limit)
//! timeout = "5s"               # wall clock per request (default 30s)
//! max_concurrent = 64          # handled at once (default 64) ...
//! max_queue = 1024             # ... and waiting (default 1024); then 503
//! max_body = "1MiB"            # larger bodies get 413 (default 1MiB)
//! max_response = "16MiB"       # larger CGI responses (and servlet replies)
//!                              # get 502 (default 16MiB)
//!
//! [[http.route]]
//! path = "/kv/*"
//! service = "kv"               # servlet: portal calls to the task providing "kv"
//!
//! [[http.route]]
//! path = "/py/*"
//! component = "handler.wasm"   # per request: a fresh wasi:http/proxy
//!                              # component (the same keys as module)
//! ```

use super::task::{task_template, RawTask};
use crate::http::config::{
    check_path, defaults, Handler, HttpSpec, RouteSpec, DEFAULT_MAX_CONNECTIONS,
};
use crate::serving::tls::{Certificate, TlsSpec};
use crate::units::{parse_duration, parse_size};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    listen: String,
    max_connections: Option<usize>,
    max_buffered: Option<String>,
    max_buffered_per_connection: Option<String>,
    tls: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_client_ca: Option<String>,
    #[serde(default)]
    route: Vec<RawRoute>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: String,
    name: Option<String>,
    module: Option<String>,
    service: Option<String>,
    component: Option<String>,
    timeout: Option<String>,
    max_concurrent: Option<usize>,
    max_queue: Option<usize>,
    max_body: Option<String>,
    max_response: Option<String>,
    // The per-request task's keys, as in [[task]].
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    dirs: BTreeMap<String, String>,
    memory_limit: Option<String>,
    on_memory_limit: Option<String>,
    memory_guarantee: Option<String>,
    memory_priority: Option<i32>,
    cpu_limit: Option<String>,
    stderr: Option<String>,
    #[serde(default)]
    uses: Vec<String>,
    #[serde(default)]
    connect: Vec<String>,
    group: Option<String>,
    share: Option<u32>,
    tickets: Option<u32>,
    priority: Option<i32>,
    cap: Option<f64>,
    bandwidth_share: Option<u32>,
    bandwidth_limit: Option<String>,
}

/// Checks and converts the `[[http]]` sections; `groups` are the names
/// of the manifest's groups.
pub(super) fn servers(
    raw: Vec<RawHttp>,
    base: &Path,
    groups: &[&str],
    problems: &mut Vec<String>,
) -> Vec<HttpSpec> {
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (i, h) in raw.into_iter().enumerate() {
        let at = format!("http[{i}] ({:?})", h.listen);
        let before = problems.len();
        match server(h, &at, base, groups, &mut names, problems) {
            Ok(spec) if problems.len() == before => out.push(spec),
            Ok(_) => {}
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    out
}

/// One `[[http]]` server. Each bad route is a problem of its own, pushed
/// to `problems` (the server is then left out by the caller).
fn server(
    h: RawHttp,
    at: &str,
    base: &Path,
    groups: &[&str],
    names: &mut HashSet<String>,
    problems: &mut Vec<String>,
) -> Result<HttpSpec, String> {
    h.listen
        .parse::<std::net::SocketAddr>()
        .map_err(|_| "listen: not an address such as \"127.0.0.1:8080\"".to_string())?;
    if h.route.is_empty() {
        return Err("no [[http.route]] entries".into());
    }
    let tls = tls(&h, base)?;
    let mut routes = Vec::new();
    for (j, r) in h.route.into_iter().enumerate() {
        let rat = format!("{at}: route[{j}] ({:?})", r.path);
        match route(r, base, groups) {
            Ok(route) if !names.insert(route.name.clone()) => {
                problems.push(format!("{rat}: duplicate route name {:?}", route.name))
            }
            Ok(route) => routes.push(route),
            Err(e) => problems.push(format!("{rat}: {e}")),
        }
    }
    let (max_buffered, max_buffered_per_connection) =
        buffered(&h.max_buffered, &h.max_buffered_per_connection, &routes)?;
    let max_connections = match h.max_connections {
        Some(0) => return Err("max_connections: must be at least 1".into()),
        n => n.unwrap_or(DEFAULT_MAX_CONNECTIONS),
    };
    Ok(HttpSpec {
        listen: h.listen,
        max_connections,
        max_buffered,
        max_buffered_per_connection,
        routes,
        tls,
    })
}

/// `tls_cert` and `tls_key` (PEM files), or `tls = "self-signed"`; and
/// `tls_client_ca`, which needs one of them.
fn tls(h: &RawHttp, base: &Path) -> Result<Option<TlsSpec>, String> {
    tls_spec([&h.tls, &h.tls_cert, &h.tls_key, &h.tls_client_ca], base)
}

/// A server's TLS from the values of its `tls`, `tls_cert`, `tls_key`
/// and `tls_client_ca` keys (errors name the key from `tls`, so that
/// `[runtime]` can say `control_` before it).
pub(super) fn tls_spec(
    [tls, cert, key, client_ca]: [&Option<String>; 4],
    base: &Path,
) -> Result<Option<TlsSpec>, String> {
    let file = |name: &str, v: &Option<String>| -> Result<Option<std::path::PathBuf>, String> {
        let Some(v) = v else { return Ok(None) };
        let path = base.join(v);
        match path.is_file() {
            true => Ok(Some(path)),
            false => Err(format!("{name}: file not found: {}", path.display())),
        }
    };
    let cert = file("tls_cert", cert)?;
    let key = file("tls_key", key)?;
    let client_ca = file("tls_client_ca", client_ca)?;
    let certificate = match (tls.as_deref(), cert, key) {
        (None, None, None) if client_ca.is_some() => {
            return Err(
                "tls_client_ca: needs tls_cert and tls_key, or tls = \"self-signed\"".into(),
            )
        }
        (None, None, None) => return Ok(None),
        (None, Some(cert), Some(key)) => Certificate::Files { cert, key },
        (None, _, _) => return Err("tls_cert: tls_cert and tls_key go together".into()),
        (Some("self-signed"), None, None) => Certificate::SelfSigned,
        (Some("self-signed"), _, _) => {
            return Err("tls: \"self-signed\" or tls_cert and tls_key, not both".into())
        }
        (Some(other), _, _) => {
            return Err(format!(
                "tls: {other:?} is not \"self-signed\" (name files with tls_cert and tls_key)"
            ))
        }
    };
    Ok(Some(TlsSpec {
        certificate,
        client_ca,
    }))
}

/// A server's `max_buffered` and `max_buffered_per_connection`: each at
/// least what one request of its largest route may hold (its head, body
/// and answer), and the server's at least one connection's. Defaults
/// are raised to that; a value given below it is refused.
fn buffered(
    server: &Option<String>,
    per_connection: &Option<String>,
    routes: &[RouteSpec],
) -> Result<(u64, u64), String> {
    let one = routes
        .iter()
        .map(|r| r.max_body + r.max_response as u64)
        .max()
        .unwrap_or(0)
        + (crate::serving::conn::MAX_HEAD as u64) * 2;
    let size = |key: &str, given: &Option<String>, default: u64, least: u64| match given {
        None => Ok(default.max(least)),
        Some(t) => match parse_size(t).map_err(|e| format!("{key}: {e}"))? {
            n if n < least => Err(format!(
                "{key}: {n} bytes is less than one request of its largest route may hold \
                 ({least} bytes: max_body + max_response + head)"
            )),
            n => Ok(n),
        },
    };
    let per_conn = size(
        "max_buffered_per_connection",
        per_connection,
        defaults::MAX_BUFFERED_PER_CONNECTION,
        one,
    )?;
    let server = size("max_buffered", server, defaults::MAX_BUFFERED, per_conn)?;
    Ok((server, per_conn))
}

fn route(r: RawRoute, base: &Path, groups: &[&str]) -> Result<RouteSpec, String> {
    check_path(&r.path)?;
    let name = r.name.clone().unwrap_or_else(|| r.path.clone());
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '"')
    {
        return Err("name: must be non-empty, without spaces, quotes or control characters".into());
    }
    if let Some(g) = r.group.as_deref().filter(|g| !groups.contains(g)) {
        return Err(format!("group: no [[group]] named {g:?}"));
    }
    let handler = handler(&r, &name, base)?;
    let size = |key: &str, v: &Option<String>, default: u64| -> Result<u64, String> {
        v.as_deref().map_or(Ok(default), |t| {
            parse_size(t).map_err(|e| format!("{key}: {e}"))
        })
    };
    let positive = |key: &str, v: Option<usize>, default: usize| match v {
        Some(0) => Err(format!("{key}: must be at least 1")),
        v => Ok(v.unwrap_or(default)),
    };
    Ok(RouteSpec {
        name,
        path: r.path.clone(),
        handler,
        timeout: match r.timeout.as_deref() {
            None => defaults::TIMEOUT,
            Some(t) => match parse_duration(t).map_err(|e| format!("timeout: {e}"))? {
                d if d.is_zero() => return Err("timeout: must be more than 0".into()),
                d => d,
            },
        },
        max_concurrent: positive("max_concurrent", r.max_concurrent, defaults::MAX_CONCURRENT)?,
        max_queue: r.max_queue.unwrap_or(defaults::MAX_QUEUE),
        max_body: size("max_body", &r.max_body, defaults::MAX_BODY)?,
        max_response: usize::try_from(size(
            "max_response",
            &r.max_response,
            defaults::MAX_RESPONSE as u64,
        )?)
        .map_err(|_| "max_response: too large".to_string())?,
    })
}

/// Who answers a route: a task per request (its module or component),
/// or a servlet.
fn handler(r: &RawRoute, name: &str, base: &Path) -> Result<Handler, String> {
    let given = [&r.module, &r.service, &r.component];
    if given.iter().filter(|k| k.is_some()).count() != 1 {
        return Err(
            "give exactly one of module (a task per request), component (a \
                    wasi:http/proxy component per request) and service (a servlet)"
                .into(),
        );
    }
    Ok(match (&r.module, &r.service) {
        (None, None) => Handler::Component(Box::new(template(r, &raw_task(r, name), base)?)),
        (Some(_), Some(_)) => unreachable!("counted above"),
        (None, Some(s)) => {
            if let Some(key) = task_keys_given(r) {
                return Err(format!(
                    "{key}: only for module routes (a servlet's limits are its [[task]]'s)"
                ));
            }
            Handler::Service(s.clone())
        }
        (Some(_), None) => Handler::Module(Box::new(template(r, &raw_task(r, name), base)?)),
    })
}

/// A per-request route's task template from its keys as `raw`.
fn template(r: &RawRoute, raw: &RawTask, base: &Path) -> Result<crate::task::TaskSpec, String> {
    // The template leaves args and env to each copy; a route has one.
    let mut spec = task_template(raw, base)?;
    spec.args = r.args.clone();
    spec.env = r.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(spec)
}

/// The first per-request task key a servlet route was given, if any.
fn task_keys_given(r: &RawRoute) -> Option<&'static str> {
    [
        ("args", !r.args.is_empty()),
        ("env", !r.env.is_empty()),
        ("dirs", !r.dirs.is_empty()),
        ("memory_limit", r.memory_limit.is_some()),
        ("on_memory_limit", r.on_memory_limit.is_some()),
        ("memory_guarantee", r.memory_guarantee.is_some()),
        ("memory_priority", r.memory_priority.is_some()),
        ("cpu_limit", r.cpu_limit.is_some()),
        ("stderr", r.stderr.is_some()),
        ("uses", !r.uses.is_empty()),
        ("connect", !r.connect.is_empty()),
        ("group", r.group.is_some()),
        ("share", r.share.is_some()),
        ("tickets", r.tickets.is_some()),
        ("priority", r.priority.is_some()),
        ("cap", r.cap.is_some()),
        ("bandwidth_share", r.bandwidth_share.is_some()),
        ("bandwidth_limit", r.bandwidth_limit.is_some()),
    ]
    .into_iter()
    .find(|&(_, given)| given)
    .map(|(key, _)| key)
}

/// The route's task keys as a `[[task]]` entry.
fn raw_task(r: &RawRoute, name: &str) -> RawTask {
    RawTask {
        name: name.chars().filter(|c| !c.is_whitespace()).collect(),
        module: r
            .module
            .clone()
            .or_else(|| r.component.clone())
            .unwrap_or_default(),
        args: r.args.clone(),
        env: r.env.clone(),
        dirs: r.dirs.clone(),
        memory_limit: r.memory_limit.clone(),
        on_memory_limit: r.on_memory_limit.clone(),
        memory_guarantee: r.memory_guarantee.clone(),
        memory_priority: r.memory_priority,
        cpu_limit: r.cpu_limit.clone(),
        stderr: r.stderr.clone(),
        uses: r.uses.clone(),
        connect: r.connect.clone(),
        group: r.group.clone(),
        share: r.share,
        tickets: r.tickets,
        priority: r.priority,
        cap: r.cap,
        bandwidth_share: r.bandwidth_share,
        bandwidth_limit: r.bandwidth_limit.clone(),
        ..RawTask::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Manifest;
    use crate::http::Handler;
    use std::time::Duration;

    fn parse(routes: &str) -> Result<Manifest, String> {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.wasm"), b"\0asm\x01\0\0\0").unwrap();
        let text = format!("[[group]]\nname = \"g\"\n[[http]]\nlisten = \"127.0.0.1:0\"\n{routes}");
        Manifest::parse(&text, d.path())
    }

    #[test]
    fn routes_with_their_keys_and_defaults() {
        let m = parse(
            r#"
[[http.route]]
path = "/a/*"
module = "m.wasm"
memory_limit = "1MiB"
cpu_limit = "10ms"
timeout = "2s"
max_concurrent = 3
max_body = "1KiB"
group = "g"
args = ["x"]
env = { A = "1" }

[[http.route]]
path = "/b"
service = "b"
"#,
        )
        .unwrap();
        assert!(m.tasks.is_empty(), "a manifest of servers alone is valid");
        let r = &m.http[0].routes;
        assert_eq!(
            (
                r[0].name.as_str(),
                r[0].timeout,
                r[0].max_concurrent,
                r[0].max_body
            ),
            ("/a/*", Duration::from_secs(2), 3, 1024)
        );
        let Handler::Module(t) = &r[0].handler else {
            panic!()
        };
        assert_eq!(
            (
                t.limits.memory_limit,
                t.sched.group.as_deref(),
                t.args.len()
            ),
            (Some(1 << 20), Some("g"), 1)
        );
        assert!(matches!(&r[1].handler, Handler::Service(s) if s == "b"));
        assert_eq!(
            (r[1].timeout, r[1].max_concurrent, r[1].max_queue),
            (Duration::from_secs(30), 64, 1024)
        );
    }

    #[test]
    fn bad_routes_are_refused_with_their_key() {
        for (route, want) in [
            (
                "path = \"/a\"\nmodule = \"m.wasm\"\nservice = \"s\"",
                "exactly one of module",
            ),
            ("path = \"/a\"", "exactly one of module"),
            (
                "path = \"/a\"\nservice = \"s\"\nmemory_limit = \"1MiB\"",
                "memory_limit: only for module routes",
            ),
            ("path = \"a\"\nservice = \"s\"", "must start with '/'"),
            ("path = \"/a*\"\nservice = \"s\"", "'*' only as a final"),
            ("path = \"/a\"\nmodule = \"nope.wasm\"", "file not found"),
            (
                "path = \"/a\"\nservice = \"s\"\ntimeout = \"0s\"",
                "timeout",
            ),
            (
                "path = \"/a\"\nservice = \"s\"\nmax_concurrent = 0",
                "max_concurrent",
            ),
            (
                "path = \"/a\"\nmodule = \"m.wasm\"\ngroup = \"none\"",
                "no [[group]] named",
            ),
            ("path = \"/a\"\nservice = \"s\"\nbogus = 1", "unknown key"),
            (
                "path = \"/a\"\nservice = \"s\"\n[[http.route]]\npath = \"/a\"\nservice = \"t\"",
                "duplicate route name",
            ),
        ] {
            let e = parse(&format!("[[http.route]]\n{route}\n")).unwrap_err();
            assert!(e.contains(want), "{route:?}: {e}");
        }
        let d = tempfile::tempdir().unwrap();
        let e = Manifest::parse(
            "[[http]]\nlisten = \"nowhere\"\n[[http.route]]\npath = \"/\"\nservice = \"s\"\n",
            d.path(),
        )
        .unwrap_err();
        assert!(e.contains("listen"), "{e}");
        let e = Manifest::parse("[[http]]\nlisten = \"127.0.0.1:0\"\n", d.path()).unwrap_err();
        assert!(e.contains("no [[http.route]]"), "{e}");
    }
}

//! The web server's routes as operators see them: `GET /api/routes`
//! (JSON) and the `warden_http_*` series of `/metrics`.

use crate::runtime::Runtime;
use crate::runtime::{RouteStats, BUCKETS};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Every route: counters, latency percentiles of its latest requests
/// (ms) and the live tasks handling its requests now.
pub(super) fn list(rt: &Runtime) -> Value {
    let live = rt.live_tasks();
    let routes: Vec<Value> = rt
        .http_routes()
        .iter()
        .map(|r| {
            let tasks = live
                .iter()
                .filter(|t| t.route.as_deref() == Some(r.name.as_str()))
                .count();
            let codes: serde_json::Map<String, Value> = r
                .codes()
                .into_iter()
                .map(|(c, n)| (c.to_string(), json!(n)))
                .collect();
            // Milliseconds to the microsecond.
            let ms = |q| r.quantile(q).map(|s| super::api::rounded(s * 1e3, 3));
            json!({
                "name": r.name, "path": r.path, "server": r.server, "kind": r.kind,
                "requests": r.count(), "codes": codes,
                "in_flight": r.in_flight.load(Ordering::Relaxed),
                "queued": r.queued.load(Ordering::Relaxed),
                "tasks": tasks,
                "p50_ms": ms(0.5), "p99_ms": ms(0.99),
            })
        })
        .collect();
    json!(routes)
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `warden_http_*` series (Prometheus histogram conventions).
pub(super) fn metrics(rt: &Runtime, out: &mut String) {
    let routes = rt.http_routes();
    if routes.is_empty() {
        return;
    }
    let help = |out: &mut String, name: &str, kind: &str, text: &str| {
        let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
    };
    help(
        out,
        "warden_http_requests_total",
        "counter",
        "Requests answered, by route and status code.",
    );
    for r in &routes {
        for (code, n) in r.codes() {
            let _ = writeln!(
                out,
                "warden_http_requests_total{{route=\"{}\",code=\"{code}\"}} {n}",
                label(&r.name)
            );
        }
    }
    let name = "warden_http_request_duration_seconds";
    help(
        out,
        name,
        "histogram",
        "Time from a request's head to its answer, by route.",
    );
    for r in &routes {
        bucket_lines(r, name, out);
    }
    for (name, text, gauge) in [
        (
            "warden_http_in_flight",
            "Requests being handled now.",
            &(|r: &RouteStats| r.in_flight.load(Ordering::Relaxed)) as &dyn Fn(&RouteStats) -> i64,
        ),
        (
            "warden_http_queued",
            "Requests waiting for a handler slot now.",
            &|r: &RouteStats| r.queued.load(Ordering::Relaxed),
        ),
    ] {
        help(out, name, "gauge", text);
        for r in &routes {
            let _ = writeln!(out, "{name}{{route=\"{}\"}} {}", label(&r.name), gauge(r));
        }
    }
}

fn bucket_lines(r: &RouteStats, name: &str, out: &mut String) {
    let route = label(&r.name);
    let cumulative = r.cumulative();
    for (i, n) in cumulative.iter().enumerate() {
        let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"{le}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_sum{{route=\"{route}\"}} {}", r.sum_seconds());
    let _ = writeln!(
        out,
        "{name}_count{{route=\"{route}\"}} {}",
        cumulative.last().copied().unwrap_or(0)
    );
}

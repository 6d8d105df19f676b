//! OpenTelemetry traces sent to a real collector: Jaeger's all-in-one
//! binary (an OpenTelemetry Collector, built by `scripts/jaeger`), fed
//! over OTLP/HTTP and read back through its query API. A request that
//! carries a W3C `traceparent` is answered with one of the same trace,
//! and the collector holds its span and its handler task's span, the
//! task's CPU time, peak memory and bytes among its attributes.

use crate::util::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The collector, killed on drop.
struct Jaeger {
    child: Reaped,
    otlp: u16,
    query: u16,
}

impl Jaeger {
    /// Starts it on fixed ports (it cannot report ports it picked), once
    /// its query API answers.
    fn start(dir: &std::path::Path) -> Jaeger {
        let exe = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/toolchains/jaeger-1.75.0");
        assert!(exe.is_file(), "{}: run scripts/jaeger", exe.display());
        let (otlp, query, grpc) = (fixed_port(), fixed_port(), fixed_port());
        // Memory storage, the OTLP/HTTP receiver and the query API on
        // these ports only (its defaults take six fixed ports).
        let config = dir.join("jaeger.yaml");
        std::fs::write(&config, format!(
            "service:\n  extensions: [jaeger_storage, jaeger_query]\n  pipelines:\n    traces:\n\
             \x20     receivers: [otlp]\n      processors: [batch]\n      exporters: [jaeger_storage_exporter]\n\
             \x20 telemetry:\n    metrics:\n      level: none\n\
             extensions:\n  jaeger_query:\n    storage:\n      traces: memstore\n\
             \x20   http:\n      endpoint: 127.0.0.1:{query}\n    grpc:\n      endpoint: 127.0.0.1:{grpc}\n\
             \x20 jaeger_storage:\n    backends:\n      memstore:\n        memory:\n          max_traces: 1000\n\
             receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{otlp}\n\
             processors:\n  batch:\n\
             exporters:\n  jaeger_storage_exporter:\n    trace_storage: memstore\n"
        )).unwrap();
        let child = Reaped(
            Command::new(exe)
                .arg("--config")
                .arg(&config)
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("jaeger.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        let j = Jaeger { child, otlp, query };
        let t = Instant::now();
        while j.get("/api/services").is_none() {
            let log = std::fs::read_to_string(dir.join("jaeger.log")).unwrap_or_default();
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "jaeger never answered:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        j
    }

    /// `GET path` on its query API, as JSON, if it answers 200.
    fn get(&self, path: &str) -> Option<serde_json::Value> {
        let out = Command::new("curl")
            .args(["-sf", "--max-time", "5"])
            .arg(format!("http://127.0.0.1:{}{path}", self.query))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())?
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[test]
fn spans_of_a_request_and_its_task_reach_a_collector() {
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let m = manifest(
        dir.path(),
        &format!(
            "[telemetry]\notlp = 'http://127.0.0.1:{}'\nservice = 'warden-test'\n\
             [[task]]\nname = 'counter'\nmodule = '{}'\nprovides = ['counter']\n\
             [[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/hello'\nmodule = '{}'\n\
             [[http.route]]\npath = '/count/*'\nservice = 'counter'\n",
            jaeger.otlp,
            guests::SERVLET,
            guests::WAGI
        ),
    );
    let web = Launch::new(&m).args(["--no-cache"]).start();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let sent = format!("traceparent: 00-{trace}-{parent}-01");
    let r = crate::http::curl(&format!("{}/hello", web.base()), &["-H", &sent]);
    assert_eq!(r.status, 200, "{r:?}");
    let back = r
        .head
        .lines()
        .find_map(|l| l.strip_prefix("traceparent: "))
        .unwrap_or_else(|| panic!("no traceparent in {}", r.head));
    assert!(
        back.starts_with(&format!("00-{trace}-")) && !back.contains(parent),
        "{back}"
    );
    let request_span = back.split('-').nth(2).unwrap().to_string();
    // The spans leave within a second; the collector stores them.
    let t = Instant::now();
    let spans = loop {
        let found = jaeger.get(&format!("/api/traces/{trace}"));
        let spans = found
            .as_ref()
            .and_then(|f| f["data"][0]["spans"].as_array().cloned())
            .unwrap_or_default();
        if spans.len() >= 2 {
            break spans;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{found:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s["operationName"] == name)
            .unwrap_or_else(|| panic!("no span {name:?} in {spans:?}"))
            .clone()
    };
    let tag = |span: &serde_json::Value, key: &str| {
        span["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == key)
            .map(|t| t["value"].clone())
            .unwrap_or_else(|| panic!("no tag {key} in {span}"))
    };
    let parent_of = |span: &serde_json::Value| span["references"][0]["spanID"].clone();
    let request = named("GET /hello");
    assert_eq!(request["spanID"], request_span.as_str());
    assert_eq!(
        parent_of(&request),
        parent,
        "the client's span is its parent"
    );
    assert_eq!(tag(&request, "http.response.status_code"), 200);
    let task = named("task /hello#1");
    assert_eq!(
        parent_of(&task),
        request_span.as_str(),
        "the task runs inside the request"
    );
    assert!(
        tag(&task, "warden.task.cpu_ms").as_f64().unwrap() > 0.0,
        "{task}"
    );
    assert!(
        tag(&task, "warden.task.peak_memory_bytes")
            .as_u64()
            .unwrap()
            >= 64 << 10
    );
    for key in ["warden.task.bytes_sent", "warden.task.bytes_received"] {
        tag(&task, key);
    }
    assert_eq!(tag(&task, "warden.task.status"), "exited");
    // Operators see the spans the queue had to drop (none here).
    let metrics = crate::http::curl(&format!("http://{}/metrics", web.control()), &[]);
    assert!(
        metrics
            .body
            .contains("\nwarden_trace_spans_dropped_total 0\n"),
        "{}",
        metrics.body
    );

    // A servlet route: the portal call is the request's child.
    let servlet = "0af7651916cd43dd8448eb211c80319c";
    let sent = format!("traceparent: 00-{servlet}-b7ad6b7169203331-01");
    let t = Instant::now();
    while crate::http::curl(&format!("{}/count/x", web.base()), &["-H", &sent]).status != 200 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the servlet never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let spans = spans_of(&jaeger, servlet, 2);
    let request = spans
        .iter()
        .rev()
        .find(|s| s["operationName"] == "GET /count/*")
        .unwrap_or_else(|| panic!("{spans:?}"));
    let call = spans
        .iter()
        .filter(|s| s["operationName"] == "call counter")
        .find(|c| c["references"][0]["spanID"] == request["spanID"])
        .unwrap_or_else(|| panic!("no call span under {request} in {spans:?}"));
    assert!(
        tag(call, "warden.call.reply_bytes").as_u64().unwrap() > 0,
        "{call}"
    );
    assert_eq!(tag(call, "warden.service"), "counter");
}

/// A run that ends sends its last spans before the process exits.
#[test]
fn a_finished_run_has_sent_its_spans() {
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\ncontrol = 'off'\n[telemetry]\notlp = 'http://127.0.0.1:{}'\nservice = 'warden-exit'\n\
             [[task]]\nname = 'hello'\nmodule = '{}'\n",
            jaeger.otlp,
            guests::HELLO
        ),
    );
    let out = warden().arg("run").arg(&m).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = Instant::now();
    loop {
        let found = jaeger.get("/api/traces?service=warden-exit&limit=10");
        let names: Vec<String> = found
            .as_ref()
            .and_then(|f| f["data"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
            .filter_map(|s| s["operationName"].as_str().map(str::to_string))
            .collect();
        if names.iter().any(|n| n == "task hello") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{names:?} {found:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The spans of trace `trace`, once the collector holds at least `n`.
fn spans_of(jaeger: &Jaeger, trace: &str, n: usize) -> Vec<serde_json::Value> {
    let t = Instant::now();
    loop {
        let found = jaeger.get(&format!("/api/traces/{trace}"));
        let spans = found
            .as_ref()
            .and_then(|f| f["data"][0]["spans"].as_array().cloned())
            .unwrap_or_default();
        if spans.len() >= n {
            return spans;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{found:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One request crossing two nodes is one trace: node a's server span for
/// the request and its call span, node b's span serving the call (its
/// parent the call span, carried in the cluster's frame), each node
/// sending its own spans to the collector.
#[test]
fn a_request_crossing_two_nodes_is_one_trace() {
    use crate::cluster::{server, Broker, Node};
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let broker = Broker::start();
    let telemetry = |service: &str| {
        format!(
            "[telemetry]\notlp = 'http://127.0.0.1:{}'\nservice = '{service}'\n",
            jaeger.otlp
        )
    };
    let _b = Node::start(
        dir.path(),
        "b",
        &broker.url(),
        &(telemetry("node-b") + &server("kv", "b")),
    );
    let a = Node::start(
        dir.path(),
        "a",
        &broker.url(),
        &(telemetry("node-a")
            + "[[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/kv/*'\nservice = 'kv'\n"),
    );
    let trace = "5cf92f3577b34da6a3ce929d0e0e4736";
    let sent = format!("traceparent: 00-{trace}-00f067aa0ba902b7-01");
    // Until node a has heard node b serve the name.
    let t = Instant::now();
    let r = loop {
        let r = crate::http::curl(&format!("{}/kv/x", a.served.base()), &["-H", &sent]);
        if r.status != 503 {
            break r;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{r:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{r:?}");
    // Each node sends its own spans: wait for b's. (Jaeger numbers the
    // processes anew in each answer: spans and processes from one.)
    let t = Instant::now();
    let (found, spans) = loop {
        let found = jaeger.get(&format!("/api/traces/{trace}"));
        let spans = found
            .as_ref()
            .and_then(|f| f["data"][0]["spans"].as_array().cloned())
            .unwrap_or_default();
        if spans.iter().any(|s| s["operationName"] == "serve kv") {
            break (found.unwrap(), spans);
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no serve span: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // (The request was tried again while a had not heard of b: each
    // try is a request span of this trace.)
    let parent_of = |span: &serde_json::Value| {
        let id = span["references"][0]["spanID"].clone();
        spans
            .iter()
            .find(|s| s["spanID"] == id)
            .unwrap_or_else(|| panic!("no parent {id} of {span} in {spans:?}"))
            .clone()
    };
    let serve = spans
        .iter()
        .find(|s| s["operationName"] == "serve kv")
        .unwrap()
        .clone();
    let call = parent_of(&serve);
    assert_eq!(call["operationName"], "call kv", "node b serves a's call");
    let request = parent_of(&call);
    assert_eq!(
        request["operationName"], "GET /kv/*",
        "the call is the request's"
    );
    let service_of = |span: &serde_json::Value| {
        let process = span["processID"].as_str().unwrap();
        found["data"][0]["processes"][process]["serviceName"].clone()
    };
    assert_eq!(service_of(&request), "node-a");
    assert_eq!(service_of(&serve), "node-b");
}

/// A task run with a trace context (as a traced request's task is): each
/// portal call it makes, to an active and to a passive service, and each
/// typed call, is a span under the task's, with the bytes each way; an
/// untraced task's calls are not.
#[test]
fn a_traced_task_s_calls_are_spans_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let rt = jaeger.runtime("warden-calls");
    let trace = "6cf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let ctx = warden::telemetry::Context::from_traceparent(&format!("00-{trace}-{parent}-01"));
    // Bytes: ipc_bench's client, 3 null and 3 str100 calls, each made
    // twice; its server active, then passive.
    let server = |passive: bool| {
        let module = if passive {
            guests::PASSIVE_BENCH
        } else {
            guests::IPC_BENCH
        };
        let mut s = spec(dir.path(), "server", module);
        s.args = vec!["server".into()];
        s.ipc.provides = vec!["bench".into()];
        s.passive = passive;
        s
    };
    let client = |name: &str| {
        let mut c = spec(dir.path(), name, guests::IPC_BENCH);
        c.args = ["client", "3", "null,str100"].map(String::from).to_vec();
        c.ipc.uses = vec!["bench".into()];
        c.trace = ctx;
        c
    };
    for passive in [false, true] {
        let s = rt.spawn(&server(passive)).unwrap();
        let r = run_one(&rt, &client("client"), Duration::from_secs(60));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
        let mut quiet = client("untraced");
        quiet.trace = None;
        assert_eq!(
            run_one(&rt, &quiet, Duration::from_secs(60)).exit_code,
            Some(0)
        );
        rt.kill(s, "next").unwrap();
        wait(&rt, s, Duration::from_secs(30));
    }
    // Typed: kv_client's checks (7 calls) to the kv component.
    let mut kv = spec(
        dir.path(),
        "kv",
        crate::components::component(guests::KV_SERVER),
    );
    kv.serves = vec!["warden-test:kv/store".into()];
    kv.ipc.provides = vec!["kv".into()];
    rt.spawn(&kv).unwrap();
    let mut c = spec(
        dir.path(),
        "typed",
        crate::components::component(guests::KV_CLIENT),
    );
    c.args = vec!["check".into()];
    c.ipc.uses = vec!["kv".into()];
    c.binds = vec![("warden-test:kv/store".into(), "kv".into())];
    c.trace = ctx;
    assert_eq!(run_one(&rt, &c, Duration::from_secs(60)).exit_code, Some(0));
    // 12 calls to each byte server, 7 typed calls, 3 task spans.
    let spans = spans_of(&jaeger, trace, 24 + 7 + 3);
    let under = |name: &str| -> Vec<&serde_json::Value> {
        spans
            .iter()
            .filter(|s| s["operationName"] == name)
            .filter(|s| s["references"][0]["spanID"] == parent)
            .collect()
    };
    let calls = under("call server");
    assert_eq!(calls.len(), 24, "{spans:?}");
    assert!(
        calls
            .iter()
            .any(|c| tag(c, "warden.call.request_bytes") == 100),
        "{calls:?}"
    );
    let set = under("typed call warden-test:kv/store@0.1.0.set");
    assert_eq!(set.len(), 3, "{spans:?}");
    assert_eq!(tag(set[0], "warden.service.task"), "kv");
    rt.kill_all("test over");
}

/// A traced task calls a relay, which is not traced and calls on to an
/// echo server for each call it receives: the relay's calls are spans
/// under the task's calls (each under the call it was serving), and an
/// untraced client's calls through the same relay add none. The same
/// through a passive service, whose handler runs on the caller's thread.
#[test]
fn calls_onward_from_a_served_call_are_spans_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let rt = jaeger.runtime("warden-onward");
    let trace = "7cf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let ctx = warden::telemetry::Context::from_traceparent(&format!("00-{trace}-{parent}-01"));
    let task = |name: &str, args: &[&str]| {
        let mut s = spec(dir.path(), name, guests::ECHO);
        s.args = args.iter().map(|a| a.to_string()).collect();
        s
    };
    let mut back = task("back", &["server", "back"]);
    back.ipc.provides = vec!["back".into()];
    rt.spawn(&back).unwrap();
    let mut front = task("front", &["relay", "front", "back"]);
    front.ipc.provides = vec!["front".into()];
    front.ipc.uses = vec!["back".into()];
    rt.spawn(&front).unwrap();
    let mut client = task("client", &["client", "front", "3", "hello"]);
    client.ipc.uses = vec!["front".into()];
    let mut quiet = client.clone();
    quiet.name = "untraced".into();
    client.trace = ctx;
    for c in [&client, &quiet] {
        let r = run_one(&rt, c, Duration::from_secs(60));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    // A passive handler calls only passive services (it cannot wait).
    for (name, uses) in [("pback", vec![]), ("mid", vec!["pback".to_string()])] {
        let mut p = spec(dir.path(), name, guests::PASSIVE);
        p.passive = true;
        p.ipc.provides = vec![name.into()];
        p.ipc.uses = uses;
        rt.spawn(&p).unwrap();
    }
    let mut caller = spec(dir.path(), "caller", guests::CALLER);
    caller.args = ["mid", "nest pback echo one", "nest pback echo two"]
        .map(String::from)
        .to_vec();
    caller.ipc.uses = vec!["mid".into()];
    caller.trace = ctx;
    assert_eq!(
        run_one(&rt, &caller, Duration::from_secs(60)).exit_code,
        Some(0)
    );
    let said = stdout_of(dir.path(), "caller");
    assert!(said.contains("nest pback echo two -> two"), "{said}");
    // 3 + 2 calls, as many onward, two task spans.
    let spans = spans_of(&jaeger, trace, 12);
    let named = |name: &str| -> Vec<&serde_json::Value> {
        spans
            .iter()
            .filter(|s| s["operationName"] == name)
            .collect()
    };
    let calls = named("call front");
    assert_eq!(calls.len(), 3, "{spans:?}");
    assert!(calls.iter().all(|c| c["references"][0]["spanID"] == parent));
    let (calls_mid, onward) = (named("call mid"), named("call back"));
    let onward_mid = named("call pback");
    assert_eq!((calls_mid.len(), onward.len()), (2, 3), "{spans:?}");
    assert_eq!(onward_mid.len(), 2, "{spans:?}");
    let calls: Vec<_> = calls.into_iter().chain(calls_mid).collect();
    for o in onward.iter().chain(&onward_mid) {
        let up = &o["references"][0]["spanID"];
        assert!(
            calls.iter().any(|c| &c["spanID"] == up),
            "an onward call under no call of the client's: {o}"
        );
    }
    rt.kill_all("test over");
}

/// A traced component calls a typed relay, which is not traced and calls
/// on to the store for each call it serves: the relay's calls are spans
/// under the client's typed calls; an untraced client's add none.
#[test]
fn typed_calls_onward_from_a_served_call_are_spans_under_it() {
    use crate::components::component;
    let dir = tempfile::tempdir().unwrap();
    let jaeger = Jaeger::start(dir.path());
    let rt = jaeger.runtime("warden-typed-onward");
    let trace = "8cf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let ctx = warden::telemetry::Context::from_traceparent(&format!("00-{trace}-{parent}-01"));
    let mut kv = spec(dir.path(), "kv", component(guests::KV_SERVER));
    kv.serves = vec!["warden-test:kv/store".into()];
    kv.ipc.provides = vec!["kv".into()];
    rt.spawn(&kv).unwrap();
    let mut relay = spec(dir.path(), "relay", component(guests::KV_RELAY));
    relay.serves = vec!["warden-test:kv/front".into()];
    relay.ipc.provides = vec!["front".into()];
    relay.ipc.uses = vec!["kv".into()];
    relay.binds = vec![("warden-test:kv/store".into(), "kv".into())];
    rt.spawn(&relay).unwrap();
    let mut client = spec(dir.path(), "client", component(guests::KV_FRONT_CLIENT));
    client.ipc.uses = vec!["front".into()];
    client.binds = vec![("warden-test:kv/front".into(), "front".into())];
    let mut quiet = client.clone();
    quiet.name = "untraced".into();
    client.trace = ctx;
    for c in [&client, &quiet] {
        let r = run_one(&rt, c, Duration::from_secs(60));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    // 3 calls, 3 onward, the client's task span.
    let spans = spans_of(&jaeger, trace, 7);
    let named = |name: &str| -> Vec<&serde_json::Value> {
        spans
            .iter()
            .filter(|s| s["operationName"] == name)
            .collect()
    };
    let calls = named("typed call warden-test:kv/front@0.1.0.set");
    let onward = named("typed call warden-test:kv/store@0.1.0.set");
    assert_eq!((calls.len(), onward.len()), (3, 3), "{spans:?}");
    assert!(calls.iter().all(|c| c["references"][0]["spanID"] == parent));
    for o in &onward {
        let up = &o["references"][0]["spanID"];
        assert!(
            calls.iter().any(|c| &c["spanID"] == up),
            "an onward call under no call of the client's: {o}"
        );
        assert_eq!(tag(o, "warden.service.task"), "kv");
    }
    rt.kill_all("test over");
}

impl Jaeger {
    /// A runtime of two workers sending its spans here as `service`.
    fn runtime(&self, service: &str) -> warden::Runtime {
        warden::Runtime::new(warden::RuntimeConfig {
            workers: 2,
            otlp: Some((format!("http://127.0.0.1:{}", self.otlp), service.into())),
            cache_dir: Some(crate::components::cache_dir()),
            ..warden::RuntimeConfig::default()
        })
        .unwrap()
    }
}

/// Span `span`'s tag `key`, as Jaeger's query API gives it.
fn tag(span: &serde_json::Value, key: &str) -> serde_json::Value {
    span["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["key"] == key)
        .map(|t| t["value"].clone())
        .unwrap_or_else(|| panic!("no tag {key} in {span}"))
}

//! Component servlets: a route's `service` naming a long-lived
//! `wasi:http/proxy` component task (`serves =
//! ["wasi:http/incoming-handler"]`, the Python handler of
//! `guests/components/py_http.py`), which keeps its state from one
//! request to the next; its faults are status codes, and one client's
//! leaving harms no other.

use crate::components::{cache_dir, component};
use crate::http::{curl, get, metrics, Reply};
use crate::util::{guests, manifest, warden, Launch, Served};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// A system whose route `/app/*` is served by the component servlet
/// `app`, restarted whenever it ends; `serves` is its `serves` key's line
/// (a `wasi:http/proxy` component given a `provides` name is a servlet
/// without it too).
fn site(memory: &str, serves: &str) -> String {
    format!(
        r#"
[[task]]
name = "app"
module = "{py}"
{serves}
provides = ["app"]
memory_limit = "{memory}"
restart = "permanent"

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/app/*"
service = "app"
timeout = "3s"
max_body = "1MiB"
max_response = "32MiB"
"#,
        py = component(guests::PY_HTTP),
    )
}

/// The `serves` line naming the interface.
const SERVES: &str = r#"serves = ["wasi:http/incoming-handler"]"#;

/// Starts `text` with the component tests' code cache, and waits until
/// the servlet answers.
fn start(dir: &std::path::Path, text: &str) -> Served {
    let web = Launch::new(&manifest(dir, text))
        .with(|c| {
            c.env("WARDEN_CACHE_DIR", cache_dir());
        })
        .start();
    wait_for(&web, |r| r.status == 200);
    web
}

/// Asks `/app/count` until `ok` holds of the answer (the servlet is
/// registered, or back), for at most a minute.
fn wait_for(web: &Served, ok: impl Fn(&Reply) -> bool) -> Reply {
    let t = Instant::now();
    loop {
        let r = get(web, "/app/count");
        if ok(&r) {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "{r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `N` of a `/app/count` answer.
fn count(r: &Reply) -> u64 {
    assert_eq!(r.status, 200, "{r:?}");
    let n = r
        .body
        .strip_prefix("count ")
        .unwrap_or_else(|| panic!("{r:?}"));
    n.parse().unwrap()
}

#[test]
fn a_component_servlet_keeps_its_state_from_one_request_to_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let web = start(dir.path(), &site("64MiB", ""));
    let first = count(&get(&web, "/app/count"));
    assert_eq!(count(&get(&web, "/app/count")), first + 1);
    // Forty at once: each is one call, so each sees its own count.
    let mut seen: Vec<u64> = std::thread::scope(|s| {
        let asks: Vec<_> = (0..40)
            .map(|_| s.spawn(|| count(&get(&web, "/app/count"))))
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    seen.sort();
    let want: Vec<u64> = (first + 2..first + 42).collect();
    assert_eq!(seen, want);
    // A body longer than what is read before the call streams in, and
    // an answer longer than the first window streams out.
    let body = "b".repeat(300_000);
    let file = dir.path().join("body");
    std::fs::write(&file, &body).unwrap();
    let r = curl(
        &format!("{}/app/echo", web.base()),
        &["--data-binary", &format!("@{}", file.display())],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, format!("python POST /app/echo 300000 {body}"));
    let r = get(&web, "/app/big?n=600000");
    assert_eq!((r.status, r.body.len()), (200, 600_000));
    // Operators see the calls, per interface and function.
    let m = metrics(&web);
    let calls = m
        .lines()
        .find(|l| {
            l.starts_with(
                "warden_typed_calls_total{task=\"app\",interface=\"wasi:http/incoming-handler@",
            ) && l.contains("function=\"handle\"")
        })
        .unwrap_or_else(|| panic!("{m}"));
    let n: f64 = calls.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 44.0, "{calls}");
}

#[test]
fn a_component_servlet_s_faults_are_answers_and_a_client_leaving_harms_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let web = start(dir.path(), &site("128MiB", SERVES));
    let r = get(&web, "/app/none");
    assert_eq!(r.status, 500, "{r:?}");
    assert!(r.body.contains("without setting a response"), "{r:?}");
    // Past the route's timeout: 504, and the handler, left to finish on
    // its own, finds its response still taken: the servlet lives on.
    let before = count(&get(&web, "/app/count"));
    let r = get(&web, "/app/sleep?ms=4500");
    assert_eq!(r.status, 504, "{r:?}");
    assert_eq!(count(&get(&web, "/app/count")), before + 1);
    // A client that leaves in the middle of a long answer.
    leave_early(&web, "/app/big?n=12000000");
    assert_eq!(count(&get(&web, "/app/count")), before + 2);
    // A trap ends the servlet (502, naming it); restarted, it starts
    // afresh.
    let r = get(&web, "/app/trap");
    assert_eq!(r.status, 502, "{r:?}");
    assert!(
        r.body.contains("servlet \"app\"") && r.body.contains("trapped"),
        "{r:?}"
    );
    let r = wait_for(&web, |r| r.status == 200);
    assert_eq!(count(&r), 1, "a restarted servlet's state is fresh");
}

/// Asks for `path` on a connection that reads little (a small receive
/// buffer), takes the head and the first bytes of the body, and closes.
fn leave_early(web: &Served, path: &str) {
    let addr: std::net::SocketAddr = web.base().trim_start_matches("http://").parse().unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: std::net::TcpStream = socket.into();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") || got.len() < 16384 {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn a_component_servlet_is_checked_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let path = manifest(dir.path(), text);
        let out = warden().arg("check").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    // Passive: its handler writes while the web server reads.
    let passive = site("64MiB", SERVES).replace("restart = \"permanent\"", "passive = true");
    let (code, err) = check(&passive);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("a component servlet is an active task"),
        "{err}"
    );
    // A command component serves no HTTP.
    let command =
        site("64MiB", SERVES).replace(component(guests::PY_HTTP), component(guests::PY_COMMAND));
    let (code, err) = check(&command);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("wasi:http/incoming-handler"), "{err}");
}

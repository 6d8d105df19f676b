//! HTTP components: `[[http.route]] component = …` and `warden serve`,
//! a fresh `wasi:http/proxy` component per request (Python from
//! componentize-py, JavaScript from componentize-js, C from clang and
//! wasm-tools), driven by curl.

use crate::components::{cache_dir, component};
use crate::http::{curl, get, metrics};
use crate::util::{guests, manifest, warden, Launch, Served};
use std::io::{Read, Write};
use std::process::Command;

/// A system with a Python and a JavaScript component route; `py_keys`
/// are more keys of the Python route.
fn site(py_keys: &str) -> String {
    format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/py/*"
component = "{py}"
memory_limit = "64MiB"
cpu_limit = "500ms"
timeout = "30s"
max_body = "64KiB"
max_response = "1MiB"
{py_keys}

[[http.route]]
path = "/js/*"
component = "{js}"
memory_limit = "64MiB"
timeout = "30s"

[[http.route]]
path = "/c/*"
component = "{c}"
memory_limit = "1MiB"
"#,
        py = component(guests::PY_HTTP),
        js = component(guests::JS_HTTP),
        c = component(guests::C_HTTP),
    )
}

/// Starts `text` with the component tests' code cache.
fn start(dir: &std::path::Path, text: &str) -> Served {
    Launch::new(&manifest(dir, text))
        .with(|c| {
            c.env("WARDEN_CACHE_DIR", cache_dir());
        })
        .start()
}

#[test]
fn python_and_javascript_handlers_answer_through_their_routes() {
    let dir = tempfile::tempdir().unwrap();
    let web = start(dir.path(), &site(""));
    let r = curl(&format!("{}/py/echo?x=1", web.base()), &["-d", "some body"]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "python POST /py/echo?x=1 9 some body");
    assert!(r.head.contains("content-type: text/plain"), "{r:?}");
    let r = get(&web, "/js/anything");
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "javascript /js/anything 0\n")
    );
    // Operators see the routes, of kind "component".
    let ps = warden()
        .args(["ps", "--control", web.control()])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        ps.lines()
            .any(|l| l.starts_with("/py/* ") && l.contains(" component ")),
        "{ps}"
    );
}

#[test]
fn five_hundred_requests_at_once_each_get_their_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let web = start(dir.path(), &site("max_concurrent = 32"));
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--max-time",
        "120",
        "--parallel",
        "--parallel-immediate",
    ])
    .args(["--parallel-max", "500", "-d", "body"]);
    for i in 0..500 {
        let (route, name) = if i % 2 == 0 {
            ("py/echo", "py")
        } else {
            ("js/x", "js")
        };
        cmd.arg("-o")
            .arg(dir.path().join(format!("{name}-{i}")))
            .arg(format!("{}/{route}?i={i}", web.base()));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..500 {
        let (name, want) = match i % 2 {
            0 => ("py", format!("python POST /py/echo?i={i} 4 body")),
            _ => ("js", format!("javascript /js/x?i={i} 4\n")),
        };
        let got = std::fs::read_to_string(dir.path().join(format!("{name}-{i}"))).unwrap();
        assert_eq!(got, want);
    }
    let m = metrics(&web);
    for route in ["/py/*", "/js/*"] {
        let line = format!("warden_http_requests_total{{route=\"{route}\",code=\"200\"}} 250");
        assert!(m.contains(&line), "{line} missing from\n{m}");
    }
}

#[test]
fn faults_are_status_codes_and_the_route_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let slow = format!(
        "\n[[http.route]]\npath = \"/slow/*\"\ncomponent = \"{}\"\ntimeout = \"1s\"\n\
         memory_limit = \"64MiB\"\n",
        component(guests::PY_HTTP)
    );
    let tiny = format!(
        "\n[[http.route]]\npath = \"/tiny/*\"\ncomponent = \"{}\"\nmemory_limit = \"4MiB\"\n",
        component(guests::PY_HTTP)
    );
    let web = start(dir.path(), &format!("{}{slow}{tiny}", site("")));
    for (path, status, says) in [
        ("/py/trap", 500, "handler failed"),
        ("/py/none", 500, "without setting a response"),
        ("/py/spin", 503, "cpu limit exceeded"),
        ("/slow/spin", 504, "timeout"),
        ("/tiny/echo", 500, "cannot start"),
    ] {
        let r = get(&web, path);
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert!(r.body.contains(says), "{path}: {r:?}");
    }
    // A body over `max_response`: a 502 while the head is not out yet,
    // else the answer cut short, never a complete one.
    let url = format!("{}/py/big?n=2000000", web.base());
    let (code, got, ok) = crate::http_streamed::download(&url, &[]);
    assert!(
        code == "502" || (!ok && got <= 1_048_576 && code == "200"),
        "over max_response: {code} {got} {ok}"
    );
    let big = "x".repeat(100_000);
    let r = curl(&format!("{}/py/echo", web.base()), &["--data-binary", &big]);
    assert_eq!(r.status, 413, "{r:?}");
    let r = get(&web, "/py/big?n=1000000");
    assert_eq!((r.status, r.body.len()), (200, 1_000_000));
    let r = get(&web, "/py/echo");
    assert_eq!((r.status, r.body.as_str()), (200, "python GET /py/echo 0 "));
}

/// A one-answer HTTP server on loopback, on a thread of its own: its
/// port. Every request gets `200 upstream`.
fn upstream() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nupstream");
        }
    });
    port
}

#[test]
fn outgoing_requests_reach_only_what_the_route_grants() {
    let dir = tempfile::tempdir().unwrap();
    let (granted, other) = (upstream(), upstream());
    let web = start(
        dir.path(),
        &site(&format!("connect = [\"127.0.0.1:{granted}\"]")),
    );
    let fetch =
        |port: u16, host: &str| get(&web, &format!("/py/fetch?url=http://{host}:{port}/x")).body;
    assert_eq!(fetch(granted, "127.0.0.1"), "fetched 200 upstream");
    for (port, host) in [(other, "127.0.0.1"), (granted, "127.0.0.2")] {
        let body = fetch(port, host);
        assert!(body.contains("HttpRequestDenied"), "{host}:{port}: {body}");
    }
}

/// `warden serve` with CPU and memory limits: a request within them is
/// answered, one past either is killed at the limit the flags named
/// (without them, the spinning one would run to the 30 s timeout and the
/// big one would allocate its 100 MB and fail only as too large a
/// response).
#[test]
fn warden_serve_runs_one_handler_with_its_limits() {
    let mut child = crate::util::Reaped(
        warden()
            .args(["serve", component(guests::PY_HTTP), "--addr", "127.0.0.1:0"])
            .args(["--cpu-limit", "300ms", "--memory-limit", "64MiB"])
            .args(["--on-memory-limit", "kill"])
            .env("WARDEN_CACHE_DIR", cache_dir())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let base = lines
        .find_map(|l| {
            Some(
                l.ok()?
                    .strip_prefix("warden: serving ")?
                    .trim_end_matches('/')
                    .to_string(),
            )
        })
        .expect("a serving line");
    let r = curl(&format!("{base}/echo"), &["-d", "hi"]);
    assert_eq!((r.status, r.body.as_str()), (200, "python POST /echo 2 hi"));
    let r = curl(&format!("{base}/big?n=1000000"), &[]);
    assert_eq!((r.status, r.body.len()), (200, 1_000_000));
    let r = curl(&format!("{base}/spin"), &[]);
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("cpu limit exceeded: used "), "{r:?}");
    assert!(r.body.contains(" of 300 ms"), "{r:?}");
    let r = curl(&format!("{base}/big?n=100000000"), &[]);
    assert_eq!(r.status, 500, "{r:?}");
    assert!(r.body.contains("memory limit exceeded"), "{r:?}");
    assert!(r.body.contains(" of 64.0 MiB"), "{r:?}");
    assert_eq!(curl(&format!("{base}/elsewhere"), &[]).status, 404);
}

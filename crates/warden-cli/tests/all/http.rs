//! The web server: `[[http]]` routes answered by per-request tasks (WAGI)
//! and by servlets, driven by a real HTTP client (curl) against a running
//! `warden run`.

use crate::util::{http1_body, manifest, warden, Launch, Served};
use std::process::Command;
use std::time::{Duration, Instant};
use warden_test_guests as guests;

/// Serves `text` (a manifest written into `dir`) without the code cache;
/// ready once its servers and control API are.
pub fn start_web(dir: &std::path::Path, text: &str) -> Served {
    Launch::new(&manifest(dir, text))
        .args(["--no-cache"])
        .start()
}

/// A response as curl saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// One request with curl; `args` come before the URL.
pub fn curl(url: &str, args: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "60"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| {
        panic!(
            "no answer from {url}: {text:?} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

pub fn get(web: &Served, path: &str) -> Reply {
    curl(&format!("{}{path}", web.base()), &[])
}

/// The server's `/metrics` text.
pub fn metrics(web: &Served) -> String {
    curl(&format!("http://{}/metrics", web.control()), &[]).body
}

/// `/api/routes` as JSON.
pub fn routes(web: &Served) -> serde_json::Value {
    serde_json::from_str(&curl(&format!("http://{}/api/routes", web.control()), &[]).body).unwrap()
}

pub fn site(dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/hello"
module = "{wagi}"
memory_limit = "8MiB"
cpu_limit = "200ms"
timeout = "2s"
max_body = "1KiB"
max_response = "64KiB"
{extra}
"#,
        wagi = guests::WAGI,
    )
    .replace("DIR", &dir.display().to_string())
}

/// One more per-request route at `path` to the WAGI guest, with its own
/// `timeout`.
fn wagi_route(path: &str, timeout: &str) -> String {
    format!(
        "\n[[http.route]]\npath = \"{path}\"\nmodule = \"{}\"\ntimeout = \"{timeout}\"\n",
        guests::WAGI
    )
}

#[test]
fn a_per_request_task_gets_the_request_and_writes_the_response() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(dir.path(), &site(dir.path(), ""));
    let r = curl(
        &format!("{}/hello?x=1", web.base()),
        &["-H", "X-Test: yes", "--data-binary", "the body"],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.head.to_ascii_lowercase().contains("x-handler: wagi"),
        "{r:?}"
    );
    let port = web.base().rsplit(':').next().unwrap();
    assert_eq!(
        r.body,
        format!(
            "method=POST path=/hello query=x=1 test=yes server=127.0.0.1:{port} length=8\nthe body"
        )
    );
    let r = get(&web, "/hello?status");
    assert_eq!((r.status, r.body.as_str()), (404, "nothing here\n"));
    // A fresh instance every time: nothing survives a request.
    for _ in 0..3 {
        assert_eq!(get(&web, "/hello?fresh").body, "seen 1\n");
    }
    assert_eq!(get(&web, "/nowhere").status, 404);
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(dir.path(), &site(dir.path(), ""));
    let url = format!("{}/hello?fresh", web.base());
    let out = Command::new("curl")
        .args(["-sS", "-w", "%{http_code} %{num_connects}\n"])
        .args([
            "-o",
            "/dev/null",
            &url,
            "-o",
            "/dev/null",
            &url,
            "-o",
            "/dev/null",
            &url,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text, "200 1\n200 0\n200 0\n",
        "one connection for three requests"
    );
}

#[test]
fn faults_become_http_answers_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let extra = wagi_route("/slow", "300ms");
    let web = start_web(dir.path(), &site(dir.path(), &extra));
    for (query, status) in [
        ("trap", 500),
        ("exit3", 500),
        ("hog", 500),
        ("bad", 502),
        ("spin", 503),
    ] {
        let r = get(&web, &format!("/hello?{query}"));
        assert_eq!(r.status, status, "{query}: {r:?}");
    }
    // An answer over max_response (64 KiB): a 502 if the handler ended
    // within its first moments (answered whole); on a loaded machine it
    // may not have, and then its answer has begun to stream (200) and is
    // cut off at the limit.
    let r = get(&web, "/hello?big=100000");
    let cut = r.status == 200 && r.body.len() <= 64 << 10;
    assert!(
        r.status == 502 || cut,
        "big=100000: {} {}",
        r.head,
        r.body.len()
    );
    let r = get(&web, "/slow?sleep");
    assert_eq!(r.status, 504, "{r:?}");
    // Bodies over max_body: 413 before any task starts, declared or not.
    let big = "x".repeat(2048);
    assert_eq!(
        curl(&format!("{}/hello", web.base()), &["--data-binary", &big]).status,
        413
    );
    let chunked = curl(
        &format!("{}/hello", web.base()),
        &["-H", "Transfer-Encoding: chunked", "--data-binary", &big],
    );
    assert_eq!(chunked.status, 413);
    // Every handler is gone, and the route still answers.
    assert_eq!(get(&web, "/hello?fresh").body, "seen 1\n");
    let t = Instant::now();
    loop {
        let r = routes(&web);
        let tasks: i64 = r
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["tasks"].as_i64().unwrap())
            .sum();
        if tasks == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "handler tasks left: {r}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = metrics(&web);
    for (code, n) in [(500, 3), (502, 2), (503, 1), (413, 2)] {
        let line = format!("warden_http_requests_total{{route=\"/hello\",code=\"{code}\"}} {n}");
        assert!(m.contains(&line), "{line} missing from\n{m}");
    }
    assert!(
        m.contains("warden_http_requests_total{route=\"/slow\",code=\"504\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("warden_http_request_duration_seconds_bucket{route=\"/hello\",le=\"+Inf\"} 9"),
        "{m}"
    );
    assert!(
        m.contains("warden_http_in_flight{route=\"/hello\"} 0"),
        "{m}"
    );
    // Every per-request task's creation and teardown is timed (the
    // two 413s started none).
    for phase in ["create", "teardown"] {
        let count = |suffix: &str| -> f64 {
            let key = format!("warden_task_{phase}_seconds_{suffix} ");
            m.lines()
                .find_map(|l| l.strip_prefix(&key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{key} missing from\n{m}"))
        };
        assert!(count("count") >= 7.0 && count("sum") > 0.0, "{m}");
    }
}

#[test]
fn two_hundred_requests_at_once_are_all_answered() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(
        dir.path(),
        &site(dir.path(), "").replace("timeout = \"2s\"", "timeout = \"60s\"\nmax_concurrent = 16"),
    );
    let codes = parallel(&web, "/hello?fresh", 200, 200);
    let ok = codes.iter().filter(|&&c| c == 200).count();
    assert_eq!(ok, 200, "{codes:?}");
    let r = &routes(&web)[0];
    assert_eq!(r["requests"], 200, "{r}");
    assert_eq!(r["codes"]["200"], 200, "{r}");
    // Latencies in milliseconds to the microsecond, never `8.649000000000001`.
    for q in ["p50_ms", "p99_ms"] {
        let text = r[q].to_string();
        let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(r[q].is_number() && decimals <= 3, "{q}: {text}");
    }
    // Operators see the route in `warden ps`.
    let ps = warden()
        .args(["ps", "--control", web.control()])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let row = ps
        .lines()
        .find(|l| l.starts_with("/hello "))
        .unwrap_or_else(|| panic!("{ps}"));
    assert!(
        row.contains(" module ") && row.ends_with("200:200"),
        "{row}"
    );
}

#[test]
fn a_servlet_keeps_state_and_its_route_recovers_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[[task]]
name = "keeper"
module = "{keeper}"
args = ["counter"]
modules = {{ child = "{servlet}" }}
provides = ["counter"]
memory_limit = "64MiB"
stdout = "DIR/keeper.out"

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/count/*"
service = "counter"
timeout = "500ms"

[[http.route]]
path = "/none"
service = "nobody"
"#,
        keeper = guests::KEEPER,
        servlet = guests::SERVLET,
    )
    .replace("DIR", &dir.path().display().to_string());
    let web = start_web(dir.path(), &text);
    crate::util::wait_for_output(dir.path(), "keeper", "started 1");
    for n in 1..=3 {
        let r = get(&web, "/count/x");
        assert_eq!(
            (r.status, r.body.clone()),
            (200, format!("count {n}\n")),
            "{r:?}"
        );
    }
    let r = curl(
        &format!("{}/count/head?q=1", web.base()),
        &["-H", "X-Test: a", "--data-binary", "B"],
    );
    assert!(
        r.body.starts_with("GET /count/head?q=1 HTTP/1.1\r\n")
            || r.body.starts_with("POST /count/head?q=1 HTTP/1.1\r\n"),
        "{r:?}"
    );
    assert!(
        r.body.contains("\r\nx-test: a\r\n") && r.body.ends_with("\r\n\r\nB"),
        "{r:?}"
    );
    assert_eq!(get(&web, "/count/bad").status, 502);
    assert_eq!(get(&web, "/none").status, 503);
    // The servlet dies holding a call: 502; its keeper starts it again,
    // and the route answers again (with fresh state).
    assert_eq!(get(&web, "/count/crash").status, 502);
    crate::util::wait_for_output(dir.path(), "keeper", "started 2");
    let t = Instant::now();
    loop {
        let r = get(&web, "/count/x");
        if r.status == 200 {
            assert_eq!(r.body, "count 1\n");
            break;
        }
        assert_eq!(r.status, 503, "{r:?}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the servlet never came back"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A servlet slower than the route's timeout: 504, and it lives on.
    assert_eq!(get(&web, "/count/slow").status, 504);
    let t = Instant::now();
    while get(&web, "/count/x").status != 200 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}",
            web.stderr.lock().unwrap()
        );
    }
}

/// Sends `stream` the head of a request whose 100-byte body will never
/// all come, and once the server has read the head (its "100 Continue"
/// says so: the request is waiting for its body), the body's first bytes.
fn expect_continue(stream: &mut std::net::TcpStream) {
    use std::io::{Read, Write};
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(
            b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\
              Expect: 100-continue\r\n\r\n",
        )
        .unwrap();
    let continued = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut got = vec![0u8; continued.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(got, continued, "{}", String::from_utf8_lossy(&got));
    stream.write_all(b"abc").unwrap();
}

#[test]
fn slow_clients_hold_a_connection_not_a_handler() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(dir.path(), &site(dir.path(), ""));
    let addr = web.base().trim_start_matches("http://").to_string();
    // A head that never ends, and a body that never comes.
    let mut slow_head = std::net::TcpStream::connect(&addr).unwrap();
    slow_head
        .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut slow_body = std::net::TcpStream::connect(&addr).unwrap();
    expect_continue(&mut slow_body);
    // A head far over the limit.
    let mut huge = std::net::TcpStream::connect(&addr).unwrap();
    let _ = huge.write_all(
        format!(
            "GET /hello HTTP/1.1\r\nX-Big: {}\r\n\r\n",
            "y".repeat(64 << 10)
        )
        .as_bytes(),
    );
    let mut answer = String::new();
    huge.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = huge.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    // Meanwhile the route answers, and no handler task was started for them.
    assert_eq!(get(&web, "/hello?fresh").status, 200);
    let r = &routes(&web)[0];
    assert_eq!(
        (r["requests"].as_u64(), r["tasks"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    // The server gives up on the slow head within its head timeout.
    slow_head
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = slow_head.read_to_end(&mut rest);
    let _ = slow_body;
}

/// A server full of connections that send no request, or no whole body
/// (slowloris), takes a new client at once: a connection waiting for a
/// request gives way first, then one waiting for a body; one with a
/// request at work never does.
#[test]
fn a_full_server_makes_room_for_a_new_client() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let extra = wagi_route("/hold", "3s");
    let text = site(dir.path(), &extra).replace(
        "listen = \"127.0.0.1:0\"",
        "listen = \"127.0.0.1:0\"\nmax_connections = 3",
    );
    let web = start_web(dir.path(), &text);
    let addr = web.base().trim_start_matches("http://").to_string();
    let connect = |first: &[u8]| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(first).unwrap();
        s
    };
    let read = |s: &mut std::net::TcpStream| {
        let mut text = Vec::new();
        let _ = s.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    };
    // A request at work (it waits for its timeout): wait until it is.
    let hold = |n| {
        let s = connect(b"GET /hold?sleep HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let t = Instant::now();
        while routes(&web)[1]["in_flight"].as_i64() != Some(n) {
            assert!(t.elapsed() < Duration::from_secs(20), "{}", routes(&web));
            std::thread::sleep(Duration::from_millis(10));
        }
        s
    };
    let mut busy = hold(1);
    // A body that does not end, then a head that does not. (Until the
    // server has read the body's head, that connection would look like
    // one with no request yet, and give way first.)
    let mut slow_body = connect(b"");
    expect_continue(&mut slow_body);
    let mut slow_head = connect(b"GET /hello?fresh HTTP/1.1\r\n");
    // A new client is answered at once, not refused: the head gave way
    // (well before the 5 s head timeout would have closed it).
    let t = Instant::now();
    assert_eq!(get(&web, "/hello?fresh").status, 200);
    assert_eq!(read(&mut slow_head), "");
    // Before the head timeout (5 s) could have been what closed it.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Full again, with a second request at work: now the body gives way
    // (well before the 10 s body timeout would have closed it).
    let mut busy2 = hold(2);
    assert_eq!(get(&web, "/hello?fresh").status, 200);
    // Closed without a word: the body timeout (10 s) would have
    // answered 408.
    assert_eq!(read(&mut slow_body), "");
    // The requests at work get their answers.
    for s in [&mut busy, &mut busy2] {
        let answer = read(s);
        assert!(answer.starts_with("HTTP/1.1 504"), "{answer:?}");
    }
}

/// A client that reads its answer slowly is not cut off when a new client
/// needs its connection: it gives way only when no connection is idle,
/// and then finishes the answer first.
#[test]
fn a_slow_reader_giving_way_still_gets_its_whole_answer() {
    use std::io::{Read, Write};
    const SIZE: usize = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let extra = wagi_route("/big", "30s") + "max_response = \"32MiB\"\n";
    let text = site(dir.path(), &extra).replace(
        "listen = \"127.0.0.1:0\"",
        "listen = \"127.0.0.1:0\"\nmax_connections = 1",
    );
    let web = start_web(dir.path(), &text);
    let addr: std::net::SocketAddr = web.base().trim_start_matches("http://").parse().unwrap();
    // A small receive window: the answer stays mostly in the server.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut slow: std::net::TcpStream = socket.into();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(slow, "GET /big?big={SIZE} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // Its answer is on its way: the head and the body's first byte.
    let mut got = Vec::new();
    let mut byte = [0u8];
    while !got.ends_with(b"\r\n\r\n") {
        slow.read_exact(&mut byte).unwrap();
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut body = Vec::new();
    while !body.ends_with(b"x") {
        slow.read_exact(&mut byte).unwrap();
        body.push(byte[0]);
    }
    // A new client gets the server's one connection...
    assert_eq!(get(&web, "/hello?fresh").status, 200);
    // ...and the reader, back well after the 200 ms a connection giving
    // way has to close, still gets the rest, then the end of the stream.
    std::thread::sleep(Duration::from_secs(1));
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    body.extend_from_slice(&rest);
    let (body, whole) = http1_body(&head, &body);
    assert!(whole && body.len() == SIZE, "the answer was cut off");
    assert!(body.iter().all(|&b| b == b'x'));
}

/// A service route to a passive service: each request runs the handler on
/// the web server's thread, its state kept; a trap is a 502, and the
/// route then answers 503 (the service is gone) instead of hanging.
#[test]
fn a_service_route_to_a_passive_service() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(
        dir.path(),
        &counter_site(guests::PASSIVE_SERVLET, "passive = true", "5s"),
    );
    for n in 1..=3 {
        let r = get(&web, "/count/x");
        assert_eq!(
            (r.status, r.body.clone()),
            (200, format!("count {n}\n")),
            "{r:?}"
        );
    }
    let t = Instant::now();
    assert_eq!(get(&web, "/count/crash").status, 502);
    assert_eq!(get(&web, "/count/x").status, 503);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "answered before the route's 5 s timeout"
    );
}

/// HTTP/2 with prior knowledge (cleartext): a request answered as its
/// HTTP/1.1 twin is, the host taken from the URI; a hundred requests at
/// once on one connection (hyper's HTTP/2 client: curl 7.88 cannot reuse
/// a prior-knowledge connection); a head over the limit refused, the
/// server unharmed.
#[test]
fn http2_with_prior_knowledge() {
    use http_body_util::BodyExt;
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(
        dir.path(),
        &site(dir.path(), "").replace("timeout = \"2s\"", "timeout = \"60s\"\nmax_concurrent = 16"),
    );
    let h2 = "--http2-prior-knowledge";
    let r = curl(
        &format!("{}/hello?x=1", web.base()),
        &[h2, "-H", "X-Test: yes", "--data-binary", "the body"],
    );
    assert!(r.head.starts_with("HTTP/2 200"), "{r:?}");
    let port = web.base().rsplit(':').next().unwrap();
    assert_eq!(
        r.body,
        format!(
            "method=POST path=/hello query=x=1 test=yes server=127.0.0.1:{port} length=8\nthe body"
        )
    );
    let addr = web.base().trim_start_matches("http://").to_string();
    let url = format!("{}/hello?fresh", web.base());
    let answers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (send, conn) = hyper::client::conn::http2::handshake(
                hyper_util::rt::TokioExecutor::new(),
                hyper_util::rt::TokioIo::new(stream),
            )
            .await
            .unwrap();
            tokio::spawn(conn);
            let requests: Vec<_> = (0..100)
                .map(|_| {
                    let mut send = send.clone();
                    let req = hyper::Request::get(&url)
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                        .unwrap();
                    tokio::spawn(async move {
                        let r = send.send_request(req).await.unwrap();
                        let status = r.status().as_u16();
                        let body = r.into_body().collect().await.unwrap().to_bytes();
                        (status, String::from_utf8_lossy(&body).into_owned())
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for r in requests {
                answers.push(r.await.unwrap());
            }
            answers
        });
    let ok = answers
        .iter()
        .filter(|(s, b)| *s == 200 && b == "seen 1\n")
        .count();
    assert_eq!(ok, 100, "{answers:?}");
    let big = format!("X-Big: {}", "y".repeat(40 << 10));
    let r = curl(&format!("{}/hello", web.base()), &[h2, "-H", &big]);
    assert_eq!(r.status, 431, "{r:?}");
    assert_eq!(curl(&format!("{}/hello", web.base()), &[h2]).status, 200);
    let r = &routes(&web)[0];
    assert_eq!(r["codes"]["200"], 102, "{r}");
}

/// `n` requests for `path`, at most `at_once` of them at a time (one
/// curl, each transfer on a connection of its own or reused); their
/// status codes.
fn parallel(web: &Served, path: &str, n: usize, at_once: usize) -> Vec<u16> {
    let url = format!("{}{path}", web.base());
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--max-time",
        "60",
        "--parallel",
        "--parallel-immediate",
        "--parallel-max",
    ])
    .arg(at_once.to_string());
    for _ in 0..n {
        cmd.args(["-o", "/dev/null", "-w", "%{http_code}\n", &url]);
    }
    let out = cmd.output().unwrap();
    let codes: Vec<u16> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(codes.len(), n, "{}", String::from_utf8_lossy(&out.stderr));
    codes
}

/// `warden_host_polls_total`: slices the web server's threads ran.
fn host_polls(web: &Served) -> f64 {
    let m = metrics(web);
    let line = m
        .lines()
        .find(|l| l.starts_with("warden_host_polls_total "))
        .unwrap_or_else(|| panic!("{m}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A servlet task from `module` (with the task keys `keys`) providing
/// "counter", and a route `/count/*` to it with `timeout`.
pub fn counter_site(module: &str, keys: &str, timeout: &str) -> String {
    format!(
        r#"
[[task]]
name = "counter"
module = "{module}"
provides = ["counter"]
{keys}

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/count/*"
service = "counter"
timeout = "{timeout}"
"#
    )
}

/// Waits until the servlet answers `/count/x` (it has registered).
pub fn wait_for_servlet(web: &Served) {
    let t = Instant::now();
    while get(web, "/count/x").status != 200 {
        assert!(t.elapsed() < Duration::from_secs(20), "no servlet");
    }
}

/// Requests at once to a servlet: every one is answered, and counted
/// once. Under load (wrk, 16 connections) calls that find the servlet
/// waiting in `recv` run it on the web server's own threads (no worker
/// woken, no thread switch back), and all are still answered.
#[test]
fn concurrent_servlet_requests_run_on_the_servers_threads() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(dir.path(), &counter_site(guests::SERVLET, "", "20s"));
    wait_for_servlet(&web);
    let codes = parallel(&web, "/count/x", 400, 8);
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    assert_eq!(get(&web, "/count/x").body, "count 402\n");
    let out = Command::new("wrk")
        .args(["-t2", "-c16", "-d1s", &format!("{}/count/x", web.base())])
        .output()
        .expect("wrk is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("requests in"),
        "{text}"
    );
    assert!(
        !text.contains("Non-2xx") && !text.contains("Socket errors"),
        "{text}"
    );
    assert!(host_polls(&web) > 0.0, "{}", metrics(&web));
}

/// A servlet kept busy by requests at once (each spins 2 ms of wall
/// time; it runs on workers, or on the web server's thread when a
/// request finds it waiting while a worker idles) is held to its CPU
/// limit of 100 ms: it dies after
/// about 50 requests (more on a loaded machine, where 2 ms of wall time
/// is less CPU), not after all 400, and the route then says nobody
/// serves it.
#[test]
fn a_busy_servlet_is_held_to_its_cpu_limit() {
    let dir = tempfile::tempdir().unwrap();
    let web = start_web(
        dir.path(),
        &counter_site(guests::SERVLET, "cpu_limit = \"100ms\"", "20s"),
    );
    wait_for_servlet(&web);
    let codes = parallel(&web, "/count/burn", 400, 8);
    let ok = codes.iter().filter(|&&c| c == 200).count();
    assert!((1..=200).contains(&ok), "{ok} answered: {codes:?}");
    assert!(
        codes.iter().all(|&c| matches!(c, 200 | 502 | 503)),
        "{codes:?}"
    );
    assert_eq!(get(&web, "/count/x").status, 503, "the servlet is gone");
}

/// A route's `memory_guarantee` is reserved per request: one that does
/// not fit the machine's budget is answered 503 with the reason, one
/// that does is served, and nothing stays reserved after.
#[test]
fn a_route_reserves_its_guarantee_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[runtime]\nmemory_limit = '64MiB'\n{}\
         memory_guarantee = '4MiB'\n\
         [[http.route]]\npath = \"/big\"\nmodule = \"{}\"\n\
         memory_limit = '100MiB'\nmemory_guarantee = '100MiB'\n",
        site(dir.path(), ""),
        guests::WAGI
    );
    let web = start_web(dir.path(), &text);
    let r = get(&web, "/big");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.body
            .contains("memory guarantee of 100.0 MiB cannot be reserved"),
        "{r:?}"
    );
    for _ in 0..3 {
        assert_eq!(get(&web, "/hello?fresh").body, "seen 1\n");
    }
    let memory: serde_json::Value =
        serde_json::from_str(&curl(&format!("http://{}/api/memory", web.control()), &[]).body)
            .unwrap();
    assert_eq!(memory["guaranteed_bytes"], 0, "{memory}");
    assert!(
        metrics(&web).contains("warden_root_memory_guaranteed_bytes 0"),
        "the root's guarantees are in /metrics"
    );
}

//! What the web attacks share: a `warden run` serving `[[http]]` routes
//! with its control API, a bystander route that must keep answering, and
//! ways to see what the host holds (its tasks, its RSS).

use crate::util::{manifest, Launch, Served};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
pub use warden_test_guests as guests;

/// A served system under attack.
pub struct Site {
    pub served: Served,
    pub dir: tempfile::TempDir,
}

/// The bystander: a per-request route at `/hello` whose answer is known.
pub fn bystander_route() -> String {
    format!(
        "[[http.route]]\npath = \"/hello\"\nmodule = \"{}\"\nmemory_limit = \"8MiB\"\ntimeout = \"20s\"\n",
        guests::WAGI
    )
}

impl Site {
    /// Serves `text` (a manifest, `DIR` standing for its directory),
    /// without the code cache.
    pub fn start(text: &str) -> Site {
        Site::start_with(text, |launch| launch)
    }

    /// [`Site::start`], the `warden run` first given to `adjust`.
    pub fn start_with(text: &str, adjust: impl FnOnce(Launch) -> Launch) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let text = text.replace("DIR", &dir.path().display().to_string());
        let m = manifest(dir.path(), &text);
        let served = adjust(Launch::new(&m).args(["--no-cache"])).start();
        Site { served, dir }
    }

    /// `ADDR` of its first server.
    pub fn addr(&self) -> &str {
        self.served.addr()
    }

    /// Its control API's address.
    pub fn control(&self) -> &str {
        self.served.control()
    }

    /// The `warden run` process's id.
    pub fn pid(&self) -> String {
        self.served.pid().to_string()
    }

    /// Its resident set now and at its peak, bytes.
    pub fn rss(&self) -> (u64, u64) {
        let field = |f| crate::util::proc_status_bytes(&self.pid(), f).unwrap_or(0);
        (field("VmRSS"), field("VmHWM"))
    }

    /// Live tasks whose name starts with `prefix`.
    pub fn live(&self, prefix: &str) -> usize {
        let (status, body) = http1(self.control(), "GET", "/api/tasks", &[], b"");
        assert_eq!(status, 200, "{body}");
        let tasks: serde_json::Value = serde_json::from_str(&body).unwrap();
        tasks
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"].as_str().unwrap_or("").starts_with(prefix))
            .count()
    }

    /// Route `name`'s requests in its handlers now, and waiting for one.
    pub fn route_load(&self, name: &str) -> (i64, i64) {
        let (status, body) = http1(self.control(), "GET", "/api/routes", &[], b"");
        assert_eq!(status, 200, "{body}");
        let routes: serde_json::Value = serde_json::from_str(&body).unwrap();
        let r = routes
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no route {name}: {routes}"));
        (
            r["in_flight"].as_i64().unwrap(),
            r["queued"].as_i64().unwrap(),
        )
    }

    /// The bystander still gets its answer.
    pub fn bystander_answers(&self) {
        let (status, body) = http1(self.addr(), "POST", "/hello", &[("X-Test", "yes")], b"ping");
        assert_eq!(status, 200, "the bystander's request: {body}");
        assert!(body.ends_with("length=4\nping"), "{body}");
    }

    /// What task `name` wrote to `DIR/<name>.out` so far.
    pub fn out(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.out"))).unwrap_or_default()
    }

    /// Waits until `ok` holds, failing after `limit`.
    pub fn until(&self, what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
        let t = Instant::now();
        while !ok() {
            assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One HTTP/1.1 request on a fresh connection (closed after): its status
/// and body (0 and the error if there was no answer).
pub fn http1(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = match std::net::TcpStream::connect(addr) {
        Ok(s) => s,
        Err(e) => return (0, e.to_string()),
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut out = Vec::new();
    let sent = s.write_all(req.as_bytes()).and_then(|()| s.write_all(body));
    if let Err(e) = sent.and_then(|()| s.read_to_end(&mut out).map(|_| ())) {
        if out.is_empty() {
            return (0, e.to_string());
        }
    }
    let Some(at) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, String::from_utf8_lossy(&out).into_owned());
    };
    let head = String::from_utf8_lossy(&out[..at]).into_owned();
    let (body, _) = crate::util::http1_body(&head, &out[at + 4..]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Runs `f` with an HTTP/2 (prior knowledge) connection to `addr`, on a
/// Tokio runtime of its own.
pub fn with_h2<T>(
    addr: &str,
    f: impl AsyncFnOnce(hyper::client::conn::http2::SendRequest<Body>) -> T,
) -> T {
    let addr = addr.to_string();
    // Workers of its own, so that `f` may block (waiting on the host)
    // while the connection is driven.
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async move {
            let send = h2_connect(&addr).await;
            f(send).await
        })
}

/// A request body for the HTTP/2 client.
pub type Body = http_body_util::Full<bytes::Bytes>;

/// A new HTTP/2 connection to `addr` (driven by a spawned task).
pub async fn h2_connect(addr: &str) -> hyper::client::conn::http2::SendRequest<Body> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}

/// A request for `path` on `addr` with `body`.
pub fn request(addr: &str, method: &str, path: &str, body: Vec<u8>) -> hyper::Request<Body> {
    hyper::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(Body::new(body.into()))
        .unwrap()
}

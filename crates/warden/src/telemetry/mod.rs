//! OpenTelemetry traces: spans exported to a collector over OTLP/HTTP
//! (protobuf, `POST /v1/traces`; see `proto`), off unless
//! `[telemetry] otlp` names one.
//!
//! A span per HTTP request (its W3C `traceparent` taken from the client,
//! and given back in the answer) and a span per task run, a request's
//! handler task as a child of its request's span; each task span carries
//! what Warden measured of the run: CPU time, peak memory, bytes sent and
//! received. Spans wait in a bounded queue ([`QUEUE`]; past it they are
//! dropped and counted, never blocking a task or a request) and leave in
//! batches, every [`PERIOD`] or [`BATCH`] spans, from a thread of their
//! own, which gives up on a collector after [`POST_TIMEOUT`].

mod proto;

use serde_json::Value;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Spans waiting to leave, at most.
pub const QUEUE: usize = 8192;
/// Spans sent in one request, at most.
pub const BATCH: usize = 512;
/// How long a span waits for a batch, at most.
pub const PERIOD: Duration = Duration::from_secs(1);
/// How long a collector has to take a batch.
pub const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a span sits in a trace: its trace and its own id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// The trace, 16 random bytes.
    pub trace: [u8; 16],
    /// The span, 8 random bytes.
    pub span: [u8; 8],
}

impl Context {
    /// A new trace's root.
    pub fn root() -> Context {
        Context {
            trace: rand::random(),
            span: rand::random(),
        }
    }

    /// A new span of the same trace.
    pub fn child(&self) -> Context {
        Context {
            trace: self.trace,
            span: rand::random(),
        }
    }

    /// The context a W3C `traceparent` header names
    /// (`00-<32 hex>-<16 hex>-<2 hex>`), if it is one.
    pub fn from_traceparent(header: &str) -> Option<Context> {
        let mut parts = header.trim().split('-');
        let (version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
        let _flags = parts.next()?;
        if version.len() != 2 || version == "ff" {
            return None;
        }
        let trace: [u8; 16] = unhex(trace)?.try_into().ok()?;
        let span: [u8; 8] = unhex(span)?.try_into().ok()?;
        (trace != [0; 16] && span != [0; 8]).then_some(Context { trace, span })
    }

    /// The W3C `traceparent` header naming this span (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", hex(&self.trace), hex(&self.span))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Nanoseconds since 1970, now.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One finished span.
#[derive(Debug, Clone)]
pub struct Span {
    /// Where it sits.
    pub at: Context,
    /// Its parent span, if any.
    pub parent: Option<[u8; 8]>,
    /// What it is: `GET /hello`, `task worker`.
    pub name: String,
    /// 2: a server's (a request), 1: internal (a task run).
    pub kind: u8,
    /// Start and end, nanoseconds since 1970.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Its attributes.
    pub attributes: Vec<(&'static str, Value)>,
    /// Whether it ended in an error.
    pub error: bool,
}

/// What the export thread is sent.
enum Msg {
    Span(Span),
    /// Send what is queued now, then say so.
    Flush(SyncSender<()>),
}

/// The exporter of a runtime's spans. [`Exporter::flush`], and dropping
/// it, send what is queued, waiting for that at most [`POST_TIMEOUT`].
pub struct Exporter {
    queue: Option<SyncSender<Msg>>,
    dropped: AtomicU64,
    /// Closed when the export thread ends (in a mutex, for `Sync`).
    finished: std::sync::Mutex<Receiver<()>>,
}

impl Exporter {
    /// Starts exporting to the collector at `endpoint` (`http://HOST:PORT`,
    /// a path before `/v1/traces` allowed), as service `service`.
    pub fn start(endpoint: &str, service: &str) -> Result<Exporter, String> {
        let target = Target::parse(endpoint)?;
        let (queue, spans) = sync_channel(QUEUE);
        let service = service.to_string();
        let (ends, finished) = sync_channel(0);
        std::thread::Builder::new()
            .name("warden-otlp".into())
            .spawn(move || {
                export_loop(&spans, &target, &service);
                drop(ends);
            })
            .map_err(|e| format!("telemetry: {e}"))?;
        Ok(Exporter {
            queue: Some(queue),
            dropped: AtomicU64::new(0),
            finished: std::sync::Mutex::new(finished),
        })
    }

    /// Queues `span`; drops it (counted) if the queue is full.
    pub fn record(&self, span: Span) {
        let sent = self
            .queue
            .as_ref()
            .is_some_and(|q| q.try_send(Msg::Span(span)).is_ok());
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends every span queued so far; returns once the collector took
    /// them, or after [`POST_TIMEOUT`].
    pub fn flush(&self) {
        let (done, flushed) = sync_channel(1);
        if let Some(q) = &self.queue {
            if q.send(Msg::Flush(done)).is_ok() {
                let _ = flushed.recv_timeout(POST_TIMEOUT);
            }
        }
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Whether `endpoint` is an OTLP/HTTP endpoint Warden can send to.
pub fn check_endpoint(endpoint: &str) -> Result<(), String> {
    Target::parse(endpoint).map(drop)
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // The loop sends what is queued once the queue is closed; a
        // collector that does not take it in time is left behind.
        drop(self.queue.take());
        if let Ok(finished) = self.finished.lock() {
            let _ = finished.recv_timeout(POST_TIMEOUT);
        }
    }
}

/// A collector's address and path.
struct Target {
    host_port: String,
    path: String,
}

impl Target {
    fn parse(endpoint: &str) -> Result<Target, String> {
        let rest = endpoint.strip_prefix("http://").ok_or_else(|| {
            format!("telemetry.otlp: {endpoint:?} is not an http:// URL (OTLP over HTTP)")
        })?;
        let (host_port, base) = rest.split_once('/').unwrap_or((rest, ""));
        if host_port.is_empty() || !host_port.contains(':') {
            return Err(format!(
                "telemetry.otlp: {endpoint:?} needs a host and port, e.g. http://127.0.0.1:4318"
            ));
        }
        let base = base.trim_end_matches('/');
        let path = match base.is_empty() {
            true => "/v1/traces".to_string(),
            false if base.ends_with("v1/traces") => format!("/{base}"),
            false => format!("/{base}/v1/traces"),
        };
        Ok(Target {
            host_port: host_port.to_string(),
            path,
        })
    }
}

fn export_loop(queue: &Receiver<Msg>, target: &Target, service: &str) {
    let send = |batch: &mut Vec<Span>| {
        if batch.is_empty() {
            return;
        }
        if let Err(e) = post(target, &proto::request(service, batch)) {
            say!("warden: {} spans not exported: {e}", batch.len());
        }
        batch.clear();
    };
    let mut batch = Vec::new();
    // When the batch's first span came: it leaves PERIOD after that.
    let mut since = std::time::Instant::now();
    loop {
        let msg = match batch.is_empty() {
            true => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
            false => queue.recv_timeout(
                (since + PERIOD).saturating_duration_since(std::time::Instant::now()),
            ),
        };
        match msg {
            Ok(Msg::Span(s)) => {
                if batch.is_empty() {
                    since = std::time::Instant::now();
                }
                batch.push(s);
                if batch.len() >= BATCH {
                    send(&mut batch);
                }
            }
            Ok(Msg::Flush(done)) => {
                send(&mut batch);
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => send(&mut batch),
            Err(RecvTimeoutError::Disconnected) => return send(&mut batch),
        }
    }
}

/// POSTs `body` to the collector: Ok once it answered 2xx.
fn post(target: &Target, body: &[u8]) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addr = target
        .host_port
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", target.host_port))?
        .next()
        .ok_or_else(|| format!("{}: no address", target.host_port))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, POST_TIMEOUT)
        .map_err(|e| format!("{}: {e}", target.host_port))?;
    s.set_read_timeout(Some(POST_TIMEOUT)).ok();
    s.set_write_timeout(Some(POST_TIMEOUT)).ok();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        target.path,
        target.host_port,
        body.len()
    );
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body))
        .map_err(|e| format!("{}: {e}", target.host_port))?;
    let mut answer = [0u8; 64];
    let n = s
        .read(&mut answer)
        .map_err(|e| format!("{}: {e}", target.host_port))?;
    let status = String::from_utf8_lossy(&answer[..n]);
    match status.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        _ => Err(format!(
            "{} answered {:?}",
            target.host_port,
            status.lines().next().unwrap_or("")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_bad_ones_are_refused() {
        let c = Context::root();
        assert_eq!(Context::from_traceparent(&c.traceparent()), Some(c));
        let w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let p = Context::from_traceparent(w3c).unwrap();
        assert_eq!(hex(&p.trace), "4bf92f3577b34da6a3ce929d0e0e4736");
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f-00f067aa0ba902b7-01",
        ] {
            assert_eq!(Context::from_traceparent(bad), None, "{bad:?}");
        }
        assert_eq!(c.child().trace, c.trace);
    }

    #[test]
    fn endpoints_name_the_traces_path() {
        let t = Target::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(
            (t.host_port.as_str(), t.path.as_str()),
            ("127.0.0.1:4318", "/v1/traces")
        );
        assert_eq!(
            Target::parse("http://c:1/otlp/").unwrap().path,
            "/otlp/v1/traces"
        );
        assert_eq!(
            Target::parse("http://c:1/v1/traces").unwrap().path,
            "/v1/traces"
        );
        assert!(Target::parse("https://c:1").is_err());
        assert!(Target::parse("http://c").is_err());
    }
}

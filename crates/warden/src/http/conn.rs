//! Serving HTTP/1.1 and HTTP/2 (cleartext, prior knowledge) connections
//! within bounds: the part the web server and the control API share (one
//! stack: hyper on tokio).
//!
//! | what | bound |
//! |---|---|
//! | connections open at once | [`Limits::max_connections`]; more are closed at accept |
//! | first bytes (which protocol) | within [`HEAD_TIMEOUT`] |
//! | request head (line + headers) | [`MAX_HEAD`], at most [`MAX_HEADERS`] headers (HTTP/1.1), read within [`HEAD_TIMEOUT`] (HTTP/1.1) |
//! | HTTP/2 requests at once | [`MAX_STREAMS`] per connection; closed after [`IDLE`] without one |
//! | one connection's life | [`Limits::connection_life`]; then it closes after the requests in flight |
//!
//! Bodies are the handler's business (each reads its own within its own
//! size and time limits). A finished connection is closed gently
//! ([`linger`]). When the gate closes, connections finish the request in
//! flight and close.

use super::preface::{self, Protocol, Rewind};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest request head, bytes.
pub const MAX_HEAD: usize = 16 << 10;
/// Most headers in a request.
pub const MAX_HEADERS: usize = 64;
/// Time allowed for a request head to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long, and how many bytes, a finished connection is drained for.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;
/// How long a closing connection may take to finish its request.
const FINISH: Duration = Duration::from_secs(10);
/// Requests one HTTP/2 connection may have in flight at once.
pub const MAX_STREAMS: u32 = 100;
/// How long an HTTP/2 connection stays open without a request.
pub const IDLE: Duration = Duration::from_secs(60);

/// A server's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// One connection's life.
    pub connection_life: Duration,
}

/// Counts a server's connections and tells them when it stops.
pub struct Gate {
    live: AtomicUsize,
    closing: tokio::sync::watch::Sender<bool>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            live: AtomicUsize::new(0),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Gate {
    /// Connections open now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Stops the connections: each finishes its request in flight.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Waits at most `grace` for the open connections to finish.
    pub async fn drain(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        while self.live() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// What answers a server's requests: the response to a request from the
/// client at an address (a closure of that shape, in practice).
pub trait Answer: Send + Sync + Unpin + 'static {
    /// The response, once ready.
    type Reply: Future<Output = Response<Full<Bytes>>> + Send + 'static;
    /// Answers `req` from the client at `remote`.
    fn answer(&self, req: Request<Incoming>, remote: SocketAddr) -> Self::Reply;
}

impl<F, Fut> Answer for F
where
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Send + Sync + Unpin + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    type Reply = Fut;

    fn answer(&self, req: Request<Incoming>, remote: SocketAddr) -> Fut {
        self(req, remote)
    }
}

/// Accepts connections for ever, serving each with `answer` (given the
/// request and the client's address).
pub async fn accept_loop<F: Answer + Clone>(
    listener: tokio::net::TcpListener,
    gate: Arc<Gate>,
    limits: Limits,
    answer: F,
) {
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            // Out of descriptors, most likely: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if gate.live.fetch_add(1, Ordering::AcqRel) >= limits.max_connections {
            gate.live.fetch_sub(1, Ordering::AcqRel);
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            gate.clone(),
            limits,
            stream,
            remote,
            answer.clone(),
        ));
    }
}

/// Serves one connection within its limits, in the protocol its first
/// bytes show.
async fn connection<F: Answer>(
    gate: Arc<Gate>,
    limits: Limits,
    stream: tokio::net::TcpStream,
    remote: SocketAddr,
    answer: F,
) {
    struct Live<'a>(&'a AtomicUsize);
    impl Drop for Live<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let _live = Live(&gate.live);
    let Some((protocol, io)) = preface::sniff(stream, HEAD_TIMEOUT).await else {
        return;
    };
    let closing = gate.closing.subscribe();
    match protocol {
        Protocol::Http1 => http1(io, limits, closing, remote, answer).await,
        Protocol::Http2 => http2(io, limits, closing, remote, answer).await,
    }
}

/// An HTTP/1.1 connection: requests one after the other (keep-alive).
async fn http1<F: Answer>(
    io: Rewind,
    limits: Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
    remote: SocketAddr,
    answer: F,
) {
    let service = hyper::service::service_fn(move |req| {
        let reply = answer.answer(req, remote);
        Box::pin(async move { Ok::<_, std::convert::Infallible>(reply.await) })
    });
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .half_close(true)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    let finished = tokio::select! {
        _ = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => true,
        _ = tokio::time::sleep(limits.connection_life) => false,
        _ = closing.wait_for(|&c| c) => false,
    };
    if finished {
        linger(conn.into_parts().io.into_inner().into_inner()).await;
        return;
    }
    std::pin::Pin::new(&mut conn).graceful_shutdown();
    let _ = tokio::time::timeout(FINISH, conn).await;
}

/// An HTTP/2 connection (prior knowledge, no TLS): up to [`MAX_STREAMS`]
/// requests at once, each answered as an HTTP/1.1 request would be. It
/// is closed (GOAWAY, then the streams in flight finish) at the end of
/// its life, when the server stops, or after [`IDLE`] without a request.
async fn http2<F: Answer>(
    io: Rewind,
    limits: Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
    remote: SocketAddr,
    answer: F,
) {
    let busy = Arc::new(Busy::default());
    let seen = busy.clone();
    let service = hyper::service::service_fn(move |req| {
        let done = InFlight::begin(&seen);
        let reply = answer.answer(req, remote);
        Box::pin(async move {
            let r = reply.await;
            drop(done);
            Ok::<_, std::convert::Infallible>(r)
        })
    });
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(MAX_HEAD as u32)
        .max_concurrent_streams(MAX_STREAMS)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(conn);
    let idle = async {
        loop {
            tokio::time::sleep(IDLE).await;
            if busy.idle() {
                return;
            }
        }
    };
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = tokio::time::sleep(limits.connection_life) => {}
        _ = closing.wait_for(|&c| c) => {}
        _ = idle => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(FINISH, conn).await;
}

/// An HTTP/2 connection's requests: how many are in flight, and whether
/// one began since [`Busy::idle`] last looked.
#[derive(Default)]
struct Busy {
    in_flight: AtomicUsize,
    began: AtomicBool,
}

impl Busy {
    /// Whether no request is in flight or began since the last look.
    fn idle(&self) -> bool {
        let began = self.began.swap(false, Ordering::Relaxed);
        self.in_flight.load(Ordering::Relaxed) == 0 && !began
    }
}

/// One HTTP/2 request in flight, until dropped (answered, or abandoned
/// by its client).
struct InFlight(Arc<Busy>);

impl InFlight {
    fn begin(busy: &Arc<Busy>) -> InFlight {
        busy.began.store(true, Ordering::Relaxed);
        busy.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(busy.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Closes a finished connection gently: sends the end of the stream, then
/// reads and discards what the client still sends, for at most
/// [`LINGER`] and [`LINGER_BYTES`]. Closing with unread bytes would reset
/// the connection, and the reset can destroy the answer (a 413 for a body
/// too large) before the client has read it.
async fn linger(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.shutdown().await;
    let mut buf = [0u8; 4096];
    let drain = async {
        let mut n = 0;
        while n < LINGER_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// A response with `status`, a content type and `body`; `close` ends the
/// connection after it (used when the request's body was not read).
pub fn respond(
    status: u16,
    kind: &'static str,
    body: impl Into<Bytes>,
    close: bool,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = r.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    if close {
        headers.insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http2_connection_is_idle_after_a_look_with_nothing_in_flight() {
        let busy = Arc::new(Busy::default());
        assert!(busy.idle());
        let request = InFlight::begin(&busy);
        assert!(!busy.idle(), "a request began since the last look");
        assert!(!busy.idle(), "a request is in flight");
        drop(request);
        assert!(busy.idle());
        drop(InFlight::begin(&busy));
        assert!(!busy.idle(), "one began and ended since the last look");
        assert!(busy.idle());
    }
}

//! Serving HTTP/1.1 connections within bounds: the part the web server
//! and the control API share (one stack: hyper on tokio).
//!
//! | what | bound |
//! |---|---|
//! | connections open at once | [`Limits::max_connections`]; more are closed at accept |
//! | request head (line + headers) | [`MAX_HEAD`], at most [`MAX_HEADERS`] headers, read within [`HEAD_TIMEOUT`] |
//! | one connection's life | [`Limits::connection_life`]; then it closes after the request in flight |
//!
//! Bodies are the handler's business (each reads its own within its own
//! size and time limits). A finished connection is closed gently
//! ([`linger`]). When the gate closes, connections finish the request in
//! flight and close.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Accepts connections for ever, serving each with `answer` (given the
/// request and the client's address).
pub async fn accept_loop<F, Fut>(
    listener: tokio::net::TcpListener,
    gate: Arc<Gate>,
    limits: Limits,
    answer: F,
) where
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + Unpin + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
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

/// Serves one connection within its limits.
async fn connection<F, Fut>(
    gate: Arc<Gate>,
    limits: Limits,
    stream: tokio::net::TcpStream,
    remote: SocketAddr,
    answer: F,
) where
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Send + Sync + Unpin + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    struct Live<'a>(&'a AtomicUsize);
    impl Drop for Live<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let _live = Live(&gate.live);
    let service = hyper::service::service_fn(move |req| {
        let reply = answer(req, remote);
        Box::pin(async move { Ok::<_, std::convert::Infallible>(reply.await) })
    });
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .half_close(true)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    let mut closing = gate.closing.subscribe();
    let finished = tokio::select! {
        _ = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => true,
        _ = tokio::time::sleep(limits.connection_life) => false,
        _ = closing.wait_for(|&c| c) => false,
    };
    if finished {
        linger(conn.into_parts().io.into_inner()).await;
        return;
    }
    std::pin::Pin::new(&mut conn).graceful_shutdown();
    let _ = tokio::time::timeout(FINISH, conn).await;
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

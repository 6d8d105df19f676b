//! The HTTP side of the control API: one thread running an event loop
//! (hyper on a single-threaded tokio runtime), so a slow or silent client
//! holds one connection and nothing else.
//!
//! Every client is bounded:
//!
//! | what | limit |
//! |---|---|
//! | connections open at once | [`MAX_CONNECTIONS`]; more are closed at accept |
//! | request head (line + headers) | 16 KiB, at most 64 headers, read within 5 s |
//! | request body | [`MAX_BODY`] (413 if declared or sent larger), read within 10 s (408) |
//! | one connection's life | 60 s; then it is closed after the request in flight |
//!
//! A stopping server accepts nothing more and gives the requests in
//! flight up to 2 s to be answered.
//!
//! Endpoints run on a small pool of blocking threads (they read the task
//! table or compile a module), never on the event loop.

use super::api::{self, Reply};
use super::auth::{self, Credentials, Token};
use super::samples::{self, Samples};
use crate::runtime::Runtime;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// The largest request body accepted, bytes.
pub const MAX_BODY: usize = 64 << 10;

/// How long, and how many bytes, a finished connection is drained for
/// before it is closed (see `linger`).
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;
const MAX_HEAD: usize = 16 << 10;
const MAX_HEADERS: usize = 64;
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_LIFE: Duration = Duration::from_secs(60);
/// How long a stopping server waits for the requests in flight.
const GRACE: Duration = Duration::from_secs(2);
const BLOCKING_THREADS: usize = 4;

/// What every request handler shares.
pub(super) struct Shared {
    pub rt: Runtime,
    pub samples: Mutex<Samples>,
    pub token: Token,
    pub addr: SocketAddr,
    live: AtomicUsize,
    /// Set when the server stops: connections finish the request in
    /// flight (its answer included) and close.
    closing: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    pub fn new(rt: Runtime, token: Token, addr: SocketAddr) -> Shared {
        Shared {
            rt,
            samples: Mutex::new(Samples::default()),
            token,
            addr,
            live: AtomicUsize::new(0),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }
}

/// Runs the event loop on this thread until `stop` fires.
pub(super) fn run(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name("warden-control")
        .build();
    let Ok(rt) = rt else { return };
    rt.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        tokio::spawn(sample_every_250ms(shared.clone()));
        tokio::select! {
            _ = stop => {}
            _ = accept_loop(shared.clone(), listener) => {}
        }
        // No more connections; the answers being made are still sent (a
        // kill of the last task ends the run while it is answered).
        shared.closing.send_replace(true);
        let deadline = tokio::time::Instant::now() + GRACE;
        while shared.live.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    rt.shutdown_background();
}

async fn sample_every_250ms(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        let s = shared.clone();
        let _ = tokio::task::spawn_blocking(move || samples::sample(&s.rt, &s.samples)).await;
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, most likely: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if shared.live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            shared.live.fetch_sub(1, Ordering::AcqRel);
            drop(stream);
            continue;
        }
        tokio::spawn(connection(shared.clone(), stream));
    }
}

/// Serves one connection within its limits.
async fn connection(shared: Arc<Shared>, stream: tokio::net::TcpStream) {
    struct Live<'a>(&'a AtomicUsize);
    impl Drop for Live<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
        }
    }
    let _live = Live(&shared.live);
    let service = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| Box::pin(answer(shared.clone(), req)))
    };
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .half_close(true)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    let mut closing = shared.closing.subscribe();
    let finished = tokio::select! {
        _ = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => true,
        _ = tokio::time::sleep(CONNECTION_LIFE) => false,
        _ = closing.wait_for(|&c| c) => false,
    };
    if finished {
        linger(conn.into_parts().io.into_inner()).await;
        return;
    }
    std::pin::Pin::new(&mut conn).graceful_shutdown();
    let _ = tokio::time::timeout(BODY_TIMEOUT, conn).await;
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

/// Admits, reads and answers one request.
async fn answer(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (parts, body) = req.into_parts();
    let header = |name| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let credentials = Credentials {
        host: header(hyper::header::HOST),
        origin: header(hyper::header::ORIGIN),
        authorization: header(hyper::header::AUTHORIZATION),
    };
    let path = parts.uri.path().to_string();
    if let Err((status, why)) = auth::admit(
        &shared.token,
        shared.addr,
        &parts.method,
        &path,
        &credentials,
    ) {
        return Ok(respond(api::error(status, why), true));
    }
    let declared = header(hyper::header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Ok(respond(too_large(), true));
    }
    let body =
        match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(_)) => return Ok(respond(too_large(), true)),
            Err(_) => {
                let slow = api::error(408, "request body not received in time");
                return Ok(respond(slow, true));
            }
        };
    let query = parts.uri.query().unwrap_or("").to_string();
    let method = parts.method.clone();
    let s = shared.clone();
    let reply = tokio::task::spawn_blocking(move || {
        api::route(&s.rt, &s.samples, &method, &path, &query, &body)
    })
    .await
    .unwrap_or_else(|_| api::error(500, "the request failed inside the server"));
    Ok(respond(reply, false))
}

fn too_large() -> Reply {
    api::error(413, format!("request body over {MAX_BODY} bytes"))
}

/// The HTTP response for `reply`; `close` ends the connection after it
/// (the request's body may not have been read).
fn respond(reply: Reply, close: bool) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(reply.body)));
    *r.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = r.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.kind),
    );
    if close {
        headers.insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

//! Serving HTTP/1.1 and HTTP/2 connections within bounds, in cleartext
//! (HTTP/2 by prior knowledge) or over TLS (HTTP/2 by ALPN; see `tls`):
//! the part the web server and the control API share (one stack: hyper
//! on tokio).
//!
//! | what | bound |
//! |---|---|
//! | connections open at once | [`Limits::max_connections`]; when full, one with no request at work gives way (see the `gate` module), or the new one is closed at accept if all have one |
//! | a connection giving way | closed after 200 ms, or, if a request is at work or its client still reads an answer, once its answers are written, within 10 s (`FINISH`) |
//! | first bytes (which protocol), or the TLS handshake | within [`HEAD_TIMEOUT`]; a handshake is charged `tls::HANDSHAKE_BYTES` to the byte budgets while it runs |
//! | request head (line + headers) | [`MAX_HEAD`], at most [`MAX_HEADERS`] headers (HTTP/1.1), read within [`HEAD_TIMEOUT`] (HTTP/1.1) |
//! | HTTP/2 requests at once | [`MAX_STREAMS`] per connection; closed after [`IDLE`] without one |
//! | one connection's life | [`Limits::connection_life`]; then it closes after the requests in flight |
//! | bytes held by requests (heads, bodies, answers) | [`Limits::max_buffered_per_connection`] per connection, [`Limits::max_buffered`] per server: past either, 503 (see `budget`) |
//!
//! Bodies are the handler's business (each reads its own within its own
//! size and time limits, every frame charged as it arrives). A finished
//! connection is closed gently ([`linger`]). When the gate closes,
//! connections finish the request in flight and close.

use super::budget::{self, Budget, Held};
use super::gate::{self, Sending, Ticket, Tracked, Watched, EVICT_GRACE};
pub use super::gate::{BodyError, Gate, Streamed};
use super::preface::{self, Protocol, Rewind};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
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
    /// Bytes all its requests may hold at once: heads, bodies and
    /// answers (see `budget`).
    pub max_buffered: u64,
    /// Bytes the requests of one connection may hold at once.
    pub max_buffered_per_connection: u64,
}

/// A request's body as the answer gets it (read like hyper's own; the
/// server watches it to know when the request is at work).
pub type RequestBody = Watched<Incoming>;

/// What answers a server's requests: the response to a request from the
/// client at an address (a closure of that shape, in practice).
pub trait Answer: Send + Sync + Unpin + 'static {
    /// The response, once ready.
    type Reply: Future<Output = Response<Full<Bytes>>> + Send + 'static;
    /// Answers `req` from the client at `remote`.
    fn answer(&self, req: Request<RequestBody>, remote: SocketAddr) -> Self::Reply;
}

impl<F, Fut> Answer for F
where
    F: Fn(Request<RequestBody>, SocketAddr) -> Fut + Send + Sync + Unpin + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    type Reply = Fut;

    fn answer(&self, req: Request<RequestBody>, remote: SocketAddr) -> Fut {
        self(req, remote)
    }
}

/// Accepts connections for ever, serving each with `answer` (given the
/// request and the client's address).
pub async fn accept_loop<F: Answer + Clone>(
    listener: tokio::net::TcpListener,
    gate: Arc<Gate>,
    limits: Limits,
    tls: Option<Arc<super::tls::Tls>>,
    answer: F,
) {
    let buffered = Budget::new(limits.max_buffered);
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            // Out of descriptors, most likely: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Some(ticket) = gate.admit(limits.max_connections) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let closing = gate.closing();
        let budgets = Budgets {
            conn: Budget::new(limits.max_buffered_per_connection),
            server: buffered.clone(),
        };
        tokio::spawn(connection(
            ticket,
            closing,
            limits,
            (stream, tls.clone()),
            remote,
            Served {
                answer: answer.clone(),
                budgets,
            },
        ));
    }
}

/// What serves one connection's requests: the answer, and the budgets
/// what they hold is charged to.
struct Served<F> {
    answer: F,
    budgets: Budgets,
}

/// A connection's budget and its server's.
#[derive(Clone)]
struct Budgets {
    conn: Arc<Budget>,
    server: Arc<Budget>,
}

/// Serves one connection within its limits, in the protocol its first
/// bytes show, until it ends, the server stops, or the gate tells it to
/// give way to a new one.
async fn connection<F: Answer>(
    ticket: Ticket,
    closing: tokio::sync::watch::Receiver<bool>,
    limits: Limits,
    (stream, tls): (tokio::net::TcpStream, Option<Arc<super::tls::Tls>>),
    remote: SocketAddr,
    answer: Served<F>,
) {
    let opened = async {
        match tls {
            None => preface::sniff(stream, HEAD_TIMEOUT).await,
            Some(tls) => handshake(stream, &tls, &answer.budgets).await,
        }
    };
    let sniffed = tokio::select! {
        sniffed = opened => sniffed,
        _ = ticket.evicted() => None,
    };
    let Some((protocol, io)) = sniffed else {
        return;
    };
    let ticket = Arc::new(ticket);
    match protocol {
        Protocol::Http1 => http1(io, ticket, limits, closing, remote, answer).await,
        Protocol::Http2 => http2(io, ticket, limits, closing, remote, answer).await,
    }
}

/// A TLS handshake, within [`HEAD_TIMEOUT`] and charged
/// [`super::tls::HANDSHAKE_BYTES`] while it runs; `None` if it fails,
/// times out or does not fit the budget.
async fn handshake(
    stream: tokio::net::TcpStream,
    tls: &super::tls::Tls,
    budgets: &Budgets,
) -> Option<(Protocol, Rewind)> {
    let held = Held::new(&budgets.conn, &budgets.server, super::tls::HANDSHAKE_BYTES).ok()?;
    let done = tokio::time::timeout(HEAD_TIMEOUT, tls.acceptor.accept(stream)).await;
    drop(held);
    Some(preface::over_tls(done.ok()?.ok()?))
}

/// Why a connection stops before its client ends it.
enum Stop {
    /// Its life is over or the server stops: requests in flight finish.
    Finish,
    /// It gives way to a new connection: it had no request at work when
    /// told, so it closes unless one is, or an answer is still being
    /// written, by the end of its grace.
    GiveWay,
}

/// An HTTP/1.1 connection: requests one after the other (keep-alive).
async fn http1<F: Answer>(
    io: Rewind,
    ticket: Arc<Ticket>,
    limits: Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
    remote: SocketAddr,
    answer: Served<F>,
) {
    let service = tracked(ticket.clone(), remote, answer);
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .half_close(true)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .serve_connection(
            hyper_util::rt::TokioIo::new(Sending::new(io, ticket.clone())),
            service,
        );
    let stop = tokio::select! {
        _ = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => None,
        _ = tokio::time::sleep(limits.connection_life) => Some(Stop::Finish),
        _ = closing.wait_for(|&c| c) => Some(Stop::Finish),
        _ = ticket.evicted() => Some(Stop::GiveWay),
    };
    let Some(stop) = stop else {
        linger(conn.into_parts().io.into_inner().into_inner().into_inner()).await;
        return;
    };
    std::pin::Pin::new(&mut conn).graceful_shutdown();
    stopping(conn, stop, &ticket).await;
}

/// A connection's requests, each answered by `answer`, in flight for the
/// gate until its response's body is taken, and holding what it charged
/// to the budgets until then: a head that does not fit is answered 503
/// without an answer being asked for, and so is an answer that does not.
/// A panic while answering becomes a 500 (it ends that request only).
fn tracked<F: Answer>(
    ticket: Arc<Ticket>,
    remote: SocketAddr,
    served: Served<F>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, Infallible>> + Send + Unpin,
> {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let (parts, body) = req.into_parts();
        let b = &served.budgets;
        let held = Held::new(&b.conn, &b.server, budget::head_bytes(&parts));
        let (body, busy) = ticket.begin(body, held.as_ref().ok().cloned());
        let admitted = held.map(|held| {
            let req = Request::from_parts(parts, body);
            (held, served.answer.answer(req, remote))
        });
        Box::pin(async move {
            let (held, reply) = match admitted {
                Ok(admitted) => admitted,
                Err(full) => return Ok(refused(busy, full)),
            };
            let reply = std::pin::pin!(reply);
            let response = CatchPanic(reply).await.unwrap_or_else(|()| {
                respond(
                    500,
                    "text/plain",
                    "the server failed answering this request\n",
                    true,
                )
            });
            let (mut parts, body) = response.into_parts();
            let tail = parts.extensions.remove::<gate::Streamed>();
            let body = gate::bytes_of(body);
            if parts.extensions.get::<budget::Charged>().is_none() {
                if let Err(full) = held.charge(body.len() as u64) {
                    return Ok(refused(busy, full));
                }
            }
            let body = Tracked::new(Full::new(body), busy, Some(held)).with_tail(tail);
            Ok(Response::from_parts(parts, body))
        })
    })
}

/// The 503 for a request whose head or answer did not fit a budget.
fn refused(busy: super::gate::Busy, full: budget::Full) -> Response<Tracked> {
    let (parts, body) = respond(503, "text/plain", format!("busy: {full}\n"), true).into_parts();
    Response::from_parts(parts, Tracked::new(body, busy, None))
}

/// A future whose panic is caught and given as `Err(())`.
struct CatchPanic<'a, F>(std::pin::Pin<&'a mut F>);

impl<F: Future> Future for CatchPanic<'_, F> {
    type Output = Result<F::Output, ()>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(r)) => std::task::Poll::Ready(Ok(r)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(_) => std::task::Poll::Ready(Err(())),
        }
    }
}

/// Lets a connection told to stop (its protocol's graceful shutdown
/// begun) finish as `stop` says: one giving way closes after its grace
/// unless closing would cut off an answer.
async fn stopping(mut conn: impl Future + Unpin, stop: Stop, ticket: &Ticket) {
    if let Stop::GiveWay = stop {
        if tokio::time::timeout(EVICT_GRACE, &mut conn).await.is_ok() || !ticket.answering() {
            return;
        }
    }
    let _ = tokio::time::timeout(FINISH, conn).await;
}

/// An HTTP/2 connection (prior knowledge, no TLS): up to [`MAX_STREAMS`]
/// requests at once, each answered as an HTTP/1.1 request would be. It
/// is closed (GOAWAY, then the streams in flight finish) at the end of
/// its life, when the server stops, after [`IDLE`] without a request, or
/// when it gives way to a new connection.
async fn http2<F: Answer>(
    io: Rewind,
    ticket: Arc<Ticket>,
    limits: Limits,
    mut closing: tokio::sync::watch::Receiver<bool>,
    remote: SocketAddr,
    answer: Served<F>,
) {
    let service = tracked(ticket.clone(), remote, answer);
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(MAX_HEAD as u32)
        .max_concurrent_streams(MAX_STREAMS)
        .serve_connection(
            hyper_util::rt::TokioIo::new(Sending::new(io, ticket.clone())),
            service,
        );
    let mut conn = Box::pin(conn);
    let idle = async {
        loop {
            tokio::time::sleep(IDLE).await;
            if ticket.idle() {
                return;
            }
        }
    };
    let stop = tokio::select! {
        _ = conn.as_mut() => return,
        _ = tokio::time::sleep(limits.connection_life) => Stop::Finish,
        _ = closing.wait_for(|&c| c) => Stop::Finish,
        _ = idle => Stop::Finish,
        _ = ticket.evicted() => Stop::GiveWay,
    };
    conn.as_mut().graceful_shutdown();
    stopping(conn, stop, &ticket).await;
}

/// Closes a finished connection gently: sends the end of the stream, then
/// reads and discards what the client still sends, for at most
/// [`LINGER`] and [`LINGER_BYTES`]. Closing with unread bytes would reset
/// the connection, and the reset can destroy the answer (a 413 for a body
/// too large) before the client has read it.
async fn linger(mut stream: preface::Conn) {
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

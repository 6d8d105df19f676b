//! The HTTP side of the control API: one thread running an event loop
//! (hyper on a single-threaded tokio runtime), so a slow or silent client
//! holds one connection and nothing else.
//!
//! Every client is bounded:
//!
//! | what | limit |
//! |---|---|
//! | connections open at once | [`MAX_CONNECTIONS`]; when full, one with no request at work makes room, or the new one is closed at accept if all have one |
//! | request head (line + headers) | 16 KiB, at most 64 headers, read within 5 s (`serving::conn`) |
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
use crate::serving::conn::{self, Gate, Limits};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// The largest request body accepted, bytes.
pub const MAX_BODY: usize = 64 << 10;

const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes the API's requests and answers may hold at once (see
/// `serving::budget`): its largest answers, a busy system's metrics, are a
/// few MiB.
const MAX_BUFFERED: u64 = 256 << 20;
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
    /// The system's stamp, as every answer's `Warden-System` header.
    stamp: hyper::header::HeaderValue,
    /// Its connections.
    gate: Arc<Gate>,
}

impl Shared {
    pub fn new(rt: Runtime, token: Token, addr: SocketAddr, stamp: auth::Stamp) -> Shared {
        Shared {
            rt,
            samples: Mutex::new(Samples::default()),
            token,
            addr,
            stamp: hyper::header::HeaderValue::from_str(&stamp.text())
                .expect("a stamp is ASCII digits and words"),
            gate: Arc::default(),
        }
    }
}

/// Runs the event loop on this thread until `stop` fires.
pub(super) fn run(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    tls: Option<Arc<crate::serving::tls::Tls>>,
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
        let limits = Limits {
            max_connections: MAX_CONNECTIONS,
            connection_life: CONNECTION_LIFE,
            max_buffered: MAX_BUFFERED,
            max_buffered_per_connection: MAX_BUFFERED / 4,
        };
        let s = shared.clone();
        let serve = conn::accept_loop(listener, shared.gate.clone(), limits, tls, move |req, _| {
            answer(s.clone(), req)
        });
        tokio::select! {
            _ = stop => {}
            _ = serve => {}
        }
        // No more connections; the answers being made are still sent (a
        // kill of the last task ends the run while it is answered).
        shared.gate.close();
        shared.gate.drain(GRACE).await;
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

/// Admits, reads and answers one request; every answer names the system.
async fn answer(shared: Arc<Shared>, req: Request<conn::RequestBody>) -> Response<Full<Bytes>> {
    let stamp = shared.stamp.clone();
    let mut response = answer_request(shared, req).await;
    response.headers_mut().insert(auth::STAMP_HEADER, stamp);
    response
}

async fn answer_request(
    shared: Arc<Shared>,
    req: Request<conn::RequestBody>,
) -> Response<Full<Bytes>> {
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
        return respond(api::error(status, why), true);
    }
    let declared = header(hyper::header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return respond(too_large(), true);
    }
    let body =
        match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(_)) => return respond(too_large(), true),
            Err(_) => {
                let slow = api::error(408, "request body not received in time");
                return respond(slow, true);
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
    respond(reply, false)
}

fn too_large() -> Reply {
    api::error(413, format!("request body over {MAX_BODY} bytes"))
}

/// The HTTP response for `reply`; `close` ends the connection after it
/// (the request's body may not have been read).
fn respond(reply: Reply, close: bool) -> Response<Full<Bytes>> {
    conn::respond(reply.status, reply.kind, reply.body, close)
}

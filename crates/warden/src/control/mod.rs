//! The control API: JSON over HTTP, served by a running `warden run` for
//! the operator tools (`warden ps`, `kill`, …) and the web dashboard.
//!
//! | request | answer |
//! |---|---|
//! | `GET /api/tasks` | every task: [`TaskView`](crate::TaskView) plus `cpu_pct` (last second) |
//! | `POST /api/tasks/{id or name}/kill` (or `suspend`, `resume`) | `{"ok": true}` |
//! | `GET /api/tasks/{id or name}/logs?from=N` | `{"data": "…", "next": M}` |
//! | `POST /api/spawn` with `{"module", "args", "memory_limit", "cpu_limit"}` | `{"id": n}` |
//! | `GET /api/cluster` | every live node of the cluster: `[{"node", "tasks": [...]}]` (404 outside a cluster) |
//! | `GET /api/routes` | every HTTP route: requests, status codes, p50/p99 latency, in flight, queued, live tasks |
//! | `GET /metrics` | Prometheus text format (tasks, groups, HTTP routes) |
//! | `GET /api/history` | per live task, the last 300 s of CPU %, memory and IPC rate |
//! | `GET /` | the web dashboard (its chart library is served from here too) |
//!
//! Errors are `{"error": "…"}` with status 400, 401 (no or wrong token),
//! 403 (foreign `Host` or `Origin`), 404, 408 (body too slow) or 413
//! (body too large).
//!
//! How each client is bounded (connections, head and body sizes,
//! timeouts) is in the `serve` module's table; the rules below are
//! written out in full in the `auth` module.
//!
//! # Who may call
//!
//! - On a loopback address, `Host` must name a loopback host (no DNS
//!   rebinding), and a request from another `Origin` is refused (no
//!   forged kill from a web page in the operator's browser).
//! - State-changing requests, and reads of what tasks wrote (`logs`),
//!   carry `Authorization: Bearer <token>`;
//!   [`ControlServer::token`] is the token, which `warden run` writes to
//!   [`token_file`] for the operator commands.
//! - On any other address, every request but the dashboard's static
//!   files needs the token.

mod api;
mod auth;
mod cluster;
mod connect;
mod devices;
mod groups;
mod metrics;
mod routes;
mod samples;
mod serve;

pub use auth::{
    find_system, find_token, token_file, write_token_file, Found, Stamp, Token, STAMP_HEADER,
};
pub use connect::{connect, connect_within, Stream, ANSWER_WITHIN};
pub use metrics::metrics;
pub use serve::{MAX_BODY, MAX_CONNECTIONS};

use std::net::SocketAddr;
use std::sync::Arc;

/// The default control address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7474";

/// A running control server; stops when dropped.
pub struct ControlServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    token: Token,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its certificate's SHA-256 fingerprint, if it speaks TLS.
    pub fingerprint: Option<String>,
    /// Kept from tasks' grants (see `net::own`).
    _own: crate::net::own::OwnEndpoint,
}

impl ControlServer {
    /// Serves `rt` on `addr` with a fresh random token. On a loopback
    /// address reads are open to local users; on any other, every
    /// request for data needs the token too.
    ///
    /// `publish` sees the bound address, the token and the system's
    /// stamp (see [`Stamp`]) before the first
    /// request is answered (`warden run` writes the token file there), so
    /// a client that can connect can also find the token.
    pub fn start(
        rt: crate::Runtime,
        addr: &str,
        tls: Option<&crate::TlsSpec>,
        publish: impl FnOnce(SocketAddr, &Token, Stamp, Option<&str>),
    ) -> Result<ControlServer, String> {
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| format!("control address {addr:?}: expected IP:PORT"))?;
        let err = |e: std::io::Error| format!("control address {addr}: {e}");
        // Bound, published, and only then listening: a client that can
        // connect can find the token.
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )
        .map_err(err)?;
        socket.set_reuse_address(true).map_err(err)?;
        socket.bind(&addr.into()).map_err(err)?;
        let addr = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(addr);
        let own = crate::net::own::register(addr);
        let token = Token::random().map_err(|e| format!("control token: {e}"))?;
        let stamp = Stamp::now();
        let tls = match tls {
            Some(t) => Some(Arc::new(
                crate::serving::tls::Tls::new(t, addr)
                    .map_err(|e| format!("control API on {addr}: {e}"))?,
            )),
            None => None,
        };
        let fingerprint = tls.as_ref().map(|t| t.fingerprint.clone());
        publish(addr, &token, stamp, fingerprint.as_deref());
        socket.listen(1024).map_err(err)?;
        socket.set_nonblocking(true).map_err(err)?;
        let listener = std::net::TcpListener::from(socket);
        let shared = Arc::new(serve::Shared::new(rt, token.clone(), addr, stamp));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("warden-control".into())
            .spawn(move || serve::run(shared, listener, tls, stopped))
            .map_err(|e| format!("control API thread: {e}"))?;
        Ok(ControlServer {
            _own: own,
            stop: Some(stop),
            thread: Some(thread),
            token,
            addr,
            fingerprint,
        })
    }

    /// The token state-changing requests must carry.
    pub fn token(&self) -> &Token {
        &self.token
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

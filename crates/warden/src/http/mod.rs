//! The web server: `[[http]]` sections of the manifest, each an HTTP/1.1
//! server (keep-alive; hyper), which speaks HTTP/2 to clients with prior
//! knowledge, whose routes are answered by tasks.
//!
//! - A **per-request** route (`module = …`) runs a fresh task for every
//!   request, from a module compiled once (instances come from the
//!   pooling allocator, memories copy-on-write): WAGI, CGI over WASI. The
//!   request arrives as CGI environment variables and stdin; the task's
//!   stdout is the response ([`cgi`]). Nothing survives a request.
//! - A **servlet** route (`service = …`) turns every request into one
//!   portal call to the task providing that name: the request's head and
//!   body as the message, a CGI response as the reply. The servlet keeps
//!   its state across requests, in its own budget and scheduling group.
//!   Under load, a request that finds the servlet waiting runs it on the
//!   server's own thread when a worker is idle (the host hand-off of the
//!   executor), charged to the servlet as usual.
//!
//! Each route bounds its requests: `max_body` (413 before any task
//! starts), `max_concurrent` handlers at once with at most `max_queue`
//! waiting (then 503), `timeout` of wall clock (504, and a per-request
//! task is killed), and its tasks' memory and CPU limits.
//!
//! | fault | answer |
//! |---|---|
//! | handler trapped, exited non-zero, or killed over its memory limit | 500 |
//! | handler's response malformed or over `max_response`; servlet died | 502 |
//! | handler killed over its CPU limit (or by an operator); route busy; no task provides the servlet's name | 503 |
//! | wall-clock timeout | 504 |
//!
//! Slow or hostile clients are bounded by the connection rules of
//! `serving::conn`: they hold a connection, never a handler task (a body is read
//! whole before any task starts).

pub mod cgi;
pub mod config;
mod handle;
mod routes;

pub use config::{Handler, HttpSpec, RouteSpec};

use crate::runtime::Runtime;
use crate::serving::conn;
pub(crate) use handle::RouteModule;
pub(crate) use routes::{RouteTemplate, Routes};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long a stopping server gives the requests in flight.
const GRACE: Duration = Duration::from_secs(2);

/// A running HTTP server; stops when dropped (requests in flight get a
/// short grace to finish).
pub struct HttpServer {
    addr: SocketAddr,
    /// Its certificate's SHA-256 fingerprint, if it serves HTTPS.
    fingerprint: Option<String>,
    /// Kept from tasks' grants (see `net::own`).
    _own: crate::net::own::OwnEndpoint,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Its routes (replaced by a manifest reload).
    routes: Arc<Routes>,
}

struct Server {
    rt: Runtime,
    local: SocketAddr,
    routes: Arc<Routes>,
}

impl HttpServer {
    /// Binds `spec.listen` and starts serving on threads of its own, as
    /// many as the runtime has workers.
    pub fn start(rt: &Runtime, spec: &HttpSpec) -> Result<HttpServer, String> {
        let listener = std::net::TcpListener::bind(&spec.listen)
            .map_err(|e| format!("http server on {}: {e}", spec.listen))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("http server on {}: {e}", spec.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let tls = match &spec.tls {
            Some(t) => Some(Arc::new(
                crate::serving::tls::Tls::new(t, addr)
                    .map_err(|e| format!("http server on {}: {e}", spec.listen))?,
            )),
            None => None,
        };
        let fingerprint = tls.as_ref().map(|t| t.fingerprint.clone());
        let own = crate::net::own::register(addr);
        let routes = Arc::new(Routes::new(
            rt,
            (&spec.listen, addr.to_string()),
            &spec.routes,
        ));
        let server = Arc::new(Server {
            rt: rt.clone(),
            local: addr,
            routes: routes.clone(),
        });
        let limits = conn::Limits {
            max_connections: spec.max_connections,
            connection_life: Duration::from_secs(600),
            max_buffered: spec.max_buffered,
            max_buffered_per_connection: spec.max_buffered_per_connection,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let threads = rt.config().workers.max(1);
        let thread = std::thread::Builder::new()
            .name("warden-http".into())
            .spawn(move || serve(server, listener, (limits, tls), threads, stopped))
            .map_err(|e| e.to_string())?;
        Ok(HttpServer {
            addr,
            fingerprint,
            _own: own,
            stop: Some(stop),
            thread: Some(thread),
            routes,
        })
    }

    /// Its routes, for live upgrades and manifest reloads.
    pub(crate) fn routes(&self) -> &Arc<Routes> {
        &self.routes
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its certificate's SHA-256 fingerprint (`AB:CD:…`) if it serves
    /// HTTPS, `None` for plain HTTP.
    pub fn tls_fingerprint(&self) -> Option<&str> {
        self.fingerprint.as_deref()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    server: Arc<Server>,
    listener: std::net::TcpListener,
    (limits, tls): (conn::Limits, Option<Arc<crate::serving::tls::Tls>>),
    threads: usize,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    // As many threads as the runtime has workers: the kernel's side of
    // the connections' sockets and starting per-request tasks are work
    // enough to keep one thread busy under load.
    let Ok(tokio) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("warden-http")
        .enable_all()
        .build()
    else {
        return;
    };
    tokio.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let gate = Arc::new(conn::Gate::default());
        let s = server.clone();
        let accept = conn::accept_loop(listener, gate.clone(), limits, tls, move |req, remote| {
            let s = s.clone();
            async move { s.answer(req, remote).await }
        });
        tokio::select! {
            _ = stop => {}
            _ = accept => {}
        }
        gate.close();
        gate.drain(GRACE).await;
    });
    tokio.shutdown_background();
}

impl Server {
    async fn answer(
        &self,
        req: hyper::Request<conn::RequestBody>,
        remote: SocketAddr,
    ) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
        match self.routes.find(req.uri().path()) {
            Some(route) => route.answer(&self.rt, req, self.local, remote).await,
            None => conn::respond(404, "text/plain", "no route for this path\n", false),
        }
    }
}

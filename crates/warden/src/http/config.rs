//! What a `[[http]]` section of the manifest says: a server's address,
//! limits and routes.

use crate::task::TaskSpec;
use std::time::Duration;

/// One HTTP server.
#[derive(Debug, Clone)]
pub struct HttpSpec {
    /// The address it listens on, `host:port`.
    pub listen: String,
    /// Most connections serving at once; when full, one with no request
    /// at work makes room for a new one (see `serving::gate`).
    pub max_connections: usize,
    /// Bytes its requests may hold at once, all connections together:
    /// heads, bodies and answers (past it, 503; see `serving::budget`).
    pub max_buffered: u64,
    /// Bytes the requests of one connection may hold at once.
    pub max_buffered_per_connection: u64,
    /// Its routes, matched in order: the first whose path matches wins.
    pub routes: Vec<RouteSpec>,
    /// TLS, if it serves HTTPS (see `serving::tls`).
    pub tls: Option<crate::serving::tls::TlsSpec>,
}

/// Default for [`HttpSpec::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// One route: which requests it takes, who answers them, and its limits.
#[derive(Debug, Clone)]
pub struct RouteSpec {
    /// Its name in metrics and task names (default: its path).
    pub name: String,
    /// An exact path (`/hello`), or a prefix ending in `/*` (`/api/*`
    /// takes `/api` and everything under `/api/`).
    pub path: String,
    /// Who answers.
    pub handler: Handler,
    /// Wall-clock limit per request, queueing included.
    pub timeout: Duration,
    /// Requests handled at once; the rest wait in a queue.
    pub max_concurrent: usize,
    /// Requests waiting at most; past it, 503 at once.
    pub max_queue: usize,
    /// Largest request body; larger ones get 413 before any task starts.
    pub max_body: u64,
    /// Largest response a handler may give (a CGI response, a servlet's
    /// reply, a component's body).
    pub max_response: usize,
}

/// Who answers a route's requests.
#[derive(Debug, Clone)]
pub enum Handler {
    /// A fresh task per request, from this template (WAGI: CGI over
    /// WASI). Its name, environment and stdin are filled per request.
    Module(Box<TaskSpec>),
    /// Portal calls to the task providing this service name.
    Service(String),
    /// A fresh task per request from this template, whose module is a
    /// `wasi:http/proxy` component: `wasi:http/incoming-handler` gets
    /// the request and answers it. Its name is filled per request.
    Component(Box<TaskSpec>),
}

/// Route defaults.
pub mod defaults {
    use std::time::Duration;
    /// [`super::RouteSpec::timeout`].
    pub const TIMEOUT: Duration = Duration::from_secs(30);
    /// [`super::RouteSpec::max_concurrent`].
    pub const MAX_CONCURRENT: usize = 64;
    /// [`super::RouteSpec::max_queue`].
    pub const MAX_QUEUE: usize = 1024;
    /// [`super::RouteSpec::max_body`].
    pub const MAX_BODY: u64 = 1 << 20;
    /// [`super::RouteSpec::max_response`].
    pub const MAX_RESPONSE: usize = 16 << 20;
    /// [`super::HttpSpec::max_buffered`] (raised to what one connection
    /// may hold, if that is more).
    pub const MAX_BUFFERED: u64 = 256 << 20;
    /// [`super::HttpSpec::max_buffered_per_connection`] (raised to what
    /// one request of the largest route may hold, if that is more).
    pub const MAX_BUFFERED_PER_CONNECTION: u64 = 32 << 20;
}

impl RouteSpec {
    /// Whether the route takes `path`.
    pub fn matches(&self, path: &str) -> bool {
        match self.path.strip_suffix("/*") {
            Some(prefix) => {
                path == prefix
                    || (path.starts_with(prefix)
                        && path.as_bytes().get(prefix.len()) == Some(&b'/'))
            }
            None => path == self.path,
        }
    }

    /// The fixed part of its path (`/api` for `/api/*`).
    pub fn prefix(&self) -> &str {
        self.path.strip_suffix("/*").unwrap_or(&self.path)
    }
}

/// Checks a route path: absolute, and `*` only as a final `/*`.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("path {path:?}: must start with '/'"));
    }
    let fixed = path.strip_suffix("/*").unwrap_or(path);
    if fixed.contains('*') || fixed.contains('?') || fixed.contains('#') {
        return Err(format!(
            "path {path:?}: '*' only as a final \"/*\" (a prefix), and no '?' or '#'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> RouteSpec {
        RouteSpec {
            name: path.into(),
            path: path.into(),
            handler: Handler::Service("s".into()),
            timeout: defaults::TIMEOUT,
            max_concurrent: 1,
            max_queue: 1,
            max_body: 1,
            max_response: 1,
        }
    }

    #[test]
    fn exact_and_prefix_paths() {
        let exact = route("/hello");
        assert!(exact.matches("/hello"));
        assert!(!exact.matches("/hello/"));
        assert!(!exact.matches("/hello2"));
        let prefix = route("/api/*");
        assert!(prefix.matches("/api"));
        assert!(prefix.matches("/api/"));
        assert!(prefix.matches("/api/x/y"));
        assert!(!prefix.matches("/apix"));
        assert!(!prefix.matches("/"));
        let all = route("/*");
        assert!(all.matches("/"));
        assert!(all.matches("/anything"));
        assert_eq!(prefix.prefix(), "/api");
    }

    #[test]
    fn bad_paths_are_refused() {
        assert!(check_path("hello").is_err());
        assert!(check_path("/a*").is_err());
        assert!(check_path("/a/*/b").is_err());
        assert!(check_path("/a?x").is_err());
        assert!(check_path("/a/*").is_ok());
        assert!(check_path("/").is_ok());
    }
}

//! Who may use the control API: the token, the `Host` and `Origin`
//! checks, and the token file the operator tools read.
//!
//! The rules, in the order they are applied to each request:
//!
//! 1. On a loopback address, `Host` (when sent) must name a loopback
//!    host: a page from `evil.example` rebound by DNS to 127.0.0.1 sends
//!    `Host: evil.example` and is refused.
//! 2. `Origin` (when sent) must be this server as named in `Host`: a page
//!    from any other origin is refused, whatever it asks.
//! 3. Every state-changing request (`POST`) carries the token in
//!    `Authorization: Bearer <token>`, and so does every read of what a
//!    task wrote (`/api/tasks/…/logs`). On a loopback address the other
//!    reads (task lists, figures, metrics) are open; on any other address
//!    every request but the dashboard's static files needs the token.
//!
//! The token is 32 random bytes in hex, made at start. `warden run`
//! writes it to [`token_file`], readable by its user only, and removes
//! it at exit; the operator commands read it from there (or from
//! `WARDEN_CONTROL_TOKEN`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A control token: 64 hex digits.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// 32 bytes from the kernel's random source.
    pub fn random() -> std::io::Result<Token> {
        let mut bytes = [0u8; 32];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token as sent in `Authorization: Bearer …`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `header` (an `Authorization` value) carries this token;
    /// compared in time independent of where they differ.
    fn accepts(&self, header: Option<&str>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
            return false;
        };
        crate::timing_safe::eq(self.0.as_bytes(), given.trim().as_bytes())
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// The headers a request is judged by.
pub(super) struct Credentials<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub authorization: Option<&'a str>,
}

/// Why a request is refused: the status and the message.
pub(super) type Refusal = (u16, String);

/// Applies the rules above to a request for `path` by `method`.
pub(super) fn admit(
    token: &Token,
    served_on: SocketAddr,
    method: &hyper::Method,
    path: &str,
    c: &Credentials,
) -> Result<(), Refusal> {
    let loopback = served_on.ip().is_loopback();
    if let (true, Some(host)) = (loopback, c.host) {
        if !loopback_authority(host) {
            return Err((
                403,
                format!("refused: Host {host:?} is not a loopback address"),
            ));
        }
    }
    if let Some(origin) = c.origin {
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|authority| Some(authority) == c.host);
        if !same {
            return Err((403, format!("refused: request from origin {origin:?}")));
        }
    }
    let open = is_static(path) || (loopback && is_open_on_loopback(path));
    let needs_token = method != hyper::Method::GET || !open;
    if needs_token && !token.accepts(c.authorization) {
        return Err((
            401,
            "this request needs the control token (Authorization: Bearer …); \
             `warden run` wrote it to its token file"
                .into(),
        ));
    }
    Ok(())
}

/// What a local user may read without the token: figures about tasks,
/// never what tasks wrote (`/api/tasks/…/logs` needs it everywhere: a
/// task granted a loopback connection must not read its neighbours'
/// output). Paths are compared as sent, so an escaped spelling of an
/// open path needs the token too.
fn is_open_on_loopback(path: &str) -> bool {
    matches!(
        path,
        "/api/tasks"
            | "/api/history"
            | "/api/groups"
            | "/api/routes"
            | "/api/cluster"
            | "/api/memory"
            | "/api/devices"
            | "/api/file-services"
            | "/metrics"
    )
}

/// The dashboard's files, which hold no data.
fn is_static(path: &str) -> bool {
    matches!(path, "/" | "/dashboard.js" | "/uplot.js" | "/uplot.css")
}

/// Whether `authority` (`host[:port]`) names this machine by loopback.
fn loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Where `warden run` serving on `addr` keeps its token:
/// `$XDG_RUNTIME_DIR/warden/control-<port>.token`, else under
/// `$HOME/.warden/`.
pub fn token_file(addr: SocketAddr) -> Option<PathBuf> {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(run) => PathBuf::from(run).join("warden"),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".warden"),
    };
    Some(dir.join(format!("control-{}.token", addr.port())))
}

/// Which system a control API belongs to: its process and the instant
/// (Unix milliseconds) it started serving. Every answer carries it (the
/// `Warden-System` header) and the token file names it, so an operator
/// command can tell the system it means from another one that has since
/// taken the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The process serving the API.
    pub pid: u32,
    /// When it started serving, Unix milliseconds.
    pub started_ms: u64,
}

impl Stamp {
    /// This process, now.
    pub fn now() -> Stamp {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Stamp {
            pid: std::process::id(),
            started_ms: since.as_millis() as u64,
        }
    }

    /// `pid=N started=MS`, as the header and the token file write it.
    pub fn text(&self) -> String {
        format!("pid={} started={}", self.pid, self.started_ms)
    }

    /// The stamp in `text` (`pid=N started=MS`, other words ignored).
    pub fn parse(text: &str) -> Option<Stamp> {
        let field = |name: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        };
        Some(Stamp {
            pid: field("pid")?.parse().ok()?,
            started_ms: field("started")?.parse().ok()?,
        })
    }
}

/// The name of the header every answer of the control API carries its
/// [`Stamp`] in.
pub const STAMP_HEADER: &str = "warden-system";

/// Writes `token` to `path`, readable and writable by this user only, in
/// a directory only this user may enter: the token on the first line,
/// then the system's stamp and address (`pid=N started=MS addr=A`), and
/// its certificate's fingerprint if it speaks TLS (` tls=AB:CD:…`).
pub fn write_token_file(
    path: &std::path::Path,
    token: &Token,
    stamp: Stamp,
    addr: SocketAddr,
    tls: Option<&str>,
) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} must belong to this user and be closed to others",
            dir.display()
        )));
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let tls = tls.map_or(String::new(), |f| format!(" tls={f}"));
    let text = format!("{}\n{} addr={addr}{tls}\n", token.as_str(), stamp.text());
    f.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

/// What an operator command finds for the system at an address.
#[derive(Debug, Clone)]
pub struct Found {
    /// The token to send.
    pub token: String,
    /// The system the token file names, and the file (`None` when the
    /// token came from `WARDEN_CONTROL_TOKEN`, or the file names none).
    pub system: Option<(Stamp, PathBuf)>,
    /// The fingerprint of the certificate the system's control API
    /// serves, if the token file names one: the client then speaks TLS
    /// and accepts that certificate only.
    pub tls: Option<String>,
}

/// The token for the system at `addr`: `WARDEN_CONTROL_TOKEN`, else its
/// token file, else none.
pub fn find_token(addr: &str) -> Option<String> {
    find_system(addr).map(|f| f.token)
}

/// The token for the system at `addr` and, from its token file, which
/// system that is.
pub fn find_system(addr: &str) -> Option<Found> {
    if let Some(t) = std::env::var("WARDEN_CONTROL_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        return Some(Found {
            token: t,
            system: None,
            tls: None,
        });
    }
    let addr = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .ok()?
        .next()?;
    let file = token_file(addr)?;
    let text = std::fs::read_to_string(&file).ok()?;
    let mut lines = text.lines();
    let token = lines.next()?.trim().to_string();
    let second = lines.next().unwrap_or("");
    let tls = second
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tls="))
        .map(str::to_string);
    let system = Stamp::parse(second).map(|s| (s, file));
    Some(Found { token, system, tls })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(on: &str, method: hyper::Method, path: &str, c: Credentials) -> u16 {
        let token = Token("ab".repeat(32));
        match admit(&token, on.parse().unwrap(), &method, path, &c) {
            Ok(()) => 200,
            Err((status, _)) => status,
        }
    }

    fn creds<'a>(host: &'a str, origin: Option<&'a str>, auth: Option<&'a str>) -> Credentials<'a> {
        Credentials {
            host: Some(host),
            origin,
            authorization: auth,
        }
    }

    #[test]
    fn rules_in_order() {
        const GET: hyper::Method = hyper::Method::GET;
        const POST: hyper::Method = hyper::Method::POST;
        let good = format!("Bearer {}", "ab".repeat(32));
        let lo = "127.0.0.1:7474";
        let host = "127.0.0.1:7474";
        assert_eq!(judge(lo, GET, "/api/tasks", creds(host, None, None)), 200);
        assert_eq!(
            judge(lo, GET, "/api/tasks", creds("evil.example", None, None)),
            403
        );
        assert_eq!(
            judge(lo, GET, "/api/tasks", creds("[::1]:7474", None, None)),
            200
        );
        let from = |o| creds(host, Some(o), Some(&good));
        assert_eq!(
            judge(lo, POST, "/api/spawn", from("http://evil.example")),
            403
        );
        assert_eq!(
            judge(lo, POST, "/api/spawn", from("http://127.0.0.1:7474")),
            200
        );
        assert_eq!(judge(lo, POST, "/api/spawn", creds(host, None, None)), 401);
        let wrong = format!("Bearer {}", "ac".repeat(32));
        assert_eq!(
            judge(lo, POST, "/api/spawn", creds(host, None, Some(&wrong))),
            401
        );
        assert_eq!(
            judge(lo, POST, "/api/spawn", creds(host, None, Some("Bearer ab"))),
            401
        );
        // What tasks wrote needs the token even on loopback, however
        // the path is spelled.
        for logs in [
            "/api/tasks/victim/logs",
            "/api/tasks/victim/%6cogs",
            "/api/tasks/",
        ] {
            assert_eq!(judge(lo, GET, logs, creds(host, None, None)), 401, "{logs}");
        }
        assert_eq!(
            judge(
                lo,
                GET,
                "/api/tasks/victim/logs",
                creds(host, None, Some(&good))
            ),
            200
        );
        assert_eq!(judge(lo, GET, "/metrics", creds(host, None, None)), 200);
        let any = "0.0.0.0:7474";
        let named = "box.example:7474";
        assert_eq!(judge(any, GET, "/", creds(named, None, None)), 200);
        assert_eq!(judge(any, GET, "/metrics", creds(named, None, None)), 401);
        assert_eq!(
            judge(any, GET, "/metrics", creds(named, None, Some(&good))),
            200
        );
    }

    #[test]
    fn tokens_differ_and_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (Token::random().unwrap(), Token::random().unwrap());
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.as_str().len(), 64);
        let dir = std::env::temp_dir().join(format!("warden-token-{}", std::process::id()));
        let path = dir.join("sub").join("control-1.token");
        let stamp = Stamp::now();
        let at: SocketAddr = "127.0.0.1:1".parse().unwrap();
        write_token_file(&path, &a, stamp, at, Some("AB:CD")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().next(), Some(a.as_str()));
        let second = text.lines().nth(1).unwrap();
        assert_eq!(Stamp::parse(second), Some(stamp));
        assert!(second.ends_with(" addr=127.0.0.1:1 tls=AB:CD"), "{second}");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&path), mode(path.parent().unwrap())), (0o600, 0o700));
        std::fs::set_permissions(
            path.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert!(
            write_token_file(&path, &b, stamp, at, None).is_err(),
            "an open directory is refused"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

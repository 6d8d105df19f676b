//! `wasi:http/outgoing-handler`: a component's outgoing requests, each
//! to an address the task's `connect` grants allow.
//!
//! The request's authority is resolved first; the connection goes to the
//! first resolved address a grant covers (Warden's own endpoints only if
//! a grant names them exactly, as for a module's sockets), and nowhere if
//! none is: the guest gets `HTTP-request-denied` before any connection
//! is attempted. Only plain `http` is spoken (no TLS client here:
//! `https` is refused the same way). One connection per request (HTTP/1.1),
//! within the request's connect and first-byte timeouts (30 s each unless
//! the guest asks for less), and within the task's life: the request's
//! future is dropped with the store.

use crate::net::grant::{canonical, Grant};
use crate::net::own::may_connect;
use http_body_util::BodyExt;
use hyper::http::uri::Scheme;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// The longest a connection or a response's first byte is waited for.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A component task's outgoing requests: what they may reach.
pub(super) struct Outgoing {
    connect: Arc<[Grant]>,
}

impl Outgoing {
    pub(super) fn new(connect: Vec<Grant>) -> Self {
        Outgoing {
            connect: connect.into(),
        }
    }
}

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;

impl WasiHttpHooks for Outgoing {
    fn send_request(
        &mut self,
        request: hyper::Request<WasiBody>,
        options: Option<RequestOptions>,
        _sent: Sent,
    ) -> Box<dyn Future<Output = Result<(hyper::Response<WasiBody>, Sent), Error>> + Send> {
        let connect = self.connect.clone();
        Box::new(async move {
            let response = send(request, options, &connect).await?;
            Ok((response, Box::new(async { Ok(()) }) as Sent))
        })
    }
}

/// Sends `request` to a granted address of its authority.
async fn send(
    mut request: hyper::Request<WasiBody>,
    options: Option<RequestOptions>,
    connect: &[Grant],
) -> Result<hyper::Response<WasiBody>, Error> {
    let uri = request.uri();
    if uri.scheme() != Some(&Scheme::HTTP) {
        // No TLS client, and nothing but http(s) is a destination.
        return Err(Error::HttpRequestDenied);
    }
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let target = format!(
        "{}:{}",
        authority.host(),
        authority.port_u16().unwrap_or(80)
    );
    let timeout = |t: Option<Duration>| t.unwrap_or(DEFAULT_TIMEOUT).min(DEFAULT_TIMEOUT);
    let connect_timeout = timeout(options.and_then(|o| o.connect_timeout));
    let first_byte = timeout(options.and_then(|o| o.first_byte_timeout));
    let addr = granted(&target, connect, connect_timeout).await?;
    let stream = tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let io = wasmtime_wasi_http::io::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(conn);
    // The request line names only the path: no proxy is addressed.
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = path.parse().map_err(|_| Error::HttpRequestUriInvalid)?;
    let response = tokio::time::timeout(first_byte, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    Ok(response.map(|body| body.map_err(Error::from).boxed_unsync()))
}

/// The first address `target` (`host:port`) resolves to that `connect`
/// grants, or `HTTP-request-denied`.
async fn granted(target: &str, connect: &[Grant], within: Duration) -> Result<SocketAddr, Error> {
    if connect.is_empty() {
        return Err(Error::HttpRequestDenied);
    }
    let found = tokio::time::timeout(within, tokio::net::lookup_host(target))
        .await
        .map_err(|_| Error::DnsTimeout)?
        .map_err(|_| Error::DestinationNotFound)?;
    found
        .map(canonical)
        .find(|a| may_connect(connect, a))
        .ok_or(Error::HttpRequestDenied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn no_grant_no_destination() {
        let r = rt().block_on(granted("127.0.0.1:80", &[], DEFAULT_TIMEOUT));
        assert!(matches!(r, Err(Error::HttpRequestDenied)));
    }

    #[test]
    fn only_granted_addresses() {
        let grants = [Grant::parse("127.0.0.1:8000-8010").unwrap()];
        let rt = rt();
        let ok = rt.block_on(granted("127.0.0.1:8005", &grants, DEFAULT_TIMEOUT));
        assert_eq!(ok.unwrap(), "127.0.0.1:8005".parse().unwrap());
        let port = rt.block_on(granted("127.0.0.1:9000", &grants, DEFAULT_TIMEOUT));
        assert!(matches!(port, Err(Error::HttpRequestDenied)));
        let host = rt.block_on(granted("127.0.0.2:8005", &grants, DEFAULT_TIMEOUT));
        assert!(matches!(host, Err(Error::HttpRequestDenied)));
    }
}

//! CGI/1.1 (RFC 3875) as WAGI uses it: a request becomes environment
//! variables and stdin; a handler's stdout becomes the response.
//!
//! A response is header lines (`Name: value`, ended by LF or CRLF), an
//! empty line, then the body. `Status: 404 Not Found` sets the status
//! (200 to 599; default 200, or 302 when only a `Location` is given). At least one
//! header is required. Hop-by-hop headers and `Content-Length` are
//! dropped (the server frames the body itself). Anything else — no empty
//! line, a line without a colon, a bad name, value or status, more than
//! [`MAX_RESPONSE_HEADERS`] lines or [`MAX_RESPONSE_HEAD`] bytes of them —
//! makes the response malformed, which the server answers with 502.
//!
//! A client header whose name holds `_` is not passed on: CGI spells
//! both `-` and `_` as `_`, so `X_Forwarded_For` would pose as a proxy's
//! `X-Forwarded-For` (nginx and Apache drop them too).

use crate::host::Strings;
use hyper::header::{HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::StatusCode;
use std::borrow::Cow;
use std::io::Write as _;

/// The request as CGI meta-variables.
pub struct Meta<'a> {
    /// The request's head.
    pub parts: &'a Parts,
    /// The matched route's fixed path (`SCRIPT_NAME`, `X_MATCHED_ROUTE`).
    pub route: &'a str,
    /// The body's length.
    pub body_len: Option<u64>,
    /// The server's own address.
    pub local: std::net::SocketAddr,
    /// The client's address.
    pub remote: std::net::SocketAddr,
}

/// The CGI environment of a request, after `base` (the route's own
/// variables): one buffer, written without a string per variable.
pub fn environment(m: &Meta, base: &[(String, String)]) -> Strings {
    let p = m.parts;
    let path = p.uri.path();
    let host = host(p);
    let server_name = match host {
        Some(h) => Cow::Borrowed(h.rsplit_once(':').map_or(h, |(name, _)| name)),
        None => Cow::Owned(m.local.ip().to_string()),
    };
    let mut env = Strings::with_capacity(1024);
    for (k, v) in base {
        env.push_var(k, v);
    }
    let num = |env: &mut Strings, name: &str, n: &dyn std::fmt::Display| {
        env.push(|b| {
            let _ = write!(b, "{name}={n}");
        })
    };
    env.push_var("GATEWAY_INTERFACE", "CGI/1.1");
    env.push_var(
        "SERVER_SOFTWARE",
        concat!("warden/", env!("CARGO_PKG_VERSION")),
    );
    num(&mut env, "SERVER_PROTOCOL", &Protocol(p.version));
    env.push_var("SERVER_NAME", &server_name);
    num(&mut env, "SERVER_PORT", &m.local.port());
    num(&mut env, "REMOTE_ADDR", &m.remote.ip());
    num(&mut env, "REMOTE_PORT", &m.remote.port());
    env.push_var("REQUEST_METHOD", p.method.as_str());
    env.push_var(
        "REQUEST_URI",
        p.uri.path_and_query().map_or(path, |pq| pq.as_str()),
    );
    env.push_var("SCRIPT_NAME", m.route);
    env.push_var("X_MATCHED_ROUTE", m.route);
    env.push_var("PATH_INFO", &decode(path));
    env.push_var("X_RAW_PATH_INFO", path);
    env.push_var("QUERY_STRING", p.uri.query().unwrap_or(""));
    if let Some(n) = &m.body_len {
        num(&mut env, "CONTENT_LENGTH", n);
    }
    header_vars(&mut env, &p.headers);
    // An HTTP/2 request names its host in its URI, not in a header.
    if let (Some(h), None) = (host, p.headers.get(hyper::header::HOST)) {
        env.push_var("HTTP_HOST", h);
    }
    env
}

/// The request's headers as `HTTP_*` variables (and `CONTENT_TYPE`), as
/// CGI has them: repeated headers joined into one, no `HTTP_PROXY` and
/// none whose name has an underscore (it would pass for a dash).
fn header_vars(env: &mut Strings, headers: &hyper::HeaderMap) {
    for name in headers.keys() {
        // No HTTP_PROXY from a client's `Proxy` header ("httpoxy"): a
        // handler's HTTP library may take it for its proxy setting.
        if name == hyper::header::CONTENT_LENGTH
            || name.as_str() == "proxy"
            || name.as_str().contains('_')
        {
            continue;
        }
        let values = || headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
        if values().next().is_none() {
            continue;
        }
        env.push(|b| {
            if name == hyper::header::CONTENT_TYPE {
                b.extend_from_slice(b"CONTENT_TYPE");
            } else {
                b.extend_from_slice(b"HTTP_");
                b.extend(name.as_str().bytes().map(|c| match c {
                    b'-' => b'_',
                    c => c.to_ascii_uppercase(),
                }));
            }
            b.push(b'=');
            // Repeated headers are one variable, their values joined.
            for (i, v) in values().enumerate() {
                if i > 0 {
                    b.extend_from_slice(b", ");
                }
                b.extend_from_slice(v.as_bytes());
            }
        });
    }
}

/// A version as CGI's `SERVER_PROTOCOL` gives it (`HTTP/1.1`).
struct Protocol(hyper::Version);

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// The host a request is for: its `Host` header, or (HTTP/2) its URI's
/// authority.
pub fn host(p: &Parts) -> Option<&str> {
    match p.headers.get(hyper::header::HOST) {
        Some(h) => h.to_str().ok(),
        None => p.uri.authority().map(|a| a.as_str()),
    }
}

/// `%XX` escapes decoded, when the result is UTF-8; else `path` as given.
fn decode(path: &str) -> String {
    String::from_utf8(crate::serving::percent_decode(path)).unwrap_or_else(|_| path.to_string())
}

/// A parsed CGI response.
#[derive(Debug)]
pub struct Response {
    /// Its status.
    pub status: StatusCode,
    /// Its headers, in order.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Where its body starts in the output.
    pub body_at: usize,
}

/// Most header lines in a response (`Status` included).
pub const MAX_RESPONSE_HEADERS: usize = 100;
/// Largest header block of a response, bytes (its empty line included).
pub const MAX_RESPONSE_HEAD: usize = 64 << 10;

/// Why a response is malformed.
pub type Malformed = String;

/// Parses a handler's output (see the module docs).
pub fn parse(out: &[u8]) -> Result<Response, Malformed> {
    let mut at = 0;
    let mut status = None;
    let mut location = false;
    let mut headers = Vec::new();
    let head = &out[..out.len().min(MAX_RESPONSE_HEAD)];
    let mut lines = 0;
    loop {
        let Some(nl) = head[at..].iter().position(|&c| c == b'\n') else {
            return Err(if head.len() < out.len() {
                format!("no empty line within the first {MAX_RESPONSE_HEAD} bytes")
            } else {
                "no empty line after the headers".into()
            });
        };
        lines += 1;
        if lines > MAX_RESPONSE_HEADERS {
            return Err(format!("more than {MAX_RESPONSE_HEADERS} header lines"));
        }
        let line = &out[at..at + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        at += nl + 1;
        if line.is_empty() {
            break;
        }
        let (name, value) = header_line(line)?;
        if name.as_str() == "status" {
            status = Some(parse_status(value)?);
            continue;
        }
        location |= name == hyper::header::LOCATION;
        if is_framing(&name) {
            continue;
        }
        let value =
            HeaderValue::from_bytes(value).map_err(|_| format!("bad value for header {name}"))?;
        headers.push((name, value));
    }
    if status.is_none() && headers.is_empty() {
        return Err("no headers (at least Content-Type, Location or Status)".into());
    }
    let status = status.unwrap_or(if location {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    Ok(Response {
        status,
        headers,
        body_at: at,
    })
}

/// A response header line's name and (trimmed) value.
fn header_line(line: &[u8]) -> Result<(HeaderName, &[u8]), Malformed> {
    let Some(colon) = line.iter().position(|&c| c == b':') else {
        return Err(format!(
            "header line without ':': {:?}",
            String::from_utf8_lossy(line)
        ));
    };
    let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| {
        format!(
            "bad header name {:?}",
            String::from_utf8_lossy(&line[..colon])
        )
    })?;
    Ok((name, line[colon + 1..].trim_ascii()))
}

fn parse_status(value: &[u8]) -> Result<StatusCode, Malformed> {
    let code = value.split(|&c| c == b' ').next().unwrap_or(b"");
    StatusCode::from_bytes(code)
        .ok()
        .filter(|s| (200..600).contains(&s.as_u16()))
        .ok_or_else(|| format!("bad Status {:?}", String::from_utf8_lossy(value)))
}

/// Headers the server sets itself.
fn is_framing(name: &HeaderName) -> bool {
    use hyper::header::*;
    [
        CONTENT_LENGTH,
        TRANSFER_ENCODING,
        CONNECTION,
        UPGRADE,
        TE,
        TRAILER,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_with_status_and_headers() {
        let out = b"Content-Type: text/plain\r\nStatus: 404 Not Found\r\nX-A: 1\r\n\r\nbody";
        let r = parse(out).unwrap();
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.headers.len(), 2);
        assert_eq!(&out[r.body_at..], b"body");
        let r = parse(b"Content-Type: text/html\n\n<p>").unwrap();
        assert_eq!((r.status, r.body_at), (StatusCode::OK, 25));
        let r = parse(b"Location: /x\n\n").unwrap();
        assert_eq!(r.status, StatusCode::FOUND);
    }

    #[test]
    fn a_header_block_is_bounded_in_lines_and_bytes() {
        let many = "X-A: 1\n".repeat(MAX_RESPONSE_HEADERS) + "\nbody";
        assert!(parse(many.as_bytes()).unwrap_err().contains("header lines"));
        let fits = "X-A: 1\n".repeat(MAX_RESPONSE_HEADERS - 1) + "\nbody";
        assert_eq!(parse(fits.as_bytes()).unwrap().headers.len(), 99);
        let long = format!("X-A: {}\n\n", "v".repeat(MAX_RESPONSE_HEAD));
        assert!(parse(long.as_bytes()).unwrap_err().contains("first"));
        let big_body = format!("X-A: 1\n\n{}", "b".repeat(MAX_RESPONSE_HEAD * 2));
        assert!(parse(big_body.as_bytes()).is_ok());
    }

    #[test]
    fn framing_headers_are_dropped() {
        let r = parse(b"Content-Type: a\nContent-Length: 99\nConnection: close\n\n").unwrap();
        assert_eq!(r.headers.len(), 1);
    }

    #[test]
    fn malformed_responses_are_refused() {
        for bad in [
            &b""[..],
            b"hello world",
            b"Content-Type text/plain\n\n",
            b"\n\nbody",
            b"Status: abc\n\n",
            b"Status: 99 Low\n\n",
            b"Status: 949 Odd\n\n",
            b"Bad Name: x\n\n",
            b"X: a\x01b\n\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_environment_carries_the_request() {
        let req = hyper::Request::builder()
            .method("POST")
            .uri("/api/a%20b?x=1")
            .header("Host", "example.org:8080")
            .header("Content-Type", "text/plain")
            .header("X-Thing", "a")
            .header("X-Thing", "b")
            .header("Proxy", "http://evil")
            .header("X_Forwarded_For", "6.6.6.6")
            .header("X-Forwarded-For", "10.0.0.1")
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let env = environment(
            &Meta {
                parts: &parts,
                route: "/api",
                body_len: Some(5),
                local: "127.0.0.1:8080".parse().unwrap(),
                remote: "127.0.0.1:5000".parse().unwrap(),
            },
            &[("GREETING".into(), "hi".into())],
        );
        let get = |k: &str| env.var(k).map(|v| std::str::from_utf8(v).unwrap());
        assert_eq!(
            env.iter().next(),
            Some(&b"GREETING=hi"[..]),
            "the route's own first"
        );
        assert_eq!(get("REQUEST_METHOD"), Some("POST"));
        assert_eq!(get("PATH_INFO"), Some("/api/a b"));
        assert_eq!(get("X_RAW_PATH_INFO"), Some("/api/a%20b"));
        assert_eq!(get("QUERY_STRING"), Some("x=1"));
        assert_eq!(get("SERVER_NAME"), Some("example.org"));
        assert_eq!(get("SERVER_PORT"), Some("8080"));
        assert_eq!(get("CONTENT_TYPE"), Some("text/plain"));
        assert_eq!(get("CONTENT_LENGTH"), Some("5"));
        assert_eq!(get("HTTP_X_THING"), Some("a, b"));
        assert_eq!(get("HTTP_HOST"), Some("example.org:8080"));
        assert_eq!(get("SCRIPT_NAME"), Some("/api"));
        assert_eq!(get("HTTP_PROXY"), None);
        assert_eq!(get("HTTP_X_FORWARDED_FOR"), Some("10.0.0.1"));
        assert_eq!(
            env.iter()
                .filter(|v| v.starts_with(b"HTTP_X_FORWARDED"))
                .count(),
            1
        );
    }

    #[test]
    fn an_http2_request_has_its_host_from_its_uri() {
        let req = hyper::Request::builder()
            .uri("http://example.org:8080/a?b")
            .version(hyper::Version::HTTP_2)
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let env = environment(
            &Meta {
                parts: &parts,
                route: "/a",
                body_len: Some(0),
                local: "127.0.0.1:8080".parse().unwrap(),
                remote: "127.0.0.1:5000".parse().unwrap(),
            },
            &[],
        );
        let get = |k: &str| env.var(k).map(|v| std::str::from_utf8(v).unwrap());
        assert_eq!(get("HTTP_HOST"), Some("example.org:8080"));
        assert_eq!(get("SERVER_NAME"), Some("example.org"));
        assert_eq!(get("SERVER_PROTOCOL"), Some("HTTP/2.0"));
        assert_eq!(get("REQUEST_URI"), Some("/a?b"));
    }
}

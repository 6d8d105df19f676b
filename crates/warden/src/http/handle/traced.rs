//! A request's spans, when tracing is on (see `telemetry`): the
//! request's own, which its handler task's run and its servlet call
//! become children of.

use super::{Answer, RequestBody};
use std::net::SocketAddr;
use std::sync::Arc;

tokio::task_local! {
    /// The span of the request being answered, and where spans go, when
    /// tracing is on: its handler task's run (see `numbered`) and its
    /// servlet call (see `servlet`) become its children.
    pub(super) static REQUEST_TRACE: Option<(crate::telemetry::Context, Arc<crate::telemetry::Exporter>)>;
}

/// Where a servlet's call for the request being answered is made, when
/// tracing: its span's context and the request's span, and where spans
/// go.
#[allow(clippy::type_complexity)]
pub(super) fn call_context() -> Option<(
    (crate::telemetry::Context, [u8; 8]),
    Arc<crate::telemetry::Exporter>,
)> {
    let (at, spans) = REQUEST_TRACE.try_with(|t| t.clone()).ok().flatten()?;
    Some(((at.child(), at.span), spans))
}

/// The span of a servlet's portal call for a request: at `at`, a child
/// of the request's span `parent`; its service, its request's bytes and
/// its reply's (`None`: it failed).
pub(super) fn call_span(
    (at, parent): (crate::telemetry::Context, [u8; 8]),
    service: &str,
    began: u64,
    request: usize,
    reply: Option<usize>,
) -> crate::telemetry::Span {
    use serde_json::json;
    let mut attributes = vec![
        ("warden.service", json!(service)),
        ("warden.call.request_bytes", json!(request)),
    ];
    if let Some(n) = reply {
        attributes.push(("warden.call.reply_bytes", json!(n)));
    }
    crate::telemetry::Span {
        at,
        parent: Some(parent),
        name: format!("call {service}"),
        kind: 3,
        start_ns: began,
        end_ns: crate::telemetry::unix_ns(),
        attributes,
        error: reply.is_none(),
    }
}

/// A request's span while it is answered (see `telemetry`).
pub(super) struct Traced {
    pub(super) at: crate::telemetry::Context,
    parent: Option<[u8; 8]>,
    name: String,
    attributes: Vec<(&'static str, serde_json::Value)>,
    start_ns: u64,
}

impl Traced {
    /// The span of `req`: a child of the client's `traceparent`, if it
    /// sent a valid one, else a new trace.
    pub(super) fn begin(
        req: &hyper::Request<RequestBody>,
        route: &str,
        remote: SocketAddr,
    ) -> Traced {
        use crate::telemetry::Context;
        use serde_json::json;
        let parent = req
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(Context::from_traceparent);
        Traced {
            at: parent.map_or_else(Context::root, |p| p.child()),
            parent: parent.map(|p| p.span),
            name: format!("{} {route}", req.method()),
            attributes: vec![
                ("http.request.method", json!(req.method().as_str())),
                ("url.path", json!(req.uri().path())),
                ("http.route", json!(route)),
                ("client.address", json!(remote.ip().to_string())),
            ],
            start_ns: crate::telemetry::unix_ns(),
        }
    }

    /// Ends the span with `answer`'s status and size, and names it in
    /// the answer's `traceparent`.
    pub(super) fn end(
        mut self,
        spans: &crate::telemetry::Exporter,
        answer: &mut Answer,
        route: &str,
    ) {
        use serde_json::json;
        let status = answer.status().as_u16();
        let sent = hyper::body::Body::size_hint(answer.body())
            .exact()
            .unwrap_or(0);
        self.attributes
            .push(("http.response.status_code", json!(status)));
        self.attributes
            .push(("http.response.body.size", json!(sent)));
        self.attributes.push(("warden.route", json!(route)));
        if let Ok(v) = hyper::header::HeaderValue::from_str(&self.at.traceparent()) {
            answer.headers_mut().insert("traceparent", v);
        }
        spans.record(crate::telemetry::Span {
            at: self.at,
            parent: self.parent,
            name: self.name,
            kind: 2,
            start_ns: self.start_ns,
            end_ns: crate::telemetry::unix_ns(),
            attributes: self.attributes,
            error: status >= 500,
        });
    }
}

//! A component route's request: a fresh task from the route's
//! `wasi:http/proxy` component, handed the request through
//! `wasi:http/incoming-handler`.
//!
//! The component reads the request's body from a `wasi:io` input stream
//! and writes its response's to an output stream, as it would under
//! `wasmtime serve`; on the host's side both stay within the route's
//! bounds as a WAGI route's do. The body was read whole, within
//! `max_body`, before the task started (a slow client holds its
//! connection, never a task), and the response's body is collected
//! within `max_response` (502 past it) before the answer goes out, so a
//! handler that fails half way through its body is a 500, never a
//! truncated 200. Faults are a WAGI route's (see [`super::fault`]): a
//! handler that returns without setting a response is a 500, one that
//! answers with a `wasi:http` error code a 502.
//!
//! Once its response is out, a handler may still be running (work after
//! its body, or its store being released): it keeps its slot until it
//! ends, and is killed if that is not within the route's timeout.

use super::{fault, refused, text, Answer, Route, Running};
use crate::host::{HttpResponse, Incoming};
use crate::runtime::Runtime;
use crate::task::{TaskSpec, TaskStatus};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::request::Parts;
use hyper::{header, Request, Response};
use std::net::SocketAddr;
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio::time::Instant;

/// The request a component gets: the client's head and the body read,
/// with a `host` header (the server's address) if it came without one.
pub(super) fn request(mut parts: Parts, body: Bytes, local: SocketAddr) -> Request<Full<Bytes>> {
    if parts.uri.authority().is_none() && !parts.headers.contains_key(header::HOST) {
        if let Ok(host) = header::HeaderValue::from_str(&local.to_string()) {
            parts.headers.insert(header::HOST, host);
        }
    }
    Request::from_parts(parts, Full::new(body))
}

impl Route {
    /// A fresh task from `template`'s component answers `request`.
    pub(super) async fn component(
        &self,
        rt: &Runtime,
        template: &TaskSpec,
        request: Request<Full<Bytes>>,
        deadline: Instant,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        let spec = self.numbered(template);
        let (respond, response) = oneshot::channel();
        let incoming = Incoming { request, respond };
        let (id, mut ended, done) = match rt.spawn_incoming(&spec, incoming) {
            Ok(x) => x,
            Err(e) => return refused(e),
        };
        let mut running = Running::new(rt, id, done, slot);
        let answer = self.response(response, &mut ended, &mut running);
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(answer) => {
                running.release_by(deadline);
                answer
            }
            Err(_) => {
                running.end("over its route's timeout").await;
                text(
                    504,
                    format!("handler over its {:?} timeout", self.spec.timeout),
                )
            }
        }
    }

    /// The answer: the response the handler set, with its whole body, or
    /// the fault that kept it from giving one.
    async fn response(
        &self,
        mut response: oneshot::Receiver<HttpResponse>,
        ended: &mut oneshot::Receiver<TaskStatus>,
        running: &mut Running,
    ) -> Answer {
        // The response is set inside the handler's call, so it is sent
        // before the task's end is. But one poll looks at the response
        // before it looks at the end, and both may arrive in between: an
        // end heard first is followed by another look at the response,
        // which then finds it if it was set.
        let (set, status) = tokio::select! {
            biased;
            set = &mut response => (set.ok(), None),
            status = running.ending(ended) => (response.try_recv().ok(), Some(status)),
        };
        match set {
            None => match status {
                Some(status) => ended_without(status),
                None => ended_without(running.ending(ended).await),
            },
            Some(Err(code)) => text(502, format!("handler answered with an error: {code:?}")),
            Some(Ok(head)) => {
                let answer = match self.collect(head).await {
                    Ok(answer) => answer,
                    Err(Some(over)) => return over,
                    Err(None) => text(500, "handler's response body broke off"),
                };
                match status {
                    Some(status) => ended_with(answer, status),
                    None => checked(answer, ended, running).await,
                }
            }
        }
    }

    /// The handler's response with its body, at most `max_response`
    /// bytes of it (`Err(Some)`: the 502 past it; `Err(None)`: the body
    /// broke off).
    async fn collect(
        &self,
        head: hyper::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>,
    ) -> Result<Answer, Option<Answer>> {
        let (mut parts, mut body) = head.into_parts();
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| None)?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > self.spec.max_response {
                    return Err(Some(self.over_max_response()));
                }
                out.extend_from_slice(data);
            }
        }
        // The body's length is the server's to say, from what it holds.
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::TRANSFER_ENCODING);
        Ok(Response::from_parts(parts, Full::new(Bytes::from(out))))
    }
}

/// `answer`, unless the task's end says it is cut short: a body looks
/// finished when the task's store is dropped, and the task's ending is
/// sent before that, so a body ended by a trap or a kill is found here
/// (a task still running finished its body itself).
async fn checked(
    answer: Answer,
    ended: &mut oneshot::Receiver<TaskStatus>,
    running: &mut Running,
) -> Answer {
    use oneshot::error::TryRecvError;
    let status = match ended.try_recv() {
        Ok(status) => Some(status),
        Err(TryRecvError::Empty) => return answer,
        // Killed while blocked: its report says how.
        Err(TryRecvError::Closed) => running.ending(ended).await,
    };
    ended_with(answer, status)
}

/// `answer` from a handler that ended as `status` (if known): the fault
/// that cut its body short, if it was one.
fn ended_with(answer: Answer, status: Option<TaskStatus>) -> Answer {
    match status {
        None => text(503, "the runtime is stopping"),
        Some(status) => fault(&status).unwrap_or(answer),
    }
}

/// The answer for a handler whose code ended (as `status`, if known)
/// without a response: its fault, or a 500 if it returned normally.
fn ended_without(status: Option<TaskStatus>) -> Answer {
    match status {
        None => text(503, "the runtime is stopping"),
        Some(status) => fault(&status)
            .unwrap_or_else(|| text(500, "handler returned without setting a response")),
    }
}

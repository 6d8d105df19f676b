//! A component route's request: a fresh task from the route's
//! `wasi:http/proxy` component, handed the request through
//! `wasi:http/incoming-handler`.
//!
//! The component reads the request's body from a `wasi:io` input stream
//! and writes its response's to an output stream, as it would under
//! `wasmtime serve`; on the host's side both stay within the route's
//! bounds as a WAGI route's do, and both stream (see `streamed`): a body
//! past its first 64 KiB arrives as the client sends it, and a response
//! body not finished within the grace streams after its first bytes, a
//! handler failing once it is under way cutting it short. Faults are a
//! WAGI route's (see [`super::fault`]): a handler that returns without
//! setting a response is a 500, one that answers with a `wasi:http`
//! error code a 502.
//!
//! Once its response is out, a handler may still be running (work after
//! its body, or its store being released): it keeps its slot until it
//! ends, and is killed if that is not within the route's timeout.

use super::{fault, refused, text, Answer, Route, Running};
use crate::host::{HttpResponse, Incoming};
use crate::pipe::Upload;
use crate::runtime::Runtime;
use crate::serving::conn::BodyError;
use crate::task::{TaskSpec, TaskStatus};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::body::{Body, Frame};
use hyper::http::request::Parts;
use hyper::{header, Request, Response};
use std::net::SocketAddr;
use std::task::{Context, Poll};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio::time::Instant;

/// The request a component gets: the client's head and the body read,
/// with a `host` header (the server's address) if it came without one.
pub(super) fn request(mut parts: Parts, body: Upload, local: SocketAddr) -> Request<Upload> {
    if parts.uri.authority().is_none() && !parts.headers.contains_key(header::HOST) {
        if let Ok(host) = header::HeaderValue::from_str(&local.to_string()) {
            parts.headers.insert(header::HOST, host);
        }
    }
    Request::from_parts(parts, body)
}

impl Route {
    /// A fresh task from `template`'s component answers `request`.
    pub(super) async fn component(
        &self,
        rt: &Runtime,
        template: &TaskSpec,
        request: Request<Upload>,
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
            Ok(Ok(answer)) => {
                running.release_by(deadline);
                answer
            }
            Ok(Err((answer, body))) => {
                let sent = answer.body().size_hint().lower() as usize;
                let left = self.spec.max_response.saturating_sub(sent);
                let tail = BodyTail::new(body, running, ended, deadline, left);
                super::streamed::with_tail(answer, tail)
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
    /// the fault that kept it from giving one; or (`Err`) the response
    /// with the body's first bytes, and the rest of the body to stream.
    async fn response(
        &self,
        mut response: oneshot::Receiver<HttpResponse>,
        ended: &mut oneshot::Receiver<TaskStatus>,
        running: &mut Running,
    ) -> Result<Answer, (Answer, OutBody)> {
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
        Ok(match set {
            None => match status {
                Some(status) => ended_without(status),
                None => ended_without(running.ending(ended).await),
            },
            Some(Err(code)) => text(502, format!("handler answered with an error: {code:?}")),
            Some(Ok(head)) => {
                let (answer, rest) = match self.first_bytes(head).await {
                    Ok(first) => first,
                    Err(Some(over)) => return Ok(over),
                    Err(None) => return Ok(text(500, "handler's response body broke off")),
                };
                if let Some(rest) = rest {
                    return Err((answer, rest));
                }
                match status {
                    Some(status) => ended_with(answer, status),
                    None => checked(answer, ended, running).await,
                }
            }
        })
    }

    /// The handler's response with the first bytes of its body: all of
    /// it if it ends within [`GRACE`](super::streamed::GRACE), else
    /// (`Some`) the rest to stream. `Err(Some)`: the 502 past
    /// `max_response`; `Err(None)`: the body broke off.
    pub(super) async fn first_bytes(
        &self,
        head: hyper::Response<OutBody>,
    ) -> Result<(Answer, Option<OutBody>), Option<Answer>> {
        let (mut parts, mut body) = head.into_parts();
        let mut out = Vec::new();
        let gather = self.gather(&mut body, &mut out);
        let ended = match tokio::time::timeout(super::streamed::GRACE, gather).await {
            Ok(ended) => ended?,
            Err(_) => false,
        };
        // The body's length is the server's to say, from what it holds.
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::TRANSFER_ENCODING);
        let answer = Response::from_parts(parts, Full::new(Bytes::from(out)));
        Ok((answer, (!ended).then_some(body)))
    }

    /// Reads `body` into `out` until it ends (`true`) or `out` holds a
    /// window's worth (`false`); `out` keeps what was read if dropped.
    async fn gather(&self, body: &mut OutBody, out: &mut Vec<u8>) -> Result<bool, Option<Answer>> {
        while out.len() < super::streamed::WINDOW {
            let Some(frame) = body.frame().await else {
                return Ok(true);
            };
            let frame = frame.map_err(|_| None)?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > self.spec.max_response {
                    return Err(Some(self.over_max_response()));
                }
                out.extend_from_slice(data);
            }
        }
        Ok(false)
    }
}

/// A component's response body, as `wasi:http` hands it over.
pub(super) type OutBody = wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// The rest of a component's response body, sent as the handler writes
/// it and the client takes it, at most `max_response` bytes in all. It
/// ends as the handler did: a body that looks finished because the
/// task's store was dropped (a trap, a kill, the route's timeout) ends
/// cut short.
struct BodyTail {
    body: OutBody,
    running: Running,
    ended: oneshot::Receiver<TaskStatus>,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    left: usize,
    finished: bool,
}

impl BodyTail {
    fn new(
        body: OutBody,
        running: Running,
        ended: oneshot::Receiver<TaskStatus>,
        deadline: Instant,
        left: usize,
    ) -> BodyTail {
        BodyTail {
            body,
            running,
            ended,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            left,
            finished: false,
        }
    }

    fn fail(&mut self, why: String) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.finished = true;
        self.running.kill(&why);
        Poll::Ready(Some(Err(why.into())))
    }

    /// The body's end, once the task's state says it is whole.
    fn end(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        use std::future::Future;
        let status = match std::pin::Pin::new(&mut self.ended).poll(cx) {
            // Still running: it finished its body itself.
            Poll::Pending => None,
            Poll::Ready(Ok(status)) => Some(status),
            // Killed while blocked: its report says how.
            Poll::Ready(Err(_)) => match self.running.poll_ending(&mut self.ended, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return self.fail("the runtime is stopping".into()),
                Poll::Ready(Some(status)) => Some(status),
            },
        };
        match status {
            Some(s) if !matches!(s, TaskStatus::Exited(0)) => {
                self.fail(format!("the handler ended the stream: {s:?}"))
            }
            _ => {
                self.finished = true;
                let deadline = self.deadline.deadline();
                self.running.release_by(deadline);
                Poll::Ready(None)
            }
        }
    }
}

impl Body for BodyTail {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        use std::future::Future;
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return this.fail("over its route's timeout".into());
        }
        match std::pin::Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => this.end(cx),
            Poll::Ready(Some(Err(e))) => this.fail(format!("the handler's body failed: {e}")),
            Poll::Ready(Some(Ok(frame))) if fits(&mut this.left, &frame) => {
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Ok(_))) => {
                this.fail("the handler's response is over max_response".into())
            }
        }
    }
}

/// Whether `frame`'s bytes fit within the `left` a response body may
/// still send; if they do, they are counted off it.
pub(super) fn fits(left: &mut usize, frame: &Frame<Bytes>) -> bool {
    let n = frame.data_ref().map_or(0, |d| d.len());
    let fit = n <= *left;
    if fit {
        *left -= n;
    }
    fit
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

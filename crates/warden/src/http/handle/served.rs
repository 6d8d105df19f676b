//! A component servlet's request: a route's `service` names a
//! long-lived `wasi:http/proxy` component task (a typed server serving
//! `wasi:http/incoming-handler`), and each request is one call of its
//! handler on that task's store, so what the component keeps between
//! calls (its globals, its heap) lasts from one request to the next.
//!
//! The request's `wasi:http` resources are made in the server's own
//! table as the call begins (`TypedServer::submit`), and the call runs on
//! the server's task (an active server: its CPU, its memory budget, its
//! limits), while the web server reads the response it sets: its head,
//! then its body as it is written, within the route's `max_response`
//! and timeout, streamed as a component route's is past its first
//! moments. A slow server holds only its own requests: the route's
//! slots bound how many wait for it.
//!
//! Faults are a module servlet's: a handler that traps ends the server
//! (its store may be half-changed) and the request is a 502 naming it,
//! as are the later ones until it is restarted (503 once its name is
//! gone); a handler past the route's timeout is a 504 (it goes on
//! running on its own task); one that returns without a response a 500;
//! an error code for a response a 502.

use super::component::{fits, OutBody};
use super::traced::{self, call_span};
use super::{text, Answer, Route};
use crate::host::{Incoming, TypedServer};
use crate::pipe::Upload;
use crate::serving::conn::BodyError;
use bytes::Bytes;
use hyper::body::{Body, Frame};
use hyper::Request;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio::time::Instant;
use wasmtime::component::Val;

/// How a servlet's call ended: its results, or why it failed; `Err`: the
/// server ended before it answered.
type Ended = Result<Result<Vec<Val>, String>, oneshot::error::RecvError>;

/// A component servlet: its server and its handler's number there.
pub(super) type Servlet = (Arc<TypedServer>, usize);

impl Route {
    /// The component servlet the task providing `name` is, if it is one.
    pub(super) fn component_servlet(&self, name: &str) -> Option<Servlet> {
        let client = self.client.as_ref()?;
        let portal = client.lookup_now(name)?;
        let handler = portal.service().direct_handler()?.clone();
        let server = handler.downcast::<TypedServer>().ok()?;
        let handle = server.http_handler()?;
        Some((server, handle))
    }

    /// The component servlet `servlet`, provided as `name`, answers
    /// `request`.
    pub(super) async fn served(
        &self,
        (name, servlet): (&str, Servlet),
        request: Request<Upload>,
        deadline: Instant,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        let (server, handle) = servlet;
        let (respond, response) = oneshot::channel();
        let response = Unread::head(response, self.spec.timeout);
        let traced = traced::call_context();
        let trace = traced.as_ref().map(|((at, _), _)| *at);
        let make = made(Incoming { request, respond });
        let call = match server.submit((handle, trace), make, 0) {
            Ok(call) => call,
            Err(why) => return text(503, format!("servlet {name:?}: {why}")),
        };
        let began = crate::telemetry::unix_ns();
        let counted = crate::clock::ticks::now();
        let answered = self.served_answer(name, &server, (response, call), deadline, slot);
        let answer = match tokio::time::timeout_at(deadline, answered).await {
            Ok(answer) => answer,
            Err(_) => text(
                504,
                format!(
                    "servlet {name:?} did not answer within {:?}",
                    self.spec.timeout
                ),
            ),
        };
        let stats = &server.funcs[handle].stats;
        stats.count(crate::clock::ticks::ns_since(counted));
        let failed = answer.status().is_server_error();
        if failed {
            stats.fail();
        }
        if let Some((at, spans)) = traced {
            spans.record(call_span(at, name, began, 0, (!failed).then_some(0)));
        }
        answer
    }

    /// The answer: the response the handler set, with its whole body or
    /// its first bytes and the rest to stream, or the fault that kept it
    /// from giving one.
    async fn served_answer(
        &self,
        name: &str,
        server: &Arc<TypedServer>,
        (mut response, mut call): (Unread, crate::host::CallAnswer),
        deadline: Instant,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        // The response is set inside the call, so it is sent before the
        // call's end: an end heard first is followed by another look.
        let head = response.receiver();
        let (set, ended) = tokio::select! {
            biased;
            set = &mut *head => (set.ok(), None),
            ended = &mut call => (head.try_recv().ok(), Some(ended)),
        };
        response.taken();
        let set = set.map(|r| r.map(|head| head.map(|body| response.body(body))));
        let head = match set {
            None => {
                let ended = match ended {
                    Some(ended) => ended,
                    None => (&mut call).await,
                };
                return without(name, server, ended);
            }
            Some(Err(code)) => {
                return text(
                    502,
                    format!("servlet {name:?} answered with an error: {code:?}"),
                )
            }
            Some(Ok(head)) => head,
        };
        let (answer, rest) = match self.first_bytes(head).await {
            Ok(first) => first,
            Err(Some(over)) => return over,
            Err(None) => {
                return text(
                    502,
                    format!("servlet {name:?}: its response body broke off"),
                )
            }
        };
        let call = match ended {
            Some(ended) => Err(failure(name, server, ended)),
            None => Ok(call),
        };
        let sent = answer.body().size_hint().lower() as usize;
        let left = self.spec.max_response.saturating_sub(sent);
        let mut tail = ServedTail::new((name, server), rest, call, (deadline, left), slot);
        match tail.body.is_some() {
            true => super::streamed::with_tail(answer, tail),
            false => match tail.cut_short() {
                Some(why) => text(502, why),
                None => answer,
            },
        }
    }
}

/// Makes the request's arguments in the server's store: the request and
/// its response's slot, as `handle` takes them. If the store cannot take
/// them (a servlet that keeps every request's handles reaches its handle
/// limit), what was put in its tables is taken out again, so that a
/// leaking servlet fails its later requests without holding their bytes.
fn made(incoming: Incoming) -> crate::host::MakeArgs {
    Box::new(move |store| {
        let (request, out) = incoming.enter(store.data_mut())?;
        let reps = (request.rep(), out.rep());
        let request = match request.try_into_resource_any(&mut *store) {
            Ok(r) => r,
            Err(e) => {
                Incoming::forget(store.data_mut(), reps);
                return Err(e);
            }
        };
        match out.try_into_resource_any(&mut *store) {
            Ok(out) => Ok(vec![Val::Resource(request), Val::Resource(out)]),
            Err(e) => {
                // Back out of the store's handles, then out of the table.
                use wasmtime::component::Resource;
                use wasmtime_wasi_http::p2::types::HostIncomingRequest;
                let back =
                    Resource::<HostIncomingRequest>::try_from_resource_any(request, &mut *store);
                let gone = back.map_or(u32::MAX, |r| r.rep());
                Incoming::forget(store.data_mut(), (gone, reps.1));
                Err(e)
            }
        }
    })
}

/// Why a call that ended as `ended` failed, if it did.
fn failure(name: &str, server: &TypedServer, ended: Ended) -> Option<String> {
    match ended {
        Ok(Ok(_)) => None,
        Ok(Err(why)) => Some(format!("servlet {name:?}: {why}")),
        Err(_) => Some(format!("servlet {name:?}: {}", server.gone())),
    }
}

/// The answer for a call that ended as `ended` without a response.
fn without(name: &str, server: &TypedServer, ended: Ended) -> Answer {
    match failure(name, server, ended) {
        Some(why) => text(502, why),
        None => text(
            500,
            format!("servlet {name:?} returned without setting a response"),
        ),
    }
}

/// A component servlet's answer past its first bytes: the rest of its
/// body, within `max_response` and the route's timeout. A body that ends
/// while the server has ended (a trap or a kill drops its store, which
/// ends every body it was writing) is cut short, not finished.
struct ServedTail {
    body: Option<OutBody>,
    /// The call, while it runs.
    call: Option<crate::host::CallAnswer>,
    /// Why the call failed, once it has.
    failed: Option<String>,
    server: Arc<TypedServer>,
    name: String,
    deadline: Pin<Box<tokio::time::Sleep>>,
    left: usize,
    finished: bool,
    _slot: OwnedSemaphorePermit,
}

impl ServedTail {
    /// The rest of `servlet`'s answer, `body`, while its call runs
    /// (`Ok`) or once it has ended (`Err`: why it failed, if it did),
    /// by `deadline` and within `left` bytes, holding `slot`.
    fn new(
        (name, server): (&str, &Arc<TypedServer>),
        body: Option<OutBody>,
        call: Result<crate::host::CallAnswer, Option<String>>,
        (deadline, left): (Instant, usize),
        slot: OwnedSemaphorePermit,
    ) -> ServedTail {
        let (call, failed) = match call {
            Ok(call) => (Some(call), None),
            Err(failed) => (None, failed),
        };
        ServedTail {
            body,
            call,
            failed,
            server: server.clone(),
            name: name.into(),
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            left,
            finished: false,
            _slot: slot,
        }
    }

    /// Why the body, now ended, was cut short, if it was: its call
    /// failed, or its server has ended.
    fn cut_short(&mut self) -> Option<String> {
        if let Some(call) = self.call.as_mut() {
            match call.try_recv() {
                Ok(ended) => self.failed = failure(&self.name, &self.server, Ok(ended)),
                Err(oneshot::error::TryRecvError::Closed) => {
                    self.failed = Some(self.server.gone());
                }
                Err(oneshot::error::TryRecvError::Empty) if self.server.has_ended() => {
                    self.failed = Some(self.server.gone());
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        self.failed.clone()
    }

    fn end(&mut self, why: Option<String>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.finished = true;
        Poll::Ready(why.map(|why| Err(why.into())))
    }
}

impl Body for ServedTail {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        use std::future::Future;
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return this.end(Some("over its route's timeout".into()));
        }
        let body = this.body.as_mut().expect("a tail has a body");
        match Pin::new(body).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                let why = this.cut_short();
                this.end(why)
            }
            Poll::Ready(Some(Err(e))) => this.end(Some(format!("the servlet's body failed: {e}"))),
            Poll::Ready(Some(Ok(frame))) if fits(&mut this.left, &frame) => {
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Ok(_))) => {
                this.end(Some("the servlet's response is over max_response".into()))
            }
        }
    }
}

/// What the web server has yet to read of a servlet's response: the
/// head it waits for, or (inside the body it wraps, see
/// [`Unread::body`]) the body. Dropped unread (its client went away, or
/// the route's timeout passed) it is read on its own, and thrown away,
/// for up to the route's timeout: the handler's writes go on succeeding
/// as they would for a client that stayed, so that one client's leaving
/// never makes a long-lived servlet fail (a handler that finds its
/// response stream closed may well trap, ending the servlet for all).
struct Unread {
    head: Option<oneshot::Receiver<crate::host::HttpResponse>>,
    body: Option<OutBody>,
    within: std::time::Duration,
}

impl Unread {
    fn head(rx: oneshot::Receiver<crate::host::HttpResponse>, within: std::time::Duration) -> Self {
        Unread {
            head: Some(rx),
            body: None,
            within,
        }
    }

    /// The head's receiver, while it is waited for.
    fn receiver(&mut self) -> &mut oneshot::Receiver<crate::host::HttpResponse> {
        self.head.as_mut().expect("the head is waited for once")
    }

    /// The head has been received, or will not be waited for.
    fn taken(&mut self) {
        self.head = None;
    }

    /// `body`, drained on its own if dropped before its end.
    fn body(&self, body: OutBody) -> OutBody {
        use http_body_util::BodyExt;
        let unread = Unread {
            head: None,
            body: Some(body),
            within: self.within,
        };
        unread.boxed_unsync()
    }

    /// Reads what is left, throwing it away, for up to `within`.
    async fn drain(
        head: Option<oneshot::Receiver<crate::host::HttpResponse>>,
        body: Option<OutBody>,
        within: std::time::Duration,
    ) {
        use http_body_util::BodyExt;
        let _ = tokio::time::timeout(within, async move {
            let mut body = match (head, body) {
                (_, Some(body)) => body,
                (Some(head), None) => match head.await {
                    Ok(Ok(response)) => response.into_body(),
                    _ => return,
                },
                (None, None) => return,
            };
            while let Some(Ok(_)) = body.frame().await {}
        })
        .await;
    }
}

impl Body for Unread {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.body = None;
        }
        polled
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        let (head, body) = (self.head.take(), self.body.take());
        if head.is_none() && body.is_none() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(Unread::drain(head, body, self.within));
        }
    }
}

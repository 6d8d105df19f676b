//! A servlet route's request: one portal call to the task providing the
//! route's service, carrying the request's head and body (its first
//! [`streamed::STREAM_AT`] bytes), answered by a CGI reply.
//!
//! A servlet served by a task of this node also gets the request's
//! exchange as a handle (see `crate::ipc::exchange`): it reads the rest of
//! a longer body from it, and it may stream its answer by passing it back
//! in its reply and sending the body on it. A passive servlet, or one on
//! another node, gets the body whole, in the message, and answers whole.

use super::traced::{self, call_span};
use super::{collect_into, from_cgi, streamed, text, Answer, Route, BODY_TIMEOUT};
use crate::ipc::client::Calling;
use crate::ipc::exchange::Exchange;
use crate::ipc::{Errno, Object};
use crate::pipe::{PipeReader, StreamedInput, Upload};
use crate::serving::budget;
use crate::serving::conn::BodyError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::http::request::Parts;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// A request's exchange as the web server keeps it.
struct Streams {
    exchange: Arc<Exchange>,
    pipe: PipeReader,
}

/// How a servlet call ended: timed out (`Err`), failed, or its reply.
type Called = Result<Result<(Vec<u8>, Vec<Object>), Errno>, tokio::time::error::Elapsed>;

impl Route {
    /// A servlet: one portal call carrying the request; the reply is CGI,
    /// whole or with its body streamed on the request's exchange.
    ///
    /// The reply is charged to the request's budget (`held`) as it leaves
    /// the call's buffer, before any copy is made for the answer: one
    /// over `max_response` is 502, one the budget cannot take 503.
    pub(super) async fn servlet(
        &self,
        name: &str,
        parts: &Parts,
        body: streamed::Input,
        deadline: Instant,
        held: Option<Arc<budget::Held>>,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        let client = self.client.as_ref().expect("servlet routes have a client");
        let Some(portal) = client.lookup_now(name) else {
            return text(503, format!("no task provides {name:?}"));
        };
        let by_task = portal.service().server().is_some();
        let (first, rest) = match by_task {
            true => split(body, self.spec.max_body),
            false => match self.whole_body(body).await {
                Ok(b) => (b, None),
                Err(answer) => return answer,
            },
        };
        let request = servlet_request(parts, &first);
        drop(first);
        let (streams, objects) = match by_task {
            true => self.exchange(rest, &held),
            false => (None, Vec::new()),
        };
        let max = self.spec.max_response;
        // Why the reply was refused: over `max_response` (None), or
        // over a budget.
        let refused = std::sync::OnceLock::new();
        let admit = |n: usize| {
            let charge = match &held {
                _ if n > max => Err(None),
                Some(h) => h.charge(n as u64).map_err(Some),
                None => Ok(()),
            };
            charge.map_err(|why| {
                let _ = refused.set(why);
                Errno::Quota
            })
        };
        // When tracing, the call is a span of the request's, and carries
        // it (to another node, in its frame).
        let traced = traced::call_context();
        let from = Calling {
            origin: None,
            trace: traced.as_ref().map(|((at, _), _)| *at),
        };
        let call = client.call_portal_within(from, portal, &request, objects, &admit);
        let began = crate::telemetry::unix_ns();
        let result = tokio::time::timeout_at(deadline, call).await;
        if let Some((at, spans)) = traced {
            let reply = result.as_ref().ok().and_then(|r| r.as_ref().ok());
            let reply = reply.map(|(r, _)| r.len());
            spans.record(call_span(at, name, began, request.len(), reply));
        }
        let charged = held.is_some();
        let refused = refused.get().copied();
        match streams.filter(|s| passed_back(&result, &s.exchange)) {
            Some(s) => self.streamed(result, s, deadline, charged, slot),
            None => self.servlet_answer(name, result, refused, charged),
        }
    }

    /// Whether the servlet `name` is a task of this node's (not passive,
    /// not on another node): it reads a long body from the exchange, or
    /// (a component servlet) from its request's stream.
    pub(super) fn servlet_streams(&self, name: &str) -> bool {
        let client = self.client.as_ref().expect("servlet routes have a client");
        let portal = client.lookup_now(name);
        let by_task = portal.is_some_and(|p| p.service().server().is_some());
        by_task || self.component_servlet(name).is_some()
    }

    /// The body of a request to a servlet that gets it whole, within the
    /// route's size and time limits.
    pub(super) async fn whole_body(&self, body: streamed::Input) -> Result<Bytes, Answer> {
        let (first, mut rest) = match body {
            streamed::Input::Whole(b) => return Ok(b),
            streamed::Input::Partial(first, rest) => (first, rest),
        };
        let mut have = first.to_vec();
        let limit = usize::try_from(self.spec.max_body).unwrap_or(usize::MAX);
        let read = collect_into(&mut have, &mut rest, limit, usize::MAX);
        match tokio::time::timeout(BODY_TIMEOUT, read).await {
            Ok(Ok(_)) => Ok(have.into()),
            Ok(Err(why)) => Err(self.unread(why)),
            Err(_) => Err(text(408, "request body not received in time")),
        }
    }

    /// A request's exchange: the rest of its body (if any) to read, and a
    /// pipe for a streamed answer, within `max_response` and charged to
    /// the request's budget; the call's objects carry the servlet's end.
    fn exchange(
        &self,
        rest: Option<Upload>,
        held: &Option<Arc<budget::Held>>,
    ) -> (Option<Streams>, Vec<Object>) {
        let input = rest.map(StreamedInput::new);
        let meter = held.clone().map(|h| h as Arc<dyn crate::pipe::Meter>);
        let limit = self.spec.max_response as u64;
        let (out, mut pipe) = crate::pipe::pipe(streamed::WINDOW, limit, meter);
        pipe.eager();
        let (exchange, end) = Exchange::new(input, out);
        let streams = Streams { exchange, pipe };
        (Some(streams), vec![Object::Exchange(end)])
    }

    /// The answer whose head (and first bytes) `result` replied, its body
    /// following on the exchange in `s`.
    fn streamed(
        &self,
        result: Called,
        s: Streams,
        deadline: Instant,
        charged: bool,
        slot: OwnedSemaphorePermit,
    ) -> Answer {
        let Ok(Ok((reply, _))) = result else {
            unreachable!("only a reply passes its exchange back")
        };
        let Streams { exchange, mut pipe } = s;
        pipe.lower_limit(reply.len() as u64);
        match super::cgi_answer(reply.into()) {
            Ok(mut answer) => {
                if charged {
                    answer.extensions_mut().insert(budget::Charged);
                }
                let tail = Tail {
                    pipe,
                    exchange,
                    deadline: Box::pin(tokio::time::sleep_until(deadline)),
                    finished: false,
                    _slot: slot,
                };
                streamed::with_tail(answer, tail)
            }
            // Dropping the pipe's reader fails the servlet's later sends.
            Err(malformed) => malformed,
        }
    }

    /// The answer for a servlet call to `name` that ended as `result`
    /// (`Err`: past the timeout), its reply refused (if it was) for
    /// `refused` (over `max_response`, or a budget), `charged` if the
    /// reply was charged to the request.
    fn servlet_answer(
        &self,
        name: &str,
        result: Called,
        refused: Option<Option<budget::Full>>,
        charged: bool,
    ) -> Answer {
        let max = self.spec.max_response;
        match result {
            Err(_) => text(
                504,
                format!(
                    "servlet {name:?} did not answer within {:?}",
                    self.spec.timeout
                ),
            ),
            Ok(Err(Errno::Denied)) => text(503, format!("no task provides {name:?}")),
            Ok(Err(_)) if refused.is_some() => match refused {
                Some(Some(full)) => text(503, format!("busy: {full}")),
                _ => text(
                    502,
                    format!("servlet {name:?}: its response is over {max} bytes"),
                ),
            },
            Ok(Err(e)) => text(502, format!("servlet {name:?}: {e}")),
            Ok(Ok((reply, _))) => {
                let mut answer = from_cgi(reply);
                if charged {
                    answer.extensions_mut().insert(budget::Charged);
                }
                answer
            }
        }
    }
}

/// A body split for a servlet with an exchange: its first
/// [`streamed::STREAM_AT`] bytes (or all of a shorter one) for the
/// message, and the rest to read from the exchange, within `max_body`.
fn split(body: streamed::Input, max_body: u64) -> (Bytes, Option<Upload>) {
    let at = streamed::STREAM_AT;
    match body {
        streamed::Input::Whole(b) if b.len() <= at => (b, None),
        streamed::Input::Whole(mut b) => {
            let rest = b.split_off(at);
            let rest = Full::new(rest).map_err(|never: std::convert::Infallible| match never {});
            (b, Some(Box::pin(rest)))
        }
        streamed::Input::Partial(mut first, body) => {
            let excess = first.split_off(at.min(first.len()));
            let left = max_body.saturating_sub(first.len() as u64);
            (first, Some(streamed::upload(excess, body, left)))
        }
    }
}

/// Whether the servlet's reply in `result` passed `exchange` back: its
/// answer's body follows on it.
fn passed_back(result: &Called, exchange: &Arc<Exchange>) -> bool {
    let Ok(Ok((_, objects))) = result else {
        return false;
    };
    objects
        .iter()
        .any(|o| matches!(o, Object::Exchange(end) if end.is_of(exchange)))
}

/// The rest of a servlet's streamed answer, read from its exchange's pipe
/// as the client takes it: complete at the servlet's shutdown, cut short
/// if its last handle goes first, it fails a bound, or the route's
/// timeout passes. Holds the request's handler slot while it lasts.
struct Tail {
    pipe: PipeReader,
    exchange: Arc<Exchange>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    finished: bool,
    _slot: OwnedSemaphorePermit,
}

impl Tail {
    fn end(&mut self, outcome: Option<String>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.finished = true;
        Poll::Ready(outcome.map(|why| Err(why.into())))
    }
}

impl Body for Tail {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return this.end(Some(
                "the servlet's answer is over its route's timeout".into(),
            ));
        }
        match this.pipe.poll_chunk(cx) {
            Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(Some(Err(fault))) => this.end(Some(fault.to_string())),
            Poll::Ready(None) if this.exchange.is_complete() => this.end(None),
            Poll::Ready(None) => this.end(Some("the servlet left its answer unfinished".into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A servlet's request: the head (request line, header lines, empty
/// line; CRLF) and the body (its first bytes, if it streams). An HTTP/2
/// request's line says `HTTP/2.0`.
fn servlet_request(parts: &Parts, body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(256 + body.len());
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let _ = write!(out, "{} {} {:?}\r\n", parts.method, target, parts.version);
    // An HTTP/2 request's host is in its URI: it becomes the header an
    // HTTP/1.1 request would have carried.
    if let (None, Some(host)) = (
        parts.headers.get(hyper::header::HOST),
        crate::http::cgi::host(parts),
    ) {
        let _ = write!(out, "host: {host}\r\n");
    }
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::servlet_request;

    fn head(req: hyper::Request<()>) -> String {
        let (parts, ()) = req.into_parts();
        String::from_utf8(servlet_request(&parts, b"body")).unwrap()
    }

    #[test]
    fn a_servlet_gets_the_head_as_received_and_the_body() {
        let req = hyper::Request::post("/kv/a?b=1")
            .header("Host", "x:1")
            .header("X-A", "1")
            .body(())
            .unwrap();
        assert_eq!(
            head(req),
            "POST /kv/a?b=1 HTTP/1.1\r\nhost: x:1\r\nx-a: 1\r\n\r\nbody"
        );
    }

    #[test]
    fn an_http2_request_names_its_host_in_a_header() {
        let req = hyper::Request::get("http://x:1/kv/a")
            .version(hyper::Version::HTTP_2)
            .header("X-A", "1")
            .body(())
            .unwrap();
        assert_eq!(
            head(req),
            "GET /kv/a HTTP/2.0\r\nhost: x:1\r\nx-a: 1\r\n\r\nbody"
        );
    }
}

//! Streamed bodies: a request body read by its handler as it arrives,
//! and a handler's response sent as it is written.
//!
//! A request body is read before its handler starts while it is short
//! (up to [`STREAM_AT`] bytes, within the body's time limit: a slow
//! client holds its connection, not a task); the rest of a longer one
//! reaches the task's stdin (or a component's incoming body) as it
//! arrives, within `max_body`, each frame given back to the request's
//! budget once it is the task's.
//!
//! A WAGI handler's stdout is a pipe (see `pipe`). A handler that ends
//! within [`GRACE`] without filling its pipe is answered whole, as
//! before; one still writing is answered once its CGI head is complete,
//! its body following as the client takes it. The pipe holds at most
//! [`WINDOW`] bytes (and one write), charged to the request's budget,
//! so a client that stops reading stops the handler at its next write
//! and holds no more than that. Once the head is out, a handler that fails, is
//! killed, or passes the route's timeout or `max_response` ends the
//! answer cut short: never a complete-looking one.

use super::{Answer, Running};
use crate::pipe::{Fault, PipeReader, Upload};
use crate::serving::budget::Held;
use crate::serving::conn::{BodyError, RequestBody};
use crate::task::TaskStatus;
use bytes::Bytes;
use hyper::body::{Body, Frame};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Request bodies longer than this are streamed to their handler.
pub const STREAM_AT: usize = 64 << 10;

/// Bytes a response's pipe holds before its handler waits.
pub const WINDOW: usize = 256 << 10;

/// A request's body: whole, or its first bytes and the rest to come.
pub enum Input {
    Whole(Bytes),
    Partial(Bytes, RequestBody),
}

/// The body of a request streamed to its handler: its first bytes,
/// then the rest as it arrives, at most `left` more bytes.
struct Rest {
    first: Option<Bytes>,
    body: RequestBody,
    left: u64,
    held: Option<Arc<Held>>,
}

/// The upload `first` then `body`, at most `max` bytes in all.
pub fn upload(first: Bytes, body: RequestBody, max: u64) -> Upload {
    let held = body.held();
    Box::pin(Rest {
        left: max.saturating_sub(first.len() as u64),
        first: Some(first),
        body,
        held,
    })
}

impl Body for Rest {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        let frame = match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(f))) => f,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let Ok(data) = frame.into_data() else {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::new()))));
        };
        let n = data.len() as u64;
        if n > self.left {
            return Poll::Ready(Some(Err(std::io::Error::other(
                "request body over the route's max_body",
            ))));
        }
        self.left -= n;
        // The frame is the task's now: what the request holds is only
        // what is still arriving.
        if let Some(h) = &self.held {
            h.release(n);
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

/// Reads `pipe` into `head` until it holds a CGI head (an empty line),
/// more than a head may be, or all there is: `Err` if the pipe failed.
pub async fn read_head(pipe: &mut PipeReader, head: &mut Vec<u8>) -> Result<(), Fault> {
    while let Some(chunk) = pipe.chunk().await {
        let from = head.len().saturating_sub(2);
        head.extend_from_slice(&chunk?);
        if ends_head(&head[from..]) || head.len() > crate::http::cgi::MAX_RESPONSE_HEAD {
            return Ok(());
        }
    }
    Ok(())
}

/// How long a handler is heard from only when it ends or fills its
/// pipe: one that ends within it is answered whole (with a length, and
/// at the cost of one wake-up); one still writing after it is streamed,
/// its first bytes this much later.
pub const GRACE: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether `b` holds the empty line that ends a head.
fn ends_head(b: &[u8]) -> bool {
    b.windows(2).any(|w| w == b"\n\n") || b.windows(3).any(|w| w == b"\n\r\n")
}

/// The rest of a WAGI handler's response, read from its pipe as the
/// client takes it; ends as the task did.
pub struct Tail {
    pipe: PipeReader,
    running: Running,
    ended: oneshot::Receiver<TaskStatus>,
    /// How the task ended, once known (`Some(None)`: the runtime dropped
    /// it).
    status: Option<Option<TaskStatus>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    finished: bool,
}

impl Tail {
    pub fn new(
        pipe: PipeReader,
        running: Running,
        ended: oneshot::Receiver<TaskStatus>,
        deadline: Instant,
    ) -> Tail {
        let mut pipe = pipe;
        pipe.eager();
        Tail {
            pipe,
            running,
            ended,
            status: None,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            finished: false,
        }
    }

    /// The end of the body, as the task's `status` says.
    fn finish(&mut self, status: Option<TaskStatus>) -> Option<Result<Frame<Bytes>, BodyError>> {
        self.finished = true;
        match status {
            Some(TaskStatus::Exited(0)) => {
                self.running.set_ended();
                None
            }
            Some(s) => Some(Err(format!("the handler ended the stream: {s:?}").into())),
            None => Some(Err("the runtime is stopping".into())),
        }
    }

    fn fail(&mut self, why: String) -> Option<Result<Frame<Bytes>, BodyError>> {
        self.finished = true;
        self.running.kill(&why);
        Some(Err(why.into()))
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
            return Poll::Ready(this.fail("over its route's timeout".into()));
        }
        if this.status.is_none() {
            if let Poll::Ready(s) = this.running.poll_ending(&mut this.ended, cx) {
                this.status = Some(s);
            }
        }
        match this.pipe.poll_chunk(cx) {
            Poll::Ready(Some(Ok(chunk))) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(Some(Err(fault))) => Poll::Ready(this.fail(fault.to_string())),
            Poll::Ready(None) | Poll::Pending => match this.status.take() {
                // The task's code has returned: everything it wrote is
                // in the pipe, and the pipe is empty.
                Some(status) => Poll::Ready(this.finish(status)),
                None => Poll::Pending,
            },
        }
    }
}

/// `answer` with `tail` to follow its bytes.
pub fn with_tail(
    mut answer: Answer,
    tail: impl Body<Data = Bytes, Error = BodyError> + Send + 'static,
) -> Answer {
    let tail = crate::serving::conn::Streamed::new(Box::pin(tail));
    answer.extensions_mut().insert(tail);
    answer
}

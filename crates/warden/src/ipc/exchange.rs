//! A servlet request's exchange: the stream its servlet reads the rest of
//! a long request body from and writes a streamed answer's body to.
//!
//! The web server makes one per call to a servlet served by a task of
//! this node and passes it in the call as a handle. The servlet reads with
//! `warden_sock_recv` what the message did not carry of the body (0 at its
//! end); to stream its answer it passes the same handle back in its reply
//! (whose bytes are the CGI head and the body's start) and goes on with
//! `warden_sock_send`, ending with `warden_sock_shutdown`. An answer whose
//! last handle goes (closed, or the servlet died) before that shutdown is
//! cut short, never complete-looking.
//!
//! What the answer's side holds is the web server's pipe (see
//! `crate::pipe`): a window, a total (`max_response` less the reply) and
//! the request's budget, charged as bytes enter and given back as they
//! leave; a client that stops reading stops the servlet's sends.

use crate::pipe::{PipeWriter, Shut, StreamedInput};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Bytes one send may bring into the pipe (the window's overshoot).
pub const MAX_SEND: usize = crate::pipe::CHUNK;

/// One request's exchange, as the web server keeps it.
pub struct Exchange {
    /// The rest of the request body (`None`: the message carried it all).
    input: Option<StreamedInput>,
    out: PipeWriter,
    /// Set by the servlet's shutdown: the answer ended complete.
    complete: AtomicBool,
}

/// What a servlet's handles hold: the answer ends when the last goes.
pub struct ExchangeEnd(Arc<Holder>);

struct Holder(Arc<Exchange>);

impl Drop for Holder {
    fn drop(&mut self) {
        self.0.out.close();
    }
}

/// Why an exchange call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// Nothing can be sent: the answer was ended, or its reader is gone.
    Closed,
    /// The body broke off or passed `max_body`; the answer passed its
    /// total or the request's budget.
    Broken,
}

impl Exchange {
    /// An exchange reading `input` and writing to `out`, and the end to
    /// hand the servlet.
    pub fn new(input: Option<StreamedInput>, out: PipeWriter) -> (Arc<Exchange>, ExchangeEnd) {
        let exchange = Arc::new(Exchange {
            input,
            out,
            complete: AtomicBool::new(false),
        });
        let end = ExchangeEnd(Arc::new(Holder(exchange.clone())));
        (exchange, end)
    }

    /// Whether the servlet ended its answer with a shutdown.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }
}

impl ExchangeEnd {
    /// Another handle's hold on the same exchange.
    pub fn dup(&self) -> ExchangeEnd {
        ExchangeEnd(self.0.clone())
    }

    /// Whether this end belongs to `exchange`.
    pub fn is_of(&self, exchange: &Arc<Exchange>) -> bool {
        Arc::ptr_eq(&self.0 .0, exchange)
    }

    fn exchange(&self) -> &Exchange {
        &self.0 .0
    }

    /// Up to `max` bytes of the rest of the body that came (empty: none
    /// yet), or its end (`Ok(None)`).
    pub fn read(&self, max: usize) -> Result<Option<bytes::Bytes>, Failed> {
        let Some(input) = &self.exchange().input else {
            return Ok(None);
        };
        match input.read(max) {
            Ok(b) => Ok(Some(b)),
            Err(None) => Ok(None),
            Err(Some(_)) => Err(Failed::Broken),
        }
    }

    /// Ready once a read has bytes or the end to give.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        match &self.exchange().input {
            Some(input) => input.poll_ready(cx),
            None => Poll::Ready(()),
        }
    }

    /// Ready once a send may bring bytes (how many, at most
    /// [`MAX_SEND`]), or can never.
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<Result<usize, Failed>> {
        if self.exchange().is_complete() {
            return Poll::Ready(Err(Failed::Closed));
        }
        self.exchange()
            .out
            .poll_room(cx)
            .map(|r| r.map(|n| n.min(MAX_SEND)).map_err(failed))
    }

    /// Appends `bytes` (after [`ExchangeEnd::poll_writable`] gave room).
    pub fn push(&self, bytes: &[u8]) -> Result<(), Failed> {
        if self.exchange().is_complete() {
            return Err(Failed::Closed);
        }
        self.exchange().out.push(bytes).map_err(failed)
    }

    /// Ends the answer complete; later sends fail.
    pub fn shutdown(&self) {
        self.exchange().complete.store(true, Ordering::Release);
        self.exchange().out.close();
    }
}

fn failed(shut: Shut) -> Failed {
    match shut {
        Shut::Gone => Failed::Closed,
        Shut::Failed => Failed::Broken,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipe::pipe;

    fn drain(r: &mut crate::pipe::PipeReader) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            match r.poll_chunk(&mut cx) {
                Poll::Ready(Some(Ok(b))) => out.extend_from_slice(&b),
                Poll::Ready(Some(Err(_))) => return (out, false),
                Poll::Ready(None) => return (out, true),
                Poll::Pending => return (out, false),
            }
        }
    }

    #[test]
    fn a_shutdown_ends_the_answer_complete_and_refuses_more() {
        let (w, mut r) = pipe(1024, 1 << 20, None);
        let (x, end) = Exchange::new(None, w);
        end.push(b"abc").unwrap();
        end.shutdown();
        assert_eq!(end.push(b"d"), Err(Failed::Closed));
        assert_eq!(drain(&mut r), (b"abc".to_vec(), true));
        assert!(x.is_complete());
        assert_eq!(end.read(10), Ok(None), "no body left");
    }

    #[test]
    fn the_last_end_gone_without_a_shutdown_is_no_complete_answer() {
        let (w, mut r) = pipe(1024, 1 << 20, None);
        let (x, end) = Exchange::new(None, w);
        let second = end.dup();
        assert!(second.is_of(&x));
        drop(end);
        second.push(b"still open").unwrap();
        drop(second);
        assert_eq!(drain(&mut r), (b"still open".to_vec(), true));
        assert!(!x.is_complete(), "ended, but not complete");
    }

    #[test]
    fn a_reader_gone_closes_the_senders_side() {
        let (w, r) = pipe(1024, 1 << 20, None);
        let (_x, end) = Exchange::new(None, w);
        drop(r);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(end.poll_writable(&mut cx), Poll::Ready(Err(Failed::Closed)));
        assert_eq!(end.push(b"x"), Err(Failed::Closed));
    }

    #[test]
    fn a_send_past_the_total_breaks_the_answer() {
        let (w, mut r) = pipe(1024, 4, None);
        let (_x, end) = Exchange::new(None, w);
        assert_eq!(end.push(b"12345"), Err(Failed::Broken));
        assert!(!drain(&mut r).1);
    }
}

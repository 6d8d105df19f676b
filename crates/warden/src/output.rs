//! Where a task's stdout and stderr go.
//!
//! Each stream is a `Sink`: the host's own stdout/stderr, nothing, or a
//! file. Everything a task writes is also kept in its [`LogRing`], the last
//! [`LOG_RING_BYTES`] of it, for operators. When several tasks share the host's terminal, each complete line is
//! prefixed with `[task-name] ` so that interleaved output stays readable;
//! partial lines are held back until their newline (or the task's end), up
//! to 16 KiB: a longer line is split, so a task writing without newlines
//! cannot make the host buffer without bound.

use bytes::Bytes;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// The destination of one output stream of a task, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Output {
    /// The host process's stdout (for a task's stdout) or stderr (for its stderr).
    #[default]
    Inherit,
    /// Discard everything.
    Null,
    /// Create or truncate this file.
    File(PathBuf),
    /// Keep it in memory, up to a bound (how an HTTP handler's response
    /// is collected). Not copied to the task's log.
    Capture(CapturedOutput),
    /// Into a pipe, as a client takes it (how an HTTP handler's response
    /// is streamed; see `pipe`). Not copied to the task's log.
    Stream(crate::pipe::PipeWriter),
}

/// Output kept in memory, at most `limit` bytes: a write past the limit
/// fails (the guest sees an I/O error) and the capture is marked
/// overflowed. Cheap to clone; clones share the bytes.
#[derive(Debug, Clone)]
pub struct CapturedOutput(Arc<Mutex<CaptureState>>);

#[derive(Debug)]
struct CaptureState {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl CapturedOutput {
    /// An empty capture holding at most `limit` bytes.
    pub fn new(limit: usize) -> CapturedOutput {
        CapturedOutput(Arc::new(Mutex::new(CaptureState {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CaptureState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes written so far (taken out), and whether a write was
    /// refused for passing the limit.
    pub fn take(&self) -> (Vec<u8>, bool) {
        let mut st = self.lock();
        (std::mem::take(&mut st.bytes), st.overflowed)
    }

    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut st = self.lock();
        if st.bytes.len() + bytes.len() > st.limit {
            st.overflowed = true;
            return Err(std::io::Error::other(
                "output larger than its capture limit",
            ));
        }
        st.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

impl PartialEq for CapturedOutput {
    fn eq(&self, other: &CapturedOutput) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CapturedOutput {}

/// Bytes of output kept per task for operators.
pub const LOG_RING_BYTES: usize = 64 * 1024;

/// The most recent output of a task (stdout and stderr interleaved).
#[derive(Debug, Default)]
pub struct LogRing {
    inner: Mutex<(std::collections::VecDeque<u8>, u64)>,
}

impl LogRing {
    fn push(&self, bytes: &[u8]) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (ring, total) = &mut *g;
        *total += bytes.len() as u64;
        let keep = &bytes[bytes.len().saturating_sub(LOG_RING_BYTES)..];
        let over = (ring.len() + keep.len()).saturating_sub(LOG_RING_BYTES);
        ring.drain(..over.min(ring.len()));
        ring.extend(keep);
    }

    /// Bytes written since offset `from` (counting from the task's first
    /// byte) that are still kept, and the offset after them.
    pub fn read_from(&self, from: u64) -> (Vec<u8>, u64) {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (ring, total) = &*g;
        let first = total - ring.len() as u64;
        let skip = from.saturating_sub(first).min(ring.len() as u64) as usize;
        (ring.iter().skip(skip).copied().collect(), *total)
    }
}

/// Which host stream an [`Output::Inherit`] refers to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HostStream {
    Stdout,
    Stderr,
}

enum Target {
    Host(HostStream),
    Null,
    File(std::fs::File),
    Capture(CapturedOutput),
    Stream(crate::pipe::PipeWriter),
}

struct SinkInner {
    target: Target,
    /// `Some` when complete lines are prefixed; holds the prefix.
    prefix: Option<String>,
    /// A partial line waiting for its newline (prefixing only).
    pending: Vec<u8>,
}

/// A task's output stream, handed to WASI. Cheap to clone (all clones write
/// to the same place).
#[derive(Clone)]
pub(crate) struct Sink(Arc<Mutex<SinkInner>>, Arc<LogRing>);

impl Sink {
    pub(crate) fn open(
        output: &Output,
        host: HostStream,
        prefix: Option<String>,
        log: Arc<LogRing>,
    ) -> std::io::Result<Sink> {
        let target = match output {
            Output::Inherit => Target::Host(host),
            Output::Null => Target::Null,
            Output::File(p) => Target::File(std::fs::File::create(p)?),
            Output::Capture(c) => Target::Capture(c.clone()),
            Output::Stream(p) => Target::Stream(p.clone()),
        };
        let prefix = match target {
            Target::Host(_) => prefix,
            _ => None,
        };
        Ok(Sink(
            Arc::new(Mutex::new(SinkInner {
                target,
                prefix,
                pending: Vec::new(),
            })),
            log,
        ))
    }

    /// Writes `bytes` to the sink's target (and its log).
    pub(crate) fn write_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &inner.target {
            Target::Capture(c) => return c.write(bytes),
            Target::Stream(p) => return p.push(bytes).map_err(shut),
            _ => {}
        }
        self.1.push(bytes);
        inner.write(bytes)
    }

    /// The pipe this sink streams into, if it does.
    pub(crate) fn stream(&self) -> Option<crate::pipe::PipeWriter> {
        match &self.0.lock().unwrap_or_else(|e| e.into_inner()).target {
            Target::Stream(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// The I/O error for a write a pipe refused.
fn shut(s: crate::pipe::Shut) -> std::io::Error {
    match s {
        crate::pipe::Shut::Gone => std::io::ErrorKind::BrokenPipe.into(),
        crate::pipe::Shut::Failed => std::io::Error::other("the response stream failed"),
    }
}

impl SinkInner {
    fn emit(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.target {
            Target::Null => Ok(()),
            Target::File(f) => f.write_all(bytes),
            Target::Host(HostStream::Stdout) => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Target::Host(HostStream::Stderr) => std::io::stderr().lock().write_all(bytes),
            Target::Capture(c) => c.write(bytes),
            Target::Stream(p) => p.push(bytes).map_err(shut),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let Some(prefix) = &self.prefix else {
            return self.emit(bytes);
        };
        let mut out = Vec::with_capacity(bytes.len() + prefix.len() + self.pending.len());
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            out.extend_from_slice(prefix.as_bytes());
            out.append(&mut self.pending);
            out.extend_from_slice(&rest[..=nl]);
            rest = &rest[nl + 1..];
        }
        self.pending.extend_from_slice(rest);
        // A line is held back at most MAX_LINE bytes: a task writing
        // without newlines must not make the host buffer without bound.
        while self.pending.len() >= MAX_LINE {
            out.extend_from_slice(prefix.as_bytes());
            out.extend(self.pending.drain(..MAX_LINE));
            out.push(b'\n');
        }
        if out.is_empty() {
            Ok(())
        } else {
            self.emit(&out)
        }
    }
}

impl Drop for SinkInner {
    fn drop(&mut self) {
        if let Target::Stream(p) = &self.target {
            p.close();
        }
        if let (Some(prefix), false) = (&self.prefix, self.pending.is_empty()) {
            let mut line = prefix.clone().into_bytes();
            line.append(&mut self.pending);
            line.push(b'\n');
            let _ = self.emit(&line);
        }
    }
}

impl IsTerminal for Sink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Sink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Sink {
    async fn ready(&mut self) {
        if let Some(p) = self.stream() {
            let _ = std::future::poll_fn(|cx| p.poll_room(cx)).await;
        }
    }
}

/// Longest line held back for its prefix; longer lines are split.
const MAX_LINE: usize = 16 * 1024;

/// Largest write accepted at once (the guest loops for more).
const MAX_WRITE: usize = 64 * 1024;

impl OutputStream for Sink {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        match self.stream().map(|p| p.room()) {
            None => Ok(MAX_WRITE),
            Some(Ok(room)) => Ok(room.min(MAX_WRITE)),
            Some(Err(s)) => Err(StreamError::LastOperationFailed(shut(s).into())),
        }
    }
}

impl tokio::io::AsyncWrite for Sink {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Some(p) = self.stream() {
            return match p.poll_room(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Err(s)) => Poll::Ready(Err(shut(s))),
                Poll::Ready(Ok(_)) => {
                    let n = buf.len().min(MAX_WRITE);
                    Poll::Ready(p.push(&buf[..n]).map(|()| n).map_err(shut))
                }
            };
        }
        Poll::Ready(self.write_bytes(buf).map(|()| buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output without newlines is passed on in bounded pieces.
    #[test]
    fn a_line_without_end_is_not_buffered_without_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut sink = SinkInner {
            target: Target::File(std::fs::File::create(&path).unwrap()),
            prefix: Some("[t] ".into()),
            pending: Vec::new(),
        };
        for _ in 0..64 {
            sink.write(&[b'x'; 4096]).unwrap();
            assert!(sink.pending.len() < MAX_LINE);
        }
        drop(sink);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches('x').count(), 64 * 4096, "nothing lost");
        assert!(text
            .lines()
            .all(|l| l.starts_with("[t] ") && l.len() <= MAX_LINE + 4));
    }

    #[test]
    fn log_ring_keeps_the_tail_and_counts_everything() {
        let ring = LogRing::default();
        ring.push(b"hello ");
        ring.push(b"world");
        assert_eq!(ring.read_from(0), (b"hello world".to_vec(), 11));
        assert_eq!(ring.read_from(6), (b"world".to_vec(), 11));
        let big = vec![b'x'; LOG_RING_BYTES + 10];
        ring.push(&big);
        let (tail, total) = ring.read_from(0);
        assert_eq!((tail.len(), total), (LOG_RING_BYTES, 11 + big.len() as u64));
        assert_eq!(ring.read_from(total).0, b"");
    }

    #[test]
    fn prefixes_complete_lines_and_flushes_partial_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let file = std::fs::File::create(&path).unwrap();
        let mut inner = SinkInner {
            target: Target::File(file),
            prefix: Some("[t] ".into()),
            pending: Vec::new(),
        };
        inner.write(b"one\ntw").unwrap();
        inner.write(b"o\nthree").unwrap();
        drop(inner);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "[t] one\n[t] two\n[t] three\n");
    }
}

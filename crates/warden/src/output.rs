//! Where a task's stdout and stderr go.
//!
//! Each stream is a [`Sink`]: the host's own stdout/stderr, nothing, or a
//! file. When several tasks share the host's terminal, each complete line is
//! prefixed with `[task-name] ` so that interleaved output stays readable;
//! partial lines are held back until their newline (or the task's end).

use bytes::Bytes;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// The destination of one output stream of a task, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The host process's stdout (for a task's stdout) or stderr (for its stderr).
    Inherit,
    /// Discard everything.
    Null,
    /// Create or truncate this file.
    File(PathBuf),
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
pub(crate) struct Sink(Arc<Mutex<SinkInner>>);

impl Sink {
    pub(crate) fn open(
        output: &Output,
        host: HostStream,
        prefix: Option<String>,
    ) -> std::io::Result<Sink> {
        let target = match output {
            Output::Inherit => Target::Host(host),
            Output::Null => Target::Null,
            Output::File(p) => Target::File(std::fs::File::create(p)?),
        };
        let prefix = match target {
            Target::Host(_) => prefix,
            _ => None,
        };
        Ok(Sink(Arc::new(Mutex::new(SinkInner {
            target,
            prefix,
            pending: Vec::new(),
        }))))
    }

    fn write_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.write(bytes)
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
        if out.is_empty() {
            Ok(())
        } else {
            self.emit(&out)
        }
    }
}

impl Drop for SinkInner {
    fn drop(&mut self) {
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
    async fn ready(&mut self) {}
}

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
        Ok(MAX_WRITE)
    }
}

impl tokio::io::AsyncWrite for Sink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
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

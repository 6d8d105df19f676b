//! A bounded pipe for a streamed HTTP body: a task writes at one end (its
//! stdout), the protocol reads at the other as the client takes the
//! bytes.
//!
//! What the pipe holds is bounded twice: by its window (a write waits
//! while the pipe holds that many bytes or more; one write may pass it by
//! at most its own length, which the host bounds), and by its [`Meter`],
//! which is charged every byte as it enters and given it back as it
//! leaves (a server's memory budget). Its total is bounded by a limit
//! (`max_response`): a write past it fails and so does the body. A
//! reader that goes away fails every later write, so a task streaming to
//! a client that left learns it at its next write.
//!
//! Writes are joined into chunks of up to [`CHUNK`] bytes. A reader is
//! woken by every write only once it asks to be ([`PipeReader::eager`]):
//! before, only when the window fills or the writer closes, so a writer
//! that writes a short answer in pieces and ends costs its reader one
//! wake-up, at its end.
//!
//! One lock per pipe, held only to move bytes or a waker; never held
//! while a meter is charged from another lock (the meter is atomics).

/// Writes are joined into chunks of at most this many bytes.
pub const CHUNK: usize = 64 << 10;

use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// What a pipe's bytes are charged to while it holds them.
pub trait Meter: Send + Sync {
    /// Charges `n` bytes, or says why they do not fit.
    fn charge(&self, n: u64) -> Result<(), String>;
    /// Gives back `n` bytes charged before.
    fn release(&self, n: u64);
}

/// Why a pipe failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Its writer passed its total limit.
    TooLong(u64),
    /// Its meter refused a write (why).
    Budget(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::TooLong(n) => write!(f, "the handler's response is over {n} bytes"),
            Fault::Budget(why) => write!(f, "busy: {why}"),
        }
    }
}

impl std::error::Error for Fault {}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shut {
    /// The reader is gone.
    Gone,
    /// The pipe failed (see [`Fault`]).
    Failed,
}

struct State {
    chunks: VecDeque<bytes::BytesMut>,
    eager: bool,
    buffered: usize,
    total: u64,
    closed: bool,
    gone: bool,
    fault: Option<Fault>,
    writer: Option<Waker>,
    reader: Option<Waker>,
    limit: u64,
}

struct Shared {
    state: Mutex<State>,
    window: usize,
    meter: Option<Arc<dyn Meter>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writing end; clones write to the same pipe.
#[derive(Clone)]
pub struct PipeWriter(Arc<Shared>);

/// The reading end; dropping it fails later writes.
pub struct PipeReader(Arc<Shared>);

impl std::fmt::Debug for PipeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PipeWriter")
    }
}

impl PartialEq for PipeWriter {
    fn eq(&self, other: &PipeWriter) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PipeWriter {}

/// A pipe holding about `window` bytes at most, `limit` in all, its
/// bytes charged to `meter` while held.
pub fn pipe(window: usize, limit: u64, meter: Option<Arc<dyn Meter>>) -> (PipeWriter, PipeReader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            chunks: VecDeque::new(),
            eager: false,
            buffered: 0,
            total: 0,
            closed: false,
            gone: false,
            fault: None,
            writer: None,
            reader: None,
            limit,
        }),
        window,
        meter,
    });
    (PipeWriter(shared.clone()), PipeReader(shared))
}

impl PipeWriter {
    /// Bytes a write may bring now (0: it must wait), or why none ever.
    pub fn room(&self) -> Result<usize, Shut> {
        let st = self.0.lock();
        Self::room_in(&st, self.0.window)
    }

    fn room_in(st: &State, window: usize) -> Result<usize, Shut> {
        if st.gone {
            return Err(Shut::Gone);
        }
        if st.fault.is_some() {
            return Err(Shut::Failed);
        }
        Ok(window.saturating_sub(st.buffered))
    }

    /// Ready once a write may bring bytes (with how many), or never can.
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<Result<usize, Shut>> {
        let mut st = self.0.lock();
        match Self::room_in(&st, self.0.window) {
            Ok(0) => {
                st.writer = Some(cx.waker().clone());
                Poll::Pending
            }
            r => Poll::Ready(r),
        }
    }

    /// Appends `bytes` whatever the window (callers wait for room first):
    /// refused past the limit or the meter, which fails the pipe.
    pub fn push(&self, bytes: &[u8]) -> Result<(), Shut> {
        if bytes.is_empty() {
            return self.room().map(drop);
        }
        let n = bytes.len() as u64;
        let mut st = self.0.lock();
        Self::room_in(&st, self.0.window)?;
        let fault = if st.total + n > st.limit {
            Some(Fault::TooLong(st.limit))
        } else {
            self.0
                .meter
                .as_ref()
                .and_then(|m| m.charge(n).err().map(Fault::Budget))
        };
        if let Some(fault) = fault {
            st.fault = Some(fault);
            wake(st.reader.take());
            return Err(Shut::Failed);
        }
        st.total += n;
        st.buffered += bytes.len();
        match st.chunks.back_mut() {
            Some(last) if last.len() + bytes.len() <= CHUNK => last.extend_from_slice(bytes),
            _ => st.chunks.push_back(bytes::BytesMut::from(bytes)),
        }
        if st.eager || st.buffered >= self.0.window {
            let reader = st.reader.take();
            drop(st);
            wake(reader);
        }
        Ok(())
    }

    /// Writes all of `bytes` once there is room for any.
    pub async fn write(&self, bytes: &[u8]) -> Result<(), Shut> {
        std::future::poll_fn(|cx| self.poll_room(cx)).await?;
        self.push(bytes)
    }

    /// No more writes: the reader sees the end once it has the rest.
    pub fn close(&self) {
        let mut st = self.0.lock();
        st.closed = true;
        let reader = st.reader.take();
        drop(st);
        wake(reader);
    }
}

fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

impl PipeReader {
    /// The next chunk, `None` at the end, or the pipe's fault.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Fault>>> {
        let mut st = self.0.lock();
        if let Some(f) = &st.fault {
            return Poll::Ready(Some(Err(f.clone())));
        }
        let Some(chunk) = st.chunks.pop_front() else {
            if st.closed {
                return Poll::Ready(None);
            }
            st.reader = Some(cx.waker().clone());
            return Poll::Pending;
        };
        st.buffered -= chunk.len();
        let writer = st.writer.take();
        drop(st);
        if let Some(m) = &self.0.meter {
            m.release(chunk.len() as u64);
        }
        wake(writer);
        Poll::Ready(Some(Ok(chunk.freeze())))
    }

    /// Lowers the pipe's total limit by `n` (bytes its writer sent by
    /// other means); a pipe already past the new limit fails.
    pub fn lower_limit(&mut self, n: u64) {
        let mut st = self.0.lock();
        st.limit = st.limit.saturating_sub(n);
        if st.total > st.limit && st.fault.is_none() {
            st.fault = Some(Fault::TooLong(st.limit));
        }
    }

    /// From now on, every write wakes the reader.
    pub fn eager(&mut self) {
        self.0.lock().eager = true;
    }

    /// Ready once the pipe holds a window's worth, is closed, or failed
    /// (what wakes a reader that is not eager).
    pub fn poll_full(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.0.lock();
        if st.closed || st.fault.is_some() || st.buffered >= self.0.window {
            return Poll::Ready(());
        }
        st.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Everything the pipe holds now, joined (without a copy when it is
    /// one chunk), and its fault if it failed.
    pub fn take_all(&mut self) -> Result<Bytes, Fault> {
        let mut parts = Vec::new();
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match self.poll_chunk(&mut cx) {
                Poll::Ready(Some(Ok(b))) => parts.push(b),
                Poll::Ready(Some(Err(f))) => return Err(f),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        Ok(match parts.len() {
            0 => Bytes::new(),
            1 => parts.swap_remove(0),
            _ => Bytes::from(parts.concat()),
        })
    }

    /// The next chunk, `None` at the end, or the pipe's fault.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, Fault>> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.gone = true;
        let held = std::mem::take(&mut st.chunks);
        let writer = st.writer.take();
        st.buffered = 0;
        drop(st);
        if let Some(m) = &self.0.meter {
            m.release(held.iter().map(|c| c.len() as u64).sum());
        }
        wake(writer);
    }
}

/// A request body as it arrives (its errors as I/O errors).
pub type Upload =
    std::pin::Pin<Box<dyn hyper::body::Body<Data = Bytes, Error = std::io::Error> + Send>>;

/// A task's stdin reading a request body as it arrives: a read takes
/// what came, and waits (the task's fiber, not a thread) while nothing
/// has. At most one frame of the body is held here at a time. Clones
/// read the same body.
#[derive(Clone)]
pub struct StreamedInput(Arc<Mutex<Input>>);

struct Input {
    pending: Bytes,
    body: Option<Upload>,
    failed: Option<String>,
}

impl std::fmt::Debug for StreamedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamedInput")
    }
}

impl StreamedInput {
    /// Stdin reading `body`.
    pub fn new(body: Upload) -> StreamedInput {
        StreamedInput(Arc::new(Mutex::new(Input {
            pending: Bytes::new(),
            body: Some(body),
            failed: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Input> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to `size` bytes that came (empty: none yet), or the end.
    pub fn read(&self, size: usize) -> Result<Bytes, Option<String>> {
        let mut st = self.lock();
        if !st.pending.is_empty() {
            let n = size.min(st.pending.len());
            return Ok(st.pending.split_to(n));
        }
        if let Some(why) = &st.failed {
            return Err(Some(why.clone()));
        }
        if st.body.is_none() {
            return Err(None);
        }
        Ok(Bytes::new())
    }

    /// Ready once a read has bytes or the end to give.
    pub fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.lock();
        while st.pending.is_empty() && st.failed.is_none() {
            let Some(body) = st.body.as_mut() else {
                break;
            };
            match body.as_mut().poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => st.body = None,
                Poll::Ready(Some(Err(e))) => {
                    st.failed = Some(e.to_string());
                    st.body = None;
                }
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        st.pending = data;
                    }
                }
            }
        }
        Poll::Ready(())
    }
}

impl wasmtime_wasi::cli::IsTerminal for StreamedInput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdinStream for StreamedInput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::InputStream> {
        Box::new(self.clone())
    }
}

impl wasmtime_wasi::p2::InputStream for StreamedInput {
    fn read(&mut self, size: usize) -> wasmtime_wasi::p2::StreamResult<Bytes> {
        use wasmtime_wasi::p2::StreamError;
        StreamedInput::read(self, size).map_err(|e| match e {
            None => StreamError::Closed,
            Some(why) => StreamError::LastOperationFailed(wasmtime::Error::msg(why)),
        })
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for StreamedInput {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await
    }
}

impl tokio::io::AsyncRead for StreamedInput {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.poll_ready(cx).is_pending() {
            return Poll::Pending;
        }
        match self.read(buf.remaining()) {
            Ok(b) => buf.put_slice(&b),
            Err(None) => {}
            Err(Some(why)) => return Poll::Ready(Err(std::io::Error::other(why))),
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Count(AtomicU64, u64);

    impl Meter for Count {
        fn charge(&self, n: u64) -> Result<(), String> {
            self.0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                    (u + n <= self.1).then_some(u + n)
                })
                .map(drop)
                .map_err(|_| "full".into())
        }
        fn release(&self, n: u64) {
            self.0.fetch_sub(n, Ordering::AcqRel);
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn noop() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    #[test]
    fn stdin_reads_a_body_frame_by_frame_to_its_end() {
        let frames: Vec<Result<hyper::body::Frame<Bytes>, std::io::Error>> = vec![
            Ok(hyper::body::Frame::data(Bytes::from_static(b"abc"))),
            Ok(hyper::body::Frame::data(Bytes::from_static(b"de"))),
        ];
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let input = StreamedInput::new(Box::pin(body));
        assert_eq!(input.read(10), Ok(Bytes::new()), "nothing read yet");
        assert!(input.poll_ready(&mut noop()).is_ready());
        assert_eq!(input.read(2), Ok(Bytes::from_static(b"ab")));
        assert_eq!(input.read(10), Ok(Bytes::from_static(b"c")));
        assert!(input.poll_ready(&mut noop()).is_ready());
        assert_eq!(input.read(10), Ok(Bytes::from_static(b"de")));
        assert!(input.poll_ready(&mut noop()).is_ready());
        assert_eq!(input.read(10), Err(None), "the end");
    }

    #[test]
    fn a_full_window_makes_the_writer_wait_and_a_read_frees_it() {
        let meter = Arc::new(Count(AtomicU64::new(0), 1 << 20));
        let (w, mut r) = pipe(10, 100, Some(meter.clone()));
        w.push(b"0123456789ab").unwrap();
        assert_eq!(w.poll_room(&mut noop()), Poll::Pending);
        assert_eq!(meter.0.load(Ordering::Relaxed), 12);
        let Poll::Ready(Some(Ok(c))) = r.poll_chunk(&mut noop()) else {
            panic!("a chunk")
        };
        assert_eq!(&c[..], b"0123456789ab");
        assert_eq!(meter.0.load(Ordering::Relaxed), 0);
        assert_eq!(w.poll_room(&mut noop()), Poll::Ready(Ok(10)));
        assert!(r.poll_chunk(&mut noop()).is_pending());
        w.close();
        assert!(matches!(r.poll_chunk(&mut noop()), Poll::Ready(None)));
    }

    #[test]
    fn past_the_limit_or_the_meter_the_pipe_fails() {
        let (w, mut r) = pipe(1000, 10, None);
        w.push(b"12345").unwrap();
        assert_eq!(w.push(b"123456"), Err(Shut::Failed));
        assert_eq!(r.take_all(), Err(Fault::TooLong(10)), "the reader sees why");
        let meter = Arc::new(Count(AtomicU64::new(0), 8));
        let (w, r) = pipe(1000, 1000, Some(meter.clone()));
        w.push(b"12345").unwrap();
        assert_eq!(w.push(b"12345"), Err(Shut::Failed));
        drop(r);
        assert_eq!(
            meter.0.load(Ordering::Relaxed),
            0,
            "a dropped reader gives all back"
        );
    }

    /// Until it is eager, a reader is woken by a full window or the end,
    /// not by each write; and what it takes whole is one chunk.
    #[test]
    fn a_quiet_reader_is_woken_by_a_full_window_or_the_end() {
        let (w, mut r) = pipe(8, 100, None);
        let (count, waker) = crate::test_waker::counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(r.poll_full(&mut cx).is_pending());
        w.push(b"abc").unwrap();
        w.push(b"def").unwrap();
        assert_eq!(count.get(), 0, "two writes, no wake-up");
        w.push(b"gh").unwrap();
        assert_eq!(count.get(), 1, "the window is full");
        assert_eq!(r.take_all().unwrap(), Bytes::from_static(b"abcdefgh"));
        assert!(r.poll_full(&mut cx).is_pending());
        r.eager();
        w.push(b"i").unwrap();
        assert_eq!(count.get(), 2, "an eager reader hears each write");
        w.close();
        assert!(r.poll_full(&mut cx).is_ready());
    }

    #[test]
    fn a_reader_gone_refuses_writes_and_wakes_a_waiting_writer() {
        let (w, r) = pipe(4, 100, None);
        w.push(b"abcd").unwrap();
        assert!(w.poll_room(&mut noop()).is_pending());
        drop(r);
        assert_eq!(w.room(), Err(Shut::Gone));
        assert_eq!(w.push(b"x"), Err(Shut::Gone));
    }

    /// A writer and a reader on two threads: every byte arrives, in
    /// order, and the pipe never holds more than its window and a write.
    #[test]
    fn bytes_cross_threads_in_order_within_the_window() {
        let meter = Arc::new(Count(AtomicU64::new(0), 1 << 20));
        let (w, mut r) = pipe(256, u64::MAX, Some(meter.clone()));
        let peak = Arc::new(AtomicU64::new(0));
        let writer = std::thread::spawn({
            let peak = peak.clone();
            let meter = meter.clone();
            move || {
                block_on(async {
                    for i in 0..20_000u32 {
                        w.write(&i.to_le_bytes()).await.unwrap();
                        peak.fetch_max(meter.0.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                });
                w.close();
            }
        });
        let mut got = Vec::new();
        block_on(async {
            while let Some(c) = r.chunk().await {
                got.extend_from_slice(&c.unwrap());
            }
        });
        writer.join().unwrap();
        let want: Vec<u8> = (0..20_000u32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(got, want);
        assert!(peak.load(Ordering::Relaxed) <= 256 + 4);
    }
}

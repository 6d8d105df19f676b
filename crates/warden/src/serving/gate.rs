//! Admitting a server's connections, and making room for a new one when
//! it is full.
//!
//! A server serves at most `max` connections. When all are open and a
//! new client arrives, one that has no request at work gives way: the
//! one idle longest among those with no request at all (still reading
//! their first head, as a slowloris's are, or kept alive since their last
//! answer), else the one waiting longest for a request body (a slow body
//! is the other slowloris), else the one that has waited longest for its
//! client to read an answer (a slow reader). A request is at work from the
//! moment its body has all arrived (or was put aside unread) until its
//! response's body is handed to the protocol; a connection with a request
//! at work never gives way. When every connection has one, the new client
//! is closed at accept.
//!
//! A connection told to give way ([`Ticket::evicted`]) closes within
//! [`EVICT_GRACE`] unless by then a request is at work in it or an answer
//! is still waiting to be written to its socket (its client reads slowly,
//! see [`Sending`]); those are finished, within the 10 s any closing
//! connection has (see `conn`). Those closing are not counted among the `max`, but no more than
//! `max` close at once, so at most `2 × max` sockets are ever open.
//!
//! Lock order: the gate's list, then (to tell a connection to give way)
//! that connection's notifier; nothing else is locked under the list.

use super::budget::Held;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a connection told to give way may take to close.
pub const EVICT_GRACE: Duration = Duration::from_millis(200);

/// A server's connections, and the signal that tells them it stops.
pub struct Gate {
    live: AtomicUsize,
    closing: tokio::sync::watch::Sender<bool>,
    /// Numbers the moments connections become idle, in order.
    ticks: AtomicU64,
    open: Mutex<Open>,
}

/// The connections open, each knowing its place in `conns`.
#[derive(Default)]
struct Open {
    conns: Vec<Arc<Conn>>,
    /// How many of them were told to give way.
    evicting: usize,
}

/// One connection's requests, as the gate sees them.
#[derive(Default)]
struct Conn {
    /// Its index in [`Open::conns`].
    at: AtomicUsize,
    /// Requests from their head's end until their response is taken.
    in_flight: AtomicUsize,
    /// Of those, the ones whose body has not all arrived.
    reading: AtomicUsize,
    /// Of those, the ones whose answer is streaming (see [`Tracked`]).
    streaming: AtomicUsize,
    /// Whether a request began since [`Ticket::idle`] last looked.
    began: AtomicBool,
    /// When it began to wait (the connection opened, its last request
    /// ended, or a request began to wait for its body), as the gate's
    /// tick then: the smallest has waited longest.
    idle_since: AtomicU64,
    /// Whether the last write to its socket left bytes unwritten (see
    /// [`Sending`]).
    sending: AtomicBool,
    /// Told to give way (set under the gate's lock).
    evicted: AtomicBool,
    give_way: tokio::sync::Notify,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            live: AtomicUsize::new(0),
            closing: tokio::sync::watch::Sender::new(false),
            ticks: AtomicU64::new(0),
            open: Mutex::default(),
        }
    }
}

impl Gate {
    /// Connections open now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Stops the connections: each finishes its request in flight.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Told when the server stops.
    pub(super) fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Waits at most `grace` for the open connections to finish.
    pub async fn drain(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        while self.live() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn tick(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::Relaxed)
    }

    /// Admits a new connection if fewer than `max` are open and not
    /// giving way, telling one with no request at work to give way if
    /// need be; `None` if every one has a request at work (or `max` are
    /// already closing).
    pub(super) fn admit(self: &Arc<Self>, max: usize) -> Option<Ticket> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.conns.len() - open.evicting >= max {
            if open.evicting >= max {
                return None;
            }
            let victim = open
                .conns
                .iter()
                .filter(|c| !c.evicted.load(Ordering::Relaxed))
                .filter_map(|c| Some((c.waiting()?, c.idle_since.load(Ordering::Relaxed), c)))
                .min_by_key(|&(waiting, since, _)| (waiting, since))?
                .2;
            victim.evicted.store(true, Ordering::Relaxed);
            victim.give_way.notify_one();
            open.evicting += 1;
        }
        let conn = Arc::new(Conn {
            at: AtomicUsize::new(open.conns.len()),
            idle_since: AtomicU64::new(self.tick()),
            ..Conn::default()
        });
        open.conns.push(conn.clone());
        self.live.fetch_add(1, Ordering::AcqRel);
        Some(Ticket {
            gate: self.clone(),
            conn,
        })
    }
}

/// What a connection with no request at work waits for, in the order
/// they give way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Waiting {
    /// A request (no request in flight).
    Request,
    /// The rest of a request's body.
    Body,
    /// Its client, to read what is left of an answer.
    Reader,
}

impl Conn {
    /// What it waits for; `None` if a request is at work. A streaming
    /// answer is an answer going out, as one waiting for its reader is:
    /// told to give way, its connection still has the time any closing
    /// one has to finish it (see `conn`).
    fn waiting(&self) -> Option<Waiting> {
        let in_flight = self.in_flight.load(Ordering::Acquire);
        let reading = self.reading.load(Ordering::Acquire);
        let streaming = self.streaming.load(Ordering::Acquire);
        if in_flight > reading + streaming {
            None
        } else if self.sending.load(Ordering::Relaxed) || streaming > 0 {
            Some(Waiting::Reader)
        } else if in_flight == 0 {
            Some(Waiting::Request)
        } else {
            Some(Waiting::Body)
        }
    }
}

/// One admitted connection: counted until dropped.
pub(super) struct Ticket {
    gate: Arc<Gate>,
    conn: Arc<Conn>,
}

impl Ticket {
    /// Resolves when the gate tells this connection to give way.
    pub(super) async fn evicted(&self) {
        self.conn.give_way.notified().await
    }

    /// A request with `body` begins: in flight until the guard is
    /// dropped, at work once its body (which it is given back, watched,
    /// each frame charged to `held`) has all arrived or is dropped.
    pub(super) fn begin<B: Body>(
        self: &Arc<Self>,
        body: B,
        held: Option<Arc<Held>>,
    ) -> (Watched<B>, Busy) {
        self.conn.began.store(true, Ordering::Relaxed);
        let reading = !body.is_end_stream();
        if reading {
            self.conn.reading.fetch_add(1, Ordering::AcqRel);
            self.conn
                .idle_since
                .store(self.gate.tick(), Ordering::Relaxed);
        }
        self.conn.in_flight.fetch_add(1, Ordering::AcqRel);
        let watched = Watched {
            body,
            reading: reading.then(|| self.clone()),
            held,
        };
        (watched, Busy(self.clone(), false))
    }

    /// Whether a request is at work now.
    #[cfg(test)]
    fn at_work(&self) -> bool {
        self.conn.waiting().is_none()
    }

    /// Whether closing now would cut off an answer: a request is at work,
    /// or an answer is still to be written to the socket.
    pub(super) fn answering(&self) -> bool {
        !matches!(self.conn.waiting(), Some(Waiting::Request | Waiting::Body))
    }

    /// Whether no request is in flight or began since the last look.
    pub(super) fn idle(&self) -> bool {
        let began = self.conn.began.swap(false, Ordering::Relaxed);
        self.conn.in_flight.load(Ordering::Acquire) == 0 && !began
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock().unwrap_or_else(|e| e.into_inner());
        let at = self.conn.at.load(Ordering::Relaxed);
        open.conns.swap_remove(at);
        if let Some(moved) = open.conns.get(at) {
            moved.at.store(at, Ordering::Relaxed);
        }
        if self.conn.evicted.load(Ordering::Relaxed) {
            open.evicting -= 1;
        }
        self.gate.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request in flight, until dropped (answered, or abandoned).
pub(super) struct Busy(Arc<Ticket>, bool);

impl Busy {
    /// Its answer streams (counted until it is dropped).
    fn streams(&mut self) {
        if !self.1 {
            self.1 = true;
            self.0.conn.streaming.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let Ticket { gate, conn } = &*self.0;
        conn.idle_since.store(gate.tick(), Ordering::Relaxed);
        if self.1 {
            conn.streaming.fetch_sub(1, Ordering::AcqRel);
        }
        conn.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request's body, telling the gate when it has all arrived (or is
/// dropped before), and charging each data frame to its request (see
/// `budget`): a frame that does not fit ends the body with `budget::Full`.
pub struct Watched<B> {
    body: B,
    /// The connection, while the body is still arriving.
    reading: Option<Arc<Ticket>>,
    /// What the request holds.
    held: Option<Arc<Held>>,
}

/// Why a request's body could not be read.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

impl<B> Watched<B> {
    /// What its request holds (see `budget`).
    pub fn held(&self) -> Option<Arc<Held>> {
        self.held.clone()
    }

    fn arrived(&mut self) {
        if let Some(t) = self.reading.take() {
            t.conn.reading.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<B> Drop for Watched<B> {
    fn drop(&mut self) {
        self.arrived();
    }
}

impl<B> Body for Watched<B>
where
    B: Body + Unpin,
    B::Error: Into<BodyError>,
{
    type Data = B::Data;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BodyError>>> {
        use bytes::Buf;
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) || self.body.is_end_stream() {
            self.arrived();
        }
        let frame = match frame {
            Poll::Ready(Some(Ok(f))) => f,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let len = frame.data_ref().map_or(0, |d| d.remaining() as u64);
        if let Some(Err(full)) = self.held.as_ref().map(|h| h.charge(len)) {
            self.arrived();
            return Poll::Ready(Some(Err(Box::new(full))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Larger answers go to the protocol in copies of this many bytes, so
/// that once the last is taken the answer's own buffer (charged to its
/// request) is freed, and a slow reader pins no more than the
/// protocol's own send buffer.
pub const CHUNK: usize = 64 << 10;

/// A response body that keeps its request in flight until the protocol
/// takes its first bytes (or drops it), and what the request holds
/// charged until the protocol has taken all of it. An answer over
/// [`CHUNK`] bytes is handed over in copied chunks, each when the
/// protocol asks for it: hyper asks only when its buffer has room
/// (HTTP/1.1) or the client's window does (HTTP/2). While the rest waits
/// for a slow reader, the request is no longer at work: its connection is
/// one waiting for its reader (see [`Sending`]).
///
/// An answer may go on after its bytes with a [`Streamed`] tail (a body
/// its handler is still writing): the request stays at work until the
/// tail ends, and the tail's error, if it fails, ends the answer cut
/// short (HTTP/1.1 without its last chunk, HTTP/2 with a reset), never
/// as a complete one.
pub(super) struct Tracked {
    rest: Bytes,
    chunked: bool,
    busy: Option<Busy>,
    tail: Option<TailBody>,
    _held: Option<Arc<Held>>,
}

/// A streamed answer's body after its first bytes.
pub type TailBody = Pin<Box<dyn Body<Data = Bytes, Error = BodyError> + Send>>;

/// An answer's extension carrying the rest of its body, streamed (see
/// [`Tracked`]); its `Full` body holds the first bytes.
#[derive(Clone)]
pub struct Streamed(Arc<Mutex<Option<TailBody>>>);

impl Streamed {
    /// A tail of `body`.
    pub fn new(body: TailBody) -> Streamed {
        Streamed(Arc::new(Mutex::new(Some(body))))
    }

    fn take(&self) -> Option<TailBody> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Tracked {
    pub(super) fn new(body: Full<Bytes>, busy: Busy, held: Option<Arc<Held>>) -> Tracked {
        let rest = bytes_of(body);
        Tracked {
            chunked: rest.len() > CHUNK,
            rest,
            busy: Some(busy),
            tail: None,
            _held: held,
        }
    }

    /// Goes on with `tail` after its bytes.
    pub(super) fn with_tail(mut self, tail: Option<Streamed>) -> Tracked {
        self.tail = tail.and_then(|t| t.take());
        if let (Some(busy), Some(_)) = (self.busy.as_mut(), &self.tail) {
            busy.streams();
        }
        self
    }

    fn poll_tail(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let Some(tail) = self.tail.as_mut() else {
            self.busy = None;
            return Poll::Ready(None);
        };
        let frame = tail.as_mut().poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) {
            self.tail = None;
            self.busy = None;
        }
        frame
    }
}

/// The bytes of a `Full` body (which has them ready).
pub(super) fn bytes_of(mut body: Full<Bytes>) -> Bytes {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(&mut body).poll_frame(&mut cx) {
        Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        _ => Bytes::new(),
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.rest.is_empty() {
            return self.poll_tail(cx);
        }
        if self.tail.is_none() {
            self.busy = None;
        }
        let data = if self.chunked {
            let n = self.rest.len().min(CHUNK);
            let copy = Bytes::copy_from_slice(&self.rest[..n]);
            bytes::Buf::advance(&mut self.rest, n);
            if self.rest.is_empty() {
                self.rest = Bytes::new();
            }
            copy
        } else {
            std::mem::take(&mut self.rest)
        };
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.tail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match &self.tail {
            None => SizeHint::with_exact(self.rest.len() as u64),
            Some(t) => {
                let mut hint = SizeHint::new();
                hint.set_lower(self.rest.len() as u64 + t.size_hint().lower());
                hint
            }
        }
    }
}

/// A connection's socket, telling the gate whether its last write left
/// bytes unwritten: the client is not reading as fast as the answer goes
/// out, and closing now would cut the answer off.
pub(super) struct Sending<T> {
    io: T,
    ticket: Arc<Ticket>,
}

impl<T> Sending<T> {
    pub(super) fn new(io: T, ticket: Arc<Ticket>) -> Self {
        Sending { io, ticket }
    }

    /// The socket.
    pub(super) fn into_inner(self) -> T {
        self.io
    }

    /// Notes a write of `offered` bytes that ended as `result`.
    fn wrote(&self, offered: usize, result: &Poll<std::io::Result<usize>>) {
        let left = match result {
            Poll::Ready(Ok(n)) => *n < offered,
            Poll::Ready(Err(_)) => false,
            Poll::Pending => true,
        };
        self.ticket.conn.sending.store(left, Ordering::Relaxed);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Sending<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Sending<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(buf.len(), &result);
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(bufs.iter().map(|b| b.len()).sum(), &result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request with no body: at work at once.
    fn work(t: &Arc<Ticket>) -> Busy {
        t.begin(http_body_util::Empty::<Bytes>::new(), None).1
    }

    #[test]
    fn a_connection_is_idle_after_a_look_with_nothing_in_flight() {
        let gate = Arc::new(Gate::default());
        let t = Arc::new(gate.admit(1).unwrap());
        assert!(t.idle());
        let request = work(&t);
        assert!(!t.idle(), "a request began since the last look");
        assert!(!t.idle(), "a request is in flight");
        drop(request);
        assert!(t.idle());
        drop(work(&t));
        assert!(!t.idle(), "one began and ended since the last look");
        assert!(t.idle());
    }

    /// Whether `t` was told to give way (without waiting).
    fn told(t: &Ticket) -> bool {
        t.conn.evicted.load(Ordering::Relaxed)
    }

    #[test]
    fn the_longest_idle_connection_gives_way_and_a_busy_one_never() {
        let gate = Arc::new(Gate::default());
        let admit = || Arc::new(gate.admit(3).unwrap());
        let (first, second, third) = (admit(), admit(), admit());
        let _serving = work(&first);
        // Idle the longest now: the second (the first is busy, the
        // third's last request ended after the second opened).
        drop(work(&third));
        let fourth = admit();
        assert!(told(&second) && !told(&first) && !told(&third));
        assert_eq!(gate.live(), 4, "the one giving way is open until it closes");
        // The next gives way in turn: the third, idle longer than the fourth.
        let fifth = admit();
        assert!(told(&third) && !told(&fourth));
        // All left are busy: a new client is refused.
        let _a = work(&fourth);
        let _b = work(&fifth);
        assert!(gate.admit(3).is_none());
        // Once the evicted close, the count is back within the bound.
        drop((second, third));
        assert_eq!(gate.live(), 3);
        assert!(gate.admit(3).is_none(), "still all busy");
    }

    #[test]
    fn no_more_than_max_give_way_at_once() {
        let gate = Arc::new(Gate::default());
        let mut held: Vec<Ticket> = (0..2).map(|_| gate.admit(2).unwrap()).collect();
        // Each newcomer evicts one idle connection, until two are closing.
        held.push(gate.admit(2).unwrap());
        held.push(gate.admit(2).unwrap());
        assert!(gate.admit(2).is_none(), "two closing already");
        assert_eq!(gate.live(), 4);
        // One closes: room for one more eviction.
        let evicted = held.iter().position(told).unwrap();
        held.swap_remove(evicted);
        assert!(gate.admit(2).is_some());
    }

    #[test]
    fn a_connection_waiting_for_a_body_gives_way_after_those_waiting_for_a_request() {
        let gate = Arc::new(Gate::default());
        let admit = || Arc::new(gate.admit(2).unwrap());
        let (reading, waiting) = (admit(), admit());
        // The older connection's request has a body still to come.
        let (body, _request) = reading.begin(Full::new(Bytes::from_static(b"body")), None);
        assert!(!reading.at_work() && !told(&reading));
        let third = admit();
        assert!(told(&waiting) && !told(&reading));
        let _at_work = work(&third);
        drop(waiting);
        let _fourth = admit();
        assert!(told(&reading), "the body's wait is next");
        drop(body);
        assert!(reading.at_work(), "the body was put aside: at work");
    }

    #[tokio::test]
    async fn a_slow_reader_gives_way_last_and_is_not_cut_off() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let gate = Arc::new(Gate::default());
        let admit = || Arc::new(gate.admit(3).unwrap());
        let (slow, body, idle) = (admit(), admit(), admit());
        // The oldest connection's client reads slowly: its socket takes
        // 64 bytes of a 100-byte answer, then no more.
        drop(work(&slow));
        let (server, mut client) = tokio::io::duplex(64);
        let mut socket = Sending::new(server, slow.clone());
        let answer = [b'x'; 100];
        let wrote = socket.write(&answer).await.unwrap();
        assert_eq!(wrote, 64);
        assert!(slow.answering() && !slow.at_work());
        let (_body, _request) = body.begin(Full::new(Bytes::from_static(b"body")), None);
        assert!(!body.answering());
        // Newcomers, each busy at once: the idle one gives way, then the
        // one awaiting a body, and only then the slow reader.
        let fourth = admit();
        let _w4 = work(&fourth);
        assert!(told(&idle) && !told(&body) && !told(&slow));
        drop(idle);
        let fifth = admit();
        let _w5 = work(&fifth);
        assert!(told(&body) && !told(&slow));
        drop(body);
        let _sixth = admit();
        assert!(told(&slow));
        // Once the client has read and the rest is written, closing cuts
        // nothing off.
        let mut got = vec![0; 64];
        client.read_exact(&mut got).await.unwrap();
        socket.write_all(&answer[wrote..]).await.unwrap();
        assert!(!slow.answering());
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_puts_its_request_at_work() {
        use http_body_util::BodyExt;
        let gate = Arc::new(Gate::default());
        let t = Arc::new(gate.admit(1).unwrap());
        let (body, _request) = t.begin(Full::new(Bytes::from_static(b"body")), None);
        assert!(!t.at_work());
        let mut body = std::pin::pin!(body);
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "body"
        );
        assert!(t.at_work());
    }

    /// Threads admitting, serving and closing at once: never more than
    /// `2 × max` open, never more than `max` not giving way, and the
    /// books balance once all are closed.
    #[test]
    fn admissions_from_many_threads_keep_the_bounds() {
        const MAX: usize = 4;
        let gate = Arc::new(Gate::default());
        std::thread::scope(|s| {
            for id in 0..4 {
                let gate = &gate;
                s.spawn(move || {
                    let mut mine: Vec<(Arc<Ticket>, Option<Busy>)> = vec![];
                    for i in 0..20_000usize {
                        if let Some(t) = gate.admit(MAX) {
                            let t = Arc::new(t);
                            let busy = (i % 3 == id % 3).then(|| work(&t));
                            mine.push((t, busy));
                        }
                        assert!(gate.live() <= 2 * MAX);
                        {
                            let open = gate.open.lock().unwrap();
                            assert!(open.conns.len() - open.evicting <= MAX);
                            assert!(open.evicting <= MAX);
                        }
                        // Close those told to give way, and now and then another.
                        mine.retain(|(t, _)| !told(t));
                        if i % 7 == 0 && !mine.is_empty() {
                            mine.swap_remove(i % mine.len());
                        }
                    }
                });
            }
        });
        assert_eq!(gate.live(), 0);
        let open = gate.open.lock().unwrap();
        assert_eq!((open.conns.len(), open.evicting), (0, 0));
    }

    #[tokio::test]
    async fn the_told_connection_is_woken() {
        let gate = Arc::new(Gate::default());
        let idle = gate.admit(1).unwrap();
        let _new = gate.admit(1).unwrap();
        tokio::time::timeout(Duration::from_secs(5), idle.evicted())
            .await
            .expect("told to give way");
    }
}

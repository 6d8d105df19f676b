//! A component connection's `input-stream` and `output-stream`: reads
//! within the task's receive budget, writes paced by the link, both
//! counted as the task's traffic.
//!
//! Readiness: `subscribe` first asks the host kernel (a `poll(2)` that
//! does not wait) and only then waits on the reactor, whose readiness is
//! edge-triggered: bytes left in the socket after a short read would
//! otherwise never wake the stream again.
//!
//! Writes: `check-write` grants at most [`MAX_WRITE`] bytes (and no more
//! than the link's credit when sends are shaped); what the host kernel
//! does not take at once is held (at most that much, charged with the
//! socket) and sent as the socket drains, and `check-write` grants
//! nothing more until it is. `shutdown(send)` ends the sending side once
//! the held bytes have gone (on the reactor, for at most 30 s; the
//! socket's slot and charge last as long); a stream dropped while it
//! holds bytes loses them, as a program that closes without flushing
//! does.
//!
//! Shut sides (what the socket shares with its streams, [`Ends`]): a
//! read after `shutdown(receive)` is `closed` at once, bytes waiting or
//! not; a write, `check-write` or `flush` after `shutdown(send)` is
//! `closed`.
//!
//! Lock order: a writer's outbox lock is the only lock here held across
//! a system call (`send`, non-blocking); the receive budget's lock is
//! taken alone.

use crate::host::sockets::receivable;
use crate::host::TaskNet;
use crate::net::fair::Bucket;
use crate::net::link::{Flow, PACKET};
use crate::net::socket::{poll_now, Conn};
use crate::task::TaskShared;
use bytes::{Buf, Bytes, BytesMut};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, Pollable, StreamError, StreamResult,
};

/// The most bytes one read returns.
pub(super) const MAX_READ: usize = 64 << 10;

/// The most bytes `check-write` grants, and so the most a writer holds.
pub(super) const MAX_WRITE: usize = 64 << 10;

/// What a connection's streams count against: the task, its receive
/// budget, its node on the link.
#[derive(Clone)]
pub(super) struct Account {
    shared: Arc<TaskShared>,
    receive: Option<Arc<Mutex<Bucket>>>,
    link: Option<(Arc<crate::net::link::Link>, crate::net::fair::NodeId)>,
}

impl Account {
    pub(super) fn of(net: &TaskNet, shared: &Arc<TaskShared>) -> Account {
        Account {
            shared: shared.clone(),
            receive: net.receive.clone(),
            link: net
                .flow
                .as_ref()
                .filter(|f| f.shaped)
                .map(|f| (f.link.clone(), f.node)),
        }
    }
}

/// What a connection's socket shares with its streams: the ends the
/// program has shut, and the bytes written and not yet taken by the host
/// kernel.
#[derive(Default)]
pub(super) struct Ends {
    /// `shutdown(receive)`: reads end at once, even with bytes waiting
    /// (Linux would go on delivering them).
    read_shut: AtomicBool,
    out: Mutex<Outbox>,
}

#[derive(Default)]
struct Outbox {
    held: Bytes,
    /// `shutdown(send)`: writes fail as closed.
    shut: bool,
}

/// The longest bytes still held at `shutdown(send)` are waited for.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Ends {
    /// Ends reading.
    pub(super) fn shut_receive(&self, conn: &Conn) -> io::Result<()> {
        self.read_shut.store(true, Ordering::Release);
        conn.shutdown_read()
    }

    /// Ends sending once what the writer holds has gone (for at most
    /// [`DRAIN`], on the reactor; `keep` rides along, so the socket's
    /// slot and charge last as long).
    pub(super) fn shut_send<K: Send + Sync + 'static>(
        &self,
        conn: &Arc<Conn>,
        shared: &Arc<TaskShared>,
        keep: K,
    ) -> io::Result<()> {
        let mut out = lock(&self.out);
        out.shut = true;
        if out.held.is_empty() {
            return conn.shutdown();
        }
        let (conn, shared, held) = (conn.clone(), shared.clone(), std::mem::take(&mut out.held));
        tokio::spawn(async move {
            let _ = tokio::time::timeout(DRAIN, drain(&conn, &shared, held)).await;
            let _ = conn.shutdown();
            drop(keep);
        });
        Ok(())
    }
}

/// Sends all of `held`, waiting for room.
async fn drain(conn: &Conn, shared: &TaskShared, mut held: Bytes) {
    loop {
        match send_held(conn, shared, &mut held) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if conn.writable().await.is_err() {
                    return;
                }
            }
            Ok(()) | Err(_) => return,
        }
    }
}

/// Sends `held` as far as the host kernel takes it now, counting what
/// goes as the task's; `WouldBlock` if some is left.
fn send_held(conn: &Conn, shared: &TaskShared, held: &mut Bytes) -> io::Result<()> {
    while !held.is_empty() {
        // SAFETY: `held` is valid for reads of its length.
        let n = unsafe { conn.try_send(held.as_ptr(), held.len()) }?;
        shared.net.count_sent(n);
        held.advance(n);
    }
    Ok(())
}

/// The two streams of a connection, and what they share with its socket.
pub(super) fn pair(conn: &Arc<Conn>, a: &Account) -> (DynInputStream, DynOutputStream, Arc<Ends>) {
    let ends = Arc::new(Ends::default());
    let reader = Reader {
        conn: conn.clone(),
        shared: a.shared.clone(),
        receive: a.receive.clone(),
        ends: ends.clone(),
        done: false,
    };
    let writer = Writer {
        conn: conn.clone(),
        shared: a.shared.clone(),
        // A leaf of its own under the task's node: the task's share and
        // cap cover it, and its waits are its own.
        pace: a.link.as_ref().map(|(link, node)| {
            let flow = Flow::new(link, Some(*node), 1, None);
            let shaped = flow.shaped;
            (flow, shaped)
        }),
        ends: ends.clone(),
        permit: 0,
        failed: false,
    };
    (Box::new(reader), Box::new(writer), ends)
}

/// Whether `fd` has any of `events` (or an error or hang-up) now.
pub(super) fn ready_now(fd: i32, events: i16) -> bool {
    let mut p = [libc::pollfd {
        fd,
        events,
        revents: 0,
    }];
    poll_now(&mut p);
    p[0].revents != 0
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Reader {
    conn: Arc<Conn>,
    shared: Arc<TaskShared>,
    receive: Option<Arc<Mutex<Bucket>>>,
    ends: Arc<Ends>,
    /// The peer closed, or a read failed: nothing more comes.
    done: bool,
}

impl Reader {
    /// How many bytes the receive budget lets the next read take (0: it
    /// must wait).
    fn allowed(&self, want: usize) -> usize {
        match &self.receive {
            None => want,
            Some(bucket) => receivable(bucket, want as u64).unwrap_or(0) as usize,
        }
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for Reader {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.done || self.ends.read_shut.load(Ordering::Acquire) {
            return Err(StreamError::Closed);
        }
        let want = self.allowed(size.min(MAX_READ));
        if want == 0 {
            return Ok(Bytes::new());
        }
        let mut buf = BytesMut::with_capacity(want);
        // SAFETY: `buf` has room for `want` bytes, which the host kernel
        // writes before `set_len` admits them.
        match unsafe { self.conn.try_recv(buf.as_mut_ptr(), want) } {
            Ok(0) => {
                self.done = true;
                Err(StreamError::Closed)
            }
            Ok(n) => {
                // SAFETY: the host kernel wrote `n <= want` bytes.
                unsafe { buf.set_len(n) };
                if let Some(bucket) = &self.receive {
                    lock(bucket).take(n as u64);
                }
                self.shared.net.count_received(n);
                Ok(buf.freeze())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Bytes::new()),
            Err(e) => {
                self.done = true;
                Err(StreamError::LastOperationFailed(e.into()))
            }
        }
    }

    /// Waits for bytes for as long as it takes (Wasmtime's default gives
    /// up after a few spurious wake-ups; these are not spurious for long).
    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        loop {
            self.ready().await;
            let got = self.read(size)?;
            if !got.is_empty() || size == 0 {
                return Ok(got);
            }
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Reader {
    async fn ready(&mut self) {
        if self.done || self.ends.read_shut.load(Ordering::Acquire) {
            return;
        }
        if let Some(bucket) = &self.receive {
            while let Err(wait) = receivable(bucket, 1) {
                tokio::time::sleep(std::time::Duration::from_nanos(wait)).await;
            }
        }
        if !ready_now(self.conn.fd(), libc::POLLIN) {
            let _ = self.conn.readable().await;
        }
    }
}

struct Writer {
    conn: Arc<Conn>,
    shared: Arc<TaskShared>,
    /// Its leaf on the link and whether the link shapes it, if the
    /// task's sends are shaped; the flow's credit is what it may send.
    pace: Option<(Flow, bool)>,
    /// What it holds, and whether the socket's sending side is shut.
    ends: Arc<Ends>,
    /// What the last `check-write` granted and `write` has not used.
    permit: usize,
    /// A send failed: the stream is closed.
    failed: bool,
}

impl Writer {
    /// The outbox, or `Closed` once sending has ended.
    fn open(&self) -> StreamResult<std::sync::MutexGuard<'_, Outbox>> {
        let out = lock(&self.ends.out);
        if self.failed || out.shut {
            return Err(StreamError::Closed);
        }
        Ok(out)
    }

    /// Sends what it holds, as far as the host kernel takes it now;
    /// whether it still holds some.
    fn push(&mut self) -> StreamResult<bool> {
        let mut out = self.open()?;
        match send_held(&self.conn, &self.shared, &mut out.held) {
            Ok(()) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
            Err(e) => {
                out.held = Bytes::new();
                drop(out);
                self.failed = true;
                Err(StreamError::LastOperationFailed(e.into()))
            }
        }
    }

    /// Bytes the link lets it send now (any, when it is not shaped).
    fn credit(&self) -> usize {
        match &self.pace {
            Some((flow, true)) => flow.credit.min(MAX_WRITE as u64) as usize,
            _ => MAX_WRITE,
        }
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Writer {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let n = bytes.len();
        {
            let mut out = self.open()?;
            if n > self.permit {
                return Err(StreamError::trap("write beyond what check-write granted"));
            }
            if n == 0 {
                return Ok(());
            }
            // A permit is only granted with nothing held.
            out.held = bytes;
        }
        self.permit -= n;
        if let Some((flow, true)) = &mut self.pace {
            flow.credit = flow.credit.saturating_sub(n as u64);
        }
        self.push().map(|_| ())
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.push().map(|_| ())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        let holding = self.push()?;
        self.permit = if holding { 0 } else { self.credit() };
        Ok(self.permit)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Writer {
    /// Returns once `check-write` would grant something (or fail): the
    /// held bytes sent, and a turn on the link taken if it has no credit.
    async fn ready(&mut self) {
        loop {
            match self.push() {
                Ok(true) => {}
                Ok(false) | Err(_) => break,
            }
            if !ready_now(self.conn.fd(), libc::POLLOUT) && self.conn.writable().await.is_err() {
                return;
            }
        }
        if let Some((flow, true)) = &mut self.pace {
            if flow.credit == 0 {
                let t = flow.link.transmit(flow.leaf, PACKET);
                let granted = t.bytes() as u64;
                t.await;
                flow.credit += granted;
            }
        }
    }
}

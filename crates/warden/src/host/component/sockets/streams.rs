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
//! nothing more until it is.

use crate::host::sockets::MIN_RECEIVE;
use crate::host::TaskNet;
use crate::net::fair::Bucket;
use crate::net::link::{Flow, PACKET};
use crate::net::socket::{poll_now, Conn};
use crate::task::TaskShared;
use bytes::{Buf, Bytes, BytesMut};
use std::io;
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

/// The two streams of a connection.
pub(super) fn pair(conn: &Arc<Conn>, a: &Account) -> (DynInputStream, DynOutputStream) {
    let reader = Reader {
        conn: conn.clone(),
        shared: a.shared.clone(),
        receive: a.receive.clone(),
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
        held: Bytes::new(),
        permit: 0,
        failed: false,
    };
    (Box::new(reader), Box::new(writer))
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

fn lock(b: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

struct Reader {
    conn: Arc<Conn>,
    shared: Arc<TaskShared>,
    receive: Option<Arc<Mutex<Bucket>>>,
    /// The peer closed, or a read failed: nothing more comes.
    done: bool,
}

impl Reader {
    /// How many bytes the receive budget lets the next read take (0: it
    /// must wait).
    fn allowed(&self, want: usize) -> usize {
        let Some(bucket) = &self.receive else {
            return want;
        };
        let now = crate::clock::since_start_ns();
        let mut b = lock(bucket);
        if b.wait_ns(now) > 0 {
            return 0;
        }
        want.min(b.available(now).max(MIN_RECEIVE) as usize)
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for Reader {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.done {
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
        if self.done {
            return;
        }
        if let Some(bucket) = &self.receive {
            loop {
                let wait = lock(bucket).wait_ns(crate::clock::since_start_ns());
                if wait == 0 {
                    break;
                }
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
    /// Bytes written and not yet taken by the host kernel.
    held: Bytes,
    /// What the last `check-write` granted and `write` has not used.
    permit: usize,
    /// A send failed: the stream is closed.
    failed: bool,
}

impl Writer {
    /// Sends what it holds, as far as the host kernel takes it now.
    fn push(&mut self) -> StreamResult<()> {
        while !self.held.is_empty() {
            // SAFETY: `held` is valid for reads of its length.
            match unsafe { self.conn.try_send(self.held.as_ptr(), self.held.len()) } {
                Ok(n) => {
                    self.shared.net.count_sent(n);
                    self.held.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.failed = true;
                    self.held = Bytes::new();
                    return Err(StreamError::LastOperationFailed(e.into()));
                }
            }
        }
        Ok(())
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
        if self.failed {
            return Err(StreamError::Closed);
        }
        if bytes.len() > self.permit {
            return Err(StreamError::trap("write beyond what check-write granted"));
        }
        self.permit -= bytes.len();
        if let Some((flow, true)) = &mut self.pace {
            flow.credit = flow.credit.saturating_sub(bytes.len() as u64);
        }
        self.held = bytes;
        self.push()
    }

    fn flush(&mut self) -> StreamResult<()> {
        if self.failed {
            return Err(StreamError::Closed);
        }
        self.push()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        if self.failed {
            return Err(StreamError::Closed);
        }
        self.push()?;
        self.permit = if self.held.is_empty() {
            self.credit()
        } else {
            0
        };
        Ok(self.permit)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Writer {
    /// Returns once `check-write` would grant something (or fail): the
    /// held bytes sent, and a turn on the link taken if it has no credit.
    async fn ready(&mut self) {
        while !self.failed && !self.held.is_empty() {
            if !ready_now(self.conn.fd(), libc::POLLOUT) && self.conn.writable().await.is_err() {
                return;
            }
            if self.push().is_err() {
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

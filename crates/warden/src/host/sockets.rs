//! What the `warden` and WASI groups' sockets share: a task's network
//! state ([`TaskNet`]: its grants, its flow on the link, its receive
//! budget), the moving of bytes between a socket and guest memory, and
//! the charge for a socket.
//!
//! Addresses are checked against the task's grants before any system call
//! (by the groups, with `crate::net::grant`). A send first asks the task's flow for a grant when the link shapes it
//! (see `crate::net::link`); a receive waits for the task's receive
//! budget. Bytes move between the socket and guest memory by the host
//! kernel's copy, never through a Rust reference to guest memory.

use super::guest::{memory, range};
use super::TaskData;
use crate::ipc::handle::{return_socket, take_socket};
use crate::ipc::Errno;
use crate::net::fair::Bucket;
use crate::net::grant::Grant;
use crate::net::link::{Flow, PACKET};
use crate::net::socket::Conn;
use crate::task::TaskShared;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use wasmtime::Caller;

/// The most bytes one send or receive moves.
const MAX_IO: u64 = 1 << 20;

/// The least a receive within the receive budget may take once the
/// budget is not empty. The budget may go into debt, so a reader held to
/// a low rate wakes a few times a second, not once per byte the budget
/// refills, and still averages the rate.
const MIN_RECEIVE: u64 = 16 << 10;

/// A task's network state.
pub(crate) struct TaskNet {
    pub(crate) listen: Vec<Grant>,
    pub(crate) connect: Vec<Grant>,
    /// Its place on the link, if its sends may be shaped.
    pub(crate) flow: Option<Flow>,
    /// Its receive budget, shared with its children.
    pub(crate) receive: Option<Arc<Mutex<Bucket>>>,
    /// Bytes of host buffer each way for its sockets.
    pub(crate) buffer: usize,
}

/// What a child takes of its parent's network state: its place on the
/// link (the child's node hangs under the parent's) and the receive
/// budget, which parent and children share.
pub(crate) struct ChildNet {
    pub(crate) link_parent: Option<crate::net::fair::NodeId>,
    pub(crate) receive: Option<Arc<Mutex<Bucket>>>,
}

impl TaskNet {
    /// What a child of this task takes.
    pub(crate) fn for_child(&self) -> ChildNet {
        ChildNet {
            link_parent: self.flow.as_ref().map(|f| f.node),
            receive: self.receive.clone(),
        }
    }
}

/// The error code a task sees for a host socket error.
pub(super) fn errno_of(e: &io::Error) -> Errno {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) | Some(libc::EADDRNOTAVAIL) => Errno::Exists,
        Some(libc::EACCES) | Some(libc::EPERM) => Errno::Denied,
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) => Errno::Quota,
        Some(libc::ENOMEM) => Errno::NoMem,
        Some(libc::ETIMEDOUT) => Errno::Timeout,
        Some(libc::EINVAL) | Some(libc::EAFNOSUPPORT) => Errno::Inval,
        _ => Errno::PeerDied,
    }
}

/// When a wait ends: `timeout_ns` 0 tries once, negative waits forever.
#[derive(Clone, Copy)]
pub(super) struct Deadline(Option<tokio::time::Instant>, bool);

impl Deadline {
    pub(super) fn new(timeout_ns: i64) -> Deadline {
        let at = (timeout_ns >= 0).then(|| {
            tokio::time::Instant::now() + std::time::Duration::from_nanos(timeout_ns as u64)
        });
        Deadline(at, timeout_ns == 0)
    }

    /// The wait for a turn on the link: as this one, except that a call
    /// that must not wait still waits for its turn (readiness cannot
    /// announce a grant, so a non-blocking sender told to try again would
    /// only spin; the wait is the link's pacing, never a peer's).
    fn for_pacing(self) -> Deadline {
        if self.1 {
            Deadline(None, false)
        } else {
            self
        }
    }

    /// Whether the deadline has passed (never, for a wait without one).
    pub(super) fn passed(self) -> bool {
        self.0.is_some_and(|at| tokio::time::Instant::now() >= at)
    }

    /// `f`'s output, or `Timeout` if the deadline passes first (`f` is
    /// polled once even past it).
    pub(super) async fn wait<F: Future>(self, f: F) -> Result<F::Output, Errno> {
        match self.0 {
            None => Ok(f.await),
            Some(at) => tokio::time::timeout_at(at, f)
                .await
                .map_err(|_| Errno::Timeout),
        }
    }
}

/// Sends up to `len` bytes at `ptr` on `conn`, paced by the task's flow;
/// shared with the WASI socket calls.
pub(super) async fn send_on(
    c: &mut Caller<'_, TaskData>,
    conn: &Conn,
    ptr: i32,
    len: u64,
    deadline: Deadline,
) -> Result<i64, Errno> {
    {
        let (mem, _) = memory(c)?;
        range(mem.len(), ptr, len)?;
    }
    if len == 0 {
        return Ok(0);
    }
    let want = paced(c, len.min(MAX_IO), deadline).await?;
    let n = guest_io(c, conn, Way::Send, ptr, want, deadline).await?;
    sent(c, n);
    Ok(n as i64)
}

/// How many of `want` bytes the task may send now: all of them if its
/// sends are not paced, else its credit on the link, after waiting for
/// a turn (at most a packet's worth) if it has none.
pub(super) async fn paced(
    c: &mut Caller<'_, TaskData>,
    want: u64,
    deadline: Deadline,
) -> Result<u64, Errno> {
    let Some(flow) = c.data_mut().net.flow.as_mut().filter(|f| f.shaped) else {
        return Ok(want);
    };
    if flow.credit == 0 {
        let t = flow
            .link
            .transmit(flow.leaf, want.min(PACKET as u64) as u32);
        let granted = t.bytes() as u64;
        deadline.for_pacing().wait(t).await?;
        if let Some(flow) = c.data_mut().net.flow.as_mut() {
            flow.credit += granted;
        }
    }
    Ok(want.min(c.data().net.flow.as_ref().map_or(want, |f| f.credit)))
}

/// Notes `n` bytes sent: taken from the task's credit, and counted.
pub(super) fn sent(c: &mut Caller<'_, TaskData>, n: usize) {
    let data = c.data_mut();
    if let Some(flow) = data.net.flow.as_mut().filter(|f| f.shaped) {
        flow.credit = flow.credit.saturating_sub(n as u64);
    }
    data.shared.net.count_sent(n);
}

/// Receives up to `cap` bytes into `ptr` from `conn` within the task's
/// receive budget; shared with the WASI socket calls.
pub(super) async fn recv_on(
    c: &mut Caller<'_, TaskData>,
    conn: &Conn,
    ptr: i32,
    cap: u64,
    deadline: Deadline,
) -> Result<i64, Errno> {
    {
        let (mem, _) = memory(c)?;
        range(mem.len(), ptr, cap)?;
    }
    if cap == 0 {
        return Ok(0);
    }
    let mut want = cap.min(MAX_IO);
    if let Some(bucket) = c.data().net.receive.clone() {
        want = loop {
            match receivable(&bucket, want) {
                Ok(n) => break n,
                Err(wait) => {
                    deadline
                        .wait(tokio::time::sleep(std::time::Duration::from_nanos(wait)))
                        .await?
                }
            }
        };
    }
    let n = guest_io(c, conn, Way::Recv, ptr, want, deadline).await?;
    let data = c.data();
    if let Some(bucket) = &data.net.receive {
        lock(bucket).take(n as u64);
    }
    data.shared.net.count_received(n);
    Ok(n as i64)
}

/// Which way [`guest_io`] moves bytes.
#[derive(Clone, Copy)]
enum Way {
    Send,
    Recv,
}

/// Moves up to `want` bytes between `conn` and guest memory at `ptr`:
/// tries the system call first, and waits for readiness (until
/// `deadline`) only when it would block. Returns the bytes moved.
async fn guest_io(
    c: &mut Caller<'_, TaskData>,
    conn: &Conn,
    way: Way,
    ptr: i32,
    want: u64,
    deadline: Deadline,
) -> Result<usize, Errno> {
    loop {
        let r = {
            let (mem, _) = memory(c)?;
            let r = range(mem.len(), ptr, want)?;
            // SAFETY: `r` lies inside the memory, mapped for the whole call.
            unsafe {
                match way {
                    Way::Send => conn.try_send(mem.at(r.start), r.len()),
                    Way::Recv => conn.try_recv(mem.at(r.start), r.len()),
                }
            }
        };
        match r {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let ready = match way {
                    Way::Send => deadline.wait(conn.writable()).await?,
                    Way::Recv => deadline.wait(conn.readable()).await?,
                };
                ready.map_err(|e| errno_of(&e))?
            }
            Err(e) => return Err(errno_of(&e)),
        }
    }
}

/// How many of `want` bytes a receive within the budget `bucket` may take
/// now (at least [`MIN_RECEIVE`], or `want` if less), or the nanoseconds
/// until it may take any; shared with components' input streams.
pub(super) fn receivable(bucket: &Mutex<Bucket>, want: u64) -> Result<u64, u64> {
    let now = crate::clock::since_start_ns();
    let mut b = lock(bucket);
    match b.wait_ns(now) {
        0 => Ok(want.min(b.available(now).max(MIN_RECEIVE))),
        wait => Err(wait),
    }
}

fn lock(b: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes a socket slot for a WASI descriptor (see [`take_socket`]).
pub(super) fn take_wasi_socket(shared: &TaskShared, bytes: u64) -> Result<(), Errno> {
    take_socket(shared, bytes)
}

/// Returns it.
pub(super) fn return_wasi_socket(shared: &TaskShared, bytes: u64) {
    return_socket(shared, bytes)
}

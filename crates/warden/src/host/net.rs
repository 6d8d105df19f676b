//! Sockets: listen, accept, connect, send, receive, shut down, addresses
//! (`poll` over them and every other waitable handle is in `poll.rs`).
//!
//! Addresses are checked against the task's grants before any system call.
//! A send first asks the task's flow for a grant when the link shapes it
//! (see `crate::net::link`); a receive waits for the task's receive
//! budget. Bytes move between the socket and guest memory by the host
//! kernel's copy, never through a Rust reference to guest memory.

use super::{len32, memory, range, ret32, ret64, TaskData};
use crate::ipc::handle::{return_socket, take_socket};
use crate::ipc::{Errno, Object};
use crate::net::fair::Bucket;
use crate::net::grant::{allowed, may_connect, parse_addr, Grant};
use crate::net::link::{Flow, PACKET};
use crate::net::socket::{Conn, Listener};
use crate::task::TaskShared;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use wasmtime::{Caller, Linker};

/// `WARDEN_POLL_*` event bits.
pub const POLL_IN: u32 = 1;
/// Writable.
pub const POLL_OUT: u32 = 2;
/// The peer closed (always reported).
pub const POLL_HUP: u32 = 4;

/// The most entries one `poll` may wait on.
pub const MAX_POLL_HANDLES: u32 = 4096;

/// The most bytes one send or receive moves.
const MAX_IO: u64 = 1 << 20;

/// A task's network state.
pub(crate) struct TaskNet {
    pub(crate) listen: Vec<Grant>,
    pub(crate) connect: Vec<Grant>,
    /// Its place on the link, if its sends may be shaped.
    pub(crate) flow: Option<Flow>,
    /// Its receive budget, shared with its children.
    pub(crate) receive: Option<Arc<Mutex<Bucket>>>,
    /// Its sockets as WASI descriptors.
    pub(crate) wasi: super::wasi_net::Sockets,
    /// Bytes of host buffer each way for its sockets.
    pub(crate) buffer: usize,
    /// `poll`'s buffers, kept between calls (made at the first).
    pub(crate) poll: Option<Box<super::poll::Scratch>>,
    /// `poll_oneoff`'s buffers when it waits on sockets (see `wasi_poll`).
    pub(crate) wasi_poll: Option<Box<super::wasi_poll::Scratch>>,
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

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "tcp_listen",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32| ret32(listen(&mut c, ptr, len)),
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "tcp_accept",
        |c: Caller<'_, TaskData>, (h, timeout): (i32, i64)| {
            Box::new(async move { ret32(accept(c, h, timeout).await) })
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "tcp_connect",
        |c: Caller<'_, TaskData>, (ptr, len, timeout): (i32, i32, i64)| {
            Box::new(async move { ret32(connect(c, ptr, len, timeout).await) })
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "sock_send",
        |c: Caller<'_, TaskData>, (h, ptr, len, timeout): (i32, i32, i32, i64)| {
            Box::new(async move { ret64(send(c, h, ptr, len, timeout).await) })
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "sock_recv",
        |c: Caller<'_, TaskData>, (h, ptr, cap, timeout): (i32, i32, i32, i64)| {
            Box::new(async move { ret64(recv(c, h, ptr, cap, timeout).await) })
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "sock_shutdown",
        |c: Caller<'_, TaskData>, h: i32| {
            ret32(
                conn_of(c.data(), h)
                    .and_then(|s| s.shutdown().map_err(|e| errno_of(&e)))
                    .map(|()| 0),
            )
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "sock_addr",
        |mut c: Caller<'_, TaskData>, h: i32, peer: i32, buf: i32, cap: i32| {
            ret32(address(&mut c, h, peer, buf, cap))
        },
    )?;
    Ok(())
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

fn read_addr(
    c: &mut Caller<'_, TaskData>,
    ptr: i32,
    len: i32,
) -> Result<std::net::SocketAddr, Errno> {
    let (mem, _) = memory(c)?;
    let r = range(mem.len(), ptr, len32(len))?;
    if r.len() > 64 {
        return Err(Errno::Inval);
    }
    parse_addr(&mem.read_vec(r)).ok_or(Errno::Inval)
}

/// Whether the task could hold one more socket handle now.
fn room_for_socket(data: &TaskData) -> Result<(), Errno> {
    let shared = &data.ipc.shared;
    if data.ipc.handles.room() == 0 || shared.net.sockets() >= shared.net.max_sockets {
        return Err(Errno::Quota);
    }
    Ok(())
}

fn listen(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32) -> Result<i32, Errno> {
    let addr = read_addr(c, ptr, len)?;
    let data = c.data_mut();
    if !allowed(&data.net.listen, &addr) {
        return Err(Errno::Denied);
    }
    room_for_socket(data)?;
    let l = Listener::bind(&addr, data.net.buffer).map_err(|e| errno_of(&e))?;
    data.ipc.handles.insert(Object::Listener(Arc::new(l)))
}

fn listener_of(data: &TaskData, h: i32) -> Result<Arc<Listener>, Errno> {
    match data.ipc.handles.get(h)? {
        Object::Listener(l) => Ok(l.clone()),
        _ => Err(Errno::BadHandle),
    }
}

fn conn_of(data: &TaskData, h: i32) -> Result<Arc<Conn>, Errno> {
    match data.ipc.handles.get(h)? {
        Object::Conn(s) => Ok(s.clone()),
        _ => Err(Errno::BadHandle),
    }
}

async fn accept(mut c: Caller<'_, TaskData>, h: i32, timeout: i64) -> Result<i32, Errno> {
    let l = listener_of(c.data(), h)?;
    room_for_socket(c.data())?;
    let conn = Deadline::new(timeout)
        .wait(l.accept())
        .await?
        .map_err(|e| errno_of(&e))?;
    let data = c.data_mut();
    data.ipc.shared.net.count_connection();
    data.ipc.handles.insert(Object::Conn(Arc::new(conn)))
}

async fn connect(
    mut c: Caller<'_, TaskData>,
    ptr: i32,
    len: i32,
    timeout: i64,
) -> Result<i32, Errno> {
    let addr = read_addr(&mut c, ptr, len)?;
    if !may_connect(&c.data().net.connect, &addr) {
        return Err(Errno::Denied);
    }
    room_for_socket(c.data())?;
    let conn = Conn::start_connect(&addr, c.data().net.buffer).map_err(|e| errno_of(&e))?;
    Deadline::new(timeout)
        .wait(conn.connected())
        .await?
        .map_err(|e| errno_of(&e))?;
    let data = c.data_mut();
    data.ipc.shared.net.count_connection();
    data.ipc.handles.insert(Object::Conn(Arc::new(conn)))
}

async fn send(
    mut c: Caller<'_, TaskData>,
    h: i32,
    ptr: i32,
    len: i32,
    timeout: i64,
) -> Result<i64, Errno> {
    let conn = conn_of(c.data(), h)?;
    send_on(&mut c, &conn, ptr, len32(len), Deadline::new(timeout)).await
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
    let mut want = len.min(MAX_IO);
    if let Some(flow) = c.data_mut().net.flow.as_mut().filter(|f| f.shaped) {
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
        want = want.min(c.data().net.flow.as_ref().map_or(want, |f| f.credit));
    }
    let n = guest_io(c, conn, Way::Send, ptr, want, deadline).await?;
    let data = c.data_mut();
    if let Some(flow) = data.net.flow.as_mut().filter(|f| f.shaped) {
        flow.credit = flow.credit.saturating_sub(n as u64);
    }
    data.ipc.shared.net.count_sent(n);
    Ok(n as i64)
}

async fn recv(
    mut c: Caller<'_, TaskData>,
    h: i32,
    ptr: i32,
    cap: i32,
    timeout: i64,
) -> Result<i64, Errno> {
    let conn = conn_of(c.data(), h)?;
    recv_on(&mut c, &conn, ptr, len32(cap), Deadline::new(timeout)).await
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
        loop {
            let wait = lock(&bucket).wait_ns(crate::clock::since_start_ns());
            if wait == 0 {
                break;
            }
            deadline
                .wait(tokio::time::sleep(std::time::Duration::from_nanos(wait)))
                .await?;
        }
        let now = crate::clock::since_start_ns();
        want = want.min(lock(&bucket).available(now).max(1));
    }
    let n = guest_io(c, conn, Way::Recv, ptr, want, deadline).await?;
    let data = c.data();
    if let Some(bucket) = &data.net.receive {
        lock(bucket).take(n as u64);
    }
    data.ipc.shared.net.count_received(n);
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

fn lock(b: &Mutex<Bucket>) -> std::sync::MutexGuard<'_, Bucket> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

fn address(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    peer: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, Errno> {
    let text = match c.data().ipc.handles.get(h)? {
        Object::Conn(s) if peer != 0 => s.peer().to_string(),
        Object::Conn(s) => s.local().to_string(),
        Object::Listener(l) if peer == 0 => l.local().to_string(),
        Object::Listener(_) => return Err(Errno::Inval),
        _ => return Err(Errno::BadHandle),
    };
    let (mem, _) = memory(c)?;
    let n = text.len().min(len32(cap) as usize);
    mem.put(buf, &text.as_bytes()[..n])?;
    Ok(text.len() as i32)
}

/// Takes a socket slot for a WASI descriptor (see [`take_socket`]).
pub(super) fn take_wasi_socket(shared: &TaskShared, bytes: u64) -> Result<(), Errno> {
    take_socket(shared, bytes)
}

/// Returns it.
pub(super) fn return_wasi_socket(shared: &TaskShared, bytes: u64) {
    return_socket(shared, bytes)
}

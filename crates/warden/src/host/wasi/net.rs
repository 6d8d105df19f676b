//! Sockets as WASI descriptors, for unmodified WASI programs.
//!
//! A task whose manifest lists `preopen_listeners` finds each listener as
//! a descriptor numbered right after its preopened directories, as
//! `wasmtime run --tcplisten` used to give. Wasmtime's own descriptor
//! table knows nothing of sockets, so each of those numbers is held there
//! by a placeholder (an empty, read-only directory) that keeps Wasmtime
//! from handing the number out, and the calls below answer for sockets
//! before Wasmtime sees them: `sock_accept`, `sock_recv`, `sock_send`,
//! `sock_shutdown`, `fd_read`, `fd_write`, `fd_close`, `fd_fdstat_get`,
//! `fd_fdstat_set_flags` (`O_NONBLOCK`), `fd_filestat_get`,
//! `fd_prestat_get` (a socket is not a preopened directory, which also
//! ends wasi-libc's scan of them), `fd_renumber` and `poll_oneoff` (in
//! `poll`).
//!
//! Accepted connections are numbered from [`Sockets::conn_base`] up: past
//! every number Wasmtime can reach (its table never holds more than the
//! standard streams, the preopens and `MAX_OPEN_FILES` open files, and it
//! numbers densely), so the two tables never collide.
//!
//! Like every socket handle, each descriptor takes a socket slot and is
//! charged its buffers.

use crate::host::guest::{memory, range, read_u32, write_u32};
use crate::host::sockets::{recv_on, return_wasi_socket, send_on, take_wasi_socket, Deadline};
use crate::host::TaskData;
use crate::ipc::Errno;
use crate::net::socket::{Conn, Listener, LISTENER_BYTES};
use crate::task::TaskShared;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use wasmtime::Caller;

/// WASI errno values used here.
pub(super) mod errno {
    pub const ACCES: i32 = 2;
    pub const ADDRINUSE: i32 = 3;
    pub const AGAIN: i32 = 6;
    pub const BADF: i32 = 8;
    pub const CONNRESET: i32 = 15;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const MFILE: i32 = 33;
    pub const NOMEM: i32 = 48;
    pub const NOTSOCK: i32 = 57;
    pub const NOTSUP: i32 = 58;
    pub const PIPE: i32 = 64;
}

const FILETYPE_SOCKET_STREAM: u8 = 6;
const FDFLAGS_NONBLOCK: u16 = 4;

/// A socket descriptor.
pub(super) enum Sock {
    Listener(Arc<Listener>),
    Conn(Arc<Conn>),
}

struct Entry {
    sock: Sock,
    nonblocking: bool,
    bytes: u64,
}

/// A task's socket descriptors: none (and no allocation) unless it has
/// preopened listeners, the only source of sockets in WASI preview 1.
pub(crate) struct Sockets(Option<Box<Table>>);

struct Table {
    map: HashMap<u32, Entry>,
    /// Closed connection numbers, reused lowest first.
    free: BTreeSet<u32>,
    /// The first connection number, and the next never used.
    base: u32,
    next: u32,
    owner: Arc<TaskShared>,
}

impl Sockets {
    /// The first number of accepted connections for a task with `dirs`
    /// preopened directories and `listeners` preopened listeners.
    pub(crate) fn conn_base(dirs: usize, listeners: usize) -> u32 {
        (3 + dirs + listeners) as u32 + super::MAX_OPEN_FILES
    }

    /// The preopened `listeners`, numbered from `3 + dirs`, charged to
    /// `owner`.
    pub(crate) fn new(
        owner: Arc<TaskShared>,
        dirs: usize,
        listeners: Vec<Listener>,
    ) -> Result<Sockets, String> {
        if listeners.is_empty() {
            return Ok(Sockets(None));
        }
        let base = Self::conn_base(dirs, listeners.len());
        let mut s = Table {
            map: HashMap::new(),
            free: BTreeSet::new(),
            base,
            next: base,
            owner,
        };
        for (i, l) in listeners.into_iter().enumerate() {
            take_wasi_socket(&s.owner, LISTENER_BYTES)
                .map_err(|e| format!("preopened listener {}: {e}", l.local()))?;
            let entry = Entry {
                sock: Sock::Listener(Arc::new(l)),
                nonblocking: false,
                bytes: LISTENER_BYTES,
            };
            s.map.insert((3 + dirs + i) as u32, entry);
        }
        Ok(Sockets(Some(Box::new(s))))
    }

    /// Whether `fd` is a socket.
    pub(super) fn has(&self, fd: i32) -> bool {
        self.0
            .as_ref()
            .is_some_and(|t| t.map.contains_key(&(fd as u32)))
    }

    /// Whether the task has no socket descriptor.
    pub(super) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|t| t.map.is_empty())
    }

    /// The socket `fd` names, and whether it is non-blocking.
    pub(super) fn get(&self, fd: i32) -> Option<(&Sock, bool)> {
        let e = self.0.as_ref()?.map.get(&(fd as u32))?;
        Some((&e.sock, e.nonblocking))
    }

    fn entry(&mut self, fd: i32) -> Option<&mut Entry> {
        self.0.as_mut()?.map.get_mut(&(fd as u32))
    }

    /// A new descriptor for `conn` (accepted on one of the listeners).
    fn insert_conn(&mut self, conn: Conn, nonblocking: bool) -> Result<u32, i32> {
        let table = self.0.as_mut().ok_or(errno::BADF)?;
        table.insert_conn(conn, nonblocking)
    }

    /// Closes a socket descriptor: `None` if `fd` is none, else whether
    /// it was a preopened one (whose placeholder Wasmtime holds too).
    pub(super) fn close(&mut self, fd: i32) -> Option<bool> {
        self.0.as_mut()?.close(fd)
    }
}

impl Table {
    fn insert_conn(&mut self, conn: Conn, nonblocking: bool) -> Result<u32, i32> {
        let bytes = conn.bytes();
        take_wasi_socket(&self.owner, bytes).map_err(wasi_errno)?;
        let fd = match self.free.pop_first() {
            Some(fd) => fd,
            None => {
                let fd = self.next;
                self.next += 1;
                fd
            }
        };
        let entry = Entry {
            sock: Sock::Conn(Arc::new(conn)),
            nonblocking,
            bytes,
        };
        self.map.insert(fd, entry);
        Ok(fd)
    }

    fn close(&mut self, fd: i32) -> Option<bool> {
        let e = self.map.remove(&(fd as u32))?;
        return_wasi_socket(&self.owner, e.bytes);
        let preopened = (fd as u32) < self.base;
        if !preopened {
            self.free.insert(fd as u32);
        }
        Some(preopened)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for e in self.map.values() {
            return_wasi_socket(&self.owner, e.bytes);
        }
    }
}

/// The WASI errno for a kernel error.
pub(super) fn wasi_errno(e: Errno) -> i32 {
    match e {
        Errno::Timeout => errno::AGAIN,
        Errno::BadPtr => errno::FAULT,
        Errno::NoMem => errno::NOMEM,
        Errno::Quota => errno::MFILE,
        Errno::Denied => errno::ACCES,
        Errno::Exists => errno::ADDRINUSE,
        Errno::Inval => errno::INVAL,
        Errno::BadHandle => errno::BADF,
        _ => errno::CONNRESET,
    }
}

fn deadline(nonblocking: bool) -> Deadline {
    Deadline::new(if nonblocking { 0 } else { -1 })
}

/// `sock_accept(fd, flags, *fd_out)`.
pub(super) async fn accept(c: &mut Caller<'_, TaskData>, fd: i32, flags: i32, out: i32) -> i32 {
    let (l, nonblocking) = match c.data().preview1().sockets.get(fd) {
        Some((Sock::Listener(l), nb)) => (l.clone(), nb),
        Some(_) => return errno::INVAL,
        None => return errno::BADF,
    };
    if let Ok((mem, _)) = memory(c) {
        if range(mem.len(), out, 4).is_err() {
            return errno::FAULT;
        }
    }
    let shared = &c.data().shared;
    if shared.net.sockets() >= shared.net.max_sockets {
        return errno::MFILE;
    }
    let conn = match deadline(nonblocking).wait(l.accept()).await {
        Err(e) => return wasi_errno(e),
        Ok(Err(e)) => return wasi_errno(crate::host::sockets::errno_of(&e)),
        Ok(Ok(conn)) => conn,
    };
    let data = c.data_mut();
    data.shared.net.count_connection();
    let nb = flags as u16 & FDFLAGS_NONBLOCK != 0;
    let fd = match data.preview1_mut().sockets.insert_conn(conn, nb) {
        Ok(fd) => fd,
        Err(e) => return e,
    };
    match memory(c).and_then(|(mem, _)| write_u32(mem, out, fd)) {
        Ok(()) => 0,
        Err(_) => errno::FAULT,
    }
}

fn conn(c: &Caller<'_, TaskData>, fd: i32) -> Result<(Arc<Conn>, bool), i32> {
    match c.data().preview1().sockets.get(fd) {
        Some((Sock::Conn(s), nb)) => Ok((s.clone(), nb)),
        Some(_) => Err(errno::NOTSUP),
        None => Err(errno::BADF),
    }
}

/// The first non-empty buffer of an iovec list: (pointer, length).
fn first_iovec(c: &mut Caller<'_, TaskData>, iovs: i32, n: i32) -> Result<(i32, u64), i32> {
    let (mem, _) = memory(c).map_err(wasi_errno)?;
    let n = n as u32 as u64;
    range(mem.len(), iovs, n.saturating_mul(8)).map_err(|_| errno::FAULT)?;
    for i in 0..n.min(1024) {
        let at = iovs.wrapping_add((i * 8) as i32);
        let buf = read_u32(mem, at).map_err(|_| errno::FAULT)?;
        let len = read_u32(mem, at.wrapping_add(4)).map_err(|_| errno::FAULT)?;
        if len > 0 {
            return Ok((buf as i32, len as u64));
        }
    }
    Ok((0, 0))
}

/// The connection `fd` names (and whether it is non-blocking), and the
/// first non-empty buffer of the iovec list at `iovs`.
fn conn_and_iovec(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
) -> Result<(Arc<Conn>, bool, i32, u64), i32> {
    let (s, nb) = conn(c, fd)?;
    let (buf, len) = first_iovec(c, iovs, n)?;
    Ok((s, nb, buf, len))
}

/// `fd_read` / `sock_recv` on a connection: reads into the first
/// non-empty buffer (a short read, as sockets give) and writes the count.
pub(super) async fn read(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
    nread: i32,
) -> i32 {
    let (s, nb, buf, len) = match conn_and_iovec(c, fd, iovs, n) {
        Ok(x) => x,
        Err(e) => return e,
    };
    match recv_on(c, &s, buf, len, deadline(nb)).await {
        Ok(k) => put_u32(c, nread, k as u32),
        Err(e) => wasi_errno(e),
    }
}

/// `fd_write` / `sock_send` on a connection: sends from the first
/// non-empty buffer and writes the count.
pub(super) async fn write(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
    nwritten: i32,
) -> i32 {
    let (s, nb, buf, len) = match conn_and_iovec(c, fd, iovs, n) {
        Ok(x) => x,
        Err(e) => return e,
    };
    match send_on(c, &s, buf, len, deadline(nb)).await {
        Ok(k) => put_u32(c, nwritten, k as u32),
        Err(Errno::PeerDied) => errno::PIPE,
        Err(e) => wasi_errno(e),
    }
}

fn put_u32(c: &mut Caller<'_, TaskData>, ptr: i32, v: u32) -> i32 {
    match memory(c).and_then(|(mem, _)| write_u32(mem, ptr, v)) {
        Ok(()) => 0,
        Err(_) => errno::FAULT,
    }
}

/// `sock_shutdown(fd, how)`: 1 reads, 2 writes, 3 both.
pub(super) fn shutdown(c: &mut Caller<'_, TaskData>, fd: i32, how: i32) -> i32 {
    let (s, _) = match conn(c, fd) {
        Ok(x) => x,
        Err(e) => {
            return if e == errno::NOTSUP {
                errno::NOTSOCK
            } else {
                e
            }
        }
    };
    let r = match how {
        1 => s.shutdown_read(),
        2 => s.shutdown(),
        3 => s.shutdown_both(),
        _ => return errno::INVAL,
    };
    match r {
        Ok(()) => 0,
        Err(e) => wasi_errno(crate::host::sockets::errno_of(&e)),
    }
}

/// `fd_fdstat_get` for a socket: a stream socket with every right.
pub(super) fn fdstat(c: &mut Caller<'_, TaskData>, fd: i32, out: i32) -> i32 {
    let Some((_, nb)) = c.data().preview1().sockets.get(fd) else {
        return errno::BADF;
    };
    let mut st = [0u8; 24];
    st[0] = FILETYPE_SOCKET_STREAM;
    let flags = if nb { FDFLAGS_NONBLOCK } else { 0 };
    st[2..4].copy_from_slice(&flags.to_le_bytes());
    let rights: u64 = (1 << 30) - 1;
    st[8..16].copy_from_slice(&rights.to_le_bytes());
    st[16..24].copy_from_slice(&rights.to_le_bytes());
    match memory(c).and_then(|(mem, _)| mem.put(out, &st)) {
        Ok(()) => 0,
        Err(_) => errno::FAULT,
    }
}

/// `fd_fdstat_set_flags` for a socket: only `NONBLOCK` means anything.
pub(super) fn set_flags(c: &mut Caller<'_, TaskData>, fd: i32, flags: i32) -> i32 {
    match c.data_mut().preview1_mut().sockets.entry(fd) {
        Some(e) => {
            e.nonblocking = flags as u16 & FDFLAGS_NONBLOCK != 0;
            0
        }
        None => errno::BADF,
    }
}

/// `fd_filestat_get` for a socket: its type, and zeros.
pub(super) fn filestat(c: &mut Caller<'_, TaskData>, out: i32) -> i32 {
    let mut st = [0u8; 64];
    st[16] = FILETYPE_SOCKET_STREAM;
    match memory(c).and_then(|(mem, _)| mem.put(out, &st)) {
        Ok(()) => 0,
        Err(_) => errno::FAULT,
    }
}

//! WASI preview-1 calls whose cost a guest chooses, bounded: they shadow
//! Wasmtime's definitions, check the argument, and hand the call on.
//!
//! - `poll_oneoff` with more than [`MAX_POLL_SUBSCRIPTIONS`] subscriptions
//!   returns `EINVAL` (as Linux's `poll` does past its descriptor limit).
//!   Wasmtime builds a host object per subscription, so half a million of
//!   them used to cost the host about 300 MiB, outside any budget.
//! - `path_open` holds a host descriptor per open file: a task may have
//!   [`MAX_OPEN_FILES`] open at once (`EMFILE` past it), and all tasks of
//!   the process together, files and sockets, half of its descriptor
//!   limit (`ENFILE`; see `crate::descriptors`), so no task can leave the
//!   host, or another task, without descriptors.
//!   `fd_close` and `fd_renumber` keep the count, and note when stdout or
//!   stderr moves.
//! - `fd_write` to stdout or stderr, while neither has moved, goes
//!   straight to the task's output sinks (see `stdio`).
//! - `poll_oneoff` that only sleeps is a timer (see `sleep`).
//! - A call on a descriptor of a served directory goes to `served`
//!   (its opens counted here like any other file's).

use super::{net, poll, served, sleep, stdio};
use crate::host::TaskData;
use std::collections::HashSet;
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;

/// The most subscriptions one `poll_oneoff` may wait on.
pub const MAX_POLL_SUBSCRIPTIONS: u32 = 4096;

/// The most files one task may have open at once.
pub const MAX_OPEN_FILES: u32 = 256;

/// WASI's `EINVAL`, `EMFILE`, `ENFILE`.
const EINVAL: i32 = 28;
const EMFILE: i32 = 33;
const ENFILE: i32 = 41;

/// The files a task opened (its descriptors), counted in `descriptors`
/// until they are closed or the task ends; and whether its stdout or
/// stderr descriptor was ever closed or renumbered (then its writes are
/// no longer known to reach its output sinks: see `stdio`).
#[derive(Default)]
pub(crate) struct OpenFiles {
    open: HashSet<u32>,
    stdio_moved: bool,
}

impl OpenFiles {
    /// Room for one more? Reserves it in the process-wide count.
    fn reserve(&self) -> Result<(), i32> {
        if self.open.len() >= MAX_OPEN_FILES as usize {
            return Err(EMFILE);
        }
        crate::descriptors::take().then_some(()).ok_or(ENFILE)
    }

    fn unreserve() {
        crate::descriptors::give(1);
    }

    fn closed(&mut self, fd: u32) {
        if self.open.remove(&fd) {
            Self::unreserve();
        }
    }

    /// Notes a close or renumbering of `fd`.
    fn touched(&mut self, fd: i32) {
        self.stdio_moved |= stdio::is_output(fd);
    }

    /// Whether descriptors 1 and 2 are still the task's stdout and stderr.
    pub(super) fn stdio_in_place(&self) -> bool {
        !self.stdio_moved
    }
}

impl Drop for OpenFiles {
    fn drop(&mut self) {
        crate::descriptors::give(self.open.len());
    }
}

/// Shadows the bounded WASI calls in `linker` (which must already hold
/// Wasmtime's WASI definitions).
pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    super::shadowing(linker, |linker| {
        linker.func_wrap_async(
            "wasi_snapshot_preview1",
            "poll_oneoff",
            |mut caller: Caller<'_, TaskData>, (subs, events, n, nevents): (i32, i32, i32, i32)| {
                Box::new(async move {
                    if n as u32 > MAX_POLL_SUBSCRIPTIONS {
                        return Ok(EINVAL);
                    }
                    match sleep::parse(&mut caller, subs, events, n, nevents) {
                        sleep::Parsed::Sleep(s) => {
                            return Ok(sleep::sleep(&mut caller, s, events, nevents).await)
                        }
                        sleep::Parsed::Refuse(errno) => return Ok(errno),
                        sleep::Parsed::Other => {}
                    }
                    // Both boxed, so that a sleeping task's future is no
                    // larger than the sleep needs (see `sleep`).
                    if poll::names_a_socket(&mut caller, subs, n) {
                        let poll = poll::poll_oneoff(&mut caller, subs, events, n, nevents);
                        return Ok(Box::pin(poll).await);
                    }
                    Box::pin(async { delegate!(caller, poll_oneoff(subs, events, n, nevents)) })
                        .await
                })
            },
        )?;
        add_file_counting(linker)?;
        add_sockets(linker)?;
        served::add_to_linker(linker)
    })
}

/// `path_open`, `fd_close` and `fd_renumber`, counting the task's open
/// files.
fn add_file_counting(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_open(linker)?;
    add_close(linker)
}

fn add_open(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type PathOpen = (i32, i32, i32, i32, i32, i64, i64, i32, i32);
    linker.func_wrap_async(
        "wasi_snapshot_preview1",
        "path_open",
        |mut caller: Caller<'_, TaskData>,
         (dir, dflags, path, len, oflags, base, inh, fdflags, out): PathOpen| {
            Box::new(async move {
                if let Err(errno) = caller.data().preview1().files.reserve() {
                    return Ok(errno);
                }
                if served::has(caller.data(), dir) {
                    let r = open_served(
                        &mut caller,
                        (dir, dflags, path, len, oflags, base, fdflags, out),
                    );
                    return Ok(r.await);
                }
                let r = delegate!(
                    caller,
                    path_open(dir, dflags, path, len, oflags, base, inh, fdflags, out)
                );
                match (&r, read_u32(&mut caller, out)) {
                    (Ok(0), Some(fd)) => {
                        caller.data_mut().preview1_mut().files.open.insert(fd);
                    }
                    _ => OpenFiles::unreserve(),
                }
                r
            })
        },
    )?;
    Ok(())
}

/// `path_open` from a served directory; the new descriptor counted.
async fn open_served(
    c: &mut Caller<'_, TaskData>,
    (dir, dflags, path, len, oflags, base, fdflags, out): (i32, i32, i32, i32, i32, i64, i32, i32),
) -> i32 {
    if read_u32(c, out).is_none() {
        OpenFiles::unreserve();
        return net::errno::FAULT;
    }
    match served::path_open(c, dir, dflags, path, len, oflags, base, fdflags).await {
        Ok(fd) => {
            let _ = write_u32(c, out, fd);
            c.data_mut().preview1_mut().files.open.insert(fd);
            0
        }
        Err(errno) => {
            OpenFiles::unreserve();
            errno
        }
    }
}

fn add_close(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        "wasi_snapshot_preview1",
        "fd_close",
        |mut caller: Caller<'_, TaskData>, (fd,): (i32,)| {
            Box::new(async move {
                caller.data_mut().preview1_mut().files.touched(fd);
                match caller.data_mut().preview1_mut().sockets.close(fd) {
                    None => {}
                    Some(false) => return Ok(0),
                    // A preopened listener: its placeholder goes too.
                    Some(true) => return delegate!(caller, fd_close(fd)),
                }
                let r = delegate!(caller, fd_close(fd));
                if let Ok(0) = r {
                    caller.data_mut().preview1_mut().files.closed(fd as u32);
                    served::closed(caller.data_mut(), fd);
                }
                r
            })
        },
    )?;
    linker.func_wrap_async(
        "wasi_snapshot_preview1",
        "fd_renumber",
        |mut caller: Caller<'_, TaskData>, (from, to): (i32, i32)| {
            Box::new(async move {
                let files = &mut caller.data_mut().preview1_mut().files;
                files.touched(from);
                files.touched(to);
                let sockets = &caller.data().preview1().sockets;
                if sockets.has(from) || sockets.has(to) {
                    return Ok(net::errno::NOTSUP);
                }
                let r = delegate!(caller, fd_renumber(from, to));
                if let Ok(0) = r {
                    let files = &mut caller.data_mut().preview1_mut().files;
                    files.closed(to as u32);
                    if files.open.remove(&(from as u32)) {
                        files.open.insert(to as u32);
                    }
                    served::renumbered(caller.data_mut(), from, to);
                }
                r
            })
        },
    )?;
    Ok(())
}

/// Shadows the calls that take a descriptor which may be a socket: each
/// answers for sockets and hands anything else to Wasmtime.
fn add_sockets(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_socket_calls(linker)?;
    add_socket_io(linker)?;
    add_socket_metadata(linker)?;
    add_socket_prestat(linker)
}

/// The name of WASI preview 1's import module.
const M: &str = "wasi_snapshot_preview1";

/// `sock_accept`, `sock_recv`, `sock_send`, `sock_shutdown`.
fn add_socket_calls(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        M,
        "sock_accept",
        |mut c: Caller<'_, TaskData>, (fd, flags, out): (i32, i32, i32)| {
            Box::new(async move {
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(sync c, sock_accept(fd, flags, out));
                }
                Ok(net::accept(&mut c, fd, flags, out).await)
            })
        },
    )?;
    type Recv = (i32, i32, i32, i32, i32, i32);
    linker.func_wrap_async(
        M,
        "sock_recv",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, flags, nread, oflags): Recv| {
            Box::new(async move {
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(sync c, sock_recv(fd, iovs, n, flags, nread, oflags));
                }
                if flags != 0 {
                    return Ok(net::errno::NOTSUP); // MSG_PEEK, MSG_WAITALL
                }
                let r = net::read(&mut c, fd, iovs, n, nread).await;
                if r == 0 && write_u16(&mut c, oflags, 0).is_none() {
                    return Ok(net::errno::FAULT);
                }
                Ok(r)
            })
        },
    )?;
    type Send = (i32, i32, i32, i32, i32);
    linker.func_wrap_async(
        M,
        "sock_send",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, flags, nw): Send| {
            Box::new(async move {
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(sync c, sock_send(fd, iovs, n, flags, nw));
                }
                Ok(net::write(&mut c, fd, iovs, n, nw).await)
            })
        },
    )?;
    linker.func_wrap_async(
        M,
        "sock_shutdown",
        |mut c: Caller<'_, TaskData>, (fd, how): (i32, i32)| {
            Box::new(async move {
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(sync c, sock_shutdown(fd, how));
                }
                Ok(net::shutdown(&mut c, fd, how))
            })
        },
    )?;
    Ok(())
}

/// `fd_read` and `fd_write` on a socket (and `fd_write` to stdout or
/// stderr, straight to the sinks).
fn add_socket_io(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        M,
        "fd_read",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, nread): (i32, i32, i32, i32)| {
            Box::new(async move {
                if served::has(c.data(), fd) {
                    return Ok(served::read(&mut c, fd, iovs, n, nread, None).await);
                }
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(c, fd_read(fd, iovs, n, nread));
                }
                Ok(net::read(&mut c, fd, iovs, n, nread).await)
            })
        },
    )?;
    linker.func_wrap_async(
        M,
        "fd_write",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, nw): (i32, i32, i32, i32)| {
            Box::new(async move {
                if served::has(c.data(), fd) {
                    return Ok(served::write(&mut c, fd, iovs, n, nw, None).await);
                }
                if !c.data().preview1().sockets.has(fd) {
                    if let Some(pipe) = stdio::streamed(&c, fd) {
                        return stdio::write_streamed(&mut c, pipe, iovs, n, nw).await;
                    }
                    if let Some(r) = stdio::write(&mut c, fd, iovs, n, nw) {
                        return r;
                    }
                    return delegate!(c, fd_write(fd, iovs, n, nw));
                }
                Ok(net::write(&mut c, fd, iovs, n, nw).await)
            })
        },
    )?;
    Ok(())
}

/// A socket's `fd_fdstat_get`, `fd_fdstat_set_flags`, `fd_filestat_get`.
fn add_socket_metadata(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        M,
        "fd_fdstat_get",
        |mut c: Caller<'_, TaskData>, (fd, out): (i32, i32)| {
            Box::new(async move {
                if served::has(c.data(), fd) {
                    return Ok(served::fdstat_get(&mut c, fd, out));
                }
                if !c.data().preview1().sockets.has(fd) {
                    if let Some(errno) = stdio::fdstat(&mut c, fd, out) {
                        return Ok(errno);
                    }
                    return delegate!(c, fd_fdstat_get(fd, out));
                }
                Ok(net::fdstat(&mut c, fd, out))
            })
        },
    )?;
    linker.func_wrap_async(
        M,
        "fd_fdstat_set_flags",
        |mut c: Caller<'_, TaskData>, (fd, flags): (i32, i32)| {
            Box::new(async move {
                if served::has(c.data(), fd) {
                    return Ok(served::set_flags(&mut c, fd, flags));
                }
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(sync c, fd_fdstat_set_flags(fd, flags));
                }
                Ok(net::set_flags(&mut c, fd, flags))
            })
        },
    )?;
    linker.func_wrap_async(
        M,
        "fd_filestat_get",
        |mut c: Caller<'_, TaskData>, (fd, out): (i32, i32)| {
            Box::new(async move {
                if served::has(c.data(), fd) {
                    return Ok(served::filestat_get(&mut c, fd, out).await);
                }
                if !c.data().preview1().sockets.has(fd) {
                    return delegate!(c, fd_filestat_get(fd, out));
                }
                Ok(net::filestat(&mut c, out))
            })
        },
    )?;
    Ok(())
}

/// `fd_prestat_get` and `fd_prestat_dir_name`: a socket is no preopened
/// directory (which also ends wasi-libc's scan of them).
fn add_socket_prestat(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        M,
        "fd_prestat_get",
        |mut c: Caller<'_, TaskData>, (fd, out): (i32, i32)| {
            Box::new(async move {
                if c.data().preview1().sockets.has(fd) {
                    return Ok(net::errno::BADF);
                }
                delegate!(sync c, fd_prestat_get(fd, out))
            })
        },
    )?;
    linker.func_wrap_async(
        M,
        "fd_prestat_dir_name",
        |mut c: Caller<'_, TaskData>, (fd, p, len): (i32, i32, i32)| {
            Box::new(async move {
                if c.data().preview1().sockets.has(fd) {
                    return Ok(net::errno::BADF);
                }
                delegate!(sync c, fd_prestat_dir_name(fd, p, len))
            })
        },
    )?;
    Ok(())
}

fn write_u16(caller: &mut Caller<'_, TaskData>, ptr: i32, v: u16) -> Option<()> {
    let (mem, _) = crate::host::guest::memory(caller).ok()?;
    mem.put(ptr, &v.to_le_bytes()).ok()
}

fn write_u32(caller: &mut Caller<'_, TaskData>, ptr: i32, v: u32) -> Option<()> {
    let (mem, _) = crate::host::guest::memory(caller).ok()?;
    mem.put(ptr, &v.to_le_bytes()).ok()
}

/// The `u32` at `ptr` in the caller's memory, if it is there.
fn read_u32(caller: &mut Caller<'_, TaskData>, ptr: i32) -> Option<u32> {
    let Some(Extern::Memory(m)) = caller.get_export("memory") else {
        return None;
    };
    let at = ptr as u32 as usize;
    let bytes = m.data(&*caller).get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

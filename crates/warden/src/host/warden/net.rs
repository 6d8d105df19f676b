//! The `warden` socket functions: listen, accept, connect, send,
//! receive, shut down, addresses (`poll` over them and every other
//! waitable handle is in `poll.rs`). Sockets are handles here; the moving
//! of bytes, the pacing and the grants' checks are `host::sockets`'. A
//! servlet request's exchange takes send, receive and shut down too
//! (`exchange.rs`).

use super::exchange;
use crate::host::guest::{len32, memory, range, ret32, ret64};
use crate::host::sockets::{errno_of, recv_on, send_on, Deadline};
use crate::host::TaskData;
use crate::ipc::{Errno, Object};
use crate::net::grant::{allowed, parse_addr};
use crate::net::own::may_connect;
use crate::net::socket::{Conn, Listener};
use std::sync::Arc;
use wasmtime::{Caller, Linker};

/// `WARDEN_POLL_*` event bits.
pub const POLL_IN: u32 = 1;
/// Writable.
pub const POLL_OUT: u32 = 2;
/// The peer closed (always reported).
pub const POLL_HUP: u32 = 4;

/// The most entries one `poll` may wait on.
pub const MAX_POLL_HANDLES: u32 = 4096;

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
        |c: Caller<'_, TaskData>, h: i32| ret32(shutdown(c.data(), h)),
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
    let shared = &data.shared;
    if data.ipc().handles.room() == 0 || shared.net.sockets() >= shared.net.max_sockets {
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
    data.ipc_mut().handles.insert(Object::Listener(Arc::new(l)))
}

fn listener_of(data: &TaskData, h: i32) -> Result<Arc<Listener>, Errno> {
    match data.ipc().handles.get(h)? {
        Object::Listener(l) => Ok(l.clone()),
        _ => Err(Errno::BadHandle),
    }
}

fn conn_of(data: &TaskData, h: i32) -> Result<Arc<Conn>, Errno> {
    match data.ipc().handles.get(h)? {
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
    data.shared.net.count_connection();
    data.ipc_mut().handles.insert(Object::Conn(Arc::new(conn)))
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
    data.shared.net.count_connection();
    data.ipc_mut().handles.insert(Object::Conn(Arc::new(conn)))
}

/// Ends the sends on a connection or an exchange.
fn shutdown(data: &TaskData, h: i32) -> Result<i32, Errno> {
    if let Some(x) = exchange::exchange_of(data, h) {
        x.shutdown();
        return Ok(0);
    }
    let conn = conn_of(data, h)?;
    conn.shutdown().map_err(|e| errno_of(&e)).map(|()| 0)
}

async fn send(
    mut c: Caller<'_, TaskData>,
    h: i32,
    ptr: i32,
    len: i32,
    timeout: i64,
) -> Result<i64, Errno> {
    let deadline = Deadline::new(timeout);
    if let Some(x) = exchange::exchange_of(c.data(), h) {
        return exchange::send(&mut c, &x, ptr, len32(len), deadline).await;
    }
    let conn = conn_of(c.data(), h)?;
    send_on(&mut c, &conn, ptr, len32(len), deadline).await
}

async fn recv(
    mut c: Caller<'_, TaskData>,
    h: i32,
    ptr: i32,
    cap: i32,
    timeout: i64,
) -> Result<i64, Errno> {
    let deadline = Deadline::new(timeout);
    if let Some(x) = exchange::exchange_of(c.data(), h) {
        return exchange::recv(&mut c, &x, ptr, len32(cap), deadline).await;
    }
    let conn = conn_of(c.data(), h)?;
    recv_on(&mut c, &conn, ptr, len32(cap), deadline).await
}

fn address(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    peer: i32,
    buf: i32,
    cap: i32,
) -> Result<i32, Errno> {
    let text = match c.data().ipc().handles.get(h)? {
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

//! `warden_sock_send`, `_recv` and `_shutdown` on a servlet request's
//! exchange (see `crate::ipc::exchange`): the rest of the request body in,
//! a streamed answer's body out. Sends are paced by the servlet's own
//! flow (`bandwidth_limit`) and counted as its sent bytes, as a socket's.

use crate::host::guest::{memory, range};
use crate::host::sockets::{paced, sent, Deadline};
use crate::host::TaskData;
use crate::ipc::exchange::{ExchangeEnd, Failed, MAX_SEND};
use crate::ipc::{Errno, Object};
use wasmtime::Caller;

/// Bytes one receive may bring.
const MAX_RECV: u64 = 1 << 20;

/// The exchange handle `h` names, if it names one.
pub(super) fn exchange_of(data: &TaskData, h: i32) -> Option<ExchangeEnd> {
    match data.ipc().handles.get(h) {
        Ok(Object::Exchange(x)) => Some(x.dup()),
        _ => None,
    }
}

fn errno(f: Failed) -> Errno {
    match f {
        Failed::Closed => Errno::PeerDied,
        Failed::Broken => Errno::Range,
    }
}

/// Sends up to `len` bytes at `ptr`: how many were taken.
pub(super) async fn send(
    c: &mut Caller<'_, TaskData>,
    x: &ExchangeEnd,
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
    let room = deadline
        .wait(std::future::poll_fn(|cx| x.poll_writable(cx)))
        .await?
        .map_err(errno)? as u64;
    let want = paced(c, len.min(room).min(MAX_SEND as u64), deadline).await?;
    {
        let (mem, _) = memory(c)?;
        let r = range(mem.len(), ptr, want)?;
        // SAFETY: `r` lies inside the memory, mapped for the whole call,
        // and nothing else runs on this task's memory meanwhile.
        let bytes = unsafe { std::slice::from_raw_parts(mem.at(r.start), r.len()) };
        x.push(bytes).map_err(errno)?;
    }
    sent(c, want as usize);
    Ok(want as i64)
}

/// Receives up to `cap` bytes of the rest of the body at `ptr`: how many
/// (0 at its end).
pub(super) async fn recv(
    c: &mut Caller<'_, TaskData>,
    x: &ExchangeEnd,
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
    loop {
        let Some(bytes) = x.read(cap.min(MAX_RECV) as usize).map_err(errno)? else {
            return Ok(0);
        };
        if !bytes.is_empty() {
            let (mem, data) = memory(c)?;
            mem.put(ptr, &bytes)?;
            data.shared.net.count_received(bytes.len());
            return Ok(bytes.len() as i64);
        }
        if deadline.passed() {
            return Err(Errno::Timeout);
        }
        deadline
            .wait(std::future::poll_fn(|cx| x.poll_readable(cx)))
            .await?;
    }
}

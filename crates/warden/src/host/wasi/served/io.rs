//! Reading and writing served files: `fd_read`, `fd_write`, `fd_pread`,
//! `fd_pwrite`, `fd_seek`, `fd_tell`, and the calls that change a file's
//! size or push it to the device. As Wasmtime does, a read or write
//! takes the first non-empty buffer of its list; it is carried in
//! requests of at most `MAX_IO` bytes (fewer if the task's per-message
//! quota is smaller), and only the end of the file shortens a read.
//! Writes to a file opened for appending go to its end, whatever offset
//! `fd_pwrite` names (Linux's rule, and Wasmtime's).

use super::client::{rpc, rpc_into, served, with_reply, Data, Got};
use super::proto::{errno, Req, FSYNC, MAX_IO, READ, REQ, TRUNCATE, WRITE};
use super::walk::{attr_of, getattr};
use super::{get, update, Open};
use crate::host::guest::{memory, range, read_u32, write_u32, write_u64};
use crate::host::TaskData;
use crate::ipc::files::FileServiceStats;
use wasmtime::Caller;

/// The first non-empty buffer of the iovec list at `iovs`: its range in
/// the task's memory (empty if there is none).
fn first_iovec(
    c: &mut Caller<'_, TaskData>,
    iovs: i32,
    n: i32,
) -> Result<std::ops::Range<usize>, i32> {
    let (mem, _) = memory(c).map_err(|_| errno::FAULT)?;
    let n = n as u32 as u64;
    range(mem.len(), iovs, n.saturating_mul(8)).map_err(|_| errno::FAULT)?;
    for i in 0..n {
        let at = iovs.wrapping_add((i * 8) as i32);
        let buf = read_u32(mem, at).map_err(|_| errno::FAULT)?;
        let len = read_u32(mem, at.wrapping_add(4)).map_err(|_| errno::FAULT)?;
        if len > 0 {
            return range(mem.len(), buf as i32, len as u64).map_err(|_| errno::FAULT);
        }
    }
    Ok(0..0)
}

/// The least a READ asks for to lend the file system its buffer (see
/// `client::rpc_into`): below it, making and revoking the permit costs
/// more than the copy it saves.
const LEND_MIN: usize = 16 << 10;

/// The most bytes one request carries for this task: `MAX_IO`, or less
/// if its per-message quota is smaller (in 4 KiB steps, 4 KiB at least).
fn chunk(c: &Caller<'_, TaskData>) -> usize {
    let quota = c.data().preview1().served.as_ref().map_or(0, |s| s.quota) as usize;
    let room = quota.saturating_sub(REQ + 255) & !4095;
    room.clamp(4096, MAX_IO)
}

/// A served file open for reading or writing, or `EBADF`.
fn file(c: &Caller<'_, TaskData>, fd: i32, writing: bool) -> Result<Open, i32> {
    let f = get(c.data(), fd)?;
    match f.dir || !(if writing { f.write } else { f.read }) {
        true => Err(errno::BADF),
        false => Ok(f),
    }
}

/// `fd_read` (`at` none) or `fd_pread` on a served file; returns the
/// WASI errno, the count written to `out`.
pub(in super::super) async fn read(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
    out: i32,
    at: Option<u64>,
) -> i32 {
    let r = async {
        let f = file(c, fd, false)?;
        let buf = first_iovec(c, iovs, n)?;
        let start = at.unwrap_or(f.pos);
        let got = read_into(c, f, start, buf).await?;
        if at.is_none() {
            update(c.data_mut(), fd, |o| o.pos = start + got as u64);
        }
        Ok(got)
    };
    let r = r.await;
    finish(c, r, out)
}

/// Reads file `f` from `start` into the task's memory at `buf`, one
/// request at a time, until the buffer is full or the file ends.
async fn read_into(
    c: &mut Caller<'_, TaskData>,
    f: Open,
    start: u64,
    buf: std::ops::Range<usize>,
) -> Result<usize, i32> {
    let (chunk, mut done) = (chunk(c), 0);
    while done < buf.len() {
        let want = (buf.len() - done).min(chunk);
        let off = start.checked_add(done as u64).ok_or(errno::OVERFLOW)?;
        let q = Req {
            a: off,
            b: want as u64,
            ..Req::on(READ, f.ino)
        };
        let at = buf.start + done;
        let r = match want >= LEND_MIN {
            true => rpc_into(c, f.mount, &q, at..at + want).await,
            false => rpc(c, f.mount, &q, Data::None).await.map(Got::Payload),
        };
        let n = match r {
            Ok(Got::Written(n)) => n,
            Ok(Got::Payload(n)) => {
                let n = n.min(want);
                with_reply(c, |mem, p| mem.write(at, &p[..n]))?;
                n
            }
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        };
        FileServiceStats::add(&served(c).mounts[f.mount].stats.read_bytes, n as u64);
        done += n;
        if n < want {
            break;
        }
    }
    Ok(done)
}

/// `fd_write` (`at` none) or `fd_pwrite` on a served file.
pub(in super::super) async fn write(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
    out: i32,
    at: Option<u64>,
) -> i32 {
    let r = async {
        let f = file(c, fd, true)?;
        let buf = first_iovec(c, iovs, n)?;
        let start = match (f.append, at) {
            (true, _) => getattr(c, f.mount, f.ino).await?.size,
            (false, Some(at)) => at,
            (false, None) => f.pos,
        };
        let done = write_from(c, f, start, buf).await?;
        if at.is_none() {
            update(c.data_mut(), fd, |o| o.pos = start + done as u64);
        }
        Ok(done)
    };
    let r = r.await;
    finish(c, r, out)
}

/// Writes the task's memory at `buf` to file `f` from `start`.
async fn write_from(
    c: &mut Caller<'_, TaskData>,
    f: Open,
    start: u64,
    buf: std::ops::Range<usize>,
) -> Result<usize, i32> {
    let (chunk, mut done) = (chunk(c), 0);
    while done < buf.len() {
        let n = (buf.len() - done).min(chunk);
        let off = start.checked_add(done as u64).ok_or(errno::FBIG)?;
        let q = Req {
            a: off,
            ..Req::on(WRITE, f.ino)
        };
        let data = Data::Guest(buf.start + done..buf.start + done + n);
        match attr_of(c, f.mount, &q, data).await {
            Ok(_) => {}
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        FileServiceStats::add(&served(c).mounts[f.mount].stats.written_bytes, n as u64);
        done += n;
    }
    Ok(done)
}

/// A count written to `out` (`EFAULT` if it cannot be), or the error.
fn finish(c: &mut Caller<'_, TaskData>, r: Result<usize, i32>, out: i32) -> i32 {
    match r {
        Ok(n) => match memory(c) {
            Ok((mem, _)) => write_u32(mem, out, n as u32).map_or(errno::FAULT, |()| 0),
            Err(_) => errno::FAULT,
        },
        Err(e) => e,
    }
}

/// `fd_seek`: `whence` 0 (set), 1 (current), 2 (end).
pub(super) async fn seek(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    delta: i64,
    whence: i32,
    out: i32,
) -> i32 {
    let r = async {
        let f = get(c.data(), fd)?;
        if f.dir {
            return Err(errno::BADF);
        }
        let base = match whence {
            0 if delta >= 0 => 0,
            1 => f.pos,
            2 => getattr(c, f.mount, f.ino).await?.size,
            _ => return Err(errno::INVAL),
        };
        let pos = base.checked_add_signed(delta).ok_or(errno::INVAL)?;
        update(c.data_mut(), fd, |o| o.pos = pos);
        Ok(pos)
    };
    let r = r.await;
    put_u64(c, r, out)
}

/// `fd_tell`.
pub(super) fn tell(c: &mut Caller<'_, TaskData>, fd: i32, out: i32) -> i32 {
    let r = get(c.data(), fd).and_then(|f| if f.dir { Err(errno::BADF) } else { Ok(f.pos) });
    put_u64(c, r, out)
}

fn put_u64(c: &mut Caller<'_, TaskData>, r: Result<u64, i32>, out: i32) -> i32 {
    match (r, memory(c)) {
        (Ok(v), Ok((mem, _))) => write_u64(mem, out, v).map_or(errno::FAULT, |()| 0),
        (Ok(_), Err(_)) => errno::FAULT,
        (Err(e), _) => e,
    }
}

/// `fd_sync` and `fd_datasync`: everything the file system holds
/// reaches its device.
pub(super) async fn sync(c: &mut Caller<'_, TaskData>, fd: i32) -> i32 {
    let r = async {
        let f = get(c.data(), fd)?;
        rpc(c, f.mount, &Req::on(FSYNC, f.ino), Data::None).await
    };
    r.await.map_or_else(|e| e, |_| 0)
}

/// `fd_filestat_set_size`.
pub(super) async fn set_size(c: &mut Caller<'_, TaskData>, fd: i32, size: u64) -> i32 {
    let r = async {
        let f = file(c, fd, true)?;
        let q = Req {
            a: size,
            ..Req::on(TRUNCATE, f.ino)
        };
        attr_of(c, f.mount, &q, Data::None).await
    };
    r.await.map_or_else(|e| e, |_| 0)
}

/// `fd_advise` (accepted, as advice) and `fd_allocate` (unsupported, as
/// in Wasmtime) on a served file.
pub(super) fn advise_or_allocate(c: &Caller<'_, TaskData>, fd: i32, allocate: bool) -> i32 {
    match get(c.data(), fd) {
        Ok(f) if f.dir => errno::BADF,
        Ok(_) if allocate => errno::NOTSUP,
        Ok(_) => 0,
        Err(e) => e,
    }
}

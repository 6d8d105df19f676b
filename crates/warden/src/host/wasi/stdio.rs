//! `fd_write` to a task's stdout and stderr, straight into its output
//! sinks. Wasmtime's own `fd_write` writes only the first non-empty
//! buffer of a gather list, in pieces of at most 4 KiB each copied into a
//! new vector and passed through its stream machinery: a per-request
//! handler's 10 KB answer cost a dozen host calls' worth of allocation.
//! Here one call writes every buffer of the list, up to [`MAX_WRITE`]
//! bytes (a partial write past it, which a guest's libc continues).
//!
//! Their `fd_fdstat_get` too, which Wasmtime answers through its
//! descriptor table's transaction: a C program asks it once, for
//! `isatty`, before its first write (a fortieth of a per-request task's
//! time).
//!
//! Only while descriptors 1 and 2 are where the task started with them:
//! once the task closes or renumbers either, Wasmtime's table decides
//! what they are and its `fd_write` answers. As WASI preview 1 says and
//! Wasmtime does, a gather list or a buffer outside the caller's memory
//! traps.

use super::cli::{misaligned, out_of_bounds};
use crate::host::guest::{memory, range};
use crate::host::TaskData;
use wasmtime::Caller;

/// Most bytes one call writes.
const MAX_WRITE: usize = 64 * 1024;

/// Most buffers one gather list may hold (Linux's `IOV_MAX`).
const MAX_BUFFERS: u32 = 1024;

/// WASI's `EINVAL`, `EIO` and `EPIPE`.
const EINVAL: i32 = 28;
const EIO: i32 = 29;
const EPIPE: i32 = 64;

/// Whether `fd` is stdout's or stderr's descriptor.
pub(super) fn is_output(fd: i32) -> bool {
    fd == 1 || fd == 2
}

/// The sink of output descriptor `fd` (1: stdout, 2: stderr).
fn output(data: &TaskData, fd: i32) -> &crate::output::Sink {
    match fd {
        1 => &data.sinks.0,
        _ => &data.sinks.1,
    }
}

/// `fd_write(fd, iovs, n, nwritten)` answered here, or `None` if `fd` is
/// not (or may no longer be) the task's stdout or stderr.
pub(super) fn write(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    iovs: i32,
    n: i32,
    nwritten: i32,
) -> Option<wasmtime::Result<i32>> {
    if !is_output(fd) || !c.data().preview1().files.stdio_in_place() {
        return None;
    }
    if n as u32 > MAX_BUFFERS {
        return Some(Ok(EINVAL));
    }
    let (mem, data) = memory(c).ok()?;
    let written = match (nwritten % 4, range(mem.len(), nwritten, 4)) {
        (0, Ok(r)) => r.start,
        (0, Err(_)) => return Some(Err(out_of_bounds())),
        _ => return Some(Err(misaligned())),
    };
    let bytes = match gather(mem, iovs, n as u32) {
        Ok(bytes) => bytes,
        Err(e) => return Some(Err(e)),
    };
    if output(data, fd).write_bytes(&bytes).is_err() {
        return Some(Ok(EIO));
    }
    mem.write(written, &(bytes.len() as u32).to_le_bytes());
    Some(Ok(0))
}

/// WASI preview 1's `filetype` of a descriptor that is a terminal or
/// not, and the `fd_write` right: what Wasmtime answers for stdout and
/// stderr.
const CHARACTER_DEVICE: u8 = 2;
const UNKNOWN: u8 = 0;
const RIGHT_FD_WRITE: u64 = 1 << 6;

/// `fd_fdstat_get(fd, out)` answered here, or `None` if `fd` is not (or
/// may no longer be) the task's stdout or stderr, or `out` is not a
/// place Wasmtime would write its answer to (then its own call traps or
/// answers as it does). The answer is Wasmtime's for these descriptors
/// (a C program asks it once, for `isatty`, before its first write):
/// written field by field, as Wasmtime does, padding untouched.
pub(super) fn fdstat(c: &mut Caller<'_, TaskData>, fd: i32, out: i32) -> Option<i32> {
    if !is_output(fd) || !c.data().preview1().files.stdio_in_place() {
        return None;
    }
    let (mem, data) = memory(c).ok()?;
    if out % 8 != 0 {
        return None;
    }
    let at = range(mem.len(), out, 24).ok()?.start;
    use wasmtime_wasi::cli::IsTerminal;
    let filetype = match output(data, fd).is_terminal() {
        true => CHARACTER_DEVICE,
        false => UNKNOWN,
    };
    mem.write(at, &[filetype]);
    mem.write(at + 2, &0u16.to_le_bytes());
    mem.write(at + 8, &RIGHT_FD_WRITE.to_le_bytes());
    mem.write(at + 16, &RIGHT_FD_WRITE.to_le_bytes());
    Some(0)
}

/// The pipe `fd_write(fd, …)` streams into, if `fd` is the task's stdout
/// (still in place) and its stdout is a streamed response.
pub(super) fn streamed(c: &Caller<'_, TaskData>, fd: i32) -> Option<crate::pipe::PipeWriter> {
    if fd != 1 || !c.data().preview1().files.stdio_in_place() {
        return None;
    }
    c.data().sinks.0.stream()
}

/// `fd_write` to a streamed stdout: waits for room in `pipe` (its
/// reader, the client, sets the pace) and for the task's bandwidth
/// (a streamed response is the task's network traffic), then writes
/// what the gather list holds, up to [`MAX_WRITE`] and the bandwidth's
/// grant. `EPIPE` once the client is gone, `EIO` once the stream failed.
pub(super) async fn write_streamed(
    c: &mut Caller<'_, TaskData>,
    pipe: crate::pipe::PipeWriter,
    iovs: i32,
    n: i32,
    nwritten: i32,
) -> wasmtime::Result<i32> {
    if n as u32 > MAX_BUFFERS {
        return Ok(EINVAL);
    }
    let written = {
        let (mem, _) = memory(c).map_err(|_| out_of_bounds())?;
        match (nwritten % 4, range(mem.len(), nwritten, 4)) {
            (0, Ok(r)) => r.start,
            (0, Err(_)) => return Err(out_of_bounds()),
            _ => return Err(misaligned()),
        }
    };
    let mut bytes = gather(memory(c).map_err(|_| out_of_bounds())?.0, iovs, n as u32)?;
    if let Err(e) = std::future::poll_fn(|cx| pipe.poll_room(cx)).await {
        return Ok(errno(e));
    }
    let forever = crate::host::sockets::Deadline::new(-1);
    let grant = crate::host::sockets::paced(c, bytes.len() as u64, forever).await;
    bytes.truncate(grant.unwrap_or(0) as usize);
    if let Err(e) = pipe.push(&bytes) {
        return Ok(errno(e));
    }
    crate::host::sockets::sent(c, bytes.len());
    let (mem, _) = memory(c).map_err(|_| out_of_bounds())?;
    mem.write(written, &(bytes.len() as u32).to_le_bytes());
    Ok(0)
}

/// WASI's errno for a write a pipe refused.
fn errno(s: crate::pipe::Shut) -> i32 {
    match s {
        crate::pipe::Shut::Gone => EPIPE,
        crate::pipe::Shut::Failed => EIO,
    }
}

/// The bytes of the `n` buffers listed at `iovs` (a pointer and a length
/// each), up to [`MAX_WRITE`] of them. Each word is read once.
fn gather(mem: crate::host::guest::GuestMem, iovs: i32, n: u32) -> wasmtime::Result<Vec<u8>> {
    if iovs % 4 != 0 {
        return Err(misaligned());
    }
    let list = range(mem.len(), iovs, 8 * u64::from(n)).map_err(|_| out_of_bounds())?;
    let mut bytes = Vec::new();
    for entry in list.step_by(8) {
        let room = MAX_WRITE - bytes.len();
        if room == 0 {
            break;
        }
        let ptr = mem.read_u32(entry as i32).map_err(|_| out_of_bounds())?;
        let len = mem
            .read_u32((entry + 4) as i32)
            .map_err(|_| out_of_bounds())?;
        let r = range(mem.len(), ptr as i32, u64::from(len)).map_err(|_| out_of_bounds())?;
        let take = r.len().min(room);
        let at = bytes.len();
        bytes.resize(at + take, 0);
        mem.read(r.start..r.start + take, &mut bytes[at..]);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::guest::GuestMem;

    /// A memory holding a gather list at 0 of `bufs` (offset, length).
    fn memory_with(bufs: &[(u32, u32)], bytes: &mut [u8]) {
        for (i, (p, l)) in bufs.iter().enumerate() {
            bytes[8 * i..8 * i + 4].copy_from_slice(&p.to_le_bytes());
            bytes[8 * i + 4..8 * i + 8].copy_from_slice(&l.to_le_bytes());
        }
    }

    #[test]
    fn every_buffer_is_written_in_order() {
        let mut bytes = vec![0u8; 256];
        memory_with(&[(100, 3), (200, 0), (150, 2)], &mut bytes);
        bytes[100..103].copy_from_slice(b"abc");
        bytes[150..152].copy_from_slice(b"de");
        let mem = GuestMem::of_test_buffer(&mut bytes);
        assert_eq!(gather(mem, 0, 3).unwrap(), b"abcde");
        assert_eq!(gather(mem, 0, 0).unwrap(), b"");
    }

    #[test]
    fn a_write_stops_at_its_bound() {
        let mut bytes = vec![b'x'; 3 * MAX_WRITE];
        memory_with(&[(64, MAX_WRITE as u32 - 10), (64, 100)], &mut bytes);
        let mem = GuestMem::of_test_buffer(&mut bytes);
        assert_eq!(gather(mem, 0, 2).unwrap().len(), MAX_WRITE);
    }

    #[test]
    fn wild_lists_and_buffers_trap() {
        let mut bytes = vec![0u8; 64];
        memory_with(&[(60, 8)], &mut bytes);
        let mem = GuestMem::of_test_buffer(&mut bytes);
        assert!(gather(mem, 0, 1).is_err(), "a buffer past the end");
        assert!(gather(mem, 56, 2).is_err(), "a list past the end");
        assert!(gather(mem, -8, 1).is_err(), "a wrapped list");
        assert!(gather(mem, 2, 1).is_err(), "a misaligned list");
    }
}

//! What served descriptors and paths report and change about files:
//! `fd_fdstat_*`, `fd_filestat_*`, `path_filestat_*`, and `fd_readdir`.
//! Rights are reported as Wasmtime reports them (every right the
//! descriptor's type and open mode allow; a preopened directory's fixed
//! set), and changing them is unsupported, as there. Only the
//! modification time can be set (the file system keeps the access time
//! itself); ext2 keeps nanoseconds in inodes of 256 bytes (mke2fs's
//! default), whole seconds in 128-byte ones.

use super::client::{rpc, served, with_reply, Data};
use super::open::{APPEND, NONBLOCK};
use super::proto::{self, errno, Attr, Req, DIRENT, MAX_IO, READDIR, SETATTR};
use super::walk::{attr_of, getattr, read_path, resolve};
use super::{get, update, Open};
use crate::host::guest::memory;
use crate::host::TaskData;
use crate::ipc::files::FileServiceStats;
use wasmtime::Caller;

/// Every right (`rights` has 30 bits), and those a directory or a file
/// opened without reading or writing lacks.
const ALL: u64 = (1 << 30) - 1;
const FD_READ: u64 = 1 << 1;
const FD_SEEK: u64 = 1 << 2;
const FD_WRITE: u64 = 1 << 6;
const FD_READDIR: u64 = 1 << 14;
const PATH_FILESTAT_SET_SIZE: u64 = 1 << 19;
const FD_FILESTAT_SET_SIZE: u64 = 1 << 22;
/// A preopened directory's rights, as Wasmtime reports them: the path
/// calls and `fd_readdir`, and for what is opened under it everything a
/// file may do.
const PREOPEN_BASE: u64 = bits(&[
    9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 20, 21, 23, 24, 25, 26,
]);
const PREOPEN_INHERITING: u64 = PREOPEN_BASE | bits(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 22, 27]);

/// The rights whose bit numbers are `b`.
const fn bits(b: &[u32]) -> u64 {
    let (mut v, mut i) = (0, 0);
    while i < b.len() {
        v |= 1 << b[i];
        i += 1;
    }
    v
}

/// The rights reported for `f`: (base, inheriting).
fn rights(f: &Open) -> (u64, u64) {
    if f.preopen {
        return (PREOPEN_BASE, PREOPEN_INHERITING);
    }
    let mut base = ALL;
    if f.dir {
        base &= !(FD_SEEK | FD_FILESTAT_SET_SIZE | PATH_FILESTAT_SET_SIZE);
    }
    if !f.read {
        base &= !(FD_READ | FD_READDIR);
    }
    if !f.write {
        base &= !FD_WRITE;
    }
    (base, base)
}

/// `fd_fdstat_get` of a served descriptor.
pub(in super::super) fn fdstat_get(c: &mut Caller<'_, TaskData>, fd: i32, out: i32) -> i32 {
    let f = match get(c.data(), fd) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let (base, inheriting) = rights(&f);
    let mut flags = 0u16;
    if f.append {
        flags |= APPEND as u16;
    }
    if f.nonblock {
        flags |= NONBLOCK as u16;
    }
    let mut stat = [0u8; 24];
    stat[0] = f.filetype;
    stat[2..4].copy_from_slice(&flags.to_le_bytes());
    stat[8..16].copy_from_slice(&base.to_le_bytes());
    stat[16..24].copy_from_slice(&inheriting.to_le_bytes());
    put(c, out, &stat)
}

/// `fd_fdstat_set_flags`: only `APPEND` and `NONBLOCK` may change (the
/// sync flags are `EINVAL`, as in Wasmtime), and only on a file.
pub(in super::super) fn set_flags(c: &mut Caller<'_, TaskData>, fd: i32, flags: i32) -> i32 {
    match get(c.data(), fd) {
        Ok(f) if f.dir => errno::BADF,
        Ok(_) if flags & (2 | 8 | 16) != 0 => errno::INVAL,
        Ok(_) => {
            update(c.data_mut(), fd, |o| {
                o.append = flags & APPEND != 0;
                o.nonblock = flags & NONBLOCK != 0;
            });
            0
        }
        Err(e) => e,
    }
}

/// `fd_fdstat_set_rights`: unsupported, as in Wasmtime.
pub(super) fn set_rights(c: &Caller<'_, TaskData>, fd: i32) -> i32 {
    get(c.data(), fd).map_or_else(|e| e, |_| errno::NOTSUP)
}

/// Writes `bytes` at `out` in the task's memory: 0, or `EFAULT`.
fn put(c: &mut Caller<'_, TaskData>, out: i32, bytes: &[u8]) -> i32 {
    match memory(c) {
        Ok((mem, _)) => mem.put(out, bytes).map_or(errno::FAULT, |()| 0),
        Err(_) => errno::FAULT,
    }
}

/// The device number served files report: one per served directory,
/// none of them Wasmtime's (1).
fn dev(mount: usize) -> u64 {
    0x5745_0000 + mount as u64
}

/// `fd_filestat_get` of a served descriptor.
pub(in super::super) async fn filestat_get(c: &mut Caller<'_, TaskData>, fd: i32, out: i32) -> i32 {
    let r = async {
        let f = get(c.data(), fd)?;
        Ok((getattr(c, f.mount, f.ino).await?, f.mount))
    };
    match r.await {
        Ok((attr, mount)) => put(c, out, &attr.filestat(dev(mount))),
        Err(e) => e,
    }
}

/// `path_filestat_get` from a served directory.
pub(super) async fn path_filestat_get(
    c: &mut Caller<'_, TaskData>,
    dirfd: i32,
    flags: i32,
    path: i32,
    len: i32,
    out: i32,
) -> i32 {
    let r = async {
        let (dir, attr) = at_path(c, dirfd, flags, path, len).await?;
        Ok((attr, dir.mount))
    };
    match r.await {
        Ok((attr, mount)) => put(c, out, &attr.filestat(dev(mount))),
        Err(e) => e,
    }
}

/// The served directory `dirfd` and what `path` names from it.
async fn at_path(
    c: &mut Caller<'_, TaskData>,
    dirfd: i32,
    flags: i32,
    path: i32,
    len: i32,
) -> Result<(Open, Attr), i32> {
    let dir = dir(c, dirfd)?;
    let path = read_path(c, path, len)?;
    let t = resolve(c, dir.mount, dir.ino, &path, flags & 1 != 0).await?;
    let attr = t.found?;
    if t.slash && !attr.is_dir() {
        return Err(errno::NOTDIR);
    }
    Ok((dir, attr))
}

/// The served directory `fd` (`ENOTDIR` if it is a file).
pub(super) fn dir(c: &Caller<'_, TaskData>, fd: i32) -> Result<Open, i32> {
    let f = get(c.data(), fd)?;
    if !f.dir {
        return Err(errno::NOTDIR);
    }
    Ok(f)
}

/// `fstflags`: set atime, set it to now, set mtime, set it to now.
const ATIM: i32 = 1;
const ATIM_NOW: i32 = 2;
const MTIM: i32 = 4;
const MTIM_NOW: i32 = 8;

/// The modification time `fst` asks for (seconds and nanoseconds), if
/// any; `EINVAL` for contradictory flags, as in Wasmtime.
fn new_mtime(mtim: u64, fst: i32) -> Result<Option<(u64, u32)>, i32> {
    if fst & !(ATIM | ATIM_NOW | MTIM | MTIM_NOW) != 0
        || fst & (ATIM | ATIM_NOW) == ATIM | ATIM_NOW
        || fst & (MTIM | MTIM_NOW) == MTIM | MTIM_NOW
    {
        return Err(errno::INVAL);
    }
    let split = |ns: u64| (ns / 1_000_000_000, (ns % 1_000_000_000) as u32);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    Ok(match fst {
        f if f & MTIM != 0 => Some(split(mtim)),
        f if f & MTIM_NOW != 0 => Some(split(now())),
        _ => None,
    })
}

/// Sets file `ino`'s modification time as `fst` asks. The access time
/// is left as it is: the file system sets it itself.
async fn set_times(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    ino: u64,
    mtim: u64,
    fst: i32,
) -> Result<(), i32> {
    let Some((secs, ns)) = new_mtime(mtim, fst)? else {
        return Ok(());
    };
    let q = Req {
        a: u64::MAX, // the mode stays
        b: secs,
        ..Req::on(SETATTR, ino)
    };
    attr_of(c, mount, &q, Data::Host(&ns.to_le_bytes()))
        .await
        .map(drop)
}

/// `fd_filestat_set_times` on a served descriptor.
pub(super) async fn fd_set_times(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    mtim: u64,
    fst: i32,
) -> i32 {
    let r = async {
        let f = get(c.data(), fd)?;
        set_times(c, f.mount, f.ino, mtim, fst).await
    };
    r.await.map_or_else(|e| e, |()| 0)
}

/// `path_filestat_set_times` from a served directory.
#[allow(clippy::too_many_arguments)]
pub(super) async fn path_set_times(
    c: &mut Caller<'_, TaskData>,
    dirfd: i32,
    flags: i32,
    path: i32,
    len: i32,
    mtim: u64,
    fst: i32,
) -> i32 {
    let r = async {
        new_mtime(mtim, fst)?;
        let (dir, attr) = at_path(c, dirfd, flags, path, len).await?;
        set_times(c, dir.mount, attr.ino, mtim, fst).await
    };
    r.await.map_or_else(|e| e, |()| 0)
}

/// `fd_readdir` on a served directory: WASI's records (24 bytes, then
/// the name, as the protocol's), as many as fit in the buffer, the last
/// cut short if it does not fit whole (so the caller knows to ask again
/// with a larger one); cookies are the file system's.
pub(super) async fn readdir(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    buf: i32,
    len: i32,
    cookie: u64,
    out: i32,
) -> i32 {
    let r = async {
        let d = dir(c, fd).map_err(|_| errno::BADF)?;
        let buf = guest_range(c, buf, len)?;
        fill_entries(c, d, buf, cookie).await
    };
    let r = r.await;
    match r {
        Ok(n) => put(c, out, &(n as u32).to_le_bytes()),
        Err(e) => e,
    }
}

/// The checked range of `len` bytes at `ptr` in the task's memory.
pub(super) fn guest_range(
    c: &mut Caller<'_, TaskData>,
    ptr: i32,
    len: i32,
) -> Result<std::ops::Range<usize>, i32> {
    let (mem, _) = memory(c).map_err(|_| errno::FAULT)?;
    crate::host::guest::range(mem.len(), ptr, len as u32 as u64).map_err(|_| errno::FAULT)
}

/// Fills the task's memory at `buf` with directory `d`'s entries from
/// `cookie`; returns the bytes written.
async fn fill_entries(
    c: &mut Caller<'_, TaskData>,
    d: Open,
    buf: std::ops::Range<usize>,
    mut cookie: u64,
) -> Result<usize, i32> {
    let mut done = 0;
    while done < buf.len() {
        let want = (buf.len() - done + DIRENT + 255).min(MAX_IO);
        let q = Req {
            a: cookie,
            b: want as u64,
            ..Req::on(READDIR, d.ino)
        };
        rpc(c, d.mount, &q, Data::None).await?;
        let at = buf.start;
        let room = buf.len();
        let (n, next) = with_reply(c, |mem, p| copy_entries(mem, at, room, done, p))?.2;
        FileServiceStats::add(
            &served(c).mounts[d.mount].stats.read_bytes,
            (n - done) as u64,
        );
        match next {
            Some(next) if n > done => (done, cookie) = (n, next),
            _ => return Ok(n),
        }
    }
    Ok(done)
}

/// Copies the protocol's records in `p` as WASI's into the buffer of
/// `room` bytes at `at`, from byte `done`; returns the bytes filled and
/// the cookie after the last whole record copied (`None` at the end of
/// the directory or when the buffer is full).
fn copy_entries(
    mem: crate::host::guest::GuestMem<'_>,
    at: usize,
    room: usize,
    mut done: usize,
    mut p: &[u8],
) -> (usize, Option<u64>) {
    let mut next = None;
    while let Some((ino, cookie, kind, name, len)) = proto::dirent(p) {
        let mut rec = [0u8; DIRENT];
        rec[0..8].copy_from_slice(&cookie.to_le_bytes());
        rec[8..16].copy_from_slice(&ino.to_le_bytes());
        rec[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
        rec[20] = proto::dirent_type(kind);
        for part in [&rec[..], name] {
            let n = part.len().min(room - done);
            mem.write(at + done, &part[..n]);
            done += n;
        }
        if done == room {
            return (done, None);
        }
        next = Some(cookie);
        p = &p[len..];
    }
    (done, next)
}

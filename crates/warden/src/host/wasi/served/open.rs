//! `path_open` under a served directory, with Wasmtime's rules: the open
//! mode from the rights asked (reading unless only writing is asked;
//! creating or truncating implies writing), `O_DIRECTORY` with
//! `O_CREAT`, `O_EXCL` or `O_TRUNC` refused (`EINVAL`), the sync flags
//! unsupported (`ENOTSUP`), a directory never opened for writing
//! (`EISDIR`), a symbolic link not followed refused (`ELOOP`).

use super::proto::{errno, Attr, Req, CREATE, TRUNCATE};
use super::walk::{attr_of, read_path, resolve};
use super::{client::Data, get, Open};
use crate::host::TaskData;
use wasmtime::Caller;
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;

/// `oflags`.
const CREAT: i32 = 1;
const DIRECTORY: i32 = 2;
const EXCL: i32 = 4;
const TRUNC: i32 = 8;
/// `fdflags`.
pub(super) const APPEND: i32 = 1;
pub(super) const NONBLOCK: i32 = 4;
const SYNCS: i32 = 2 | 8 | 16; // DSYNC, RSYNC, SYNC
/// Rights that choose the open mode.
const FD_READ: i64 = 1 << 1;
const FD_WRITE: i64 = 1 << 6;
/// A file made by `path_open` gets these permission bits.
const NEW_FILE_MODE: u64 = 0o644;

/// `path_open` from the served directory `dirfd`: the new descriptor's
/// number (its placeholder's), which the caller counts as an open file.
#[allow(clippy::too_many_arguments)]
pub(in super::super) async fn path_open(
    c: &mut Caller<'_, TaskData>,
    dirfd: i32,
    dirflags: i32,
    path: i32,
    len: i32,
    oflags: i32,
    base: i64,
    fdflags: i32,
) -> Result<u32, i32> {
    let dir = get(c.data(), dirfd)?;
    if !dir.dir {
        return Err(errno::NOTDIR);
    }
    let path = read_path(c, path, len)?;
    if oflags & DIRECTORY != 0 && oflags & (CREAT | EXCL | TRUNC) != 0 {
        return Err(errno::INVAL);
    }
    if fdflags & SYNCS != 0 {
        return Err(errno::NOTSUP);
    }
    let wants_write = base & FD_WRITE != 0;
    let write = wants_write || oflags & (CREAT | TRUNC) != 0;
    let read = base & FD_READ != 0 || !wants_write;
    let attr = open_target(c, dir, &path, dirflags & 1 != 0, oflags).await?;
    if attr.is_symlink() {
        return Err(errno::LOOP);
    }
    if attr.is_dir() && write {
        return Err(errno::ISDIR);
    }
    if attr.is_regular() && oflags & TRUNC != 0 && attr.size != 0 {
        let q = Req::on(TRUNCATE, attr.ino);
        attr_of(c, dir.mount, &q, Data::None).await?;
    }
    let fd = placeholder(c, dirfd).await?;
    let open = Open {
        mount: dir.mount,
        ino: attr.ino,
        dir: attr.is_dir(),
        filetype: attr.filetype(),
        pos: 0,
        append: fdflags & APPEND != 0,
        nonblock: fdflags & NONBLOCK != 0,
        read,
        write,
        preopen: false,
    };
    if let Some(s) = c.data_mut().preview1_mut().served.as_mut() {
        s.fds.insert(fd, open);
    }
    Ok(fd)
}

/// What `path` names from `dir`, made first if `O_CREAT` asks and it is
/// not there; a non-directory is refused where a directory is asked.
async fn open_target(
    c: &mut Caller<'_, TaskData>,
    dir: Open,
    path: &[u8],
    follow: bool,
    oflags: i32,
) -> Result<Attr, i32> {
    let t = resolve(c, dir.mount, dir.ino, path, follow).await?;
    let attr = match t.found {
        Ok(_) if oflags & CREAT != 0 && oflags & EXCL != 0 => return Err(errno::EXIST),
        Ok(attr) => attr,
        Err(errno::NOENT) if oflags & CREAT != 0 && !t.name.is_empty() => {
            if t.slash {
                return Err(errno::ISDIR);
            }
            let q = Req {
                a: NEW_FILE_MODE,
                name: &t.name,
                ..Req::on(CREATE, t.parent)
            };
            attr_of(c, dir.mount, &q, Data::None).await?
        }
        Err(e) => return Err(e),
    };
    let wants_dir = oflags & DIRECTORY != 0 || t.slash;
    if wants_dir && !attr.is_dir() && !(attr.is_symlink() && !follow && !t.slash) {
        return Err(errno::NOTDIR);
    }
    Ok(attr)
}

/// A placeholder for a new served descriptor: Wasmtime opens `.` of the
/// served directory `dirfd`'s placeholder (an empty host directory) and
/// hands out its number.
async fn placeholder(c: &mut Caller<'_, TaskData>, dirfd: i32) -> Result<u32, i32> {
    const OUT: usize = 8;
    let mut scratch = [0u8; 16];
    scratch[0] = b'.';
    // As Wasmtime's own shim does before each call: the store's budget
    // for copies made on the guest's behalf.
    let fuel = wasmtime::AsContextMut::as_context_mut(&mut *c).hostcall_fuel();
    let data = c.data_mut();
    p1::WasiSnapshotPreview1::set_hostcall_fuel(&mut data.wasi, fuel);
    let mut mem = wiggle::GuestMemory::Unshared(&mut scratch);
    let r = p1::path_open(
        &mut data.wasi,
        &mut mem,
        dirfd,
        0,
        0,
        1,
        DIRECTORY,
        FD_READ,
        0,
        0,
        OUT as i32,
    )
    .await;
    match r {
        Ok(0) => Ok(u32::from_le_bytes(
            scratch[OUT..OUT + 4].try_into().unwrap(),
        )),
        Ok(e) => Err(e),
        Err(_) => Err(errno::IO),
    }
}

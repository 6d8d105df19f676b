//! The calls that change names under a served directory: making and
//! removing directories, unlinking, renaming, symbolic and hard links,
//! and reading a link. Names are resolved without following a symbolic
//! link in the last one (POSIX's rule for these calls, Wasmtime's too);
//! the file system checks what only it can (a directory not empty, a
//! rename into its own subtree). Two names on different file systems
//! (or one on a host directory) are `EXDEV`. A symbolic link to an
//! absolute path is refused (`EPERM`), as Wasmtime refuses it.

use super::client::{rpc, with_reply, Data};
use super::meta::{dir, guest_range};
use super::proto::{errno, Req, LINK, MKDIR, READLINK, RENAME, RMDIR, SYMLINK, UNLINK};
use super::walk::{attr_of, read_path, resolve, Target};
use super::Open;
use crate::host::guest::{memory, write_u32};
use crate::host::TaskData;
use wasmtime::Caller;

/// A new directory gets these permission bits.
const NEW_DIR_MODE: u64 = 0o755;

/// `path` (at `ptr`, `len`) from served directory `dirfd`, resolved.
async fn target(
    c: &mut Caller<'_, TaskData>,
    dirfd: i32,
    ptr: i32,
    len: i32,
    follow: bool,
) -> Result<(Open, Target), i32> {
    let d = dir(c, dirfd)?;
    let path = read_path(c, ptr, len)?;
    let t = resolve(c, d.mount, d.ino, &path, follow).await?;
    Ok((d, t))
}

/// A name that must not exist yet: its parent and name, or the error.
fn fresh(t: &Target) -> Result<(), i32> {
    match &t.found {
        _ if t.name.is_empty() => Err(errno::EXIST),
        Ok(_) => Err(errno::EXIST),
        Err(errno::NOENT) => Ok(()),
        Err(e) => Err(*e),
    }
}

fn code(r: Result<(), i32>) -> i32 {
    r.map_or_else(|e| e, |()| 0)
}

/// `path_create_directory`.
pub(super) async fn mkdir(c: &mut Caller<'_, TaskData>, fd: i32, p: i32, len: i32) -> i32 {
    let r = async {
        let (d, t) = target(c, fd, p, len, false).await?;
        fresh(&t)?;
        let q = Req {
            a: NEW_DIR_MODE,
            name: &t.name,
            ..Req::on(MKDIR, t.parent)
        };
        attr_of(c, d.mount, &q, Data::None).await.map(drop)
    };
    code(r.await)
}

/// `path_remove_directory` (`rmdir = true`) or `path_unlink_file`.
pub(super) async fn remove(
    c: &mut Caller<'_, TaskData>,
    fd: i32,
    p: i32,
    len: i32,
    rmdir: bool,
) -> i32 {
    let r = async {
        let (d, t) = target(c, fd, p, len, false).await?;
        if t.name.is_empty() {
            return Err(if rmdir { errno::INVAL } else { errno::ISDIR });
        }
        let attr = t.found?;
        match (rmdir, attr.is_dir()) {
            (true, false) => return Err(errno::NOTDIR),
            (false, true) => return Err(errno::ISDIR),
            (false, false) if t.slash => return Err(errno::NOTDIR),
            _ => {}
        }
        let q = Req {
            name: &t.name,
            ..Req::on(if rmdir { RMDIR } else { UNLINK }, t.parent)
        };
        rpc(c, d.mount, &q, Data::None).await.map(drop)
    };
    code(r.await)
}

/// `path_rename` between served directories of one file system.
pub(super) async fn rename(
    c: &mut Caller<'_, TaskData>,
    (fd, p, len): (i32, i32, i32),
    (to_fd, to_p, to_len): (i32, i32, i32),
) -> i32 {
    let r = async {
        let (d, from) = target(c, fd, p, len, false).await?;
        let (d2, to) = target(c, to_fd, to_p, to_len, false).await?;
        if d.mount != d2.mount {
            return Err(errno::XDEV);
        }
        if from.name.is_empty() || to.name.is_empty() {
            return Err(errno::BUSY);
        }
        let src = from.found?;
        match &to.found {
            Ok(_) | Err(errno::NOENT) => {}
            Err(e) => return Err(*e),
        }
        if (from.slash || to.slash) && !src.is_dir() {
            return Err(errno::NOTDIR);
        }
        let q = Req {
            b: to.parent,
            name: &from.name,
            ..Req::on(RENAME, from.parent)
        };
        rpc(c, d.mount, &q, Data::Host(&to.name)).await.map(drop)
    };
    code(r.await)
}

/// `path_symlink`: a link at `path` from `fd` holding `old`.
pub(super) async fn symlink(
    c: &mut Caller<'_, TaskData>,
    (old, old_len): (i32, i32),
    fd: i32,
    p: i32,
    len: i32,
) -> i32 {
    let r = async {
        let link_target = read_path(c, old, old_len)?;
        if link_target.first() == Some(&b'/') {
            return Err(errno::PERM); // it would lead out of the directory
        }
        let (d, t) = target(c, fd, p, len, false).await?;
        fresh(&t)?;
        if t.slash {
            return Err(errno::NOENT);
        }
        let q = Req {
            name: &t.name,
            ..Req::on(SYMLINK, t.parent)
        };
        attr_of(c, d.mount, &q, Data::Host(&link_target))
            .await
            .map(drop)
    };
    code(r.await)
}

/// `path_link`: a new name at (`to_fd`, `to`) for what `from` names.
pub(super) async fn link(
    c: &mut Caller<'_, TaskData>,
    (fd, flags, p, len): (i32, i32, i32, i32),
    (to_fd, to_p, to_len): (i32, i32, i32),
) -> i32 {
    let r = async {
        let (d, from) = target(c, fd, p, len, flags & 1 != 0).await?;
        let (d2, to) = target(c, to_fd, to_p, to_len, false).await?;
        if d.mount != d2.mount {
            return Err(errno::XDEV);
        }
        let src = from.found?;
        if src.is_dir() {
            return Err(errno::PERM);
        }
        if from.slash {
            return Err(errno::NOTDIR);
        }
        fresh(&to)?;
        if to.slash {
            return Err(errno::NOENT);
        }
        let q = Req {
            b: to.parent,
            name: &to.name,
            ..Req::on(LINK, src.ino)
        };
        attr_of(c, d.mount, &q, Data::None).await.map(drop)
    };
    code(r.await)
}

/// `path_readlink`: the link's target, cut to the buffer, and its length.
pub(super) async fn readlink(
    c: &mut Caller<'_, TaskData>,
    (fd, p, len): (i32, i32, i32),
    buf: i32,
    cap: i32,
    out: i32,
) -> i32 {
    let r = async {
        let (d, t) = target(c, fd, p, len, false).await?;
        let attr = t.found?;
        if !attr.is_symlink() || t.slash {
            return Err(if t.slash { errno::NOTDIR } else { errno::INVAL });
        }
        let buf = guest_range(c, buf, cap)?;
        rpc(c, d.mount, &Req::on(READLINK, attr.ino), Data::None).await?;
        let n = with_reply(c, |mem, target| {
            let n = target.len().min(buf.len());
            mem.write(buf.start, &target[..n]);
            n
        })?
        .2;
        let (mem, _) = memory(c).map_err(|_| errno::FAULT)?;
        write_u32(mem, out, n as u32).map_err(|_| errno::FAULT)
    };
    code(r.await)
}

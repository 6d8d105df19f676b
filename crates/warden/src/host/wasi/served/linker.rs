//! The WASI calls the interposer shadows outright (those `bounds` does
//! not already shadow): each takes a served descriptor itself and hands
//! any other to Wasmtime. A call naming two descriptors, one served and
//! one not (or served by different file systems), is `EXDEV`.

use super::proto::errno;
use super::{has, io, meta, paths};
use crate::host::TaskData;
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;

const M: &str = "wasi_snapshot_preview1";

/// Shadows the calls in `linker` (which must already hold Wasmtime's
/// WASI definitions, with shadowing allowed).
pub(in super::super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_file_io(linker)?;
    add_file_meta(linker)?;
    add_path_meta(linker)?;
    add_names(linker)?;
    add_two_names(linker)
}

fn add_file_io(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Rw = (i32, i32, i32, i64, i32);
    l.func_wrap_async(
        M,
        "fd_pread",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, at, out): Rw| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_pread(fd, iovs, n, at, out));
                }
                Ok(io::read(&mut c, fd, iovs, n, out, Some(at as u64)).await)
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "fd_pwrite",
        |mut c: Caller<'_, TaskData>, (fd, iovs, n, at, out): Rw| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_pwrite(fd, iovs, n, at, out));
                }
                Ok(io::write(&mut c, fd, iovs, n, out, Some(at as u64)).await)
            })
        },
    )?;
    add_position(l)
}

/// `fd_seek`, `fd_tell`, `fd_sync`, `fd_datasync`.
fn add_position(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Seek = (i32, i64, i32, i32);
    l.func_wrap_async(
        M,
        "fd_seek",
        |mut c: Caller<'_, TaskData>, (fd, delta, whence, out): Seek| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_seek(fd, delta, whence, out));
                }
                Ok(io::seek(&mut c, fd, delta, whence, out).await)
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "fd_tell",
        |mut c: Caller<'_, TaskData>, (fd, out): (i32, i32)| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(sync c, fd_tell(fd, out));
                }
                Ok(io::tell(&mut c, fd, out))
            })
        },
    )?;
    for (name, data_only) in [("fd_sync", false), ("fd_datasync", true)] {
        l.func_wrap_async(
            M,
            name,
            move |mut c: Caller<'_, TaskData>, (fd,): (i32,)| {
                Box::new(async move {
                    match (has(c.data(), fd), data_only) {
                        (true, _) => Ok(io::sync(&mut c, fd).await),
                        (false, false) => delegate!(c, fd_sync(fd)),
                        (false, true) => delegate!(c, fd_datasync(fd)),
                    }
                })
            },
        )?;
    }
    Ok(())
}

fn add_file_meta(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    l.func_wrap_async(
        M,
        "fd_filestat_set_size",
        |mut c: Caller<'_, TaskData>, (fd, size): (i32, i64)| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_filestat_set_size(fd, size));
                }
                Ok(io::set_size(&mut c, fd, size as u64).await)
            })
        },
    )?;
    type Times = (i32, i64, i64, i32);
    l.func_wrap_async(
        M,
        "fd_filestat_set_times",
        |mut c: Caller<'_, TaskData>, (fd, a, m, fst): Times| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_filestat_set_times(fd, a, m, fst));
                }
                Ok(meta::fd_set_times(&mut c, fd, m as u64, fst).await)
            })
        },
    )?;
    add_file_hints(l)
}

/// `fd_advise`, `fd_allocate`, `fd_fdstat_set_rights`, `fd_readdir`.
fn add_file_hints(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Advise = (i32, i64, i64, i32);
    l.func_wrap_async(
        M,
        "fd_advise",
        |mut c: Caller<'_, TaskData>, (fd, at, len, advice): Advise| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_advise(fd, at, len, advice));
                }
                Ok(io::advise_or_allocate(&c, fd, false))
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "fd_allocate",
        |mut c: Caller<'_, TaskData>, (fd, at, len): (i32, i64, i64)| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(sync c, fd_allocate(fd, at, len));
                }
                Ok(io::advise_or_allocate(&c, fd, true))
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "fd_fdstat_set_rights",
        |mut c: Caller<'_, TaskData>, (fd, b, i): (i32, i64, i64)| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(sync c, fd_fdstat_set_rights(fd, b, i));
                }
                Ok(meta::set_rights(&c, fd))
            })
        },
    )?;
    type Readdir = (i32, i32, i32, i64, i32);
    l.func_wrap_async(
        M,
        "fd_readdir",
        |mut c: Caller<'_, TaskData>, (fd, buf, len, cookie, out): Readdir| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, fd_readdir(fd, buf, len, cookie, out));
                }
                Ok(meta::readdir(&mut c, fd, buf, len, cookie as u64, out).await)
            })
        },
    )?;
    Ok(())
}

fn add_path_meta(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Stat = (i32, i32, i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_filestat_get",
        |mut c: Caller<'_, TaskData>, (fd, fl, p, len, out): Stat| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_filestat_get(fd, fl, p, len, out));
                }
                Ok(meta::path_filestat_get(&mut c, fd, fl, p, len, out).await)
            })
        },
    )?;
    type Times = (i32, i32, i32, i32, i64, i64, i32);
    l.func_wrap_async(
        M,
        "path_filestat_set_times",
        |mut c: Caller<'_, TaskData>, (fd, fl, p, len, a, m, fst): Times| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_filestat_set_times(fd, fl, p, len, a, m, fst));
                }
                Ok(meta::path_set_times(&mut c, fd, fl, p, len, m as u64, fst).await)
            })
        },
    )?;
    type Readlink = (i32, i32, i32, i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_readlink",
        |mut c: Caller<'_, TaskData>, (fd, p, len, buf, cap, out): Readlink| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_readlink(fd, p, len, buf, cap, out));
                }
                Ok(paths::readlink(&mut c, (fd, p, len), buf, cap, out).await)
            })
        },
    )?;
    Ok(())
}

fn add_names(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Path = (i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_create_directory",
        |mut c: Caller<'_, TaskData>, (fd, p, len): Path| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_create_directory(fd, p, len));
                }
                Ok(paths::mkdir(&mut c, fd, p, len).await)
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "path_remove_directory",
        |mut c: Caller<'_, TaskData>, (fd, p, len): Path| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_remove_directory(fd, p, len));
                }
                Ok(paths::remove(&mut c, fd, p, len, true).await)
            })
        },
    )?;
    l.func_wrap_async(
        M,
        "path_unlink_file",
        |mut c: Caller<'_, TaskData>, (fd, p, len): Path| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_unlink_file(fd, p, len));
                }
                Ok(paths::remove(&mut c, fd, p, len, false).await)
            })
        },
    )?;
    type Symlink = (i32, i32, i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_symlink",
        |mut c: Caller<'_, TaskData>, (old, old_len, fd, p, len): Symlink| {
            Box::new(async move {
                if !has(c.data(), fd) {
                    return delegate!(c, path_symlink(old, old_len, fd, p, len));
                }
                Ok(paths::symlink(&mut c, (old, old_len), fd, p, len).await)
            })
        },
    )?;
    Ok(())
}

/// Which way a call naming descriptors `a` and `b` goes: Wasmtime's
/// (`None`), the interposer's (`Some(0)`) or `EXDEV`.
fn two(c: &Caller<'_, TaskData>, a: i32, b: i32) -> Option<i32> {
    match (has(c.data(), a), has(c.data(), b)) {
        (false, false) => None,
        (true, true) => Some(0),
        _ => Some(errno::XDEV),
    }
}

fn add_two_names(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    type Rename = (i32, i32, i32, i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_rename",
        |mut c: Caller<'_, TaskData>, (fd, p, len, fd2, p2, len2): Rename| {
            Box::new(async move {
                match two(&c, fd, fd2) {
                    None => delegate!(c, path_rename(fd, p, len, fd2, p2, len2)),
                    Some(0) => Ok(paths::rename(&mut c, (fd, p, len), (fd2, p2, len2)).await),
                    Some(e) => Ok(e),
                }
            })
        },
    )?;
    type Link = (i32, i32, i32, i32, i32, i32, i32);
    l.func_wrap_async(
        M,
        "path_link",
        |mut c: Caller<'_, TaskData>, (fd, fl, p, len, fd2, p2, len2): Link| {
            Box::new(async move {
                match two(&c, fd, fd2) {
                    None => delegate!(c, path_link(fd, fl, p, len, fd2, p2, len2)),
                    Some(0) => Ok(paths::link(&mut c, (fd, fl, p, len), (fd2, p2, len2)).await),
                    Some(e) => Ok(e),
                }
            })
        },
    )?;
    Ok(())
}

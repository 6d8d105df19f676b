//! Memory objects: create, view, read, write, size, revoke.

use crate::host::guest::{len32, memory, range, ret32, ret64};
use crate::host::TaskData;
use crate::ipc::memobj::{MemObject, MemView};
use crate::ipc::{Errno, Object};
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_objects(linker)?;
    add_access(linker)
}

/// `mem_create` and `mem_view`.
fn add_objects(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "mem_create",
        |mut c: Caller<'_, TaskData>, size: i64| {
            let data = c.data_mut();
            let (ipc, core) = data.warden_parts();
            let shared = &core.shared;
            let r = u64::try_from(size)
                .map_err(|_| Errno::Inval)
                .and_then(|size| MemObject::create(size, shared))
                .and_then(|(object, view)| {
                    let h = ipc.handles.insert(Object::Mem(view))?;
                    ipc.owned.add_mem(&object);
                    Ok(h)
                });
            ret32(r)
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "mem_view",
        |mut c: Caller<'_, TaskData>, h: i32, off: i64, len: i64, readonly: i32| {
            let table = &mut c.data_mut().ipc_mut().handles;
            let r = view(table.get(h))
                .and_then(|v| v.sub(off as u64, len as u64, readonly != 0))
                .and_then(|v| table.insert(Object::Mem(v)));
            ret32(r)
        },
    )?;
    Ok(())
}

/// `mem_read`, `mem_write`, `mem_size`, `mem_revoke`.
fn add_access(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "mem_read",
        |mut c: Caller<'_, TaskData>, h: i32, off: i64, dst: i32, len: i32| {
            ret64(copy(&mut c, h, off, dst, len, false))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "mem_write",
        |mut c: Caller<'_, TaskData>, h: i32, off: i64, src: i32, len: i32| {
            ret64(copy(&mut c, h, off, src, len, true))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "mem_size",
        |c: Caller<'_, TaskData>, h: i32| {
            ret64(
                view(c.data().ipc().handles.get(h))
                    .and_then(|v| v.size())
                    .map(|s| s as i64),
            )
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "mem_revoke",
        |mut c: Caller<'_, TaskData>, h: i32| {
            let table = &mut c.data_mut().ipc_mut().handles;
            ret32(
                view(table.get(h))
                    .and_then(MemView::revoke)
                    .and_then(|v| table.insert(Object::Mem(v))),
            )
        },
    )?;
    Ok(())
}

fn view(object: Result<&Object, Errno>) -> Result<&MemView, Errno> {
    match object? {
        Object::Mem(v) => Ok(v),
        _ => Err(Errno::BadHandle),
    }
}

fn copy(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    off: i64,
    ptr: i32,
    len: i32,
    write: bool,
) -> Result<i64, Errno> {
    let (mem, data) = memory(c)?;
    let v = view(data.ipc().handles.get(h))?;
    let r = range(mem.len(), ptr, len32(len))?;
    let n = r.len();
    if write {
        v.write_with(off as u64, n, |b| mem.read(r, b))?;
    } else {
        v.read_with(off as u64, n, |b| mem.write(r.start, b))?;
    }
    Ok(n as i64)
}

//! Memory objects: create, view, read, write, size, revoke; map and
//! unmap (see `crate::mapping`).

use crate::host::guest::{len32, memory, range, ret32, ret64};
use crate::host::TaskData;
use crate::ipc::memobj::{map_errno, MemObject, MemView};
use crate::ipc::permit::copy_racy;
use crate::ipc::{Errno, Object};
use crate::mapping::Mappings;
use std::sync::Arc;
use wasmtime::{Caller, Linker};

/// `mem_map` flags: the mapping may be read (required), written.
pub const MAP_READ: i32 = 1;
pub const MAP_WRITE: i32 = 2;

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

pub(super) fn view(object: Result<&Object, Errno>) -> Result<&MemView, Errno> {
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
    let at = mem.at(r.start);
    if write {
        // SAFETY: `at` is `n` checked bytes of the task's memory, the
        // object's pointer `n` bytes of its own (see `write_with`); both
        // may be written by others meanwhile, hence the racy copy.
        v.write_with(off as u64, n, |b| unsafe { copy_racy(at, b, n) })?;
    } else {
        // SAFETY: as above, the other way round.
        v.read_with(off as u64, n, |b| unsafe { copy_racy(b, at, n) })?;
    }
    Ok(n as i64)
}

/// `mem_map` and `mem_unmap`; for a passive task (whose handler runs in
/// its callers' calls, and whose memory is released elsewhere) both
/// return `NotSup`.
pub(super) fn add_maps_to_linker(
    linker: &mut Linker<TaskData>,
    enabled: bool,
) -> wasmtime::Result<()> {
    add_map_fn(linker, "mem_map", map, enabled)?;
    linker.func_wrap(
        super::MODULE,
        "mem_unmap",
        move |mut c: Caller<'_, TaskData>, addr: i32, len: i32| {
            let r = match enabled {
                true => unmap(&mut c, addr as u32 as usize, len as u32 as usize),
                false => Err(Errno::NotSup),
            };
            ret32(r.map(|()| 0))
        },
    )?;
    Ok(())
}

/// A mapping host function: handle, offset and length, address, flags.
pub(super) type MapFn =
    fn(&mut Caller<'_, TaskData>, i32, (i64, i64), i32, i32) -> Result<(), Errno>;

/// Adds the mapping host function `name`, made by `map` (`NotSup` unless
/// `enabled`). A range it maps is the object's: it is lent out of the
/// task's budget until unmapped (`MemoryBudget::lend`).
pub(super) fn add_map_fn(
    linker: &mut Linker<TaskData>,
    name: &str,
    map: MapFn,
    enabled: bool,
) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        name,
        move |mut c: Caller<'_, TaskData>, h: i32, off: i64, len: i64, addr: i32, flags: i32| {
            let r = match enabled {
                true => map(&mut c, h, (off, len), addr, flags),
                false => Err(Errno::NotSup),
            };
            if r.is_ok() {
                c.data_mut().core.budget.lend(len as u64);
            }
            ret32(r.map(|()| 0))
        },
    )?;
    Ok(())
}

/// Gives back the mapping at `addr..addr + len`: the range is the
/// task's own memory again, charged back to its budget (`NoMem` if the
/// budget cannot take it: the mapping then stays).
fn unmap(c: &mut Caller<'_, TaskData>, addr: usize, len: usize) -> Result<(), Errno> {
    let core = &mut c.data_mut().core;
    let maps = core.shared.maps.get().ok_or(Errno::Inval)?.clone();
    if !maps.is_mapped(addr, len) {
        return Err(Errno::Inval);
    }
    if !core.budget.reclaim(len as u64) {
        return Err(Errno::NoMem);
    }
    maps.unmap(addr, len).map_err(|e| {
        core.budget.lend(len as u64);
        map_errno(e)
    })
}

/// Maps `len` bytes at `off` of the view `h` at `addr` of the caller's
/// memory.
fn map(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    (off, len): (i64, i64),
    addr: i32,
    flags: i32,
) -> Result<(), Errno> {
    let write = writable(flags)?;
    let (off, len) = offsets(off, len)?;
    let (maps, mem_len) = holder(c)?;
    let v = view(c.data().ipc().handles.get(h))?;
    v.map(&maps, (off, len), addr as u32 as usize, mem_len, write)
}

/// Whether `mem_map` flags ask for a writable mapping.
pub(super) fn writable(flags: i32) -> Result<bool, Errno> {
    match flags {
        MAP_READ => Ok(false),
        f if f == MAP_READ | MAP_WRITE => Ok(true),
        _ => Err(Errno::Inval),
    }
}

/// An offset and a length, neither negative.
pub(super) fn offsets(off: i64, len: i64) -> Result<(u64, u64), Errno> {
    match (u64::try_from(off), u64::try_from(len)) {
        (Ok(off), Ok(len)) => Ok((off, len)),
        _ => Err(Errno::Range),
    }
}

/// The caller's mapping table (made at its first mapping; the memory's
/// initial size is its floor) and its memory's length now.
pub(super) fn holder(c: &mut Caller<'_, TaskData>) -> Result<(Arc<Mappings>, usize), Errno> {
    let exported = c.data().core.memory.memory.ok_or(Errno::BadPtr)?;
    let floor = exported
        .ty(&*c)
        .minimum()
        .saturating_mul(exported.page_size(&*c));
    let (mem, data) = memory(c)?;
    let maps = table(&data.core.shared, mem.at(0), floor as usize)?;
    Ok((maps, mem.len()))
}

/// The task's mapping table, made at its first mapping.
fn table(
    shared: &crate::task::TaskShared,
    base: *mut u8,
    floor: usize,
) -> Result<Arc<Mappings>, Errno> {
    if let Some(t) = shared.maps.get() {
        return Ok(t.clone());
    }
    let t = Mappings::new(base, floor).map_err(map_errno)?;
    Ok(shared.maps.get_or_init(|| t).clone())
}

//! Permits: grant access to a range of one's own memory, read and write
//! through a permit, revoke it.

use crate::host::guest::{len32, memory, range, ret32, ret64};
use crate::host::TaskData;
use crate::ipc::permit::{Permit, PermitRef};
use crate::ipc::{Errno, Object};
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "permit_grant",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32, writable: i32| {
            ret32(grant(&mut c, ptr, len, writable != 0))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "permit_read",
        |mut c: Caller<'_, TaskData>, h: i32, off: i64, dst: i32, len: i32| {
            ret64(access(&mut c, h, off, dst, len, false))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "permit_write",
        |mut c: Caller<'_, TaskData>, h: i32, off: i64, src: i32, len: i32| {
            ret64(access(&mut c, h, off, src, len, true))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "permit_revoke",
        |c: Caller<'_, TaskData>, h: i32| {
            let (ipc, shared) = (&c.data().ipc(), &c.data().shared);
            let r = match ipc.handles.get(h) {
                Ok(Object::Permit(p)) if p.0.owner == shared.id => {
                    p.0.revoke();
                    Ok(0)
                }
                Ok(Object::Permit(_)) => Err(Errno::Denied), // only the owner revokes
                Ok(_) => Err(Errno::BadHandle),
                Err(e) => Err(e),
            };
            ret32(r)
        },
    )?;
    Ok(())
}

/// `permit_map`; for a passive task it returns `NotSup` (as `mem_map`).
pub(super) fn add_map_to_linker(
    linker: &mut Linker<TaskData>,
    enabled: bool,
) -> wasmtime::Result<()> {
    super::mem::add_map_fn(linker, "permit_map", map, enabled)
}

/// Maps `len` bytes at `off` of the permit `h` at `addr` of the caller's
/// memory (see `Permit::map`).
fn map(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    (off, len): (i64, i64),
    addr: i32,
    flags: i32,
) -> Result<(), Errno> {
    let write = super::mem::writable(flags)?;
    let (off, len) = super::mem::offsets(off, len)?;
    let permit = match c.data().ipc().handles.get(h)? {
        Object::Permit(p) => p.0.clone(),
        _ => return Err(Errno::BadHandle),
    };
    let (maps, mem_len) = super::mem::holder(c)?;
    permit.map((off, len), &maps, addr as u32 as usize, mem_len, write)
}

fn grant(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32, writable: bool) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let r = range(mem.len(), ptr, len32(len))?;
    let (ipc, core) = data.warden_parts();
    // SAFETY: the range was checked against the task's own memory, and the
    // permit is recorded among the task's owned objects, which are revoked
    // before its memory is released (`ReleaseOnDrop` in the runtime).
    let permit =
        unsafe { Permit::of_task(&core.shared, mem.at(r.start), r.len() as u64, writable) };
    ipc.owned.add_permit(&permit);
    ipc.handles.insert(Object::Permit(PermitRef(permit)))
}

fn access(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    off: i64,
    ptr: i32,
    len: i32,
    write: bool,
) -> Result<i64, Errno> {
    let permit = match c.data().ipc().handles.get(h)? {
        Object::Permit(p) => p.0.clone(),
        _ => return Err(Errno::BadHandle),
    };
    let (mem, _) = memory(c)?;
    let r = range(mem.len(), ptr, len32(len))?;
    let n = r.len();
    let local = mem.at(r.start);
    // SAFETY: `local` is valid for `n` bytes of the caller's own memory,
    // which stays mapped for the call (this task is running it); the
    // permit copies with racy-safe accesses on both sides.
    unsafe {
        if write {
            permit.write(off as u64, local, n)?;
        } else {
            permit.read(off as u64, local, n)?;
        }
    }
    Ok(n as i64)
}

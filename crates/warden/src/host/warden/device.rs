//! Block devices: open, info, read, write, sync (see `crate::dev`).
//!
//! `device_open` finds a device the task's `devices` grant and claims it
//! (`WARDEN_EDENIED` if not granted or not there, `WARDEN_EBUSY` while
//! another task, or another handle of this one, holds it). Reads and
//! writes move whole sectors between the device and the caller's memory
//! through the host kernel's copy; each is counted for the device and the
//! task. A host file's failure is `WARDEN_EIO`, counted as an error.

use crate::host::guest::{len32, memory, range, ret32, ret64, write_u64};
use crate::host::TaskData;
use crate::ipc::{Errno, Object};
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "device_open",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32| ret32(open(&mut c, ptr, len)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "device_info",
        |mut c: Caller<'_, TaskData>, h: i32, out: i32| ret32(info(&mut c, h, out)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "device_read",
        |mut c: Caller<'_, TaskData>, h: i32, sector: i64, count: i32, buf: i32, cap: i32| {
            ret64(transfer(&mut c, h, (sector, count), (buf, cap), false))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "device_write",
        |mut c: Caller<'_, TaskData>, h: i32, sector: i64, count: i32, buf: i32, len: i32| {
            ret64(transfer(&mut c, h, (sector, count), (buf, len), true))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "device_sync",
        |c: Caller<'_, TaskData>, h: i32| ret32(sync(&c, h)),
    )?;
    Ok(())
}

/// The device behind handle `h`.
fn device(data: &TaskData, h: i32) -> Result<&crate::dev::Claim, Errno> {
    match data.ipc().handles.get(h)? {
        Object::Device(d) => Ok(d),
        _ => Err(Errno::BadHandle),
    }
}

fn open(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let name = super::names::read_name(mem, ptr, len)?;
    let (ipc, core) = data.warden_parts();
    if !ipc.grants.devices.contains(&name) {
        return Err(Errno::Denied);
    }
    let devices = ipc.kernel.devices.get().ok_or(Errno::Denied)?;
    let device = devices.get(&name).ok_or(Errno::Denied)?;
    let claim = device.claim().ok_or(Errno::Busy)?;
    core.shared.device.get_or_init(Default::default);
    ipc.handles.insert(Object::Device(claim))
}

/// Writes the device's sector size and sector count (two little-endian
/// u64s) at `out`.
fn info(c: &mut Caller<'_, TaskData>, h: i32, out: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let d = device(data, h)?;
    range(mem.len(), out, 16)?;
    write_u64(mem, out, crate::dev::SECTOR)?;
    write_u64(mem, out.wrapping_add(8), d.sectors())?;
    Ok(0)
}

/// Reads (or, `write`, writes) `count` sectors at `sector` into (from)
/// the `len` bytes at `buf`: the bytes moved.
fn transfer(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    (sector, count): (i64, i32),
    (buf, len): (i32, i32),
    write: bool,
) -> Result<i64, Errno> {
    let (mem, data) = memory(c)?;
    let d = device(data, h)?;
    let (sector, count) = (u64::try_from(sector), u64::try_from(count));
    let (Ok(sector), Ok(count)) = (sector, count) else {
        return Err(Errno::Inval);
    };
    let (offset, bytes) = d.extent(sector, count).ok_or(Errno::Range)?;
    let r = range(mem.len(), buf, len32(len))?;
    // The whole buffer is checked, and must hold the sectors moved.
    if (r.len() as u64) < bytes {
        return Err(Errno::Inval);
    }
    // SAFETY: `r` lies inside the caller's memory, which stays mapped and
    // in place for the whole host call; only the host kernel's copy
    // touches it.
    let moved = unsafe { d.transfer(write, offset, mem.at(r.start), bytes) };
    let task = data.shared.device.get();
    if moved.is_err() {
        count_error(&d.stats);
        if let Some(t) = task {
            count_error(t);
        }
        return Err(Errno::Io);
    }
    d.stats.count(write, bytes);
    if let Some(t) = task {
        t.count(write, bytes);
    }
    Ok(bytes as i64)
}

fn count_error(counters: &crate::task::DeviceCounters) {
    counters
        .errors
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn sync(c: &Caller<'_, TaskData>, h: i32) -> Result<i32, Errno> {
    let d = device(c.data(), h)?;
    d.sync().map_err(|_| {
        count_error(&d.stats);
        Errno::Io
    })?;
    if let Some(t) = c.data().shared.device.get() {
        t.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(0)
}

//! Messages' objects: taking the handles a message lists from the
//! sender's table, and giving them to the receiver's.

use crate::host::guest::{range, read_u32, write_u32, GuestMem};
use crate::ipc::{Errno, HandleTable, Object, MOVE};

/// The arguments of `warden_call`: portal, request, its length, its
/// handles and their count, reply buffer, its capacity, reply handles and
/// the pointer to their count.
pub(super) type CallArgs = (i32, i32, i32, i32, i32, i32, i32, i32, i32);

/// The `i`-th entry of the guest's handle list at `list_ptr`.
fn list_entry(mem: GuestMem, list_ptr: i32, i: u64) -> Result<i32, Errno> {
    mem.read_u32(list_ptr.wrapping_add((i * 4) as i32))
        .map(|h| h as i32)
}

/// Takes the objects a message carries from the sender's table into
/// `out`: each listed handle is duplicated, or moved if flagged with
/// [`MOVE`]. All are checked before any is taken, so a failed send leaves
/// the table as it was.
pub(super) fn take_objects(
    table: &mut HandleTable,
    mem: GuestMem,
    list_ptr: i32,
    count: u64,
    out: &mut Vec<Object>,
) -> Result<(), Errno> {
    copy_objects(table, mem, list_ptr, count, out)?;
    close_moved(table, mem, list_ptr, count);
    Ok(())
}

/// The first half of [`take_objects`]: checks the list and duplicates
/// every listed object into `out`, leaving the table as it is (so that an
/// operation that then fails has changed nothing).
pub(super) fn copy_objects(
    table: &HandleTable,
    mem: GuestMem,
    list_ptr: i32,
    count: u64,
    out: &mut Vec<Object>,
) -> Result<(), Errno> {
    if count == 0 {
        return Ok(());
    }
    range(mem.len(), list_ptr, count * 4)?;
    for i in 0..count {
        let h = list_entry(mem, list_ptr, i)?;
        if h & MOVE != 0 {
            for j in 0..i {
                if list_entry(mem, list_ptr, j)? & !MOVE == h & !MOVE {
                    return Err(Errno::Inval); // moved twice, or moved and copied
                }
            }
        }
        // Checked as it is taken: the list may change under a racing
        // permit writer, but no object but a transferable one leaves.
        let object = table.get(h & !MOVE)?;
        if !object.transferable() {
            return Err(Errno::Inval);
        }
        out.push(object.dup()?);
    }
    Ok(())
}

/// The second half of [`take_objects`], once the operation has succeeded:
/// closes the handles flagged with [`MOVE`].
pub(super) fn close_moved(table: &mut HandleTable, mem: GuestMem, list_ptr: i32, count: u64) {
    for i in 0..count {
        match list_entry(mem, list_ptr, i) {
            Ok(h) if h & MOVE != 0 => {
                let _ = table.remove(h & !MOVE);
            }
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// Delivers a message into the receiver's memory: the first `cap` bytes
/// of `bytes` at `buf`, and as many of `objects` as the count at `nh_ptr`
/// allows as handles at `h_ptr` (the rest are dropped); the count
/// delivered is written back to `nh_ptr`. The caller returns the full
/// length, so a receiver can tell it was truncated.
#[allow(clippy::too_many_arguments)]
pub(super) fn deliver(
    table: &mut HandleTable,
    mem: GuestMem,
    bytes: &[u8],
    buf: i32,
    cap: i32,
    objects: &mut Vec<Object>,
    h_ptr: i32,
    nh_ptr: i32,
) -> Result<(), Errno> {
    let n = bytes.len().min(cap as u32 as usize);
    mem.put(buf, &bytes[..n])?;
    let cap_nh = read_u32(mem, nh_ptr)? as u64;
    range(mem.len(), h_ptr, cap_nh * 4)?;
    let given = give_objects(table, mem, h_ptr, cap_nh, objects);
    write_u32(mem, nh_ptr, given)
}

/// Installs received objects in the receiver's table, writing their
/// handles to the guest array at `list_ptr` (room for `cap`). Objects
/// beyond `cap`, or that the table cannot take, are dropped. Returns how
/// many were installed.
fn give_objects(
    table: &mut HandleTable,
    mem: GuestMem,
    list_ptr: i32,
    cap: u64,
    objects: &mut Vec<Object>,
) -> u32 {
    let mut given = 0u32;
    for object in objects.drain(..) {
        if (given as u64) < cap {
            if let Ok(h) = table.insert(object) {
                // In bounds: the caller checked `cap` entries at `list_ptr`.
                let at = list_ptr.wrapping_add((given * 4) as i32);
                if write_u32(mem, at, h as u32).is_ok() {
                    given += 1;
                }
            }
        }
    }
    given
}

//! The `warden` import module: host functions guests call, one file per
//! group, each with its own `add_to_linker`.
//!
//! Every function checks every pointer and length against the caller's
//! memory and every handle against its table, and reports failure as a
//! negative [`Errno`] code. None of them traps: a guest's bad argument
//! harms only the call that carried it.
//!
//! The functions and their Wasm signatures are listed in [`FUNCTIONS`];
//! `sdk/c/warden.h` declares the same imports.

/// Calls Wasmtime's own definition of a WASI function, reached as its
/// linker shim reaches it: `delegate!(caller, name(args…))`, or
/// `delegate!(sync caller, name(args…))` for one Wasmtime defines as a
/// plain function.
macro_rules! delegate {
    (sync $caller:ident, $f:ident($($arg:expr),*)) => {{
        delegate!(@call $caller, $f($($arg),*))
    }};
    ($caller:ident, $f:ident($($arg:expr),*)) => {
        async { delegate!(@call $caller, $f($($arg),*) .await) }.await
    };
    // The shim's own steps, then the call (followed by `$rest`).
    (@call $caller:ident, $f:ident($($arg:expr),*) $($rest:tt)*) => {{
        use p1::WasiSnapshotPreview1 as _;
        let fuel = wasmtime::AsContextMut::as_context_mut(&mut $caller).hostcall_fuel();
        let Some(Extern::Memory(memory)) = $caller.get_export("memory") else {
            wasmtime::bail!("missing required memory export");
        };
        let (mem, data) = memory.data_and_store_mut(&mut $caller);
        data.wasi.set_hostcall_fuel(fuel);
        let mut mem = wiggle::GuestMemory::Unshared(mem);
        p1::$f(&mut data.wasi, &mut mem, $($arg),*) $($rest)*
    }};
}

mod any;
mod cli;
mod data;
mod direct;
mod ending;
mod guest;
mod handles;
mod ipc;
mod mem;
mod names;
mod net;
mod passive;
mod permit;
mod poll;
mod random;
mod sleep;
mod stdio;
mod subscription;
mod task;
mod teavm;
mod wasi;
mod wasi_net;
mod wasi_poll;

pub use cli::Strings;
pub(crate) use cli::{add_to_linker as add_cli_to_linker, Cli};
pub(crate) use data::{Bindings, Grants, NameMap, Spawner, TaskData, TaskIpc};
pub(crate) use direct::{call_bytes, HostService};
pub use direct::{HostCall, HostHandler};
pub(crate) use ending::classify;
pub(crate) use net::{ChildNet, TaskNet};
pub(crate) use passive::{add_to_passive_linker, on_tick as passive_on_tick, Passive, Server};
pub(crate) use random::{add_to_linker as add_random_to_linker, ThreadRandom};
pub(crate) use teavm::add_to_linker as add_teavm_to_linker;
pub use teavm::{refusal as teavm_refusal, MODULE as TEAVM_MODULE};
pub(crate) use wasi::add_to_linker as add_wasi_bounds;
pub use wasi::{MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};
pub(crate) use wasi_net::Sockets;

use crate::ipc::{Errno, HandleTable, Object, MOVE};
use guest::{memory, GuestMem};
use std::ops::Range;
use wasmtime::Linker;

/// The import module name.
pub const MODULE: &str = "warden";

/// Every host function: name, parameter types, result type (Wasm text
/// notation). A test instantiates a guest importing all of them.
pub const FUNCTIONS: &[(&str, &str, &str)] = &[
    ("close", "i32", "i32"),
    ("dup", "i32", "i32"),
    ("service_create", "", "i32"),
    ("portal_create", "i32", "i32"),
    ("call", "i32 i32 i32 i32 i32 i32 i32 i32 i32", "i64"),
    ("call_fast", "i32 i32 i32 i32 i32 i32 i32 i32 i32", "i64"),
    (
        "call_timeout",
        "i32 i32 i32 i32 i32 i32 i32 i32 i32 i64",
        "i64",
    ),
    ("recv", "i32 i32 i32 i32 i32 i32", "i64"),
    ("reply", "i64 i32 i32 i32 i32", "i32"),
    ("call_origin", "i64 i32 i32", "i32"),
    ("name_register", "i32 i32 i32", "i32"),
    ("name_lookup", "i32 i32 i64", "i32"),
    ("mem_create", "i64", "i32"),
    ("mem_view", "i32 i64 i64 i32", "i32"),
    ("mem_read", "i32 i64 i32 i32", "i64"),
    ("mem_write", "i32 i64 i32 i32", "i64"),
    ("mem_size", "i32", "i64"),
    ("mem_revoke", "i32", "i32"),
    ("permit_grant", "i32 i32 i32", "i32"),
    ("permit_read", "i32 i64 i32 i32", "i64"),
    ("permit_write", "i32 i64 i32 i32", "i64"),
    ("permit_revoke", "i32", "i32"),
    ("module_lookup", "i32 i32", "i32"),
    ("task_spawn", "i32 i32 i32 i32 i32 i32", "i32"),
    ("task_kill", "i32", "i32"),
    ("task_wait", "i32 i64 i32", "i32"),
    ("task_suspend", "i32", "i32"),
    ("task_resume", "i32", "i32"),
    ("task_event", "i32 i64 i32", "i32"),
    ("task_raise", "i32 i64 i64", "i32"),
    ("task_granted", "i32", "i32"),
    ("namespace_bind", "i32 i32 i32", "i32"),
    ("tcp_listen", "i32 i32", "i32"),
    ("tcp_accept", "i32 i64", "i32"),
    ("tcp_connect", "i32 i32 i64", "i32"),
    ("sock_send", "i32 i32 i32 i64", "i64"),
    ("sock_recv", "i32 i32 i32 i64", "i64"),
    ("sock_shutdown", "i32", "i32"),
    ("sock_addr", "i32 i32 i32 i32", "i32"),
    ("poll", "i32 i32 i64", "i32"),
];

/// Adds every `warden` host function to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    handles::add_to_linker(linker)?;
    ipc::add_to_linker(linker)?;
    names::add_to_linker(linker)?;
    mem::add_to_linker(linker)?;
    permit::add_to_linker(linker)?;
    task::add_to_linker(linker)?;
    net::add_to_linker(linker)?;
    poll::add_to_linker(linker)?;
    Ok(())
}

/// Polls `ready` until it yields a value, or until `timeout_ns` passes
/// (`None`); a negative timeout waits forever, zero does not wait.
async fn wait_for<T>(
    timeout_ns: i64,
    mut ready: impl FnMut(&mut std::task::Context<'_>) -> std::task::Poll<T>,
) -> Option<T> {
    use std::future::Future;
    use std::task::Poll;
    let mut deadline = (timeout_ns > 0).then(|| {
        Box::pin(tokio::time::sleep(std::time::Duration::from_nanos(
            timeout_ns as u64,
        )))
    });
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = ready(cx) {
            return Poll::Ready(Some(v));
        }
        let expired = timeout_ns == 0
            || deadline
                .as_mut()
                .is_some_and(|d| d.as_mut().poll(cx).is_ready());
        if expired {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Runs `define` with shadowing allowed in `linker`, to replace some of
/// the WASI definitions it already holds, and forbids shadowing again
/// however `define` ends.
fn shadowing(
    linker: &mut Linker<TaskData>,
    define: impl FnOnce(&mut Linker<TaskData>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = define(linker);
    linker.allow_shadowing(false);
    r
}

/// A result as the guest sees it: the value, or the error code.
fn ret32(r: Result<i32, Errno>) -> i32 {
    r.unwrap_or_else(Errno::code)
}

fn ret64(r: Result<i64, Errno>) -> i64 {
    r.unwrap_or_else(|e| e.code() as i64)
}

/// `len` bytes at guest address `ptr`, checked against memory of
/// `mem_len` bytes. Arguments arrive as `i32` and are read as unsigned.
fn range(mem_len: usize, ptr: i32, len: u64) -> Result<Range<usize>, Errno> {
    let start = ptr as u32 as u64;
    let end = start.checked_add(len).ok_or(Errno::BadPtr)?;
    if end > mem_len as u64 {
        return Err(Errno::BadPtr);
    }
    Ok(start as usize..end as usize)
}

fn read_u32(mem: GuestMem, ptr: i32) -> Result<u32, Errno> {
    mem.read_u32(ptr)
}

fn write_u32(mem: GuestMem, ptr: i32, v: u32) -> Result<(), Errno> {
    mem.put(ptr, &v.to_le_bytes())
}

fn write_u64(mem: GuestMem, ptr: i32, v: u64) -> Result<(), Errno> {
    mem.put(ptr, &v.to_le_bytes())
}

/// The `i`-th entry of the guest's handle list at `list_ptr`.
fn list_entry(mem: GuestMem, list_ptr: i32, i: u64) -> Result<i32, Errno> {
    mem.read_u32(list_ptr.wrapping_add((i * 4) as i32))
        .map(|h| h as i32)
}

/// A length argument, which must not be negative when read as `i32` is
/// not the question: wasm32 lengths are unsigned.
fn len32(len: i32) -> u64 {
    len as u32 as u64
}

/// Takes the objects a message carries from the sender's table into
/// `out`: each listed handle is duplicated, or moved if flagged with
/// [`MOVE`]. All are checked before any is taken, so a failed send leaves
/// the table as it was.
fn take_objects(
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
fn copy_objects(
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
fn close_moved(table: &mut HandleTable, mem: GuestMem, list_ptr: i32, count: u64) {
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
fn deliver(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_reject_wild_pointers_and_huge_lengths() {
        assert_eq!(range(100, 0, 100), Ok(0..100));
        assert_eq!(range(100, 99, 1), Ok(99..100));
        assert_eq!(range(100, 100, 0), Ok(100..100));
        assert_eq!(range(100, 99, 2), Err(Errno::BadPtr));
        assert_eq!(range(100, -1, 1), Err(Errno::BadPtr)); // 0xffff_ffff
        assert_eq!(range(100, 0, u64::MAX), Err(Errno::BadPtr));
        assert_eq!(range(usize::MAX, -1, u64::MAX), Err(Errno::BadPtr));
    }
}

//! The name service: `name_register` and `name_lookup`, checked against
//! the task's manifest grants (`provides`, `uses`).

use crate::host::guest::{len32, memory, range, ret32, GuestMem};
use crate::host::TaskData;
use crate::ipc::service::PortalRef;
use crate::ipc::{name_allowed, Errno, Object};
use wasmtime::{Caller, Linker};

/// Longest name accepted.
pub const MAX_NAME: u64 = 256;

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "name_register",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32, portal: i32| {
            ret32(register(&mut c, ptr, len, portal))
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "name_lookup",
        |c: Caller<'_, TaskData>, (ptr, len, timeout): (i32, i32, i64)| {
            Box::new(async move { ret32(lookup(c, ptr, len, timeout).await) })
        },
    )?;
    Ok(())
}

pub(super) fn read_name(mem: GuestMem, ptr: i32, len: i32) -> Result<String, Errno> {
    let len = len32(len);
    if len == 0 || len > MAX_NAME {
        return Err(Errno::Inval);
    }
    let r = range(mem.len(), ptr, len)?;
    String::from_utf8(mem.read_vec(r)).map_err(|_| Errno::Inval)
}

fn register(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32, portal: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let name = read_name(mem, ptr, len)?;
    register_name(data, &name, portal)
}

/// Registers the portal `portal` of the task whose data is `data` as
/// `name`, which its `provides` must grant.
pub(super) fn register_name(data: &TaskData, name: &str, portal: i32) -> Result<i32, Errno> {
    let ipc = &data.ipc();
    let portal = match ipc.handles.get(portal)? {
        Object::Portal(p) => p.clone(),
        _ => return Err(Errno::BadHandle),
    };
    if !name_allowed(&ipc.grants.provides, name) {
        return Err(Errno::Denied);
    }
    let exported = name_allowed(&ipc.grants.export, name);
    ipc.kernel
        .names
        .register(name, portal, &data.shared, exported)?;
    Ok(0)
}

/// `name_lookup` without waiting, for a passive handler: a name not
/// registered yet is `Timeout` at once.
pub(super) fn add_nowait_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "name_lookup",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32, _timeout: i64| {
            let (mem, data) = match memory(&mut c) {
                Ok(m) => m,
                Err(e) => return e.code(),
            };
            let found = read_name(mem, ptr, len).and_then(|name| match find(data, &name)? {
                Found::Portal(p) => Ok(p),
                Found::Registry => data.ipc().kernel.names.lookup(&name).ok_or(Errno::Timeout),
            });
            ret32(found.and_then(|p| data.ipc_mut().handles.insert(Object::Portal(p))))
        },
    )?;
    Ok(())
}

/// Where a lookup finds its name.
pub(super) enum Found {
    /// Bound by the parent.
    Portal(PortalRef),
    /// In the name service, once registered.
    Registry,
}

/// Names bound by the parent come first (interposition), and a name it
/// hid is refused; others must be granted (`uses`).
pub(super) fn find(data: &TaskData, name: &str) -> Result<Found, Errno> {
    match data.ipc().names.as_ref().and_then(|m| m.get(name)) {
        Some(Some(portal)) => Ok(Found::Portal(portal.clone())),
        Some(None) => Err(Errno::Denied),
        None if name_allowed(&data.ipc().grants.uses, name) => Ok(Found::Registry),
        None => Err(Errno::Denied),
    }
}

async fn lookup(
    mut c: Caller<'_, TaskData>,
    ptr: i32,
    len: i32,
    timeout_ns: i64,
) -> Result<i32, Errno> {
    let (mem, data) = memory(&mut c)?;
    let name = read_name(mem, ptr, len)?;
    if let Found::Portal(portal) = find(data, &name)? {
        return data.ipc_mut().handles.insert(Object::Portal(portal));
    }
    let kernel = data.ipc().kernel.clone();
    let Some(portal) = crate::host::wait::name(&kernel, &name, timeout_ns).await else {
        return Err(Errno::Timeout);
    };
    c.data_mut()
        .ipc_mut()
        .handles
        .insert(Object::Portal(portal))
}

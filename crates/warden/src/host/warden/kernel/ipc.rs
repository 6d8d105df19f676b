//! `warden:kernel/ipc`: handles, services, portals, names and byte
//! calls, as the `warden` module's `close` … `reply` are, with bytes in
//! lists. A component's calls carry no handles: its request carries
//! none, and those a server answers with are closed.

use super::{handle, out};
use crate::host::TaskData;
use crate::ipc::service::{CallRef, PortalRef, Service, ServiceRef};
use crate::ipc::{Errno, Object};
use std::sync::Arc;
use wasmtime::component::{ComponentType, Lift, LinkerInstance, Lower};
use wasmtime::StoreContextMut;

/// `received`: a call's handle and its request.
#[derive(ComponentType, Lift, Lower)]
#[component(record)]
struct Received {
    call: u32,
    request: Vec<u8>,
}

pub(super) fn add_to_linker(inst: &mut LinkerInstance<'_, TaskData>) -> wasmtime::Result<()> {
    add_handles(inst)?;
    add_names(inst)?;
    inst.func_wrap_async("call", |store, args: (u32, Vec<u8>, i64)| {
        Box::new(async move { out(call(store, args).await) })
    })?;
    inst.func_wrap_async("recv", |store, (service,): (u32,)| {
        Box::new(async move { out(recv(store, handle(service)).await) })
    })?;
    inst.func_wrap("reply", |mut store, (call, answer): (u32, Vec<u8>)| {
        out(reply(store.data_mut(), handle(call), &answer))
    })?;
    inst.func_wrap("caller", |store, (call,): (u32,)| {
        out(match store.data().ipc().handles.get(handle(call)) {
            Ok(Object::Call(c)) => Ok(c.client().0),
            Ok(_) => Err(Errno::BadHandle),
            Err(e) => Err(e),
        })
    })?;
    Ok(())
}

/// `close`, `dup`, `service-create`, `portal-create`, `portal-revoke`.
fn add_handles(inst: &mut LinkerInstance<'_, TaskData>) -> wasmtime::Result<()> {
    inst.func_wrap("close", |mut store, (h,): (u32,)| {
        out(super::super::handles::close(store.data_mut(), handle(h)).map(drop))
    })?;
    inst.func_wrap("dup", |mut store, (h,): (u32,)| {
        let table = &mut store.data_mut().ipc_mut().handles;
        out(table
            .get(handle(h))
            .and_then(Object::dup)
            .and_then(|o| table.insert(o))
            .map(as_u32))
    })?;
    inst.func_wrap("service-create", |mut store, (): ()| {
        let data = store.data_mut();
        let (ipc, core) = data.warden_parts();
        let service = Service::of(&core.shared);
        out(ipc
            .handles
            .insert(Object::Service(ServiceRef::new(&service)))
            .map(as_u32))
    })?;
    inst.func_wrap("portal-create", |mut store, (service,): (u32,)| {
        let table = &mut store.data_mut().ipc_mut().handles;
        let portal = match table.get(handle(service)) {
            Ok(Object::Service(s)) => Ok(PortalRef::new(s.service())),
            Ok(_) => Err(Errno::BadHandle),
            Err(e) => Err(e),
        };
        out(portal
            .and_then(|p| table.insert(Object::Portal(p)))
            .map(as_u32))
    })?;
    inst.func_wrap("portal-revoke", |store, (portal,): (u32,)| {
        out(super::super::ipc::revoke(store.data(), handle(portal)).map(drop))
    })?;
    Ok(())
}

/// `name-register` and `name-lookup`.
fn add_names(inst: &mut LinkerInstance<'_, TaskData>) -> wasmtime::Result<()> {
    inst.func_wrap("name-register", |store, (name, portal): (String, u32)| {
        let r = checked_name(&name)
            .and_then(|()| super::super::names::register_name(store.data(), &name, handle(portal)));
        out(r.map(drop))
    })?;
    inst.func_wrap_async("name-lookup", |store, (name, timeout): (String, i64)| {
        Box::new(async move { out(lookup(store, &name, timeout).await.map(as_u32)) })
    })?;
    Ok(())
}

fn as_u32(h: i32) -> u32 {
    h as u32
}

/// A name as `name_register` and `name_lookup` take it: 1 to 256 bytes.
fn checked_name(name: &str) -> Result<(), Errno> {
    match name.is_empty() || name.len() as u64 > super::super::names::MAX_NAME {
        true => Err(Errno::Inval),
        false => Ok(()),
    }
}

async fn lookup(
    mut store: StoreContextMut<'_, TaskData>,
    name: &str,
    timeout_ns: i64,
) -> Result<i32, Errno> {
    use super::super::names::{find, Found};
    checked_name(name)?;
    let data = store.data_mut();
    if let Found::Portal(portal) = find(data, name)? {
        return data.ipc_mut().handles.insert(Object::Portal(portal));
    }
    let kernel = data.ipc().kernel.clone();
    let portal = crate::host::wait::name(&kernel, name, timeout_ns)
        .await
        .ok_or(Errno::Timeout)?;
    store
        .data_mut()
        .ipc_mut()
        .handles
        .insert(Object::Portal(portal))
}

/// A call through `portal`: the request copied into the task's call
/// slot (or handed to a direct service), the answer copied out.
async fn call(
    mut store: StoreContextMut<'_, TaskData>,
    (portal, request, timeout_ns): (u32, Vec<u8>, i64),
) -> Result<Vec<u8>, Errno> {
    // A negative timeout: the task's call_timeout, if it has one.
    let timeout_ns = match (timeout_ns, crate::host::call_timeout(store.data())) {
        (t, Some(d)) if t < 0 => d.as_nanos().min(i64::MAX as u128) as i64,
        (t, _) => t,
    };
    let data = store.data_mut();
    let (ipc, core) = data.warden_parts();
    let shared = core.shared.clone();
    if request.len() as u64 > ipc.grants.max_message_bytes {
        return Err(Errno::Quota);
    }
    let p = super::super::active::portal_of(data, handle(portal))?;
    let (service, via) = (p.service().clone(), p.via());
    if service.owner == shared.id {
        return Err(Errno::Deadlock);
    }
    let answer = match service.direct_handler().cloned() {
        Some(handler) => crate::host::call_bytes(&handler, &shared, &request).await?,
        None => active_call(&mut store, (&service, via), &request, timeout_ns).await?,
    };
    if answer.len() as u64 > store.data().ipc().grants.max_message_bytes {
        return Err(Errno::Quota);
    }
    shared.ipc.count(1, request.len(), answer.len());
    Ok(answer)
}

/// A call to a task's service loop: queued from the task's call slot,
/// its context lent to the server until answered (or given up).
async fn active_call(
    store: &mut StoreContextMut<'_, TaskData>,
    (service, via): (&Arc<Service>, usize),
    request: &[u8],
    timeout_ns: i64,
) -> Result<Vec<u8>, Errno> {
    let (ipc, core) = store.data_mut().warden_parts();
    let slot = ipc.call_slot.get(&core.shared).clone();
    let to = (&**service, via);
    crate::host::calls::call_bytes_in(&slot, &core.shared, to, request, timeout_ns).await
}

/// The next call on `service`: its handle and request.
async fn recv(mut store: StoreContextMut<'_, TaskData>, service: i32) -> Result<Received, Errno> {
    let (slot, seq) = std::future::poll_fn(|cx| {
        let data = &*store.data_mut();
        match super::super::ipc::service_in(data, service) {
            Ok(s) => s.poll_next(cx),
            Err(e) => std::task::Poll::Ready(Err(e)),
        }
    })
    .await?;
    let data = store.data_mut();
    let st = slot.lock();
    let request = st.request.clone();
    drop(st);
    data.shared.ipc.count(1, 0, request.len());
    let call = CallRef::new(slot, seq);
    // No room for its handle: the call, dropped unanswered, fails for
    // its client.
    let h = data.ipc_mut().handles.insert(Object::Call(call))?;
    Ok(Received {
        call: as_u32(h),
        request,
    })
}

fn reply(data: &mut TaskData, call: i32, answer: &[u8]) -> Result<(), Errno> {
    let ipc = data.ipc_mut();
    if !matches!(ipc.handles.get(call)?, Object::Call(_)) {
        return Err(Errno::BadHandle);
    }
    if answer.len() as u64 > ipc.grants.max_message_bytes {
        return Err(Errno::Quota);
    }
    let Ok(Object::Call(call)) = ipc.handles.remove(call) else {
        unreachable!("checked above")
    };
    data.shared.inherit.withdraw(call.client());
    data.shared.ipc.count(0, answer.len(), 0);
    call.reply_with(answer.len(), |b| b.copy_from_slice(answer), Vec::new())
        .map_err(|(e, _)| e)
}

//! Services, portals and synchronous calls.
//!
//! A call copies the request from the client's memory into its call slot
//! (a kernel buffer reused for every call of that client), queues the slot
//! on the service and blocks the client. `recv` copies the request into the
//! server's memory and gives the server a call handle; `reply` copies the
//! answer into the slot and wakes the client, whose `call` then copies it
//! into the client's memory. Longer messages than the receiver's buffer
//! are truncated: the return value is always the full length.

use super::active::{load_request, portal_of, take_reply};
use super::message::{deliver, take_objects, CallArgs};
use crate::host::calls::start;
use crate::host::guest::{len32, memory, range, read_u32, ret32, ret64, write_u64};
use crate::host::TaskData;
use crate::ipc::service::{CallRef, PortalRef, Service, ServiceRef};
use crate::ipc::{Errno, Object};
use std::sync::Arc;
use std::task::Poll;
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_services(linker)?;
    add_calls(linker)
}

/// `service_create` and `portal_create`.
fn add_services(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "service_create",
        |mut c: Caller<'_, TaskData>| {
            let data = c.data_mut();
            let (ipc, core) = data.warden_parts();
            let service = Service::of(&core.shared);
            ret32(
                ipc.handles
                    .insert(Object::Service(ServiceRef::new(&service))),
            )
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "portal_create",
        |mut c: Caller<'_, TaskData>, service: i32| {
            let table = &mut c.data_mut().ipc_mut().handles;
            let portal = match table.get(service) {
                Ok(Object::Service(s)) => PortalRef::new(s.service()),
                Ok(_) => return Errno::BadHandle.code(),
                Err(e) => return e.code(),
            };
            ret32(table.insert(Object::Portal(portal)))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "portal_revoke",
        |c: Caller<'_, TaskData>, portal: i32| ret32(revoke(c.data(), portal)),
    )?;
    Ok(())
}

/// `portal_revoke`: only the task serving the service revokes its
/// portals.
pub(super) fn revoke(data: &TaskData, portal: i32) -> Result<i32, Errno> {
    match data.ipc().handles.get(portal)? {
        Object::Portal(p) if p.service().owner == data.core.shared.id => {
            p.revoke();
            fail_received(&data.ipc().handles, p.via());
            Ok(0)
        }
        Object::Portal(_) => Err(Errno::Denied),
        _ => Err(Errno::BadHandle),
    }
}

/// Fails the calls its server (this task) received through the revoked
/// portal grant `via` and has not answered: their clients get `Revoked`
/// now; the server's answer later gets `PeerDied`.
fn fail_received(handles: &crate::ipc::HandleTable, via: usize) {
    for object in handles.objects() {
        if let Object::Call(call) = object {
            if call.slot().is_via(call.seq(), via) {
                call.slot().finish(call.seq(), Errno::Revoked.code());
            }
        }
    }
}

/// `call_fast`, with its span if the task is traced (ended here if the
/// call was, else by the `call` that waits for it).
fn add_call_fast(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "call_fast",
        |mut c: Caller<'_, TaskData>,
         p: i32,
         rq: i32,
         rl: i32,
         rh: i32,
         rn: i32,
         sp: i32,
         sc: i32,
         sh: i32,
         sn: i32| {
            let trace = super::traced::begin(c.data_mut());
            let r = super::direct::call_fast(&mut c, (p, rq, rl, rh, rn, sp, sc, sh, sn));
            if let Some(t) = trace {
                super::traced::end(c.data_mut(), t, (p, rl), &r, true);
            }
            ret64(r)
        },
    )?;
    Ok(())
}

/// `call`, `call_fast`, `call_timeout`, `recv`, `reply`, `call_origin`.
fn add_calls(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        super::MODULE,
        "call",
        |c: Caller<'_, TaskData>, args: (i32, i32, i32, i32, i32, i32, i32, i32, i32)| {
            Box::new(async move { ret64(traced_call(c, args, -1).await) })
        },
    )?;
    add_call_fast(linker)?;
    linker.func_wrap_async(
        super::MODULE,
        "call_timeout",
        |c: Caller<'_, TaskData>, (p, rq, rl, rh, rn, sp, sc, sh, sn, timeout): CallTimeoutArgs| {
            Box::new(async move {
                ret64(traced_call(c, (p, rq, rl, rh, rn, sp, sc, sh, sn), timeout).await)
            })
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "recv",
        |c: Caller<'_, TaskData>, args: (i32, i32, i32, i32, i32, i32)| {
            Box::new(async move { ret64(recv(c, args).await) })
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "reply",
        |mut c: Caller<'_, TaskData>, call_id: i64, resp: i32, len: i32, h: i32, nh: i32| {
            ret32(reply(&mut c, call_id, resp, len, h, nh))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "call_origin",
        |mut c: Caller<'_, TaskData>, call_id: i64, buf: i32, cap: i32| {
            ret32(origin(&mut c, call_id, buf, cap))
        },
    )?;
    Ok(())
}

/// `call_origin`: the caller of a received call as `node/task`.
fn origin(c: &mut Caller<'_, TaskData>, call_id: i64, buf: i32, cap: i32) -> Result<i32, Errno> {
    let call = i32::try_from(call_id).map_err(|_| Errno::BadHandle)?;
    let (mem, data) = memory(c)?;
    let Object::Call(call) = data.ipc().handles.get(call)? else {
        return Err(Errno::BadHandle);
    };
    let text = match &call.slot().lock().origin {
        Some(o) => format!("{}/{}", o.node, o.task),
        None => {
            let node = data.ipc().kernel.node.get().map_or("", String::as_str);
            format!("{node}/{}", call.client().0)
        }
    };
    let dst = range(mem.len(), buf, len32(cap))?;
    let mut bytes = text.into_bytes();
    bytes.push(0);
    let n = bytes.len().min(dst.len());
    mem.write(dst.start, &bytes[..n]);
    Ok(bytes.len() as i32 - 1)
}

type CallTimeoutArgs = (i32, i32, i32, i32, i32, i32, i32, i32, i32, i64);

/// [`call`], with its span if the task is traced.
async fn traced_call(
    mut c: Caller<'_, TaskData>,
    args: CallArgs,
    timeout_ns: i64,
) -> Result<i64, Errno> {
    let Some(trace) = super::traced::begin(c.data_mut()) else {
        return call(&mut c, args, timeout_ns).await;
    };
    let (portal, req) = (args.0, args.2);
    let r = call(&mut c, args, timeout_ns).await;
    super::traced::end(c.data_mut(), trace, (portal, req), &r, false);
    r
}

/// A portal call: copy the request in, queue it, wait at most
/// `timeout_ns` (negative: for ever) for the answer, copy the answer out.
/// A call `call_fast` left under way is waited for here (the SDKs make
/// this call, with the same arguments, right after).
async fn call(c: &mut Caller<'_, TaskData>, args: CallArgs, timeout_ns: i64) -> Result<i64, Errno> {
    let mut flight = match c.data_mut().ipc_mut().in_flight.take() {
        Some(flight) => flight,
        None => {
            let portal = portal_of(c.data(), args.0)?;
            let (service, via) = (portal.service().clone(), portal.via());
            if let Some(handler) = service.direct_handler().cloned() {
                return super::direct::call(c, handler, args, timeout_ns).await;
            }
            let (mem, data) = memory(c)?;
            let (ipc, core) = data.warden_parts();
            let shared = &core.shared;
            let seq = load_request(mem, ipc, shared, (&service, via), args)?;
            let made = start(ipc.call_slot.get(shared), shared, &service, seq)?;
            made.into_owned()
        }
    };
    let code = crate::host::wait::wait_for(timeout_ns, |cx| flight.slot.poll_done(cx)).await;
    let code = code.ok_or(Errno::Timeout)?;
    flight.answered = true;
    let (mem, data) = memory(c)?;
    let (ipc, core) = data.warden_parts();
    let shared = &core.shared;
    take_reply(
        mem,
        &mut ipc.handles,
        shared,
        flight.slot.lock(),
        code,
        args,
    )
}

/// The service the handle `service` holds (to receive on), borrowed from
/// the task's handle table; `BadHandle` if it holds none.
pub(super) fn service_in(data: &TaskData, service: i32) -> Result<&Arc<Service>, Errno> {
    match data.ipc().handles.get(service)? {
        Object::Service(s) => Ok(s.service()),
        _ => Err(Errno::BadHandle),
    }
}

async fn recv(
    mut c: Caller<'_, TaskData>,
    (service, call_id, buf, cap, h, nh): (i32, i32, i32, i32, i32, i32),
) -> Result<i64, Errno> {
    {
        let (mem, data) = memory(&mut c)?;
        service_in(data, service)?;
        range(mem.len(), call_id, 8)?;
        range(mem.len(), buf, len32(cap))?;
        let cap_nh = read_u32(mem, nh)? as u64;
        range(mem.len(), h, cap_nh * 4)?;
        // Room for the call handle and the handles the request may carry.
        if (data.ipc().handles.room() as u64)
            < 1 + cap_nh.min(data.ipc().grants.max_message_handles)
        {
            return Err(Errno::Quota);
        }
    }
    let (slot, seq) = next_call(&mut c, service).await?;
    // From here to the end no await: a kill cannot split the delivery.
    let (mem, data) = memory(&mut c)?;
    let mut st = slot.lock();
    let st_ref = &mut *st;
    let (request, objects) = (&st_ref.request, &mut st_ref.request_objects);
    // Pointers were checked before waiting; memory never shrinks.
    deliver(
        &mut data.ipc_mut().handles,
        mem,
        request,
        buf,
        cap,
        objects,
        h,
        nh,
    )?;
    let len = st.request.len() as i64;
    let trace = st.trace;
    drop(st);
    data.shared.ipc.count(1, 0, len as usize);
    let handle = data
        .ipc_mut()
        .handles
        .insert(Object::Call(CallRef::new(slot, seq)))?;
    super::traced::received(data.ipc_mut(), handle, trace);
    write_u64(mem, call_id, handle as u64)?;
    Ok(len)
}

/// What a `recv` waits for: a call, or a live upgrade's request to save.
enum Next {
    Call(Arc<crate::ipc::service::CallSlot>, u64),
    Save(u64),
}

/// The next call on `service`. A live upgrade's request to hand the
/// task's state over is answered first, between calls; after a hand-over
/// no call is taken (they go on to the new task) until it is cancelled.
async fn next_call(
    c: &mut Caller<'_, TaskData>,
    service: i32,
) -> Result<(Arc<crate::ipc::service::CallSlot>, u64), Errno> {
    loop {
        // Looked up at each poll rather than held: nothing but this
        // task's own host calls changes its handle table, and it is in
        // this one. (Through `data_mut`: a shared borrow held across the
        // wait would need the task's data to be `Sync`.)
        let next = std::future::poll_fn(|cx| {
            let data = &*c.data_mut();
            if let Poll::Ready(max) = data.shared.handover.poll_asked(cx) {
                return Poll::Ready(Ok(Next::Save(max)));
            }
            let s = match service_in(data, service) {
                Ok(s) => s,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if data.shared.handover.holding() {
                return s.poll_gone(cx).map(Err);
            }
            match s.poll_next(cx) {
                Poll::Ready(r) => Poll::Ready(r.map(|(slot, seq)| Next::Call(slot, seq))),
                // Looked at again once its waker is filed with the service:
                // an upgrade asks, then wakes the service's receiver.
                Poll::Pending => data
                    .shared
                    .handover
                    .poll_asked(cx)
                    .map(|m| Ok(Next::Save(m))),
            }
        })
        .await?;
        match next {
            Next::Call(slot, seq) => return Ok((slot, seq)),
            Next::Save(max) => {
                let saved = super::upgrade::save(c, max).await;
                c.data().shared.handover.saved(saved);
            }
        }
    }
}

fn reply(
    c: &mut Caller<'_, TaskData>,
    call_id: i64,
    resp: i32,
    len: i32,
    h: i32,
    nh: i32,
) -> Result<i32, Errno> {
    let call = i32::try_from(call_id).map_err(|_| Errno::BadHandle)?;
    let (mem, data) = memory(c)?;
    let ipc = data.ipc_mut();
    if !matches!(ipc.handles.get(call)?, Object::Call(_)) {
        return Err(Errno::BadHandle);
    }
    let (len, nh) = (len32(len), len32(nh));
    if len > ipc.grants.max_message_bytes || nh > ipc.grants.max_message_handles {
        return Err(Errno::Quota);
    }
    let src = range(mem.len(), resp, len)?;
    let mut objects = Vec::new();
    take_objects(&mut ipc.handles, mem, h, nh, &mut objects)?;
    super::traced::answered(ipc, call);
    let Ok(Object::Call(call)) = ipc.handles.remove(call) else {
        unreachable!("checked above")
    };
    data.shared.inherit.withdraw(call.client());
    data.shared.ipc.count(0, src.len(), 0);
    match call.reply_with(src.len(), |b| mem.read(src, b), objects) {
        Ok(()) => Ok(0),
        // The client is gone; the objects it would have received are
        // dropped (they were duplicates or moved out of this table).
        Err((e, _objects)) => Err(e),
    }
}

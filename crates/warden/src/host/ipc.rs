//! Services, portals and synchronous calls.
//!
//! A call copies the request from the client's memory into its call slot
//! (a kernel buffer reused for every call of that client), queues the slot
//! on the service and blocks the client. `recv` copies the request into the
//! server's memory and gives the server a call handle; `reply` copies the
//! answer into the slot and wakes the client, whose `call` then copies it
//! into the client's memory. Longer messages than the receiver's buffer
//! are truncated: the return value is always the full length.

use super::guest::GuestMem;
use super::{deliver, len32, memory, range, read_u32, ret32, ret64, take_objects, write_u64};
use crate::host::data::TaskIpc;
use crate::host::TaskData;
use crate::ipc::service::{CallRef, CallSlot, CallState, Phase, PortalRef, Service, ServiceRef};
use crate::ipc::{Errno, HandleTable, Object};
use crate::task::TaskShared;
use std::sync::{Arc, MutexGuard};
use std::task::Poll;
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "service_create",
        |mut c: Caller<'_, TaskData>| {
            let ipc = &mut c.data_mut().ipc;
            let service = Service::of(&ipc.shared);
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
            let table = &mut c.data_mut().ipc.handles;
            let portal = match table.get(service) {
                Ok(Object::Service(s)) => PortalRef::new(s.service()),
                Ok(_) => return Errno::BadHandle.code(),
                Err(e) => return e.code(),
            };
            ret32(table.insert(Object::Portal(portal)))
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "call",
        |c: Caller<'_, TaskData>, args: (i32, i32, i32, i32, i32, i32, i32, i32, i32)| {
            Box::new(async move { ret64(call(c, args, -1).await) })
        },
    )?;
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
            ret64(super::direct::call_fast(
                &mut c,
                (p, rq, rl, rh, rn, sp, sc, sh, sn),
            ))
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "call_timeout",
        |c: Caller<'_, TaskData>, (p, rq, rl, rh, rn, sp, sc, sh, sn, timeout): CallTimeoutArgs| {
            Box::new(
                async move { ret64(call(c, (p, rq, rl, rh, rn, sp, sc, sh, sn), timeout).await) },
            )
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
    let Object::Call(call) = data.ipc.handles.get(call)? else {
        return Err(Errno::BadHandle);
    };
    let text = match &call.slot().lock().origin {
        Some(o) => format!("{}/{}", o.node, o.task),
        None => {
            let node = data.ipc.kernel.node.get().map_or("", String::as_str);
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

use super::direct::CallArgs;
type CallTimeoutArgs = (i32, i32, i32, i32, i32, i32, i32, i32, i32, i64);

/// An active call under way. On any end — an answer taken, a timeout,
/// or the client's death (its future or its store dropped) — it
/// withdraws the context the client lent the server; unless answered, it
/// also abandons the call, so the server's late reply gets `PeerDied`.
///
/// It borrows the client's slot and the server while the host call that
/// made it runs ([`Made`]) and owns them ([`InFlight::into_owned`]) only
/// once it is kept past that call: a call answered at once (a direct
/// hand-off) counts no references.
pub(crate) struct InFlight<S = Arc<CallSlot>, T = Arc<TaskShared>>
where
    S: AsRef<CallSlot>,
    T: AsRef<TaskShared>,
{
    slot: S,
    server: Option<T>,
    answered: bool,
}

/// A call under way, borrowed from the host call that made it.
type Made<'a> = InFlight<&'a Arc<CallSlot>, &'a Arc<TaskShared>>;

impl<S: AsRef<CallSlot>, T: AsRef<TaskShared>> Drop for InFlight<S, T> {
    fn drop(&mut self) {
        let slot = self.slot.as_ref();
        if let Some(server) = &self.server {
            server.as_ref().inherit.withdraw(slot.owner().id);
        }
        if !self.answered {
            slot.abandon();
        }
    }
}

impl Made<'_> {
    /// The same call, kept past the host call that made it.
    fn into_owned(self) -> InFlight {
        let made = std::mem::ManuallyDrop::new(self);
        InFlight {
            slot: made.slot.clone(),
            server: made.server.cloned(),
            answered: made.answered,
        }
    }
}

/// A portal call: copy the request in, queue it, wait at most
/// `timeout_ns` (negative: for ever) for the answer, copy the answer out.
/// A call `call_fast` left under way is waited for here (the SDKs make
/// this call, with the same arguments, right after).
async fn call(mut c: Caller<'_, TaskData>, args: CallArgs, timeout_ns: i64) -> Result<i64, Errno> {
    let mut flight = match c.data_mut().ipc.in_flight.take() {
        Some(flight) => flight,
        None => {
            let service = service_of(c.data(), args.0)?.clone();
            if let Some(handler) = service.direct_handler().cloned() {
                return super::direct::call(c, handler, args, timeout_ns).await;
            }
            let (mem, data) = memory(&mut c)?;
            let ipc = &mut data.ipc;
            let seq = load_request(mem, ipc, &service, args)?;
            let made = start(ipc.call_slot.get(&ipc.shared), &ipc.shared, &service, seq)?;
            made.into_owned()
        }
    };
    let code = super::wait_for(timeout_ns, |cx| flight.slot.poll_done(cx)).await;
    let code = code.ok_or(Errno::Timeout)?;
    flight.answered = true;
    let (mem, data) = memory(&mut c)?;
    let ipc = &mut data.ipc;
    take_reply(
        mem,
        &mut ipc.handles,
        &ipc.shared,
        flight.slot.lock(),
        code,
        args,
    )
}

/// The service the handle `service` holds (to receive on), borrowed from
/// the task's handle table; `BadHandle` if it holds none.
fn service_in(data: &TaskData, service: i32) -> Result<&Arc<Service>, Errno> {
    match data.ipc.handles.get(service)? {
        Object::Service(s) => Ok(s.service()),
        _ => Err(Errno::BadHandle),
    }
}

/// The service `portal` calls, borrowed from the caller's handle table;
/// `BadHandle` if it is not a portal.
pub(super) fn service_of(data: &TaskData, portal: i32) -> Result<&Arc<Service>, Errno> {
    match data.ipc.handles.get(portal)? {
        Object::Portal(p) => Ok(p.service()),
        _ => Err(Errno::BadHandle),
    }
}

/// `call_fast` on an active service: the call is made and, if the server
/// answered within this poll (a direct hand-off), finished; otherwise it
/// is left under way for `call` to wait for, and the answer is `Again`.
pub(super) fn call_at_once(
    c: &mut Caller<'_, TaskData>,
    service: &Service,
    args: CallArgs,
) -> Result<i64, Errno> {
    let (mem, data) = memory(c)?;
    let ipc = &mut data.ipc;
    let seq = load_request(mem, ipc, service, args)?;
    let slot = ipc.call_slot.get(&ipc.shared);
    let mut flight = start(slot, &ipc.shared, service, seq)?;
    let st = slot.lock();
    match st.phase {
        Phase::Done(code) => {
            flight.answered = true;
            take_reply(mem, &mut ipc.handles, &ipc.shared, st, code, args)
        }
        _ => {
            drop(st);
            ipc.in_flight = Some(flight.into_owned());
            Err(Errno::Again)
        }
    }
}

/// Starts an active call whose request `load_request` put in `slot` as
/// call number `seq`: the client's context lent to the server (CPU
/// inheritance: the server runs on it while the client waits, and a
/// higher-priority caller boosts it), the call queued and, if its server
/// waits for it on this worker, handed off to it at once (only to a
/// server that runs on lent contexts).
fn start<'a>(
    slot: &'a Arc<CallSlot>,
    client: &'a Arc<TaskShared>,
    service: &'a Service,
    seq: u64,
) -> Result<Made<'a>, Errno> {
    let server = service.server();
    if let Some(server) = server {
        server.inherit.lend(client.id, client.context());
    }
    let mut flight = InFlight {
        slot,
        server,
        answered: false,
    };
    let receiver = match service.enqueue(slot, seq) {
        Ok(receiver) => receiver,
        Err(e) => {
            flight.answered = true;
            let mut st = slot.lock();
            st.phase = Phase::Idle;
            st.request_objects.clear();
            return Err(e);
        }
    };
    // A server waiting in `recv` may answer right here (direct hand-off),
    // if it runs on its callers' contexts: one that does not waits for its
    // own turn in the run queue.
    match (receiver, server) {
        (Some(receiver), _) => {
            if server.is_some_and(|s| s.inherit.donor_id().is_some()) {
                let own = client.inherit.donor_id().is_none();
                crate::executor::hand_off(receiver, own.then_some(client));
            } else {
                receiver.wake();
            }
        }
        // Queued under its own key before it was lent this context: moved
        // under the client's once the client blocks.
        (None, Some(s)) if s.state.load().is_queued() => {
            client
                .lent_while_queued
                .store(s.id.0, std::sync::atomic::Ordering::Relaxed);
        }
        (None, _) => {}
    }
    Ok(flight)
}

/// Checks a call to `service` and copies its request (bytes and handles)
/// into the client's call slot; returns the call's number.
fn load_request(
    mem: GuestMem,
    ipc: &mut TaskIpc,
    service: &Service,
    (_, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, resp_nh): CallArgs,
) -> Result<u64, Errno> {
    if service.owner == ipc.shared.id {
        return Err(Errno::Deadlock);
    }
    let (req_len, req_nh) = (len32(req_len), len32(req_nh));
    if req_len > ipc.grants.max_message_bytes || req_nh > ipc.grants.max_message_handles {
        return Err(Errno::Quota);
    }
    let req = range(mem.len(), req, req_len)?;
    range(mem.len(), resp, len32(resp_cap))?;
    let cap_nh = read_u32(mem, resp_nh)? as u64;
    range(mem.len(), resp_h, cap_nh * 4)?;
    let slot = ipc.call_slot.get(&ipc.shared);
    let mut st = slot.lock();
    st.set_request_with(slot.owner(), req.len(), |b| mem.read(req, b))?;
    st.request_objects.clear();
    st.reply_objects.clear();
    if let Err(e) = take_objects(
        &mut ipc.handles,
        mem,
        req_h,
        req_nh,
        &mut st.request_objects,
    ) {
        st.request_objects.clear();
        return Err(e);
    }
    st.seq += 1;
    st.phase = Phase::Queued;
    Ok(st.seq)
}

/// The call ended with `code`: an error, or the reply, which is copied
/// (bytes and handles) into the client's memory and handle table. `st`
/// is its slot's state, locked.
fn take_reply(
    mem: GuestMem,
    handles: &mut HandleTable,
    client: &TaskShared,
    mut st: MutexGuard<'_, CallState>,
    code: i32,
    (_, _, req_len, _, _, resp, resp_cap, resp_h, resp_nh): CallArgs,
) -> Result<i64, Errno> {
    st.phase = Phase::Idle;
    if code < 0 {
        st.reply_objects.clear();
        return Err(Errno::from_code(code));
    }
    let st = &mut *st;
    let (reply, objects) = (&st.reply, &mut st.reply_objects);
    deliver(
        handles, mem, reply, resp, resp_cap, objects, resp_h, resp_nh,
    )?;
    let len = st.reply.len();
    client.ipc.count(1, len32(req_len) as usize, len);
    Ok(len as i64)
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
        if (data.ipc.handles.room() as u64) < 1 + cap_nh.min(data.ipc.grants.max_message_handles) {
            return Err(Errno::Quota);
        }
    }
    // Looked up at each poll rather than held: nothing but this task's
    // own host calls changes its handle table, and it is in this one.
    // (Through `data_mut`: a shared borrow held across the wait would
    // need the task's data to be `Sync`.)
    let (slot, seq) = std::future::poll_fn(|cx| match service_in(c.data_mut(), service) {
        Ok(s) => s.poll_next(cx),
        Err(e) => Poll::Ready(Err(e)),
    })
    .await?;
    // From here to the end no await: a kill cannot split the delivery.
    let (mem, data) = memory(&mut c)?;
    let mut st = slot.lock();
    let st_ref = &mut *st;
    let (request, objects) = (&st_ref.request, &mut st_ref.request_objects);
    // Pointers were checked before waiting; memory never shrinks.
    deliver(
        &mut data.ipc.handles,
        mem,
        request,
        buf,
        cap,
        objects,
        h,
        nh,
    )?;
    let len = st.request.len() as i64;
    drop(st);
    data.ipc.shared.ipc.count(1, 0, len as usize);
    let handle = data
        .ipc
        .handles
        .insert(Object::Call(CallRef::new(slot, seq)))?;
    write_u64(mem, call_id, handle as u64)?;
    Ok(len)
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
    let ipc = &mut data.ipc;
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
    let Ok(Object::Call(call)) = ipc.handles.remove(call) else {
        unreachable!("checked above")
    };
    ipc.shared.inherit.withdraw(call.client());
    ipc.shared.ipc.count(0, src.len(), 0);
    match call.reply_with(src.len(), |b| mem.read(src, b), objects) {
        Ok(()) => Ok(0),
        // The client is gone; the objects it would have received are
        // dropped (they were duplicates or moved out of this table).
        Err((e, _objects)) => Err(e),
    }
}

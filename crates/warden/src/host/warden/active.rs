//! Calls to an active service, one a task serves from its own loop
//! (`recv`, `reply`): the request copied into the client's call slot and
//! queued, the client's context lent to the server while it waits (CPU
//! inheritance), a hand-off when the server waits on this worker, and the
//! reply copied out.

use super::message::{deliver, take_objects, CallArgs};
use super::state::TaskIpc;
use crate::host::calls::start;
use crate::host::guest::{len32, memory, range, read_u32, GuestMem};
use crate::host::TaskData;
use crate::ipc::service::{CallState, Phase, PortalRef, Service};
use crate::ipc::{Errno, HandleTable, Object};
use crate::task::TaskShared;
use std::sync::{Arc, MutexGuard};
use wasmtime::Caller;

/// The service `portal` calls, borrowed from the caller's handle table;
/// `BadHandle` if it is not a portal, `Revoked` if it was revoked.
pub(super) fn service_of(data: &TaskData, portal: i32) -> Result<&Arc<Service>, Errno> {
    portal_of(data, portal).map(PortalRef::service)
}

/// The portal `portal`, if not revoked.
pub(super) fn portal_of(data: &TaskData, portal: i32) -> Result<&PortalRef, Errno> {
    match data.ipc().handles.get(portal)? {
        Object::Portal(p) => p.check().map(|()| p),
        _ => Err(Errno::BadHandle),
    }
}

/// `call_fast` on an active service: the call is made and, if the server
/// answered within this poll (a direct hand-off), finished; otherwise it
/// is left under way for `call` to wait for, and the answer is `Again`.
pub(super) fn call_at_once(
    c: &mut Caller<'_, TaskData>,
    to: (&Service, usize),
    args: CallArgs,
) -> Result<i64, Errno> {
    let service = to.0;
    let (mem, data) = memory(c)?;
    let (ipc, core) = data.warden_parts();
    let shared = &core.shared;
    let seq = load_request(mem, ipc, shared, to, args)?;
    let slot = ipc.call_slot.get(shared);
    let mut flight = start(slot, shared, service, seq)?;
    let st = slot.lock();
    match st.phase {
        Phase::Done(code) => {
            flight.answered = true;
            take_reply(mem, &mut ipc.handles, shared, st, code, args)
        }
        _ => {
            drop(st);
            ipc.in_flight = Some(flight.into_owned());
            Err(Errno::Again)
        }
    }
}

/// Checks a call to `service`, made through the portal grant `via` (see
/// `PortalRef::via`), and copies its request (bytes and handles) into the
/// client's call slot; returns the call's number.
pub(super) fn load_request(
    mem: GuestMem,
    ipc: &mut TaskIpc,
    client: &Arc<TaskShared>,
    (service, via): (&Service, usize),
    (_, req, req_len, req_h, req_nh, resp, resp_cap, resp_h, resp_nh): CallArgs,
) -> Result<u64, Errno> {
    if service.owner == client.id {
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
    let slot = ipc.call_slot.get(client);
    let mut st = slot.lock();
    st.set_request_with(slot.owner(), req.len(), |b| mem.read(req, b))?;
    // What the call carries to its server: its own span's context if
    // it is traced (see `traced`), else the task's.
    st.trace = ipc.traced_began.map(|(_, at)| at).or(client.trace);
    st.via = via;
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
pub(super) fn take_reply(
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

//! The interposer's calls to a file-system task. Each is the task's own
//! call in every way that matters: its request and reply pass through a
//! call slot the task owns (their buffers charged to its budget), its
//! context is lent to the server while it waits (CPU inheritance, as a
//! `warden_call` lends it), it counts in the task's IPC figures, and the
//! task's death mid-call abandons it. The slot is the interposer's own,
//! so the task's `warden_call`s and its file calls never meet.
//!
//! A mount finds its service by name in the name service, waiting at
//! most [`FIRST_WAIT`] the first time (the file system may still be
//! starting), and not at all after that. A server that has gone answers
//! `EIO`; the mount forgets it and looks the name up again at its next
//! call, so a restarted file system serves the task again.

use super::proto::{self, errno, Req, REQ};
use super::Served;
use crate::host::calls::{start, InFlight};
use crate::host::guest::{memory, GuestMem};
use crate::host::wait::wait_for;
use crate::host::TaskData;
use crate::ipc::files::FileServiceStats;
use crate::ipc::permit::{Permit, PermitRef};
use crate::ipc::service::{CallSlot, Phase, Service};
use crate::ipc::{Errno, Object};
use std::ops::Range;
use std::sync::Arc;
use wasmtime::Caller;

/// How long a mount's first call waits for its service's name.
const FIRST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a request carries after its name.
pub(super) enum Data<'a> {
    None,
    /// Bytes of the host's.
    Host(&'a [u8]),
    /// A checked range of the task's memory.
    Guest(Range<usize>),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::None => 0,
            Data::Host(b) => b.len(),
            Data::Guest(r) => r.len(),
        }
    }
}

/// The interposer's state in the caller's store. Only a task with served
/// directories reaches the interposer, so it is there.
pub(super) fn served<'a>(c: &'a mut Caller<'_, TaskData>) -> &'a mut Served {
    c.data_mut()
        .preview1_mut()
        .served
        .as_deref_mut()
        .expect("a served descriptor implies the interposer's state")
}

/// One request to mount `mount`'s file system; on success, the length of
/// the reply's payload, which [`with_reply`] reads.
pub(super) async fn rpc(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    q: &Req<'_>,
    data: Data<'_>,
) -> Result<usize, i32> {
    rpc_lending(c, mount, q, data, None).await.map(|(_, n)| n)
}

/// What a READ sent with [`rpc_into`] got.
pub(super) enum Got {
    /// This many bytes, written by the server straight into the buffer.
    Written(usize),
    /// A payload of this many bytes in the reply, to copy.
    Payload(usize),
}

/// A READ of at most `dest.len()` bytes, whose request lends the server
/// a writable permit for `dest` (a checked range of the task's memory):
/// a server that writes the bytes through it answers how many with a
/// positive status and no payload, one copy in all (see `warden_fs.h`);
/// one that ignores it sends them as a payload. The permit is revoked
/// before this returns, whatever the server did: nothing it kept can
/// reach the task's memory afterwards.
pub(super) async fn rpc_into(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    q: &Req<'_>,
    dest: Range<usize>,
) -> Result<Got, i32> {
    let want = dest.len();
    let permit = {
        let (mem, data) = memory(c).map_err(|_| errno::FAULT)?;
        // SAFETY: `dest` was checked against the task's memory; the permit
        // is revoked below before this call returns, and, should the task
        // die first, by `TaskData::revoke_owned` before its memory is
        // released (it is kept in `Served::lent` meanwhile).
        unsafe { Permit::of_task(&data.shared, mem.at(dest.start), want as u64, true) }
    };
    served(c).lent = Some(permit.clone());
    let lent = Object::Permit(PermitRef(permit.clone()));
    let r = rpc_lending(c, mount, q, Data::None, Some(lent)).await;
    permit.revoke();
    served(c).lent = None;
    match r? {
        (0, n) => Ok(Got::Payload(n)),
        (n, 0) if n as usize <= want => Ok(Got::Written(n as usize)),
        _ => Err(errno::IO), // more than was asked, or bytes both ways
    }
}

/// One request, carrying `object` if any: the reply's status (0 or
/// positive) and payload length; a negative status as WASI's errno.
async fn rpc_lending(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    q: &Req<'_>,
    data: Data<'_>,
    object: Option<Object>,
) -> Result<(i32, usize), i32> {
    let service = connect(c, mount).await?;
    let len = REQ + q.name.len() + data.len();
    let sent = call(c, &service, len, object, |mem, buf| {
        q.encode(buf, data.len());
        let rest = &mut buf[REQ + q.name.len()..];
        match &data {
            Data::None => {}
            Data::Host(b) => rest.copy_from_slice(b),
            Data::Guest(r) => mem.read(r.clone(), rest),
        }
    })
    .await;
    let r = match sent {
        Ok(()) => match with_reply(c, |_, _| ()) {
            Ok((status @ 0.., n, ())) => Ok((status, n)),
            Ok((status, _, ())) => Err(proto::wasi_errno(status)),
            Err(e) => Err(e),
        },
        Err(Errno::NoMem | Errno::Quota) => Err(errno::NOMEM),
        Err(_) => {
            served(c).mounts[mount].portal = None; // gone, or refusing: look it up again
            Err(errno::IO)
        }
    };
    let stats = &served(c).mounts[mount].stats;
    FileServiceStats::add(&stats.ops, 1);
    if r.is_err() {
        FileServiceStats::add(&stats.errors, 1);
    }
    r
}

/// The last reply's status and payload length, and what `f` made of its
/// payload (given the task's memory, to copy into); `EIO` if the server
/// sent no whole reply.
pub(super) fn with_reply<R>(
    c: &mut Caller<'_, TaskData>,
    f: impl FnOnce(GuestMem<'_>, &[u8]) -> R,
) -> Result<(i32, usize, R), i32> {
    let (mem, data) = memory(c).map_err(|_| errno::FAULT)?;
    let Some(slot) = data.preview1().served.as_ref().and_then(|s| s.slot.clone()) else {
        return Err(errno::IO);
    };
    let st = slot.lock();
    let (status, n) = proto::reply_header(&st.reply).ok_or(errno::IO)?;
    let r = f(mem, &st.reply[proto::REPLY..proto::REPLY + n]);
    Ok((status, n, r))
}

/// The service mount `mount` reaches, looked up if it has none.
async fn connect(c: &mut Caller<'_, TaskData>, mount: usize) -> Result<Arc<Service>, i32> {
    let s = served(c);
    let m = &mut s.mounts[mount];
    if let Some(p) = &m.portal {
        return Ok(p.service().clone());
    }
    let wait = match std::mem::replace(&mut m.looked_up, true) {
        false => FIRST_WAIT.as_nanos() as i64,
        true => 0,
    };
    let (kernel, name) = (s.kernel.clone(), m.service.clone());
    let Some(portal) = crate::host::wait::name(&kernel, &name, wait).await else {
        return Err(errno::IO);
    };
    let service = portal.service().clone();
    served(c).mounts[mount].portal = Some(portal);
    Ok(service)
}

/// One call to the active `service`: a request of `len` bytes that
/// `fill` writes (given the task's memory, to copy from), and the wait
/// for its answer, which stays in the slot.
async fn call(
    c: &mut Caller<'_, TaskData>,
    service: &Arc<Service>,
    len: usize,
    object: Option<Object>,
    fill: impl FnOnce(GuestMem<'_>, &mut [u8]),
) -> Result<(), Errno> {
    let mut flight = begin(c, service, len, object, fill)?;
    let code = wait_for(-1, |cx| flight.slot.poll_done(cx)).await;
    flight.answered = true;
    let mut st = flight.slot.lock();
    st.phase = Phase::Idle;
    st.request_objects.clear(); // a lent permit the server did not take
    st.reply_objects.clear(); // a file service sends none; none are kept
    let code = code.unwrap_or(Errno::Timeout.code());
    if code < 0 {
        return Err(Errno::from_code(code));
    }
    let reply = st.reply.len();
    drop(st);
    c.data().shared.ipc.count(1, len, reply);
    Ok(())
}

/// Writes the request (and `object`, if any) into the interposer's slot
/// (made at its first call) and queues it.
fn begin(
    c: &mut Caller<'_, TaskData>,
    service: &Arc<Service>,
    len: usize,
    object: Option<Object>,
    fill: impl FnOnce(GuestMem<'_>, &mut [u8]),
) -> Result<InFlight, Errno> {
    if service.direct_handler().is_some() {
        return Err(Errno::Inval); // a passive service runs no such calls
    }
    let (mem, data) = memory(c)?;
    let (preview1, core) = data.wasi_parts();
    let shared = &core.shared;
    if service.owner == shared.id {
        return Err(Errno::Deadlock);
    }
    let s = preview1.served.as_deref_mut().ok_or(Errno::Inval)?;
    let slot = s
        .slot
        .get_or_insert_with(|| CallSlot::new(shared.clone()))
        .clone();
    let seq = {
        let mut st = slot.lock();
        st.set_request_with(slot.owner(), len, |b| fill(mem, b))?;
        st.request_objects.clear();
        st.request_objects.extend(object);
        st.reply_objects.clear();
        st.seq += 1;
        st.phase = Phase::Queued;
        st.seq
    };
    let flight = start(&slot, shared, service, seq)?.into_owned();
    Ok(flight)
}

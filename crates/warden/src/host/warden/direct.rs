//! Direct services: calls that run on the caller's thread, inside its
//! `warden_call`, with no run queue and no thread switch (J-Kernel's LRMI,
//! Luna's remote calls). Two kinds sit behind an ordinary portal:
//!
//! - a **passive** task's handler ([`Passive`]): a reactor module whose
//!   exported handler runs in the server's own store (its memory, its
//!   budget, its handles), synchronously, on the calling thread;
//! - a **host service** ([`HostService`]): a Rust closure an embedder
//!   registered.
//!
//! A passive call is described in [`super::passive`].

use super::active::{portal_of, service_of};
use super::message::CallArgs;
use super::passive::{invoke, invoke_nested_ok, passive_bytes, Passive, Server};
use crate::host::guest::GuestMem;
use crate::host::guest::{len32, memory, range, write_u32};
use crate::host::TaskData;
use crate::ipc::permit::copy_racy;
use crate::ipc::service::Direct;
use crate::ipc::Errno;
use crate::task::{TaskId, TaskShared};
use std::future::Future;
use wasmtime::Caller;

/// Who is calling a host service.
#[derive(Debug, Clone, Copy)]
pub struct HostCall<'a> {
    /// The calling task.
    pub caller: TaskId,
    /// Its name.
    pub caller_name: &'a str,
}

/// A host service's handler: the request, and a reply buffer to fill
/// (empty, with the capacity earlier replies left it).
pub type HostHandler =
    dyn Fn(&HostCall<'_>, &[u8], &mut Vec<u8>) -> Result<(), Errno> + Send + Sync;

/// A Rust closure offered to guests as a service.
pub(crate) struct HostService(pub(crate) Box<HostHandler>);

/// `warden_call` on a direct service, from a task's own (async) store.
/// A timeout (`call_timeout`) bounds only the wait for a busy service.
pub(super) async fn call(
    c: &mut Caller<'_, TaskData>,
    handler: Direct,
    args: CallArgs,
    timeout_ns: i64,
) -> Result<i64, Errno> {
    {
        let (mem, data) = memory(c)?;
        check(mem, data, args)?;
        if let Some(h) = handler.downcast_ref::<HostService>() {
            return host_call(mem, data, h, args);
        }
    }
    let Some(p) = handler.downcast_ref::<Passive>() else {
        return Err(Errno::BadHandle);
    };
    let mut server = match p.server.try_lock() {
        Some(server) => server,
        None => {
            let mut lock = std::pin::pin!(p.server.lock());
            crate::host::wait::wait_for(timeout_ns, |cx| lock.as_mut().poll(cx))
                .await
                .ok_or(Errno::Timeout)?
        }
    };
    let (mem, data) = memory(c)?;
    passive_call(mem, data, p, &mut server, args)
}

/// `call_fast`: a call made at once, without the async host-call
/// machinery `call` needs to wait. A direct service's call runs here; an
/// active service's is made here and, if its server answered within this
/// poll (a direct hand-off), finished. `Again` when it must wait: for a
/// busy passive service (nothing done yet), or for an active service's
/// answer (the call is under way, and `call` waits for it).
pub(super) fn call_fast(c: &mut Caller<'_, TaskData>, args: CallArgs) -> Result<i64, Errno> {
    // Anything but a portal is the waiting call's to judge, and so is a
    // call while another is under way.
    if c.data().ipc().in_flight.is_some() {
        return Err(Errno::Again);
    }
    let portal = portal_of(c.data(), args.0).map_err(|_| Errno::Again)?;
    if portal.service().direct_handler().is_none() {
        let (service, via) = (portal.service().clone(), portal.via());
        return super::active::call_at_once(c, (&service, via), args);
    }
    let (mem, data, handler) = direct_target(c, args, Errno::BadHandle)?;
    if let Some(h) = handler.downcast_ref::<HostService>() {
        return host_call(mem, data, h, args);
    }
    let p = handler.downcast_ref::<Passive>().ok_or(Errno::Again)?;
    let Some(mut server) = p.server.try_lock() else {
        return Err(Errno::Again);
    };
    passive_call(mem, data, p, &mut server, args)
}

/// The caller's memory and data and the direct service its call's portal
/// leads to (`not_direct` if the service is an active task's), with the
/// call's arguments checked. The handler is borrowed from the caller's
/// handle table, which nothing changes while the call runs, rather than
/// cloned (a locked instruction each way).
fn direct_target<'a>(
    c: &'a mut Caller<'_, TaskData>,
    args: CallArgs,
    not_direct: Errno,
) -> Result<(GuestMem<'a>, &'a TaskData, &'a Direct), Errno> {
    let (mem, data) = memory(c)?;
    let data = &*data;
    let handler = service_of(data, args.0)?
        .direct_handler()
        .ok_or(not_direct)?;
    check(mem, data, args)?;
    Ok((mem, data, handler))
}

/// `warden_call` from inside a passive handler (a synchronous store): a
/// direct service is called at once; an active one cannot be waited for.
pub(super) fn call_nested(c: &mut Caller<'_, TaskData>, args: CallArgs) -> Result<i64, Errno> {
    let (mem, data, handler) = direct_target(c, args, Errno::Deadlock)?;
    if let Some(h) = handler.downcast_ref::<HostService>() {
        return host_call(mem, data, h, args);
    }
    let p = handler.downcast_ref::<Passive>().ok_or(Errno::BadHandle)?;
    if !invoke_nested_ok(p) {
        return Err(Errno::Deadlock);
    }
    // Whoever holds it runs a handler that never waits (bounded by its
    // call_cpu_limit), so spinning ends; a cycle of services calling each
    // other ends at this call's own bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(p.call_limit_ns);
    let mut server = loop {
        if let Some(g) = p.server.try_lock() {
            break g;
        }
        if std::time::Instant::now() > deadline {
            return Err(Errno::Timeout);
        }
        std::thread::yield_now();
    };
    passive_call(mem, data, p, &mut server, args)
}

/// Checks a direct call's arguments against the caller's quotas and
/// memory; direct calls carry no handles.
fn check(
    mem: GuestMem,
    data: &TaskData,
    (_, req, req_len, _, req_nh, resp, resp_cap, _, resp_nh): CallArgs,
) -> Result<(), Errno> {
    let grants = &data.ipc().grants;
    if len32(req_len) > grants.max_message_bytes {
        return Err(Errno::Quota);
    }
    if req_nh != 0 {
        return Err(Errno::Inval);
    }
    range(mem.len(), req, len32(req_len))?;
    range(mem.len(), resp, len32(resp_cap))?;
    range(mem.len(), resp_nh, 4)?;
    Ok(())
}

/// Runs a host service's handler on the caller's request, copied into the
/// caller's call slot (whose buffers are charged to the caller).
fn host_call(
    mem: GuestMem,
    data: &TaskData,
    h: &HostService,
    args: CallArgs,
) -> Result<i64, Errno> {
    let (_, req, req_len, _, _, resp, resp_cap, _, resp_nh) = args;
    let shared = &data.shared;
    let mut st = data.ipc().call_slot.get(shared).lock();
    let r = range(mem.len(), req, len32(req_len))?;
    st.set_request_with(shared, r.len(), |b| mem.read(r, b))?;
    let st = &mut *st;
    let before = st.reply.capacity();
    st.reply.clear();
    let result = run_host(h, shared, &st.request, &mut st.reply);
    let grown = st.reply.capacity().saturating_sub(before) as u64;
    if grown > 0 && !shared.try_charge(grown) {
        st.reply = Vec::with_capacity(before);
        return Err(Errno::NoMem);
    }
    result?;
    let n = st.reply.len().min(len32(resp_cap) as usize);
    mem.put(resp, &st.reply[..n])?;
    write_u32(mem, resp_nh, 0)?;
    shared.ipc.count(1, len32(req_len) as usize, st.reply.len());
    Ok(st.reply.len() as i64)
}

/// Runs a host service's closure for `caller`; a panic in it is the
/// caller's `PeerDied`.
fn run_host(
    h: &HostService,
    caller: &TaskShared,
    request: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Errno> {
    let call = HostCall {
        caller: caller.id,
        caller_name: &caller.name,
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (h.0)(&call, request, reply)
    }))
    .map_err(|_| Errno::PeerDied)?
}

/// Runs one passive call from a task with the service's lock held
/// (`server`): the request is copied from the caller's memory into the
/// server's, the reply straight back.
fn passive_call(
    mem: GuestMem,
    data: &TaskData,
    p: &Passive,
    server: &mut Option<Server>,
    (_, req, req_len, _, _, resp, resp_cap, _, resp_nh): CallArgs,
) -> Result<i64, Errno> {
    let req = range(mem.len(), req, len32(req_len))?;
    let cap = len32(resp_cap).min(data.ipc().grants.max_message_bytes) as u32;
    // The call's span's context if it is traced, else the task's.
    let ipc = data.ipc();
    let trace = ipc.traced_began.map(|(_, at)| at).or(data.shared.trace);
    let n = invoke(
        p,
        server,
        (req.len() as u32, cap),
        trace,
        // SAFETY: both ranges are checked against their memories, which
        // stay mapped for the whole call (memories never move or shrink).
        |smem, at| unsafe { copy_racy(mem.at(req.start), smem.at(at), req.len()) },
        |smem, at, n| {
            let out = range(mem.len(), resp, n as u64)?;
            // SAFETY: as above; `at..at + n` lies in the server's buffer.
            unsafe { copy_racy(smem.at(at), mem.at(out.start), n) };
            Ok(())
        },
    )?;
    write_u32(mem, resp_nh, 0)?;
    if n >= 0 {
        data.shared.ipc.count(1, req.len(), n as usize);
    }
    Ok(n)
}

/// A direct service's call for a client that is not a task (see
/// [`crate::ipc::client::DirectCall`]).
pub(crate) fn call_bytes<'a>(
    handler: &'a Direct,
    caller: &'a TaskShared,
    request: &'a [u8],
) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<u8>, Errno>> + Send + 'a>> {
    Box::pin(async move {
        if let Some(h) = handler.downcast_ref::<HostService>() {
            let mut reply = Vec::new();
            run_host(h, caller, request, &mut reply)?;
            return Ok(reply);
        }
        // A typed server called from another node (see `typed::remote`).
        if let Some(t) = handler.downcast_ref::<crate::host::TypedServer>() {
            return crate::host::typed_serve_bytes(t, request).await;
        }
        let p = handler.downcast_ref::<Passive>().ok_or(Errno::BadHandle)?;
        passive_bytes(p, request).await
    })
}

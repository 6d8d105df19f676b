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
//! # A passive call
//!
//! 1. The request is checked in the caller (quotas, pointers; direct calls
//!    carry bytes only, so a request with handles is `Inval`).
//! 2. The caller waits for the service: one call runs in it at a time,
//!    the others wait in FIFO order (Tokio's fair mutex). This is an
//!    ordinary wait: a caller killed here is gone at once.
//! 3. From here to the end nothing awaits. The request is copied into a
//!    buffer the server's `warden_passive_alloc` export keeps, the handler
//!    runs on this thread, and the reply is copied back. The caller's
//!    worker is busy with it, so its time is charged to the caller by the
//!    worker's meter (inheritance by construction), and a kill of the
//!    caller takes effect when the handler has returned.
//! 4. The server's deadline callback bounds the handler: past the server's
//!    `call_cpu_limit` in one call, or its own `cpu_limit` in all, or once
//!    the server is killed, the handler traps. Any trap ends the server:
//!    the caller gets `PeerDied`, and so does everyone after.
//!
//! Inside a handler the server's store runs synchronously (its linker has
//! no async functions), so it can call other direct services but not wait
//! for an active task: such a call returns `Deadlock`. Direct calls nest
//! at most [`MAX_DEPTH`] deep on one thread, each level taking up to
//! Wasmtime's `max_wasm_stack` (512 KiB) of the caller's 2 MiB stack.

use super::guest::GuestMem;
use super::{len32, memory, range, write_u32, TaskData};
use crate::ipc::permit::copy_racy;
use crate::ipc::service::{Direct, ServiceRef};
use crate::ipc::{Errno, Object};
use crate::task::{KillSignal, TaskId, TaskShared, TaskStatus};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasmtime::{Caller, Linker, Memory, Store, TypedFunc};

/// Direct calls nested on one thread, at most.
pub const MAX_DEPTH: usize = 2;

/// The arguments of `warden_call`: portal, request, its length, its
/// handles and their count, reply buffer, its capacity, reply handles and
/// the pointer to their count.
pub(super) type CallArgs = (i32, i32, i32, i32, i32, i32, i32, i32, i32);

thread_local! {
    /// The passive services whose handlers this thread is running,
    /// innermost last (to refuse re-entry and bound nesting).
    static RUNNING: Cell<[usize; MAX_DEPTH]> = const { Cell::new([0; MAX_DEPTH]) };
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

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

/// A passive task: its store while it lives, and how it ends.
pub(crate) struct Passive {
    /// The server task.
    pub(crate) shared: Arc<TaskShared>,
    /// The server's store; `None` once it has ended.
    server: tokio::sync::Mutex<Option<Server>>,
    /// CPU one call may use, ns.
    pub(crate) call_limit_ns: u64,
    /// The call in progress, as its deadline callback measures it.
    pub(crate) clock: CallClock,
    /// How the server ended, and its task's waker.
    ending: Mutex<(Option<TaskStatus>, Option<Waker>)>,
    /// The service's holder reference: dropping it closes the service.
    holder: Mutex<Option<ServiceRef>>,
}

/// An instantiated passive module.
pub(crate) struct Server {
    pub(crate) store: Store<TaskData>,
    pub(crate) memory: Memory,
    pub(crate) alloc: TypedFunc<u32, u32>,
    pub(crate) handler: TypedFunc<(u32, u32, u32, u32), i64>,
    /// The request-and-reply buffer `alloc` gave, and its size.
    buf: (u32, u32),
}

impl Server {
    /// A server ready for calls.
    pub(crate) fn new(
        store: Store<TaskData>,
        memory: Memory,
        alloc: TypedFunc<u32, u32>,
        handler: TypedFunc<(u32, u32, u32, u32), i64>,
    ) -> Server {
        Server {
            store,
            memory,
            alloc,
            handler,
            buf: (0, 0),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // IPC rule 5: nothing may reach the memory once it is released.
        self.store.data_mut().ipc.owned.revoke_all();
    }
}

/// One call's running time: wall time from its start until the first
/// epoch tick that sees it, then the thread's CPU clock. A call shorter
/// than a tick (most) costs two reads of the monotonic clock; a longer one
/// is measured in CPU time, so a preempted thread does not overcharge.
#[derive(Default)]
pub(crate) struct CallClock {
    start: AtomicU64,
    wall_before: AtomicU64,
    cpu_base: AtomicU64,
}

impl CallClock {
    fn begin(&self) {
        self.cpu_base.store(0, Ordering::Relaxed);
        self.start
            .store(crate::cpu::now().max(1), Ordering::Relaxed);
    }

    /// Ends the call: the CPU it used, ns (see [`CallClock::used`]).
    fn end(&self) -> u64 {
        let start = self.start.swap(0, Ordering::Relaxed);
        match self.cpu_base.load(Ordering::Relaxed) {
            0 => crate::cpu::now().saturating_sub(start),
            base => {
                self.wall_before.load(Ordering::Relaxed)
                    + crate::cpu::thread_cpu_ns().saturating_sub(base)
            }
        }
    }

    /// CPU the call in progress has used, ns (0 between calls). Called by
    /// the server's deadline callback, on the calling thread.
    pub(crate) fn used(&self) -> u64 {
        let start = self.start.load(Ordering::Relaxed);
        if start == 0 {
            return 0;
        }
        let base = self.cpu_base.load(Ordering::Relaxed);
        if base == 0 {
            let before = crate::cpu::now().saturating_sub(start);
            self.wall_before.store(before, Ordering::Relaxed);
            self.cpu_base
                .store(crate::cpu::thread_cpu_ns().max(1), Ordering::Relaxed);
            return before;
        }
        self.wall_before.load(Ordering::Relaxed) + crate::cpu::thread_cpu_ns().saturating_sub(base)
    }
}

impl Passive {
    /// A passive task not yet started.
    pub(crate) fn new(shared: Arc<TaskShared>, call_limit_ns: u64) -> Arc<Passive> {
        Arc::new(Passive {
            shared,
            server: tokio::sync::Mutex::new(None),
            call_limit_ns,
            clock: CallClock::default(),
            ending: Mutex::new((None, None)),
            holder: Mutex::new(None),
        })
    }

    /// Installs the started server and its service, which is `direct`
    /// (this object) under the holder reference `holder`.
    pub(crate) fn install(&self, server: Server, holder: ServiceRef) {
        *self.server.try_lock().expect("not yet callable") = Some(server);
        *lock(&self.holder) = Some(holder);
    }

    /// For the server task's future: ready with how the server ended.
    pub(crate) fn poll_end(&self, cx: &mut Context<'_>) -> Poll<TaskStatus> {
        let mut e = lock(&self.ending);
        match e.0.take() {
            Some(status) => Poll::Ready(status),
            None => {
                e.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Ends the server with `status` (unless it already ended): its
    /// service closes and its task finishes.
    pub(crate) fn end(&self, status: TaskStatus) {
        drop(lock(&self.holder).take());
        let mut e = lock(&self.ending);
        if e.0.is_none() {
            e.0 = Some(status);
            if let Some(w) = e.1.take() {
                drop(e);
                w.wake();
            }
        }
    }

    /// The server task's future was dropped (it was killed, or the system
    /// ended): close the service, and release the store unless a call
    /// holds it (that call sees the kill, traps and releases it).
    pub(crate) fn shut_down(&self) {
        drop(lock(&self.holder).take());
        lock(&self.ending).1 = None;
        if let Ok(mut server) = self.server.try_lock() {
            drop(server.take());
        }
    }

    /// Ends the server after a failed call: drops its store, closes the
    /// service and finishes its task with the failure's status.
    fn fail(&self, server: &mut Option<Server>, e: &wasmtime::Error) {
        let status = super::classify(e, &self.shared, "passive call: ");
        drop(server.take());
        self.end(status);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The deadline callback of a passive server's store: traps the handler
/// once the server is killed or a CPU limit is passed; never yields.
pub(crate) fn on_tick(p: &Passive) -> wasmtime::Result<wasmtime::UpdateDeadline> {
    let shared = &p.shared;
    if shared.kill_requested() {
        return Err(KillSignal(shared.kill_reason()).into());
    }
    let used = p.clock.used();
    if used > p.call_limit_ns {
        return Err(KillSignal(format!(
            "a passive call used more than its call_cpu_limit of {} ms",
            p.call_limit_ns / 1_000_000
        ))
        .into());
    }
    if let Some(reason) = shared
        .cpu
        .over_limit(shared.cpu.subtree_ns() + shared.cpu.served_ns() + used)
    {
        return Err(KillSignal(reason).into());
    }
    Ok(wasmtime::UpdateDeadline::Continue(1))
}

/// `warden_call` on a direct service, from a task's own (async) store.
/// A timeout (`call_timeout`) bounds only the wait for a busy service.
pub(super) async fn call(
    mut c: Caller<'_, TaskData>,
    handler: Direct,
    args: CallArgs,
    timeout_ns: i64,
) -> Result<i64, Errno> {
    check(&mut c, args)?;
    if let Some(h) = handler.downcast_ref::<HostService>() {
        return host_call(&mut c, h, args);
    }
    let Some(p) = handler.downcast_ref::<Passive>() else {
        return Err(Errno::BadHandle);
    };
    let mut server = match p.server.try_lock() {
        Ok(server) => server,
        Err(_) => {
            let mut lock = std::pin::pin!(p.server.lock());
            super::wait_for(timeout_ns, |cx| lock.as_mut().poll(cx))
                .await
                .ok_or(Errno::Timeout)?
        }
    };
    passive_call(&mut c, p, &mut server, args)
}

/// The host functions a passive task's store links: WASI (synchronous),
/// handles, memory objects, permits, a `name_lookup` that does not wait
/// and a `call` that reaches direct services only. Nothing in it waits,
/// so the store never needs a fiber and runs on its caller's.
pub(crate) fn add_to_passive_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p1::add_to_linker_sync(linker, |d: &mut TaskData| &mut d.wasi)?;
    super::handles::add_to_linker(linker)?;
    super::mem::add_to_linker(linker)?;
    super::permit::add_to_linker(linker)?;
    super::names::add_nowait_to_linker(linker)?;
    // `call_fast` too: the SDK's warden_call tries it first.
    for name in ["call", "call_fast"] {
        linker.func_wrap(
            super::MODULE,
            name,
            |mut c: Caller<'_, TaskData>,
             a: i32,
             b: i32,
             l: i32,
             h: i32,
             n: i32,
             r: i32,
             rc: i32,
             rh: i32,
             rn: i32| {
                super::ret64(call_nested(&mut c, (a, b, l, h, n, r, rc, rh, rn)))
            },
        )?;
    }
    linker.func_wrap(
        super::MODULE,
        "call_timeout",
        |mut c: Caller<'_, TaskData>,
         a: i32,
         b: i32,
         l: i32,
         h: i32,
         n: i32,
         r: i32,
         rc: i32,
         rh: i32,
         rn: i32,
         _timeout: i64| {
            super::ret64(call_nested(&mut c, (a, b, l, h, n, r, rc, rh, rn)))
        },
    )?;
    Ok(())
}

/// `call_fast`: a direct service's call made at once, without the async
/// host-call machinery `call` needs to wait; `Again` when it must wait (an
/// active service, a busy passive one, or waiting for a handler's lock).
pub(super) fn call_fast(c: &mut Caller<'_, TaskData>, args: CallArgs) -> Result<i64, Errno> {
    let handler = match c.data().ipc.handles.get(args.0) {
        Ok(Object::Portal(p)) => p.service().direct_handler().cloned(),
        _ => None,
    };
    let Some(handler) = handler else {
        return Err(Errno::Again);
    };
    check(c, args)?;
    if let Some(h) = handler.downcast_ref::<HostService>() {
        return host_call(c, h, args);
    }
    let p = handler.downcast_ref::<Passive>().ok_or(Errno::Again)?;
    let Ok(mut server) = p.server.try_lock() else {
        return Err(Errno::Again);
    };
    passive_call(c, p, &mut server, args)
}

/// `warden_call` from inside a passive handler (a synchronous store): a
/// direct service is called at once; an active one cannot be waited for.
pub(super) fn call_nested(c: &mut Caller<'_, TaskData>, args: CallArgs) -> Result<i64, Errno> {
    let handler = match c.data().ipc.handles.get(args.0)? {
        Object::Portal(p) => p.service().direct_handler().cloned(),
        _ => return Err(Errno::BadHandle),
    };
    let handler = handler.ok_or(Errno::Deadlock)?;
    check(c, args)?;
    if let Some(h) = handler.downcast_ref::<HostService>() {
        return host_call(c, h, args);
    }
    let p = handler.downcast_ref::<Passive>().ok_or(Errno::BadHandle)?;
    let me = p as *const Passive as usize;
    if RUNNING.with(|r| r.get()[..DEPTH.with(Cell::get)].contains(&me)) {
        return Err(Errno::Deadlock);
    }
    // Whoever holds it runs a handler that never waits (bounded by its
    // call_cpu_limit), so spinning ends; a cycle of services calling each
    // other ends at this call's own bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(p.call_limit_ns);
    let mut server = loop {
        if let Ok(g) = p.server.try_lock() {
            break g;
        }
        if std::time::Instant::now() > deadline {
            return Err(Errno::Timeout);
        }
        std::thread::yield_now();
    };
    passive_call(c, p, &mut server, args)
}

/// Checks a direct call's arguments against the caller's quotas and
/// memory; direct calls carry no handles.
fn check(
    c: &mut Caller<'_, TaskData>,
    (_, req, req_len, _, req_nh, resp, resp_cap, _, resp_nh): CallArgs,
) -> Result<(), Errno> {
    let (mem, data) = memory(c)?;
    let grants = &data.ipc.grants;
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
fn host_call(c: &mut Caller<'_, TaskData>, h: &HostService, args: CallArgs) -> Result<i64, Errno> {
    let (_, req, req_len, _, _, resp, resp_cap, _, resp_nh) = args;
    let (mem, data) = memory(c)?;
    let shared = data.ipc.shared.clone();
    let slot = data.ipc.call_slot.clone();
    let mut st = slot.lock();
    let r = range(mem.len(), req, len32(req_len))?;
    st.set_request_with(&shared, r.len(), |b| mem.read(r, b))?;
    let st = &mut *st;
    let before = st.reply.capacity();
    st.reply.clear();
    let call = HostCall {
        caller: shared.id,
        caller_name: &shared.name,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (h.0)(&call, &st.request, &mut st.reply)
    }));
    let grown = st.reply.capacity().saturating_sub(before) as u64;
    if grown > 0 && !shared.try_charge(grown) {
        st.reply = Vec::with_capacity(before);
        return Err(Errno::NoMem);
    }
    result.map_err(|_| Errno::PeerDied)??;
    let n = st.reply.len().min(len32(resp_cap) as usize);
    mem.put(resp, &st.reply[..n])?;
    write_u32(mem, resp_nh, 0)?;
    shared.ipc.count(1, len32(req_len) as usize, st.reply.len());
    Ok(st.reply.len() as i64)
}

/// Runs one passive call from a task with the service's lock held
/// (`server`): the request is copied from the caller's memory into the
/// server's, the reply straight back.
fn passive_call(
    c: &mut Caller<'_, TaskData>,
    p: &Passive,
    server: &mut Option<Server>,
    (_, req, req_len, _, _, resp, resp_cap, _, resp_nh): CallArgs,
) -> Result<i64, Errno> {
    let (mem, data) = memory(c)?;
    let req = range(mem.len(), req, len32(req_len))?;
    let cap = len32(resp_cap).min(data.ipc.grants.max_message_bytes) as u32;
    let n = invoke(
        p,
        server,
        req.len() as u32,
        cap,
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
        data.ipc.shared.ipc.count(1, req.len(), n as usize);
    }
    Ok(n)
}

/// A passive call for a client that is not a task (the web server's
/// service routes): the request's bytes in, the reply's out.
async fn passive_bytes(p: &Passive, request: &[u8]) -> Result<Vec<u8>, Errno> {
    let mut server = p.server.lock().await;
    let cap = match server.as_ref() {
        Some(s) => s.store.data().ipc.grants.max_message_bytes as u32,
        None => return Err(Errno::PeerDied),
    };
    let len = u32::try_from(request.len()).map_err(|_| Errno::Quota)?;
    let mut reply = Vec::new();
    let n = invoke(
        p,
        &mut server,
        len,
        cap,
        |smem, at| smem.write(at, request),
        |smem, at, n| {
            reply.resize(n, 0);
            smem.read(at..at + n, &mut reply);
            Ok(())
        },
    )?;
    if n < 0 {
        return Err(Errno::from_code(n as i32));
    }
    Ok(reply)
}

/// Runs the handler once on `server` (the service's lock held): `fill`
/// writes the `len` request bytes into the server's memory at the offset
/// given; the handler may write up to `cap` reply bytes, which `take`
/// reads (offset, length). Returns the handler's result: the reply's
/// length or its error code. A handler that breaks the protocol gets the
/// caller `Inval`; one that traps ends the server (`PeerDied`).
fn invoke(
    p: &Passive,
    server: &mut Option<Server>,
    len: u32,
    cap: u32,
    fill: impl FnOnce(GuestMem, usize),
    take: impl FnOnce(GuestMem, usize, usize) -> Result<(), Errno>,
) -> Result<i64, Errno> {
    if p.shared.kill_requested() {
        drop(server.take());
        return Err(Errno::PeerDied);
    }
    let s = server.as_mut().ok_or(Errno::PeerDied)?;
    let need = len.checked_add(cap).ok_or(Errno::Quota)?;
    let result = enter(p, || {
        let buf = buffer(s, need)?;
        range(server_mem(s).len(), buf as i32, need as u64).map_err(|_| Ok(Errno::Inval))?;
        fill(server_mem(s), buf as usize);
        p.clock.begin();
        let r = s.handler.call(&mut s.store, (buf, len, buf + len, cap));
        p.shared.charge_served(p.clock.end());
        let n = r.map_err(Err)?;
        // A reply longer than the buffer, or a code that is not an error
        // the caller knows (`Again` would make it call again), breaks the
        // protocol.
        let known = |n: i64| {
            Errno::ALL
                .iter()
                .any(|e| *e != Errno::Again && e.code() as i64 == n)
        };
        if n > cap as i64 || (n < 0 && !known(n)) {
            return Err(Ok(Errno::Inval));
        }
        if n > 0 {
            take(server_mem(s), (buf + len) as usize, n as usize).map_err(Ok)?;
        }
        Ok(n)
    });
    match result {
        Ok(n) => {
            if n >= 0 {
                p.shared.ipc.count(1, n as usize, len as usize);
            }
            if p.shared.kill_requested() {
                drop(server.take());
            }
            Ok(n)
        }
        Err(Ok(e)) => Err(e),
        Err(Err(trap)) => {
            p.fail(server, &trap);
            Err(Errno::PeerDied)
        }
    }
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
            let call = HostCall {
                caller: caller.id,
                caller_name: &caller.name,
            };
            let mut reply = Vec::new();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (h.0)(&call, request, &mut reply)
            }));
            result.map_err(|_| Errno::PeerDied)??;
            return Ok(reply);
        }
        let p = handler.downcast_ref::<Passive>().ok_or(Errno::BadHandle)?;
        passive_bytes(p, request).await
    })
}

/// A failed step of a passive call: an error for the caller, or a trap
/// that ends the server.
type Step<T> = Result<T, Result<Errno, wasmtime::Error>>;

/// Runs `f` as the handler of `p` on this thread, refusing to nest deeper
/// than [`MAX_DEPTH`].
fn enter<T>(p: &Passive, f: impl FnOnce() -> Step<T>) -> Step<T> {
    let depth = DEPTH.with(Cell::get);
    if depth >= MAX_DEPTH {
        return Err(Ok(Errno::Deadlock));
    }
    RUNNING.with(|r| {
        let mut v = r.get();
        v[depth] = p as *const Passive as usize;
        r.set(v);
    });
    DEPTH.with(|d| d.set(depth + 1));
    struct Leave(usize);
    impl Drop for Leave {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(self.0));
        }
    }
    let _leave = Leave(depth);
    f()
}

/// The server's request-and-reply buffer, at least `need` bytes, from its
/// `warden_passive_alloc` export (0 there: out of memory).
fn buffer(s: &mut Server, need: u32) -> Step<u32> {
    if s.buf.1 >= need && s.buf.0 != 0 {
        return Ok(s.buf.0);
    }
    let at = s.alloc.call(&mut s.store, need.max(64)).map_err(Err)?;
    if at == 0 {
        return Err(Ok(Errno::NoMem));
    }
    s.buf = (at, need.max(64));
    Ok(at)
}

fn server_mem(s: &Server) -> GuestMem<'_> {
    GuestMem::of(s.memory, &s.store)
}

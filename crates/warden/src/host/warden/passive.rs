//! Passive services: a passive task's store, how its handler is run on
//! the caller's thread, and how it ends (see [`super::direct`] for the
//! calls that reach it).
//!
//! # A passive call
//!
//! 1. The request is checked in the caller (quotas, pointers; direct calls
//!    carry bytes only, so a request with handles is `Inval`).
//! 2. The caller waits for the service: one call runs in it at a time,
//!    the others wait in FIFO order ([`FifoLock`]). This is an ordinary
//!    wait: a caller killed here is gone at once.
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

use crate::fifo::FifoLock;
use crate::host::guest::range;
use crate::host::guest::GuestMem;
use crate::host::TaskData;
use crate::ipc::service::ServiceRef;
use crate::ipc::Errno;
use crate::task::{KillSignal, TaskShared, TaskStatus};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasmtime::{Store, TypedFunc};

/// Direct calls nested on one thread, at most.
pub const MAX_DEPTH: usize = 2;

thread_local! {
    /// The passive services whose handlers this thread is running,
    /// innermost last (to refuse re-entry and bound nesting).
    // One cell per level: entering a level is one store, not a copy of
    // the whole array patched and written back.
    static RUNNING: [Cell<usize>; MAX_DEPTH] = const { [const { Cell::new(0) }; MAX_DEPTH] };
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// A passive task: its store while it lives, and how it ends.
pub(crate) struct Passive {
    /// The server task.
    pub(crate) shared: Arc<TaskShared>,
    /// The server's store; `None` once it has ended.
    pub(super) server: FifoLock<Option<Server>>,
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
    /// Its store, whose data records its memory (`MemoryCache::set`).
    pub(crate) store: Store<TaskData>,
    pub(crate) alloc: TypedFunc<u32, u32>,
    pub(crate) handler: TypedFunc<(u32, u32, u32, u32), i64>,
    /// The request-and-reply buffer `alloc` gave, and its size.
    buf: (u32, u32),
}

impl Server {
    /// A server ready for calls.
    pub(crate) fn new(
        store: Store<TaskData>,
        alloc: TypedFunc<u32, u32>,
        handler: TypedFunc<(u32, u32, u32, u32), i64>,
    ) -> Server {
        Server {
            store,
            alloc,
            handler,
            buf: (0, 0),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // IPC rule 5: nothing may reach the memory once it is released.
        self.store.data_mut().ipc_mut().owned.revoke_all();
    }
}

/// One call's running time: wall time from its start until the first
/// epoch tick that sees it, then the thread's CPU clock. A call shorter
/// than a tick (most) costs two readings of [`crate::clock::ticks`]; a longer one
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
            .store(crate::clock::ticks::now(), Ordering::Relaxed);
    }

    /// Ends the call: the CPU it used, ns (see [`CallClock::used`]).
    fn end(&self) -> u64 {
        // Only the calling thread, which holds the service, writes the
        // clock: a plain store suffices (a swap is a locked instruction).
        let start = self.start.load(Ordering::Relaxed);
        self.start.store(0, Ordering::Relaxed);
        match self.cpu_base.load(Ordering::Relaxed) {
            0 => crate::clock::ticks::ns_since(start),
            base => {
                self.wall_before.load(Ordering::Relaxed)
                    + crate::clock::thread_cpu_ns().saturating_sub(base)
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
            let before = crate::clock::ticks::ns_since(start);
            self.wall_before.store(before, Ordering::Relaxed);
            self.cpu_base
                .store(crate::clock::thread_cpu_ns().max(1), Ordering::Relaxed);
            return before;
        }
        self.wall_before.load(Ordering::Relaxed)
            + crate::clock::thread_cpu_ns().saturating_sub(base)
    }
}

impl Passive {
    /// A passive task not yet started.
    pub(crate) fn new(shared: Arc<TaskShared>, call_limit_ns: u64) -> Arc<Passive> {
        // Once per process, here rather than in the first call.
        crate::clock::ticks::calibrate();
        Arc::new(Passive {
            shared,
            server: FifoLock::new(None),
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
        if let Some(mut server) = self.server.try_lock() {
            drop(server.take());
        }
    }

    /// Ends the server after a failed call: drops its store, closes the
    /// service and finishes its task with the failure's status.
    fn fail(&self, server: &mut Option<Server>, e: &wasmtime::Error) {
        let status = crate::host::classify(e, &self.shared, "passive call: ");
        drop(server.take());
        self.end(status);
    }
}

impl crate::task::Serving for Passive {
    fn end(&self, status: TaskStatus) {
        Passive::end(self, status)
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

/// A passive call for a client that is not a task (the web server's
/// service routes): the request's bytes in, the reply's out.
pub(super) async fn passive_bytes(p: &Passive, request: &[u8]) -> Result<Vec<u8>, Errno> {
    let mut server = p.server.lock().await;
    let cap = match server.as_ref() {
        Some(s) => s.store.data().ipc().grants.max_message_bytes as u32,
        None => return Err(Errno::PeerDied),
    };
    let len = u32::try_from(request.len()).map_err(|_| Errno::Quota)?;
    let mut reply = Vec::new();
    let n = invoke(
        p,
        &mut server,
        (len, cap),
        None,
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
/// caller `Inval`; one that traps ends the server (`PeerDied`). The calls
/// the handler makes are spans under `trace`, the call's context, if it
/// is traced (see `traced`).
pub(super) fn invoke(
    p: &Passive,
    server: &mut Option<Server>,
    (len, cap): (u32, u32),
    trace: Option<crate::telemetry::Context>,
    fill: impl FnOnce(GuestMem, usize),
    take: impl FnOnce(GuestMem, usize, usize) -> Result<(), Errno>,
) -> Result<i64, Errno> {
    if p.shared.kill_requested() {
        drop(server.take());
        return Err(Errno::PeerDied);
    }
    let s = server.as_mut().ok_or(Errno::PeerDied)?;
    // The reply starts on a 16-byte boundary after the request, so that
    // copying it out to an aligned buffer goes a word at a time.
    let at = len.checked_next_multiple_of(16).ok_or(Errno::Quota)?;
    let need = at.checked_add(cap).ok_or(Errno::Quota)?;
    let result = enter(p, || {
        let buf = buffer(s, need)?;
        let mem = server_mem(s);
        range(mem.len(), buf as i32, need as u64).map_err(|_| Ok(Errno::Inval))?;
        fill(mem, buf as usize);
        p.clock.begin();
        // No handle names a passive call: -1 marks it served.
        s.store.data_mut().ipc_mut().serving = trace.map(|t| (-1, t));
        let r = s.handler.call(&mut s.store, (buf, len, buf + at, cap));
        s.store.data_mut().ipc_mut().serving = None;
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
            take(server_mem(s), (buf + at) as usize, n as usize).map_err(Ok)?;
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

/// A failed step of a passive call: an error for the caller, or a trap
/// that ends the server.
type Step<T> = Result<T, Result<Errno, wasmtime::Error>>;

/// Whether this thread may call `p`'s handler: it is not running it
/// already (a handler calling back into its own service would wait for
/// itself).
pub(super) fn invoke_nested_ok(p: &Passive) -> bool {
    let me = p as *const Passive as usize;
    !RUNNING.with(|r| r[..DEPTH.with(Cell::get)].iter().any(|c| c.get() == me))
}

/// Runs `f` as the handler of `p` on this thread, refusing to nest deeper
/// than [`MAX_DEPTH`].
fn enter<T>(p: &Passive, f: impl FnOnce() -> Step<T>) -> Step<T> {
    let depth = DEPTH.with(Cell::get);
    if depth >= MAX_DEPTH {
        return Err(Ok(Errno::Deadlock));
    }
    RUNNING.with(|r| r[depth].set(p as *const Passive as usize));
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

fn server_mem(s: &mut Server) -> GuestMem<'_> {
    GuestMem::of(&mut s.store).expect("a passive server has a memory")
}

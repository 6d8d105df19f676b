//! A task's life as a future, and its epoch deadline callback.

use crate::host::TaskData;
use crate::host::{classify, Incoming};
use crate::module::{Code, Linked};
use crate::task::{KillSignal, TaskShared, TaskStatus};
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wasmtime::{Extern, ModuleExport, Store, TypedFunc, UpdateDeadline};

/// The deadline callback, run every epoch tick while the task runs: ends
/// the task if it was killed or used up its CPU time, yields if it was
/// suspended, if a limit elsewhere needs the worker's attention (an
/// ancestor's, or the client's whose context it runs on) or at the end of
/// its slice, and otherwise lets it continue for one more tick.
pub(super) fn on_tick(shared: &TaskShared, slice_ticks: u64) -> wasmtime::Result<UpdateDeadline> {
    let state = shared.state.load();
    if state.is_killed() {
        return Err(KillSignal(shared.kill_reason()).into());
    }
    if state.is_suspended() {
        return Ok(UpdateDeadline::Yield(1));
    }
    if let Some(why) = shared.maps.get().and_then(|m| m.take_hit()) {
        // Its host code touched a revoked or read-only mapping (see
        // `crate::mapping`): it ends as its own code would have.
        return Err(wasmtime::Error::msg(why));
    }
    let donor = shared.inherit.donor();
    if shared.cpu.limited || donor.as_ref().is_some_and(|d| d.task.cpu.limited) {
        crate::cpu::reconcile();
        if let Some((task, reason)) = shared.cpu_breach() {
            if task.id == shared.id && !shared.cpu_limit_notify() {
                shared.request_kill(&reason);
                return Err(KillSignal(reason).into());
            }
            // Suspended for its parent, or an ancestor's limit: the worker
            // acts after this slice.
            return Ok(UpdateDeadline::Yield(1));
        }
        if donor.is_some_and(|d| d.task.cpu_breach().is_some()) {
            return Ok(UpdateDeadline::Yield(1));
        }
    }
    // Outside a worker's poll (where no task runs) it yields.
    let Some(now) = crate::executor::ticks_now() else {
        return Ok(UpdateDeadline::Yield(1));
    };
    let ran = now.saturating_sub(shared.slice_start_tick.load(Ordering::Relaxed));
    Ok(if ran >= slice_ticks {
        UpdateDeadline::Yield(1)
    } else {
        UpdateDeadline::Continue(1)
    })
}

/// A task's whole life as a future: make its store (on the worker that
/// first polls it, see [`super::store::StoreSeed`]), instantiate, run
/// `_start`, classify the ending (sent to `ended` at once, if given). The
/// store is dropped when the future completes or is dropped; a task
/// killed before its first poll never has one.
///
/// The future lives as long as the task, sized for the largest state it
/// passes through; what it needs only at the start is boxed so that a
/// resident task does not carry it (see [`start`]). The seed, passed by
/// value, took its 1.1 KiB twice over (an async function's argument and
/// the local it moves into), in every live task.
pub(super) async fn run(
    module: Arc<crate::module::LoadedModule>,
    seed: Box<super::store::StoreSeed>,
    shared: Arc<TaskShared>,
    ended: Option<tokio::sync::oneshot::Sender<TaskStatus>>,
    incoming: Option<Box<Incoming>>,
) -> TaskStatus {
    let began = crate::clock::ticks::now();
    // Moved into the block so that its box is freed at the block's end,
    // not with the future.
    let store = {
        let seed = seed;
        seed.grow(module.engine())
    };
    let mut task = ReleaseOnDrop {
        store: ManuallyDrop::new(store),
        shared,
    };
    task.shared
        .create_ns
        .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
    let status = start(&module, &mut task.store, &task.shared, incoming).await;
    if let Some(tx) = ended {
        let _ = tx.send(status.clone());
    }
    status
}

/// Linear memories at least this large go back to the system as soon as
/// their task ends.
const EAGER_RELEASE_BYTES: usize = 1 << 20;

/// A task's store, which on drop first revokes every permit and memory
/// object the task owns (ipc rule 5: nothing may reach its memory once it
/// is released), then decides where the memory's pages go:
///
/// - A small memory stays *warm*: the pooling allocator resets the pages
///   the task wrote (up to `setup::KEEP_MEMORY`) in place, so the slot's
///   next task, most likely of the same module, takes no page faults and
///   no other core's TLB is flushed. Warm pages are bounded for the whole
///   runtime by `setup::WARM_MEMORY_BYTES`: past it, the memory is
///   released as a large one is.
/// - A large memory (or one past the bound) is handed back to the system
///   at once, with `madvise`; the pooling allocator would decommit it
///   only with the next batch of freed slots (see `DECOMMIT_BATCH`),
///   which on a quiet system may be never.
///
/// The time all this takes is the task's `teardown_ns`. It is dropped
/// whether the task ended or its future was dropped by a kill, so the
/// revocation happens on every path.
struct ReleaseOnDrop {
    store: ManuallyDrop<Store<TaskData>>,
    shared: Arc<TaskShared>,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let began = crate::clock::ticks::now();
        let store = &mut *self.store;
        store.data_mut().revoke_owned();
        if let Some(maps) = self.shared.maps.get() {
            // Before the memory goes back to the pool: no object's page
            // may stay in the slot.
            maps.release();
        }
        if let Some(memory) = store.data().memory.memory {
            let (ptr, len) = (memory.data_ptr(&*store), memory.data_size(&*store));
            if len >= EAGER_RELEASE_BYTES || !super::setup::may_stay_warm(store.engine()) {
                // SAFETY: the range is this store's linear memory, which
                // stays mapped until the store is dropped just below;
                // nothing uses it any more (see above). MADV_DONTNEED only
                // drops page contents: the pages read back as the module's
                // image or zeros, the state the pooling allocator resets
                // the slot to anyway (and, finding no page written, it
                // then keeps none of them).
                unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
            }
        }
        // SAFETY: dropped once, here, and never used after.
        unsafe { ManuallyDrop::drop(&mut self.store) };
        self.shared
            .teardown_ns
            .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
    }
}

/// Instantiates the task's code and runs its entry: a core module's
/// `_start`, a command component's `wasi:cli/run`, an HTTP component's
/// `wasi:http/incoming-handler.handle` for its request.
async fn start(
    module: &crate::module::LoadedModule,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
    incoming: Option<Box<Incoming>>,
) -> TaskStatus {
    match (&module.code, incoming) {
        (Code::Core { pre, exports }, _) => start_core(pre, exports, store, shared).await,
        (Code::Component(Linked::Command(pre)), _) => start_command(pre, store, shared).await,
        (Code::Component(Linked::Client(pre)), _) => {
            let component = pre.instance_pre().component();
            if let Err(why) = crate::host::typed_bind(store.data_mut(), component).await {
                return TaskStatus::Trapped(format!("cannot start: {why}"));
            }
            start_command(pre, store, shared).await
        }
        (Code::Component(Linked::Reactor(_)), _) => TaskStatus::Trapped(
            "cannot start: the component exports interfaces and no wasi:cli/run: it serves \
             them as a task given `serves`"
                .into(),
        ),
        (Code::Component(Linked::Proxy(pre)), Some(incoming)) => {
            start_proxy(pre, *incoming, store, shared).await
        }
        (Code::Component(Linked::Proxy(_)), None) => {
            TaskStatus::Trapped("cannot start: an HTTP component runs only for a request".into())
        }
    }
}

async fn start_core(
    pre: &wasmtime::InstancePre<TaskData>,
    exports: &crate::module::Exports,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
) -> TaskStatus {
    let began = crate::clock::ticks::now();
    // Boxed: Wasmtime's instantiation future is about 1 KiB, five times
    // the `_start` call's that follows it, and unboxed it would set the
    // size of every task's future for the task's whole life.
    let instance = match Box::pin(pre.instantiate_async(&mut *store)).await {
        Ok(i) => i,
        Err(e) => return classify(&e, shared, "cannot start: "),
    };
    shared
        .create_ns
        .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
    let mut export = |e: &Option<ModuleExport>| {
        e.as_ref()
            .and_then(|e| instance.get_module_export(&mut *store, e))
    };
    let memory = export(&exports.memory).and_then(Extern::into_memory);
    let start = export(&exports.start).and_then(Extern::into_func);
    let base = memory.map_or(std::ptr::null_mut(), |m| m.data_ptr(&*store));
    store.data_mut().memory.set(memory, base);
    let Some(start) = start else {
        return TaskStatus::Trapped("cannot start: no `_start` function".into());
    };
    let handed = shared
        .handed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(state) = handed {
        let restored = crate::host::handover::restore(&instance, store, &state.0);
        if let Err(why) = Box::pin(restored).await {
            return TaskStatus::Trapped(format!("cannot start: the state handed over: {why}"));
        }
    }
    // SAFETY: loading the module checked that its `_start` takes and
    // returns nothing (`module::Entry::check`), and `start` is that export
    // of an instance of that module.
    let start = unsafe { TypedFunc::<(), ()>::new_unchecked(&*store, start) };
    match start.call_async(&mut *store, ()).await {
        Ok(()) => TaskStatus::Exited(0),
        Err(e) => classify(&e, shared, ""),
    }
}

/// A command component: instantiated (its start functions run), then
/// `wasi:cli/run`, whose `err` is exit code 1, as `wasmtime run` has it.
async fn start_command(
    pre: &wasmtime_wasi::p2::bindings::CommandPre<TaskData>,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
) -> TaskStatus {
    let began = crate::clock::ticks::now();
    let command = match Box::pin(pre.instantiate_async(&mut *store)).await {
        Ok(c) => c,
        Err(e) => return classify(&e, shared, "cannot start: "),
    };
    shared
        .create_ns
        .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
    match Box::pin(command.wasi_cli_run().call_run(&mut *store)).await {
        Ok(Ok(())) => TaskStatus::Exited(0),
        Ok(Err(())) => TaskStatus::Exited(1),
        Err(e) => classify(&e, shared, ""),
    }
}

/// An HTTP component: instantiated, then handed its request and the
/// slot of its response. Its body may still be written after `handle`
/// returns only until the store is dropped, with the task.
async fn start_proxy(
    pre: &wasmtime_wasi_http::p2::bindings::ProxyPre<TaskData>,
    incoming: Incoming,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
) -> TaskStatus {
    let began = crate::clock::ticks::now();
    let proxy = match Box::pin(pre.instantiate_async(&mut *store)).await {
        Ok(p) => p,
        Err(e) => return classify(&e, shared, "cannot start: "),
    };
    shared
        .create_ns
        .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
    let (request, out) = match incoming.enter(store.data_mut()) {
        Ok(handles) => handles,
        Err(e) => return classify(&e, shared, "cannot start: "),
    };
    let handler = proxy.wasi_http_incoming_handler();
    match Box::pin(handler.call_handle(&mut *store, request, out)).await {
        Ok(()) => TaskStatus::Exited(0),
        Err(e) => classify(&e, shared, ""),
    }
}

//! A task's life as a future, and its epoch deadline callback.

use crate::executor::Clock;
use crate::task::{KillSignal, TaskData, TaskShared, TaskStatus};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wasmtime::{InstancePre, Store, Trap, UpdateDeadline, WasmBacktrace};
use wasmtime_wasi::I32Exit;

/// The deadline callback, run every epoch tick while the task runs: ends
/// the task if it was killed or used up its CPU time, yields at the end
/// of its slice, and otherwise lets it continue for one more tick.
pub(super) fn on_tick(
    shared: &TaskShared,
    clock: &Clock,
    slice_ticks: u64,
) -> wasmtime::Result<UpdateDeadline> {
    if shared.kill_requested() {
        let reason = shared.kill_reason().unwrap_or_else(|| "killed".into());
        return Err(KillSignal(reason).into());
    }
    if shared.suspended.load(Ordering::Relaxed) {
        return Ok(UpdateDeadline::Yield(1));
    }
    if shared.limited {
        crate::cpu::reconcile();
        if let Some((task, reason)) = shared.cpu_breach() {
            if task.id == shared.id {
                if shared.cpu_limit_notify() {
                    return Ok(UpdateDeadline::Yield(1));
                }
                shared.request_kill(&reason);
                return Err(KillSignal(reason).into());
            }
            // An ancestor's limit: the worker kills it after this slice.
            return Ok(UpdateDeadline::Yield(1));
        }
    }
    let ran = clock
        .now()
        .saturating_sub(shared.slice_start_tick.load(Ordering::Relaxed));
    Ok(if ran >= slice_ticks {
        UpdateDeadline::Yield(1)
    } else {
        UpdateDeadline::Continue(1)
    })
}

/// A task's whole life as a future: instantiate, run `_start`, classify
/// the ending. The store is dropped when the future completes or is dropped.
pub(super) async fn run(
    pre: InstancePre<TaskData>,
    store: Store<TaskData>,
    shared: Arc<TaskShared>,
) -> TaskStatus {
    let mut store = ReleaseOnDrop(store);
    let status = start(pre, &mut store.0, &shared).await;
    // Revoke what the task owns before its memory goes (ipc rule 5).
    shared.release_owned();
    drop(store);
    status
}

/// Linear memories at least this large go back to the system as soon as
/// their task ends.
const EAGER_RELEASE_BYTES: usize = 1 << 20;

/// A task's store, which on drop hands a large linear memory's pages back
/// to the system at once. The pooling allocator would decommit them only
/// with the next batch of freed slots (see `DECOMMIT_BATCH`), which on a
/// quiet system may be never; small memories still wait for the batch,
/// where one `madvise` serves many tasks.
///
/// Dropped only after the task's permits and memory objects are revoked
/// (by `run` above, or by the executor before it drops the future), so
/// nothing else reads the memory any more.
struct ReleaseOnDrop(Store<TaskData>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let Some(memory) = self.0.data().ipc.memory else {
            return;
        };
        let (ptr, len) = (memory.data_ptr(&self.0), memory.data_size(&self.0));
        if len >= EAGER_RELEASE_BYTES {
            // SAFETY: the range is this store's linear memory, which stays
            // mapped until the store is dropped just after; nothing uses it
            // any more (see above). MADV_DONTNEED only drops page contents:
            // the pages read back as the module's image or zeros, the state
            // the pooling allocator resets the slot to anyway.
            unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
        }
    }
}

async fn start(
    pre: InstancePre<TaskData>,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
) -> TaskStatus {
    let instance = match pre.instantiate_async(&mut *store).await {
        Ok(i) => i,
        Err(e) => return classify(&e, shared, "cannot start: "),
    };
    let memory = instance.get_memory(&mut *store, "memory");
    store.data_mut().ipc.memory = memory;
    let start = match instance.get_typed_func::<(), ()>(&mut *store, "_start") {
        Ok(f) => f,
        Err(e) => return TaskStatus::Trapped(format!("cannot start: {e:#}")),
    };
    match start.call_async(&mut *store, ()).await {
        Ok(()) => TaskStatus::Exited(0),
        Err(e) => classify(&e, shared, ""),
    }
}

fn classify(e: &wasmtime::Error, shared: &TaskShared, context: &str) -> TaskStatus {
    if let Some(exit) = e.downcast_ref::<I32Exit>() {
        return TaskStatus::Exited(exit.0);
    }
    if let Some(kill) = e.downcast_ref::<KillSignal>() {
        return TaskStatus::Killed(kill.0.clone());
    }
    if shared.kill_requested() {
        return TaskStatus::Killed(shared.kill_reason().unwrap_or_else(|| "killed".into()));
    }
    let mut reason = match e.downcast_ref::<Trap>() {
        Some(trap) => format!("{context}{trap}"),
        None => format!("{context}{}", e.root_cause()),
    };
    if let Some(frame) = e
        .downcast_ref::<WasmBacktrace>()
        .and_then(|bt| bt.frames().first())
    {
        match frame.func_name() {
            Some(name) => reason.push_str(&format!(" (in {name})")),
            None => reason.push_str(&format!(" (in function {})", frame.func_index())),
        }
    }
    TaskStatus::Trapped(reason)
}

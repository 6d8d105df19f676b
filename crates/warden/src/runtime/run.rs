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
    mut store: Store<TaskData>,
    shared: Arc<TaskShared>,
) -> TaskStatus {
    let status = start(pre, &mut store, &shared).await;
    // Revoke what the task owns before its memory goes (ipc rule 5).
    shared.release_owned();
    drop(store);
    status
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

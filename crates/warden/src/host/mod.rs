//! The host functions guests import, one folder per import module, each
//! owning its per-task state and its `add_to_linker`:
//!
//! - `warden/`: the `warden` module (handles, calls, names, memory
//!   objects, permits, tasks, sockets, poll), its state [`TaskIpc`];
//! - `wasi/`: `wasi_snapshot_preview1` as Wasmtime defines it, with the
//!   calls whose cost a guest chooses bounded and sockets added, its
//!   state [`Preview1`];
//! - `teavm.rs`: the few `teavm` imports TeaVM's Java output needs;
//! - `component/`: WASI 0.2 for components (`wasi:cli`, `wasi:http`, …)
//!   as Wasmtime defines it, with sockets refused and outgoing HTTP
//!   held to the task's grants, its state [`Component`].
//!
//! Below them, shared by both groups: the guest's memory as host calls
//! touch it (`guest`), waiting (`wait`), active calls under way (`calls`), the sockets' byte moving, pacing
//! and charges (`sockets`, state [`TaskNet`]) and how a task's run ended
//! (`ending`). The groups never name each other; this file composes
//! their states into one [`TaskData`] and their functions into the two
//! linkers (a task's, and a passive task's synchronous one).
//!
//! Every function checks every pointer and length against the caller's
//! memory and every handle against its table, and reports failure as an
//! error code. None of them traps on a guest's bad argument: it harms
//! only the call that carried it.

/// Calls Wasmtime's own definition of a WASI function, reached as its
/// linker shim reaches it: `delegate!(caller, name(args…))`, or
/// `delegate!(sync caller, name(args…))` for one Wasmtime defines as a
/// plain function.
macro_rules! delegate {
    (sync $caller:ident, $f:ident($($arg:expr),*)) => {{
        delegate!(@call $caller, $f($($arg),*))
    }};
    ($caller:ident, $f:ident($($arg:expr),*)) => {
        async { delegate!(@call $caller, $f($($arg),*) .await) }.await
    };
    // The shim's own steps, then the call (followed by `$rest`).
    (@call $caller:ident, $f:ident($($arg:expr),*) $($rest:tt)*) => {{
        use p1::WasiSnapshotPreview1 as _;
        let fuel = wasmtime::AsContextMut::as_context_mut(&mut $caller).hostcall_fuel();
        let Some(Extern::Memory(memory)) = $caller.get_export("memory") else {
            wasmtime::bail!("missing required memory export");
        };
        let (mem, data) = memory.data_and_store_mut(&mut $caller);
        data.wasi.set_hostcall_fuel(fuel);
        let mut mem = wiggle::GuestMemory::Unshared(mem);
        p1::$f(&mut data.wasi, &mut mem, $($arg),*) $($rest)*
    }};
}

mod calls;
mod component;
mod ending;
mod guest;
mod sockets;
mod teavm;
mod wait;
mod warden;
mod wasi;

pub(crate) use component::unprovided_import;
pub(crate) use component::Response as HttpResponse;
pub use component::PROVIDED_PACKAGES;
pub(crate) use component::{network as component_network, Component, Incoming};
pub(crate) use ending::classify;
pub(crate) use guest::MemoryCache;
pub(crate) use sockets::{ChildNet, TaskNet};
pub use teavm::{refusal as teavm_refusal, MODULE as TEAVM_MODULE};
pub(crate) use warden::{call_bytes, HostService, Passive, Server};
pub(crate) use warden::{on_tick as passive_on_tick, Bindings, Grants, NameMap, Spawner, TaskIpc};
pub use warden::{HostCall, HostHandler, FUNCTIONS, MODULE};
pub(crate) use wasi::{Cli, Preview1, Served, Sockets, ThreadRandom};
pub use wasi::{Strings, MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};

use crate::limiter::MemoryBudget;
use crate::output::Sink;
use crate::task::TaskShared;
use std::sync::Arc;
use wasmtime::Linker;

/// The data of a task's store: each import group's state, and what they
/// share.
pub(crate) struct TaskData {
    /// The task, as the rest of the runtime sees it.
    pub(crate) shared: Arc<TaskShared>,
    /// Wasmtime's WASI preview-1 context: files, clocks, standard streams.
    pub(crate) wasi: wasmtime_wasi::p1::WasiP1Ctx,
    /// The WASI group's own state: arguments and environment, open files,
    /// socket descriptors.
    pub(crate) preview1: Preview1,
    /// The `warden` group's state.
    pub(crate) ipc: TaskIpc,
    /// What both groups' sockets share: grants, flow, receive budget.
    /// Boxed: inline, it would take the store past the allocator's 2 KiB
    /// size class, to its 2.5 KiB one, for every task.
    pub(crate) net: Box<TaskNet>,
    /// Its memory budget, the store's limiter.
    pub(crate) budget: MemoryBudget,
    /// Its exported memory, as host calls find it.
    pub(crate) memory: MemoryCache,
    /// Its output streams, which its children share.
    pub(crate) sinks: (Sink, Sink),
    /// The component group's state, in a component task's store only.
    pub(crate) component: Option<Box<Component>>,
    /// Epoch ticks in its scheduling slice (the deadline callback's
    /// setting, here so that the callback captures nothing: a closure
    /// with no state is boxed without an allocation).
    pub(crate) slice_ticks: u64,
}

/// Every import a task may have: WASI preview 1 (Wasmtime's, async, with
/// Warden's bounds and sockets), `warden` and `teavm`.
pub(crate) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasi::add_to_linker(linker)?;
    warden::add_to_linker(linker)?;
    teavm::add_to_linker(linker)
}

/// Every import a component task may have: WASI 0.2 (see `component`).
pub(crate) fn add_to_component_linker(
    linker: &mut wasmtime::component::Linker<TaskData>,
) -> wasmtime::Result<()> {
    component::add_to_linker(linker)
}

/// A passive task's imports: WASI (synchronous), the `warden` functions
/// that never wait, and `teavm`. Nothing in it waits, so the store never
/// needs a fiber and runs on its caller's.
pub(crate) fn add_to_passive_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasi::add_sync_to_linker(linker)?;
    warden::add_passive_to_linker(linker)?;
    teavm::add_to_linker(linker)
}

//! The host functions guests import, one folder per import group, each
//! owning its per-task state, how that state is built from the task's
//! spec (`prepare`), and the functions it adds to each kind of linker:
//!
//! - `warden/`: the `warden` module (handles, calls, names, memory
//!   objects, permits, tasks, sockets, poll);
//! - `wasi/`: `wasi_snapshot_preview1` as Wasmtime defines it, with the
//!   calls whose cost a guest chooses bounded, sockets added, and
//!   directories served by file-system tasks;
//! - `teavm.rs`: the few `teavm` imports TeaVM's Java output needs;
//! - `component/`: WASI 0.2 for components (`wasi:cli`, `wasi:http`, …)
//!   as Wasmtime defines it, with TCP and name lookup on Warden's own
//!   sockets and outgoing HTTP held to the task's grants.
//!
//! A group's state is a type whose insides only its own folder sees
//! (`warden::State(TaskIpc)`, …), opened by accessors that folder
//! defines on [`TaskData`]: the compiler, not a convention, keeps one
//! group out of another's state. What the groups share is the task's
//! [`Core`] (the task itself, its memory, budget and output, Wasmtime's
//! WASI context, its network), which `TaskData` dereferences to. Adding
//! a group is one folder (a `State` implementing `Group`) and one line
//! in `groups!` below.
//!
//! Below the groups, shared files: the guest's memory as host calls
//! touch it (`guest`), waiting (`wait`), active calls under way
//! (`calls`), the sockets' byte moving, pacing and charges (`sockets`,
//! state [`TaskNet`]) and how a task's run ended (`ending`). The groups
//! never name each other (a test in `layers.rs` reads their paths).
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
        // The memory recorded at the task's start, or (before it: a start
        // function's calls) looked up by name.
        let memory = match $caller.data().memory.memory {
            Some(m) => m,
            None => match $caller.get_export("memory") {
                Some(Extern::Memory(m)) => m,
                _ => wasmtime::bail!("missing required memory export"),
            },
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
mod typed;
mod wait;
mod warden;
mod wasi;

use component::provided as provided_import;
pub(crate) use component::unprovided_import;
pub(crate) use component::Response as HttpResponse;
pub use component::PROVIDED_PACKAGES;
pub(crate) use component::{network as component_network, Incoming};
pub(crate) use ending::classify;
pub(crate) use guest::MemoryCache;
pub(crate) use sockets::{ChildNet, TaskNet};
pub use teavm::{refusal as teavm_refusal, MODULE as TEAVM_MODULE};
pub(crate) use typed::{add_stubs as typed_stubs, bind as typed_bind, serve as typed_serve};
pub(crate) use typed::{call_timeout, iface_matches, set_call_timeout};
pub(crate) use typed::{check_pair as typed_check, served_exports, typed_imports, TypedServer};
pub(crate) use typed::{serve_bytes as typed_serve_bytes, unbound as typed_unbound};
pub(crate) use typed::{CallAnswer, MakeArgs};
pub(crate) use warden::upgrade as handover;
pub(crate) use warden::{call_bytes, HostService, Passive, Server};
pub(crate) use warden::{on_tick as passive_on_tick, NameMap, Parent, Spawner};
pub use warden::{HostCall, HostHandler, FUNCTIONS, MODULE};
pub(crate) use wasi::{Cli, Sockets, ThreadRandom};
pub use wasi::{Strings, MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};

use crate::ipc::Kernel;
use crate::limiter::MemoryBudget;
use crate::net::grant::Grant;
use crate::output::Sink;
use crate::task::{TaskShared, TaskSpec};
use std::sync::{Arc, Weak};
use wasmtime::Linker;

/// One import group: its per-task state, how that state is built, and
/// the functions it adds to each kind of linker. The state's insides are
/// the group's own (a type whose fields only its folder sees); what the
/// groups share is the task's [`Core`].
trait Group: Sized {
    /// The group's state of a new task.
    fn prepare(p: &mut Prepare<'_>) -> Result<Self, String>;
    /// Its functions for a task's (async) store.
    fn add_to_linker(_: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        Ok(())
    }
    /// Its functions for a passive task's store, none of which waits.
    fn add_to_passive_linker(_: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        Ok(())
    }
    /// Its interfaces for a component task.
    fn add_to_component_linker(
        _: &mut wasmtime::component::Linker<TaskData>,
    ) -> wasmtime::Result<()> {
        Ok(())
    }
}

/// What a task's groups are built from: its spec and what the runtime
/// has made for it. An input one group consumes is an `Option` it takes.
pub(crate) struct Prepare<'a> {
    /// The task's spec.
    pub(crate) spec: &'a TaskSpec,
    /// The task, as the rest of the runtime sees it.
    pub(crate) shared: &'a Arc<TaskShared>,
    /// The runtime's kernel objects (names, services, devices).
    pub(crate) kernel: &'a Arc<Kernel>,
    /// The runtime, for spawning and controlling children.
    pub(crate) spawner: Weak<dyn Spawner>,
    /// Whether the task is a component.
    pub(crate) component: bool,
    /// The addresses it may connect to.
    pub(crate) connect: &'a [Grant],
    /// Its arguments and environment.
    pub(crate) cli: Option<Cli>,
    /// Its sockets as WASI descriptors (its preopened listeners).
    pub(crate) sockets: Option<Sockets>,
    /// What its parent gives it: kernel objects for its handle table, and
    /// the names it bound.
    pub(crate) child: Option<(Vec<crate::ipc::Object>, Option<Arc<NameMap>>)>,
}

/// The import groups, in the order their functions enter a linker (a
/// later one may shadow an earlier one's). One line per group: its field
/// in the store's data and its state type.
macro_rules! groups {
    ($($field:ident: $state:ty),* $(,)?) => {
        /// Every group's state of one task. (A group without state, such
        /// as `teavm`, has a field that is never read.)
        #[allow(dead_code)]
        pub(crate) struct Groups {
            $($field: $state,)*
        }

        impl Groups {
            /// Each group's state of a new task.
            pub(crate) fn prepare(mut p: Prepare<'_>) -> Result<Groups, String> {
                Ok(Groups { $($field: <$state as Group>::prepare(&mut p)?,)* })
            }
        }

        /// Every import a task may have.
        pub(crate) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
            $(<$state as Group>::add_to_linker(linker)?;)*
            Ok(())
        }

        /// A passive task's imports: nothing in them waits, so the store
        /// never needs a fiber and runs on its caller's.
        pub(crate) fn add_to_passive_linker(
            linker: &mut Linker<TaskData>,
        ) -> wasmtime::Result<()> {
            $(<$state as Group>::add_to_passive_linker(linker)?;)*
            Ok(())
        }

        /// Every import a component task may have.
        pub(crate) fn add_to_component_linker(
            linker: &mut wasmtime::component::Linker<TaskData>,
        ) -> wasmtime::Result<()> {
            $(<$state as Group>::add_to_component_linker(linker)?;)*
            Ok(())
        }
    };
}

groups! {
    wasi: wasi::State,
    warden: warden::State,
    teavm: teavm::State,
    component: component::State,
    typed: typed::State,
}

/// What every group shares of a task: the task itself, its memory and
/// budget, its output, Wasmtime's WASI context and its network.
pub(crate) struct Core {
    /// The task, as the rest of the runtime sees it.
    pub(crate) shared: Arc<TaskShared>,
    /// Wasmtime's WASI context: files, clocks, standard streams, and the
    /// resource table a component's interfaces share.
    pub(crate) wasi: wasmtime_wasi::p1::WasiP1Ctx,
    /// What the groups' sockets share: grants, flow, receive budget.
    /// Boxed: inline, it would take the store past the allocator's 2 KiB
    /// size class, to its 2.5 KiB one, for every task.
    pub(crate) net: Box<TaskNet>,
    /// Its memory budget, the store's limiter.
    pub(crate) budget: MemoryBudget,
    /// Its exported memory, as host calls find it.
    pub(crate) memory: MemoryCache,
    /// Its output streams, which its children share.
    pub(crate) sinks: (Sink, Sink),
    /// Epoch ticks in its scheduling slice (the deadline callback's
    /// setting, here so that the callback captures nothing: a closure
    /// with no state is boxed without an allocation).
    pub(crate) slice_ticks: u64,
}

/// The data of a task's store: what the groups share, and each group's
/// own state, which only that group can open.
pub(crate) struct TaskData {
    core: Core,
    groups: Groups,
}

impl TaskData {
    /// A task's store data, from its core and its groups' states.
    pub(crate) fn new(core: Core, groups: Groups) -> TaskData {
        TaskData { core, groups }
    }

    /// Revokes every grant of the task's memory it made or that was made
    /// on its behalf (permits, memory objects, a buffer lent for a file
    /// read in flight), before its memory is released (its run has ended).
    pub(crate) fn revoke_owned(&mut self) {
        self.revoke_ipc_owned();
        self.revoke_wasi_lent();
    }
}

impl std::ops::Deref for TaskData {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl std::ops::DerefMut for TaskData {
    fn deref_mut(&mut self) -> &mut Core {
        &mut self.core
    }
}

//! The `warden` import module: handles, calls, names, memory objects,
//! permits, tasks, sockets and `poll`, one file per group of functions.
//! Its per-task state is [`TaskIpc`] (`state.rs`).
//!
//! The functions and their Wasm signatures are listed in [`FUNCTIONS`];
//! `sdk/c/warden.h` declares the same imports. Failures are negative
//! [`Errno`](crate::ipc::Errno) codes.
//!
//! Inside, lowest first: `state` and `message` (a message's objects);
//! `active` (calls to a task's service loop) and `passive` (a passive
//! task's handler run on the caller's thread); `direct` (passive and host
//! services behind a portal); then the functions: `ipc`, `handles`,
//! `names`, `mem`, `permit`, `task`, `net`, `poll`, `device`; and
//! `kernel`, the same objects for components (`warden:kernel`).

mod active;
mod device;
mod direct;
mod exchange;
mod handles;
mod ipc;
mod kernel;
mod mem;
mod message;
mod names;
mod net;
mod passive;
mod permit;
mod poll;
mod state;
mod supervise;
mod task;
mod traced;
pub(crate) mod upgrade;

pub(crate) use direct::{call_bytes, HostService};
pub use direct::{HostCall, HostHandler};
pub(crate) use passive::{on_tick, Passive, Server};
pub(crate) use state::{NameMap, Parent, Spawner};

use super::guest::ret64;
use super::{Core, Prepare, TaskData};
use state::{Bindings, Grants, TaskIpc};
use std::sync::Arc;
use wasmtime::{Caller, Linker};

/// The `warden` group's state of one task: its handle table, calls,
/// grants, names and children. Only this folder opens it.
pub(crate) struct State(TaskIpc);

impl super::Group for State {
    fn prepare(p: &mut Prepare<'_>) -> Result<State, String> {
        let mut handles = crate::ipc::HandleTable::new(p.spec.ipc.max_handles, p.shared.clone());
        let (granted, names) = match p.child.take() {
            Some((grants, names)) => (state::grant(&mut handles, grants)?, names),
            None => (Vec::new(), None),
        };
        Ok(State(TaskIpc {
            handles,
            call_slot: Default::default(),
            in_flight: None,
            traced_began: None,
            serving: None,
            grants: Grants::of(p.spec),
            kernel: p.kernel.clone(),
            spawner: p.spawner.clone(),
            owned: Default::default(),
            // Only a task that may spawn children needs its spec later.
            spec: (!p.spec.ipc.modules.is_empty()).then(|| Arc::new(p.spec.clone())),
            granted,
            names,
            child_names: Bindings::new(p.shared.clone()),
            poll: None,
        }))
    }

    fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_to_linker(linker)
    }

    fn add_to_passive_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_passive_to_linker(linker)
    }

    fn add_to_component_linker(
        linker: &mut wasmtime::component::Linker<TaskData>,
    ) -> wasmtime::Result<()> {
        kernel::add_to_linker(linker)
    }
}

impl TaskData {
    /// This group's state.
    fn ipc(&self) -> &TaskIpc {
        &self.groups.warden.0
    }

    /// This group's state, to change.
    fn ipc_mut(&mut self) -> &mut TaskIpc {
        &mut self.groups.warden.0
    }

    /// This group's state and the shared core, borrowed apart.
    fn warden_parts(&mut self) -> (&mut TaskIpc, &mut Core) {
        (&mut self.groups.warden.0, &mut self.core)
    }

    /// Revokes the permits and memory objects the task created (its run
    /// has ended; see `TaskData::revoke_owned`).
    pub(super) fn revoke_ipc_owned(&mut self) {
        self.ipc_mut().owned.revoke_all();
    }
}

/// The import module name.
pub const MODULE: &str = "warden";

/// Every host function: name, parameter types, result type (Wasm text
/// notation). A test instantiates a guest importing all of them.
pub const FUNCTIONS: &[(&str, &str, &str)] = &[
    ("close", "i32", "i32"),
    ("dup", "i32", "i32"),
    ("service_create", "", "i32"),
    ("portal_create", "i32", "i32"),
    ("portal_revoke", "i32", "i32"),
    ("call", "i32 i32 i32 i32 i32 i32 i32 i32 i32", "i64"),
    ("call_fast", "i32 i32 i32 i32 i32 i32 i32 i32 i32", "i64"),
    (
        "call_timeout",
        "i32 i32 i32 i32 i32 i32 i32 i32 i32 i64",
        "i64",
    ),
    ("recv", "i32 i32 i32 i32 i32 i32", "i64"),
    ("reply", "i64 i32 i32 i32 i32", "i32"),
    ("call_origin", "i64 i32 i32", "i32"),
    ("name_register", "i32 i32 i32", "i32"),
    ("name_lookup", "i32 i32 i64", "i32"),
    ("mem_create", "i64", "i32"),
    ("mem_view", "i32 i64 i64 i32", "i32"),
    ("mem_read", "i32 i64 i32 i32", "i64"),
    ("mem_write", "i32 i64 i32 i32", "i64"),
    ("mem_size", "i32", "i64"),
    ("mem_revoke", "i32", "i32"),
    ("mem_map", "i32 i64 i64 i32 i32", "i32"),
    ("mem_unmap", "i32 i32", "i32"),
    ("permit_grant", "i32 i32 i32", "i32"),
    ("permit_read", "i32 i64 i32 i32", "i64"),
    ("permit_write", "i32 i64 i32 i32", "i64"),
    ("permit_revoke", "i32", "i32"),
    ("permit_map", "i32 i64 i64 i32 i32", "i32"),
    ("module_lookup", "i32 i32", "i32"),
    ("task_spawn", "i32 i32 i32 i32 i32 i32", "i32"),
    ("task_kill", "i32", "i32"),
    ("task_wait", "i32 i64 i32", "i32"),
    ("task_suspend", "i32", "i32"),
    ("task_resume", "i32", "i32"),
    ("task_event", "i32 i64 i32", "i32"),
    ("task_raise", "i32 i64 i64", "i32"),
    ("supervisor_create", "i32", "i32"),
    ("supervisor_spawn", "i32 i32 i32 i32 i32 i32 i32 i32", "i32"),
    ("supervisor_wait", "i32 i64 i32", "i32"),
    ("supervisor_child", "i32 i32", "i32"),
    ("task_granted", "i32", "i32"),
    ("namespace_bind", "i32 i32 i32", "i32"),
    ("tcp_listen", "i32 i32", "i32"),
    ("tcp_accept", "i32 i64", "i32"),
    ("tcp_connect", "i32 i32 i64", "i32"),
    ("sock_send", "i32 i32 i32 i64", "i64"),
    ("sock_recv", "i32 i32 i32 i64", "i64"),
    ("sock_shutdown", "i32", "i32"),
    ("sock_addr", "i32 i32 i32 i32", "i32"),
    ("poll", "i32 i32 i64", "i32"),
    ("device_open", "i32 i32", "i32"),
    ("device_info", "i32 i32", "i32"),
    ("device_read", "i32 i64 i32 i32 i32", "i64"),
    ("device_write", "i32 i64 i32 i32 i32", "i64"),
    ("device_sync", "i32", "i32"),
];

/// Adds every `warden` host function to `linker`.
fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    handles::add_to_linker(linker)?;
    ipc::add_to_linker(linker)?;
    names::add_to_linker(linker)?;
    mem::add_to_linker(linker)?;
    mem::add_maps_to_linker(linker, true)?;
    permit::add_to_linker(linker)?;
    permit::add_map_to_linker(linker, true)?;
    task::add_to_linker(linker)?;
    supervise::add_to_linker(linker)?;
    net::add_to_linker(linker)?;
    poll::add_to_linker(linker)?;
    device::add_to_linker(linker)
}

/// The `warden` functions a passive task's store links: handles, memory
/// objects, permits, a `name_lookup` that does not wait and a `call` that
/// reaches direct services only.
fn add_passive_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    handles::add_to_linker(linker)?;
    mem::add_to_linker(linker)?;
    mem::add_maps_to_linker(linker, false)?;
    permit::add_to_linker(linker)?;
    permit::add_map_to_linker(linker, false)?;
    // Device I/O does not wait for another task: a passive file system
    // serves its callers on their threads.
    device::add_to_linker(linker)?;
    names::add_nowait_to_linker(linker)?;
    // `call_fast` too: the SDK's warden_call tries it first.
    for name in ["call", "call_fast"] {
        linker.func_wrap(
            MODULE,
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
                // A span if the passive task serves a traced call.
                let trace = traced::begin(c.data_mut());
                let result = direct::call_nested(&mut c, (a, b, l, h, n, r, rc, rh, rn));
                if let Some(t) = trace {
                    traced::end(c.data_mut(), t, (a, l), &result, false);
                }
                ret64(result)
            },
        )?;
    }
    linker.func_wrap(
        MODULE,
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
            ret64(direct::call_nested(&mut c, (a, b, l, h, n, r, rc, rh, rn)))
        },
    )?;
    Ok(())
}

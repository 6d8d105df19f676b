//! `wasi_snapshot_preview1`: Wasmtime's definitions, with Warden's own
//! in front of some of them, and the group's per-task state
//! ([`Preview1`]).
//!
//! - `bounds`: the calls whose cost a guest chooses, bounded (open files,
//!   poll subscriptions), and the dispatch of socket descriptors;
//! - `cli`: arguments and environment, shared by every task of a route
//!   or command rather than copied per task;
//! - `stdio`: writes to stdout and stderr straight to the task's sinks;
//! - `random`: random bytes without a per-task generator;
//! - `sleep`, `subscription`: `poll_oneoff` that only sleeps, as a timer;
//! - `net`, `poll`: sockets as WASI descriptors, and `poll_oneoff` over
//!   them (the bytes move through `host::sockets`, as the `warden`
//!   group's do);
//! - `served`: directories whose files a file-system task serves, every
//!   file call under them carried to it.

mod bounds;
mod cli;
mod net;
mod poll;
mod random;
mod served;
mod sleep;
mod stdio;
mod subscription;

pub use bounds::{MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};
pub(crate) use cli::Cli;
pub use cli::Strings;
pub(crate) use net::Sockets;
pub(crate) use random::ThreadRandom;
use served::Served;

use crate::host::{Core, Prepare, TaskData};
use wasmtime::Linker;

/// The WASI group's state of one task, beside Wasmtime's context (which
/// the component group shares, in the task's core). Only this folder
/// opens it.
pub(crate) struct State(Preview1);

impl super::Group for State {
    fn prepare(p: &mut Prepare<'_>) -> Result<State, String> {
        let spec = p.spec;
        let served = (!spec.served_dirs.is_empty()).then(|| {
            let names: Vec<String> = spec.served_dirs.iter().map(|(_, n)| n.clone()).collect();
            let first = 3 + spec.dirs.len() as u32;
            Served::new(p.kernel.clone(), &names, first, spec.ipc.max_message_bytes)
        });
        let cli = p.cli.take().ok_or("no arguments prepared for the task")?;
        let sockets = p.sockets.take().ok_or("no sockets prepared for the task")?;
        Ok(State(Preview1::new(cli, sockets, served)))
    }

    fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_to_linker(linker)
    }

    fn add_to_passive_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_sync_to_linker(linker)
    }
}

impl TaskData {
    /// This group's state.
    fn preview1(&self) -> &Preview1 {
        &self.groups.wasi.0
    }

    /// This group's state, to change.
    fn preview1_mut(&mut self) -> &mut Preview1 {
        &mut self.groups.wasi.0
    }

    /// This group's state and the shared core, borrowed apart.
    fn wasi_parts(&mut self) -> (&mut Preview1, &mut Core) {
        (&mut self.groups.wasi.0, &mut self.core)
    }

    /// Revokes what the task lent a file system for a call in flight
    /// (its run has ended; see `served::client::rpc_into`).
    pub(super) fn revoke_wasi_lent(&mut self) {
        if let Some(s) = self.preview1_mut().served.as_mut() {
            s.revoke_lent();
        }
    }
}

/// The WASI group's own state for one task.
pub(crate) struct Preview1 {
    /// Its arguments and environment.
    pub(crate) cli: Cli,
    /// Its open files, bounded.
    pub(crate) files: bounds::OpenFiles,
    /// Its sockets as descriptors.
    pub(crate) sockets: Sockets,
    /// `poll_oneoff`'s buffers when it waits on sockets (see `poll`).
    pub(crate) poll: Option<Box<poll::Scratch>>,
    /// Its directories served by file-system tasks, if it has any.
    pub(crate) served: Option<Box<Served>>,
}

impl Preview1 {
    /// A task's state: its arguments and environment, its sockets (the
    /// preopened listeners among them) and its served directories.
    pub(crate) fn new(cli: Cli, sockets: Sockets, served: Option<Box<Served>>) -> Self {
        Preview1 {
            cli,
            files: Default::default(),
            sockets,
            poll: None,
            served,
        }
    }
}

/// WASI preview 1 for a task's store: Wasmtime's async definitions and
/// Warden's in front of them.
fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p1::add_to_linker_async(linker, |d: &mut TaskData| &mut d.wasi)?;
    bounds::add_to_linker(linker)?;
    cli::add_to_linker(linker)?;
    random::add_to_linker(linker)
}

/// WASI preview 1 for a passive task's synchronous store: Wasmtime's
/// synchronous definitions, and arguments and environment shared.
fn add_sync_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p1::add_to_linker_sync(linker, |d: &mut TaskData| &mut d.wasi)?;
    cli::add_to_linker(linker)
}

/// Runs `define` with shadowing allowed in `linker`, to replace some of
/// the WASI definitions it already holds, and forbids shadowing again
/// however `define` ends.
fn shadowing(
    linker: &mut Linker<TaskData>,
    define: impl FnOnce(&mut Linker<TaskData>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = define(linker);
    linker.allow_shadowing(false);
    r
}

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
pub(crate) use served::Served;

use crate::host::TaskData;
use wasmtime::Linker;

/// The WASI group's own state for one task, beside Wasmtime's context.
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
pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p1::add_to_linker_async(linker, |d: &mut TaskData| &mut d.wasi)?;
    bounds::add_to_linker(linker)?;
    cli::add_to_linker(linker)?;
    random::add_to_linker(linker)
}

/// WASI preview 1 for a passive task's synchronous store: Wasmtime's
/// synchronous definitions, and arguments and environment shared.
pub(super) fn add_sync_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
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

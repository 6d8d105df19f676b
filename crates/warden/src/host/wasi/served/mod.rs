//! Directories served by a file-system task: a task's `dirs` entry may
//! name a service (`dirs = { "/data" = "service:fs" }`), and then every
//! WASI preview-1 file call on a descriptor under that directory becomes
//! requests of the file-service protocol (`sdk/c/warden_fs.h`) to the
//! task registered under that name — an unmodified program reads and
//! writes the file system's files as it would a host directory's.
//!
//! Each served descriptor has a placeholder at the same number in
//! Wasmtime's table: an empty, read-only host directory opened for it.
//! So descriptor numbers are handed out by one allocator, a preopen's
//! name is Wasmtime's to report (`fd_prestat_*`), `fd_close` and
//! `fd_renumber` are Wasmtime's (mirrored here), and a call this module
//! does not take over meets an empty directory that holds nothing.
//!
//! - `proto`: the protocol's records, and its errors as WASI's;
//! - `client`: the calls to the file-system task, on the task's behalf;
//! - `walk`: paths resolved one name at a time, never above the
//!   descriptor they start from;
//! - `open`, `io`, `meta`, `paths`: the WASI calls;
//! - `linker`: the calls this module shadows outright.

mod client;
mod io;
mod linker;
mod meta;
mod open;
mod paths;
mod proto;
mod walk;

pub(super) use io::{read, write};
pub(super) use linker::add_to_linker;
pub(super) use meta::{fdstat_get, filestat_get, set_flags};
pub(super) use open::path_open;

use crate::host::TaskData;
use crate::ipc::files::FileServiceStats;
use crate::ipc::service::{CallSlot, PortalRef};
use crate::ipc::Kernel;
use std::collections::HashMap;
use std::sync::Arc;

/// The interposer's state for one task: its served directories, the
/// descriptors open under them, and its call slot.
pub(crate) struct Served {
    mounts: Vec<Mount>,
    fds: HashMap<u32, Open>,
    kernel: Arc<Kernel>,
    slot: Option<Arc<CallSlot>>,
    /// The task's per-message quota, which bounds one request.
    quota: u64,
    /// The permit a READ in flight lends the file system to write its
    /// bytes straight into the task's buffer (see `client::rpc_into`),
    /// revoked when the reply is in, or by [`Served::revoke_lent`].
    lent: Option<Arc<crate::ipc::permit::Permit>>,
}

/// A served directory: the service behind it and what it carried.
struct Mount {
    service: String,
    portal: Option<PortalRef>,
    /// Whether the name was ever looked up (only the first lookup waits).
    looked_up: bool,
    /// The service's counters, which every task reaching it shares.
    stats: Arc<FileServiceStats>,
}

/// An open served descriptor.
#[derive(Clone, Copy, Debug)]
struct Open {
    mount: usize,
    ino: u64,
    dir: bool,
    filetype: u8,
    pos: u64,
    append: bool,
    nonblock: bool,
    read: bool,
    write: bool,
    preopen: bool,
}

impl Served {
    /// A task's served directories, named by their services, preopened
    /// as descriptors `first_fd`, `first_fd + 1`, …
    pub(crate) fn new(
        kernel: Arc<Kernel>,
        services: &[String],
        first_fd: u32,
        quota: u64,
    ) -> Box<Self> {
        let mut fds = HashMap::new();
        let mounts = services
            .iter()
            .enumerate()
            .map(|(i, service)| {
                fds.insert(first_fd + i as u32, Open::root(i));
                Mount {
                    service: service.clone(),
                    portal: None,
                    looked_up: false,
                    stats: kernel.file_services.stats(service),
                }
            })
            .collect();
        Box::new(Served {
            mounts,
            fds,
            kernel,
            slot: None,
            quota,
            lent: None,
        })
    }

    /// Revokes the permit a READ in flight lent, if any: the task has
    /// ended, and its memory is about to be released.
    pub(crate) fn revoke_lent(&mut self) {
        if let Some(p) = self.lent.take() {
            p.revoke();
        }
    }
}

impl Open {
    fn root(mount: usize) -> Self {
        Open {
            mount,
            ino: proto::ROOT,
            dir: true,
            filetype: proto::filetype::DIRECTORY,
            pos: 0,
            append: false,
            nonblock: false,
            read: true,
            write: false,
            preopen: true,
        }
    }
}

/// Whether `fd` is a served descriptor of the task's.
pub(super) fn has(data: &TaskData, fd: i32) -> bool {
    data.preview1()
        .served
        .as_ref()
        .is_some_and(|s| s.fds.contains_key(&(fd as u32)))
}

/// Wasmtime closed `fd`: a served descriptor goes with its placeholder.
pub(super) fn closed(data: &mut TaskData, fd: i32) {
    if let Some(s) = data.preview1_mut().served.as_mut() {
        s.fds.remove(&(fd as u32));
    }
}

/// Wasmtime renumbered `from` to `to`: so does the served table.
pub(super) fn renumbered(data: &mut TaskData, from: i32, to: i32) {
    if let Some(s) = data.preview1_mut().served.as_mut() {
        let moved = s.fds.remove(&(from as u32));
        s.fds.remove(&(to as u32));
        if let Some(open) = moved {
            s.fds.insert(to as u32, open);
        }
    }
}

/// The served descriptor `fd` (`EBADF` if it is none).
fn get(data: &TaskData, fd: i32) -> Result<Open, i32> {
    data.preview1()
        .served
        .as_ref()
        .and_then(|s| s.fds.get(&(fd as u32)).copied())
        .ok_or(proto::errno::BADF)
}

/// Updates the served descriptor `fd`, if it is still open.
fn update(data: &mut TaskData, fd: i32, f: impl FnOnce(&mut Open)) {
    if let Some(open) = data
        .preview1_mut()
        .served
        .as_mut()
        .and_then(|s| s.fds.get_mut(&(fd as u32)))
    {
        f(open)
    }
}

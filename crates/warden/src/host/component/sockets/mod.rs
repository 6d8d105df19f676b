//! `wasi:sockets` for components, on Warden's own sockets: TCP
//! (`tcp`, `tcp-create-socket`) and name lookup (`ip-name-lookup`) are
//! defined here, over the same objects and accounts a module's sockets
//! use; `network`, `instance-network` and UDP stay Wasmtime's (UDP is
//! refused: no datagram socket is ever made).
//!
//! What a component's TCP socket shares with a module's:
//!
//! - **Grants before any system call**: `start-bind` needs a `listen`
//!   grant for the address, `start-connect` a `connect` grant, and
//!   Warden's own endpoints (control API, web servers, broker) only if a
//!   grant names them exactly (`crate::net::own`). Otherwise
//!   `access-denied`.
//! - **Slots and charges**: each socket (created or accepted) takes one of
//!   the task's `max_sockets` and is charged its host-kernel buffers plus
//!   what its streams may hold ([`tcp::CHARGE_EXTRA`]) from creation to
//!   drop; past either, `new-socket-limit` or `out-of-memory`. Each takes
//!   a place among the process's descriptors (`crate::descriptors`).
//! - **The link**: a connection's sends wait for the link's grants when
//!   the task's sends are shaped (a link rate, or a `bandwidth_limit` on
//!   it or an ancestor); each connection is a leaf under the task's
//!   node, so the task's share and cap hold whatever it opens.
//! - **The receive budget**: a read takes no more than the budget allows
//!   and waits (in `subscribe`) until it allows some.
//!
//! Buffers are the task's `socket_buffer` each way, or less if the
//! program asks for less (more is clamped, as WASI allows); a socket is
//! charged for the task's either way. Binding needs a `listen` grant for the address, whether the
//! socket then listens or connects from it.

mod lookup;
mod streams;
mod tcp;

pub(super) use lookup::InFlight;

use super::TaskData;
use crate::host::TaskNet;
use crate::task::TaskShared;
use std::sync::Arc;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode};
use wasmtime_wasi::p2::SocketError;
use wasmtime_wasi::WasiView;

/// The `HasData` of the interfaces defined here.
struct Net;

impl HasData for Net {
    type Data<'a> = View<'a>;
}

/// What the interfaces here see of a task's store.
pub(super) struct View<'a> {
    table: &'a mut ResourceTable,
    net: &'a TaskNet,
    shared: &'a Arc<TaskShared>,
    lookups: &'a Arc<InFlight>,
}

fn view(t: &mut TaskData) -> View<'_> {
    let TaskData { core, groups } = t;
    let component = groups
        .component
        .0
        .as_deref()
        .expect("only component tasks link wasi:sockets");
    View {
        table: core.wasi.ctx().table,
        net: &core.net,
        shared: &core.shared,
        lookups: &component.lookups,
    }
}

/// The per-task state of the name lookups.
pub(super) fn in_flight() -> Arc<InFlight> {
    Arc::default()
}

/// Defines `wasi:sockets/tcp`, `tcp-create-socket` and `ip-name-lookup`
/// over Wasmtime's (which the linker already holds).
pub(super) fn add_to_linker(l: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::sockets::{ip_name_lookup, tcp, tcp_create_socket};
    l.allow_shadowing(true);
    tcp::add_to_linker::<TaskData, Net>(l, view)?;
    tcp_create_socket::add_to_linker::<TaskData, Net>(l, view)?;
    ip_name_lookup::add_to_linker::<TaskData, Net>(l, view)?;
    l.allow_shadowing(false);
    Ok(())
}

// What the interfaces' bindings need of `wasi:sockets/network` (whose
// definitions in the linker stay Wasmtime's): an error's code.
impl network::Host for View<'_> {
    fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
        error.downcast()
    }

    fn network_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let err = self.table.get(&err)?;
        Ok(err.downcast_ref::<std::io::Error>().map(ErrorCode::from))
    }
}

impl network::HostNetwork for View<'_> {
    fn drop(&mut self, this: Resource<network::Network>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

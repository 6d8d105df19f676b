//! WASI 0.2 for components (`wasi:cli/command` and `wasi:http/proxy`):
//! Wasmtime's definitions of `wasi:cli`, `wasi:clocks`,
//! `wasi:filesystem`, `wasi:io`, `wasi:random`, `wasi:sockets` and
//! `wasi:http`, on the task's own WASI context, and the group's state
//! ([`Component`]).
//!
//! What Warden changes:
//!
//! - **Sockets are Warden's** (`sockets`): `wasi:sockets/tcp` and
//!   name lookup are defined over the same listeners, connections,
//!   grants, socket slots, charges, link and receive budget a module's
//!   sockets use; UDP is refused (`access-denied`, before any system
//!   call).
//! - **Outgoing HTTP reaches only what `connect` grants** (`outgoing`):
//!   each resolved address is checked against the task's grants before
//!   the connection is made; plain `http` only.
//!
//! Everything else is the task's as for a module: its memory budget is
//! the store's limiter (every memory and table of every core instance
//! inside the component), its CPU is sliced by the same epoch deadline,
//! its directories, arguments, environment and standard streams come
//! from its spec.

mod outgoing;
mod sockets;

use super::TaskData;
use crate::net::grant::Grant;
use wasmtime::component::Resource;
use wasmtime_wasi::{WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// The interfaces a component may import, by package: the ones
/// [`add_to_linker`] defines, at their 0.2 versions.
pub const PROVIDED_PACKAGES: &[&str] = &[
    "wasi:cli",
    "wasi:clocks",
    "wasi:filesystem",
    "wasi:io",
    "wasi:random",
    "wasi:sockets",
    "wasi:http",
];

/// The group's state in a component task's store: `wasi:http`'s context
/// and what its outgoing requests may reach.
struct Component {
    http: WasiHttpCtx,
    outgoing: outgoing::Outgoing,
    /// Its name lookups under way.
    lookups: std::sync::Arc<sockets::InFlight>,
}

impl Component {
    /// The state of a component task whose `connect` grants are `connect`.
    fn new(connect: Vec<Grant>) -> Box<Component> {
        Box::new(Component {
            http: WasiHttpCtx::new(),
            outgoing: outgoing::Outgoing::new(connect),
            lookups: sockets::in_flight(),
        })
    }
}

/// What a `wasi:http/proxy` component task's response is: a head with
/// a body the guest writes, or the error it answered with.
pub(crate) type Response = Result<
    hyper::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>,
    wasmtime_wasi_http::p2::bindings::http::types::ErrorCode,
>;

/// One request for a `wasi:http/proxy` component task, and where its
/// response goes.
pub(crate) struct Incoming {
    pub(crate) request: hyper::Request<crate::pipe::Upload>,
    pub(crate) respond: tokio::sync::oneshot::Sender<Response>,
}

/// The resources `wasi:http/incoming-handler.handle` is called with.
type Handles = (
    Resource<wasmtime_wasi_http::p2::types::HostIncomingRequest>,
    Resource<wasmtime_wasi_http::p2::types::HostResponseOutparam>,
);

impl Incoming {
    /// Puts the request and its response's slot into the task's
    /// resource table.
    pub(crate) fn enter(self, data: &mut TaskData) -> wasmtime::Result<Handles> {
        let mut http = data.http();
        use http_body_util::BodyExt;
        use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
        let request = self
            .request
            .map(|body| body.map_err(|e| ErrorCode::InternalError(Some(e.to_string()))));
        let request = http.new_incoming_request(Scheme::Http, request)?;
        let rep = request.rep();
        match http.new_response_outparam(self.respond) {
            Ok(out) => Ok((request, out)),
            Err(e) => {
                Incoming::forget(data, (rep, u32::MAX));
                Err(e)
            }
        }
    }

    /// Takes the request and the response slot numbered `reps` (the
    /// numbers [`Incoming::enter`] gave them; `u32::MAX`: none) out of
    /// the task's resource table, for a request its handler will never
    /// get.
    pub(crate) fn forget(data: &mut TaskData, (request, out): (u32, u32)) {
        use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};
        let http = data.http();
        if request != u32::MAX {
            let _ = http
                .table
                .delete(Resource::<HostIncomingRequest>::new_own(request));
        }
        if out != u32::MAX {
            let _ = http
                .table
                .delete(Resource::<HostResponseOutparam>::new_own(out));
        }
    }
}

/// A component's network, as its WASI context is built: Wasmtime's own
/// sockets and name lookups stay off (this folder's `sockets` defines
/// TCP and name lookup; UDP is refused).
pub(crate) fn network(b: &mut WasiCtxBuilder) {
    b.allow_tcp(false);
    b.allow_udp(false);
    b.allow_ip_name_lookup(false);
}

impl WasiView for TaskData {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi.ctx()
    }
}

impl WasiHttpView for TaskData {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let component = self
            .groups
            .component
            .0
            .as_deref_mut()
            .expect("only component tasks link wasi:http");
        WasiHttpCtxView {
            ctx: &mut component.http,
            table: self.core.wasi.ctx().table,
            hooks: &mut component.outgoing,
        }
    }
}

/// The component group's state of one task: `wasi:http`'s context and
/// the outgoing requests' grants, for a component task only. Only this
/// folder opens it.
pub(crate) struct State(Option<Box<Component>>);

impl super::Group for State {
    fn prepare(p: &mut super::Prepare<'_>) -> Result<State, String> {
        Ok(State(
            p.component.then(|| Component::new(p.connect.to_vec())),
        ))
    }

    /// Every interface of [`PROVIDED_PACKAGES`], async (a task's store
    /// runs on a fiber): Wasmtime's, with `sockets`' over its TCP and
    /// name lookup.
    fn add_to_component_linker(
        linker: &mut wasmtime::component::Linker<TaskData>,
    ) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)?;
        sockets::add_to_linker(linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }
}

/// The first import of `component` outside [`PROVIDED_PACKAGES`]'s 0.2
/// versions that `stubbed` does not accept, if any: its name.
pub(crate) fn unprovided_import(
    component: &wasmtime::component::Component,
    engine: &wasmtime::Engine,
    stubbed: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let ty = component.component_type();
    let first = ty
        .imports(engine)
        .map(|(name, _)| name)
        .find(|name| !provided(name) && !stubbed(name))
        .map(str::to_string);
    first
}

/// Whether an import named `name` (`wasi:io/streams@0.2.6`) is one of
/// the provided packages at a 0.2 version.
pub(crate) fn provided(name: &str) -> bool {
    let Some((path, version)) = name.split_once('@') else {
        return false;
    };
    let package = path.split('/').next().unwrap_or(path);
    (PROVIDED_PACKAGES.contains(&package) && version.starts_with("0.2."))
        || (package == KERNEL_PACKAGE && version.starts_with("0.1."))
}

/// Warden's own package (`sdk/wit/kernel.wit`), provided at 0.1.
pub const KERNEL_PACKAGE: &str = "warden:kernel";

#[cfg(test)]
mod tests {
    use super::provided;

    #[test]
    fn only_the_provided_packages_at_0_2_are_provided() {
        assert!(provided("wasi:io/streams@0.2.0"));
        assert!(provided("wasi:http/types@0.2.12"));
        assert!(!provided("wasi:io/streams@0.3.0-rc-2025-09-16"));
        assert!(!provided("wasi:keyvalue/store@0.2.0-draft"));
        assert!(!provided("wasi:io/streams"));
        assert!(!provided("my:own/thing@0.2.0"));
        // A package whose name merely begins like a provided one.
        assert!(!provided("wasi:cli-extra/x@0.2.0"));
        assert!(provided("warden:kernel/ipc@0.1.0"));
        assert!(!provided("warden:kernel/ipc@0.2.0"));
    }
}

//! Typed services between component tasks: WIT interfaces as portals
//! (JX's typed portals, J-Kernel's copying stubs, on the component
//! model).
//!
//! - A component task given `serves` is a [`TypedServer`]: its exported
//!   interfaces are registered under its `provides` name, as a direct
//!   service no byte call can use.
//! - A component importing an interface Warden does not provide gets a
//!   stub for each of its functions ([`add_stubs`]). At the task's start
//!   each such import is bound ([`bind`]) to the service its `binds`
//!   names: looked up as a name is (subject to `uses`, waiting for it to
//!   be registered), then checked function by function against the
//!   server's export (`check`). A mismatch, an unbound import, or a
//!   shape that cannot cross (resources, streams) refuses the start.
//! - A call copies: Wasmtime lifts the arguments out of the caller's
//!   memory, the stub checks their size against the caller's
//!   `max_message_bytes`, and the server's function lowers them into the
//!   server's memory (its allocator, its budget); results come back the
//!   same way. Nothing is shared. A failed call traps the caller with a
//!   reason naming the server.
//! - A resource the interface defines crosses as a capability: the
//!   client holds a handle of its own to the server's resource, valid
//!   only in the client and only for that server, released when dropped
//!   and revoked when the server ends (`held`).

mod check;
mod copy;
mod held;
mod remote;
mod server;
mod wire;

pub(crate) use remote::serve_bytes;
pub(crate) use server::{Answer as CallAnswer, MakeArgs, TypedServer};

use crate::host::TaskData;
use crate::ipc::service::{PortalRef, Service, ServiceRef};
use crate::ipc::{name_allowed, Kernel};
use crate::task::TaskStatus;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Val};
use wasmtime::{Engine, StoreContextMut};

/// How long a start waits for a bound service to be registered.
pub const BIND_WAIT: Duration = Duration::from_secs(5);

/// The typed group's state of one task: what its imports are bound to,
/// and what binding them may use.
#[derive(Default)]
pub(crate) struct State {
    /// Each typed import's binding, by the import's number: to a server
    /// here, or on another node.
    bound: Vec<Option<Arc<Binding>>>,
    remote: Vec<Option<Arc<remote::Remote>>>,
    /// `binds`: interface (with or without version) → service name.
    binds: Vec<(String, String)>,
    /// The names the task may look up (`uses`).
    uses: Vec<String>,
    /// Most bytes one call copies either way.
    max_bytes: u64,
    /// The servers' resources the task holds handles to, and how many it
    /// may hold.
    held: held::Table,
    max_handles: usize,
    /// Longest a call to an active server is waited for.
    call_timeout: Option<Duration>,
    kernel: Option<Arc<Kernel>>,
    /// While a server runs a traced caller's call: that call's span, which
    /// the server's own calls become children of.
    pub(super) serving: Option<crate::telemetry::Context>,
}

/// One bound import: the server, and for each imported function the
/// server's number for it.
struct Binding {
    iface: String,
    server: Arc<TypedServer>,
    funcs: Vec<usize>,
    /// The interface's resource types: the server's, and the client's.
    types: held::Types,
    /// For each imported function, whether it returns a
    /// `warden:kernel/errors.error` on failure instead of trapping.
    soft: Vec<bool>,
    /// Keeps the task counted among the service's clients.
    _portal: PortalRef,
}

impl super::Group for State {
    fn prepare(p: &mut super::Prepare<'_>) -> Result<State, String> {
        Ok(State {
            bound: Vec::new(),
            remote: Vec::new(),
            binds: p.spec.binds.clone(),
            uses: p.spec.ipc.uses.clone(),
            max_bytes: p.spec.ipc.max_message_bytes,
            held: Default::default(),
            max_handles: p.spec.ipc.max_handles,
            call_timeout: p.spec.call_timeout,
            kernel: Some(p.kernel.clone()),
            serving: None,
        })
    }
}

/// The longest the task whose data is `data` waits for a call's answer
/// (`call_timeout`), if bounded.
pub(crate) fn call_timeout(data: &TaskData) -> Option<Duration> {
    data.groups.typed.call_timeout
}

/// Sets [`call_timeout`] (`warden:kernel/task.set-call-timeout`).
pub(crate) fn set_call_timeout(data: &mut TaskData, t: Option<Duration>) {
    data.groups.typed.call_timeout = t;
}

/// Whether the interface `pattern` (`example:kv/store`, or with a
/// version, `example:kv/store@0.1.0`) names the import or export `name`.
pub(crate) fn iface_matches(pattern: &str, name: &str) -> bool {
    match pattern.contains('@') {
        true => pattern == name,
        false => name.split('@').next() == Some(pattern),
    }
}

/// The interfaces `component` imports that Warden does not provide
/// (instances only), with their functions' names, in a fixed order.
pub(crate) fn typed_imports(component: &Component, engine: &Engine) -> Vec<(String, Vec<String>)> {
    let ty = component.component_type();
    let mut out = Vec::new();
    for (name, item) in ty.imports(engine) {
        if super::provided_import(name) {
            continue;
        }
        if let ComponentItem::ComponentInstance(inst) = item.ty {
            let funcs = inst
                .exports(engine)
                .filter(|(_, i)| matches!(i.ty, ComponentItem::ComponentFunc(_)))
                .map(|(n, _)| n.to_string())
                .collect();
            out.push((name.to_string(), funcs));
        }
    }
    out
}

/// The names of the resource types the import `iface` of `component`
/// defines, in order.
fn import_resources(component: &Component, iface: &str) -> Vec<String> {
    let engine = component.engine();
    match component
        .component_type()
        .get_import(engine, iface)
        .map(|e| e.ty)
    {
        Some(ComponentItem::ComponentInstance(inst)) => (check::resources(engine, &inst))
            .into_iter()
            .map(|(_, n)| n)
            .collect(),
        _ => Vec::new(),
    }
}

/// Defines a stub in `linker` for every function of every typed import
/// of `component`, each finding its binding in the calling task's state,
/// and a resource type of the client's own for each resource type one
/// defines (see `held`).
pub(crate) fn add_stubs(
    linker: &mut wasmtime::component::Linker<TaskData>,
    component: &Component,
) -> wasmtime::Result<()> {
    use wasmtime::component::ResourceType;
    for (i, (iface, funcs)) in typed_imports(component, component.engine())
        .into_iter()
        .enumerate()
    {
        let resources = import_resources(component, &iface);
        let mut inst = linker.instance(&iface)?;
        for (k, name) in resources.iter().enumerate() {
            let ty = ResourceType::host_dynamic(held::type_id(i, k));
            // The client dropped its handle: released.
            inst.resource(name, ty, |mut store, rep| {
                drop(store.data_mut().groups.typed.held.take(rep));
                Ok(())
            })?;
        }
        for (j, name) in funcs.into_iter().enumerate() {
            inst.func_new_async(&name.clone(), move |store, _ty, params, results| {
                Box::new(call(store, (i, j), params, results))
            })?;
        }
    }
    Ok(())
}

/// One call through a stub: the import `i`'s function `j`; its span if
/// the caller is traced.
async fn call(
    store: StoreContextMut<'_, TaskData>,
    at: (usize, usize),
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    if let Some(r) = store
        .data()
        .groups
        .typed
        .remote
        .get(at.0)
        .cloned()
        .flatten()
    {
        return call_remote(store, (&r, at.1), params, results).await;
    }
    let Some(traced) = traced(&store, at) else {
        return call_untraced(store, at, params, results, None).await;
    };
    let r = call_untraced(store, at, params, results, Some(traced.at)).await;
    span(traced, &r);
    r
}

/// A traced call's context: the caller's trace (its own, or that of the
/// call it is serving), the call's span, the spans' exporter, the call's
/// name and server, and when it began (`None` if the caller is not traced
/// or spans are not recorded).
struct Traced {
    trace: crate::telemetry::Context,
    at: crate::telemetry::Context,
    spans: Arc<crate::telemetry::Exporter>,
    name: String,
    server: String,
    began: u64,
}

fn traced(store: &StoreContextMut<'_, TaskData>, (i, j): (usize, usize)) -> Option<Traced> {
    let state = &store.data().groups.typed;
    let trace = store.data().shared.trace.or(state.serving)?;
    let spans = state.kernel.as_ref()?.spans.get()?.clone();
    let b = state.bound.get(i)?.as_ref()?;
    let served = &b.server.funcs[b.funcs[j]];
    Some(Traced {
        trace,
        at: trace.child(),
        spans,
        name: format!("typed call {}.{}", b.iface, served.name),
        server: b.server.shared.name.clone(),
        began: crate::telemetry::unix_ns(),
    })
}

/// Records a traced call's span: its server, and why it failed if it did.
fn span(t: Traced, r: &wasmtime::Result<()>) {
    use serde_json::json;
    let mut attributes = vec![("warden.service.task", json!(t.server))];
    if let Err(e) = r {
        attributes.push(("warden.call.error", json!(e.to_string())));
    }
    t.spans.record(crate::telemetry::Span {
        at: t.at,
        parent: Some(t.trace.span),
        name: t.name,
        kind: 3,
        start_ns: t.began,
        end_ns: crate::telemetry::unix_ns(),
        attributes,
        error: r.is_err(),
    });
}

/// [`call`] itself, made in the span `trace` (carried to the server).
/// A function returning a `warden:kernel` error returns one when the
/// call fails; any other call's failure traps its caller.
async fn call_untraced(
    mut store: StoreContextMut<'_, TaskData>,
    (i, j): (usize, usize),
    params: &[Val],
    results: &mut [Val],
    trace: Option<crate::telemetry::Context>,
) -> wasmtime::Result<()> {
    let state = &store.data().groups.typed;
    let Some(b) = state.bound.get(i).cloned().flatten() else {
        return Err(wasmtime::Error::msg("typed call: the import is not bound"));
    };
    let served = &b.server.funcs[b.funcs[j]];
    let out = exchange(&mut store, &b, (j, trace), params, results).await;
    let Err(failed) = out else {
        return Ok(());
    };
    served.stats.fail();
    let what = || format!("typed call {}.{}", b.iface, served.name);
    failure(failed, (b.soft[j], &what), results)
}

/// A failed call: its `warden:kernel` error as its result if it returns
/// one (`soft`), else a trap naming the call (`what`).
fn failure(
    failed: server::Failed,
    (soft, what): (bool, &dyn Fn() -> String),
    results: &mut [Val],
) -> wasmtime::Result<()> {
    if !soft {
        return Err(wasmtime::Error::msg(format!("{}: {}", what(), failed.why)));
    }
    let name = failed.errno.name().to_string();
    results[0] = Val::Result(Err(Some(Box::new(Val::Enum(name)))));
    Ok(())
}

/// A call through a binding to another node's server.
async fn call_remote(
    mut store: StoreContextMut<'_, TaskData>,
    (r, j): (&remote::Remote, usize),
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let Err(failed) = remote::call(&mut store, r, j, params, results).await else {
        return Ok(());
    };
    let what = || format!("typed call {} (on another node)", r.iface);
    failure(failed, (r.soft[j], &what), results)
}

/// One call's arguments copied to the server, its results back (the
/// caller's handles exchanged for the server's and back), within the
/// caller's bounds.
async fn exchange(
    store: &mut StoreContextMut<'_, TaskData>,
    b: &Binding,
    (j, trace): (usize, Option<crate::telemetry::Context>),
    params: &[Val],
    results: &mut [Val],
) -> Result<(), server::Failed> {
    use crate::ipc::Errno;
    let state = &store.data().groups.typed;
    let (cap, timeout) = (state.max_bytes, state.call_timeout);
    let func = b.funcs[j];
    let stats = &b.server.funcs[func].stats;
    let quota = |e: wasmtime::Error| server::Failed {
        errno: Errno::Quota,
        why: e.to_string(),
    };
    let sent = copy::size(params, cap).map_err(|n| quota(copy::refusal("arguments", n, cap)))?;
    let mapped;
    let params = match b.types.is_empty() {
        true => params,
        false => {
            let mut theirs = params.to_vec();
            held::to_server(store, &b.server, &mut theirs).map_err(|e| server::Failed {
                errno: Errno::BadHandle,
                why: e.to_string(),
            })?;
            mapped = theirs;
            &mapped[..]
        }
    };
    let began = crate::clock::ticks::now();
    let caller = store.data().shared.clone();
    let out = (b.server)
        .call(&caller, (func, trace), params, results.len(), timeout)
        .await;
    stats.count(crate::clock::ticks::ns_since(began));
    let mut out = out?;
    let got = copy::size(&out, cap).map_err(|n| quota(copy::refusal("results", n, cap)))?;
    if !b.types.is_empty() {
        let most = store.data().groups.typed.max_handles;
        held::to_client(store, (&b.server, &b.types), &mut out, most).map_err(quota)?;
    }
    stats.copied(sent + got);
    for (slot, v) in results.iter_mut().zip(out) {
        *slot = v;
    }
    Ok(())
}

/// Binds every typed import of `component` for the task whose store
/// data is `data`: each to the server its `binds` names, checked. Waits
/// up to [`BIND_WAIT`] for a server to be registered.
pub(crate) async fn bind(data: &mut TaskData, component: &Component) -> Result<(), String> {
    let imports = typed_imports(component, component.engine());
    let state = &data.groups.typed;
    let wants = Wants {
        binds: state.binds.clone(),
        uses: state.uses.clone(),
        kernel: state.kernel.clone().expect("prepared"),
        shared: data.shared.clone(),
    };
    let (mut here, mut there) = (Vec::new(), Vec::new());
    for (i, (iface, funcs)) in imports.iter().enumerate() {
        let (h, t) = match bind_one(&wants, component, (i, iface), funcs).await? {
            Bound::Here(b) => (Some(Arc::new(b)), None),
            Bound::There(r) => (None, Some(Arc::new(r))),
        };
        here.push(h);
        there.push(t);
    }
    data.groups.typed.bound = here;
    data.groups.typed.remote = there;
    Ok(())
}

/// Why an import `iface` that no `binds` entry names is refused.
pub(crate) fn unbound(iface: &str) -> String {
    format!(
        "imports `{iface}`, which no `binds` entry names (Warden provides the 0.2 versions of \
         {} and warden:kernel 0.1 itself)",
        super::PROVIDED_PACKAGES.join(", ")
    )
}

/// What binding a task's imports may use, taken from its state.
struct Wants {
    binds: Vec<(String, String)>,
    uses: Vec<String>,
    kernel: Arc<Kernel>,
    shared: Arc<crate::task::TaskShared>,
}

/// A typed import bound: to a server here, or on another node.
enum Bound {
    Here(Binding),
    There(remote::Remote),
}

async fn bind_one(
    state: &Wants,
    component: &Component,
    (i, iface): (usize, &str),
    funcs: &[String],
) -> Result<Bound, String> {
    let Some((_, service)) = state.binds.iter().find(|(p, _)| iface_matches(p, iface)) else {
        return Err(unbound(iface));
    };
    if !name_allowed(&state.uses, service) {
        return Err(format!(
            "binds {iface} to {service:?}, which its `uses` does not grant"
        ));
    }
    let wait = BIND_WAIT.as_nanos() as i64;
    let Some(portal) = crate::host::wait::name(&state.kernel, service, wait).await else {
        return Err(format!(
            "binds {iface} to {service:?}, which was not registered within {} s",
            BIND_WAIT.as_secs()
        ));
    };
    let s = portal.service();
    let Some(server) = (s.direct_handler()).and_then(|h| h.clone().downcast::<TypedServer>().ok())
    else {
        // A service no task here serves: another node's, through the
        // cluster's relay.
        if s.server().is_none() && s.direct_handler().is_none() {
            let r = remote::bind(&state.shared, component, (iface, funcs), (portal, service));
            return r.await.map(Bound::There);
        }
        return Err(format!(
            "binds {iface} to {service:?}, which is not a typed service"
        ));
    };
    let export = checked(
        component,
        iface,
        (&server.component, &server.serves),
        service,
    )?;
    let soft = soft_funcs(component, iface, funcs);
    let funcs = funcs
        .iter()
        .map(|f| server.func_index(&export, f).expect("checked"))
        .collect();
    let types = resource_types(component, (i, iface), &server, &export);
    Ok(Bound::Here(Binding {
        iface: iface.to_string(),
        server,
        funcs,
        types,
        soft,
        _portal: portal,
    }))
}

/// For each function `funcs` of the import `iface` of `component`,
/// whether it returns a `warden:kernel` error on failure.
pub(super) fn soft_funcs(component: &Component, iface: &str, funcs: &[String]) -> Vec<bool> {
    let engine = component.engine();
    let ty = component.component_type();
    let Some(ComponentItem::ComponentInstance(inst)) = ty.get_import(engine, iface).map(|e| e.ty)
    else {
        return vec![false; funcs.len()];
    };
    (funcs.iter())
        .map(|f| match inst.get_export(engine, f).map(|e| e.ty) {
            Some(ComponentItem::ComponentFunc(f)) => check::returns_kernel_error(&f),
            _ => false,
        })
        .collect()
}

/// How the import `i` (`iface`) of `component` and the server's
/// `export` name the same resource types (checked to match by name).
fn resource_types(
    component: &Component,
    (i, iface): (usize, &str),
    server: &TypedServer,
    export: &str,
) -> held::Types {
    let theirs = server
        .resources
        .get()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (k, name) in import_resources(component, iface).iter().enumerate() {
        let found = theirs.iter().find(|(e, n, _)| e == export && n == name);
        if let Some((_, _, ty)) = found {
            out.push((*ty, held::type_id(i, k)));
        }
    }
    out
}

/// The server's export the import `iface` of `component` binds to,
/// once their types are checked.
fn checked(
    component: &Component,
    iface: &str,
    (server, serves): (&Component, &[String]),
    service: &str,
) -> Result<String, String> {
    let engine = component.engine();
    let unversioned = iface.split('@').next().unwrap_or(iface);
    let Some(export) = serves.iter().find(|s| compatible(iface, s)) else {
        return Err(format!(
            "binds {iface} to {service:?}, which serves {} (not {unversioned} at a compatible \
             version)",
            serves.join(", ")
        ));
    };
    let client_ty = component.component_type();
    let server_ty = server.component_type();
    let (
        Some(ComponentItem::ComponentInstance(want)),
        Some(ComponentItem::ComponentInstance(have)),
    ) = (
        client_ty.get_import(engine, iface).map(|e| e.ty),
        server_ty.get_export(engine, export).map(|e| e.ty),
    )
    else {
        return Err(format!("{iface}: not an interface on both sides"));
    };
    if let Some(why) = check::unsupported(engine, iface, &want) {
        return Err(why);
    }
    check::check(engine, iface, &want, &have)?;
    Ok(export.clone())
}

/// Whether an import `a` and an export `b` are one interface at
/// compatible versions: the same path, and the same version or the same
/// major one (the same minor one below 1.0).
pub(super) fn compatible(a: &str, b: &str) -> bool {
    let (pa, va) = a.split_once('@').unwrap_or((a, ""));
    let (pb, vb) = b.split_once('@').unwrap_or((b, ""));
    if pa != pb {
        return false;
    }
    let key = |v: &str| -> String {
        let mut parts = v.split('.');
        match parts.next() {
            Some("0") => format!("0.{}", parts.next().unwrap_or("")),
            Some(major) => major.to_string(),
            None => String::new(),
        }
    };
    va == vb || key(va) == key(vb)
}

/// The full export names of `component` that `serves` names: each
/// pattern must name an interface it exports.
pub(crate) fn served_exports(
    component: &Component,
    serves: &[String],
) -> Result<Vec<String>, String> {
    let engine = component.engine();
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .filter(|(_, i)| matches!(i.ty, ComponentItem::ComponentInstance(_)))
        .map(|(n, _)| n.to_string())
        .collect();
    let mut out = Vec::new();
    for pattern in serves {
        let Some(e) = exports.iter().find(|e| iface_matches(pattern, e)) else {
            return Err(format!(
                "serves {pattern}, which the component does not export (it exports: {})",
                if exports.is_empty() {
                    "no interface".into()
                } else {
                    exports.join(", ")
                }
            ));
        };
        if let Some(why) = served_type(component, e) {
            return Err(why);
        }
        out.push(e.clone());
    }
    Ok(out)
}

fn served_type(component: &Component, export: &str) -> Option<String> {
    // A component servlet's handler takes `wasi:http`'s resources, which
    // the web server makes in its store (see `TypedServer::submit`).
    if iface_matches(crate::task::HTTP_HANDLER, export) {
        return None;
    }
    let engine = component.engine();
    match component
        .component_type()
        .get_export(engine, export)
        .map(|e| e.ty)
    {
        Some(ComponentItem::ComponentInstance(inst)) => check::unsupported(engine, export, &inst),
        _ => None,
    }
}

/// Checks statically (both components at hand, as `warden check` has
/// them) that `client`'s import `iface` binds to `server` serving
/// `serves`.
pub(crate) fn check_pair(
    client: &Component,
    iface: &str,
    server: &Component,
    serves: &[String],
) -> Result<(), String> {
    let exports = served_exports(server, serves)?;
    checked(client, iface, (server, &exports), "the server").map(|_| ())
}

/// A typed server task's whole life as a future: its own typed imports
/// bound, instantiated, its service registered under `name`, then serving
/// until it ends.
pub(crate) async fn serve(
    pre: wasmtime::component::InstancePre<TaskData>,
    mut store: wasmtime::Store<TaskData>,
    server: Arc<TypedServer>,
    (name, exported): (String, bool),
) -> TaskStatus {
    struct ShutDown(Arc<TypedServer>);
    impl Drop for ShutDown {
        fn drop(&mut self) {
            self.0.shut_down();
        }
    }
    let _guard = ShutDown(server.clone());
    let shared = server.shared.clone();
    // Its own typed imports (a relay's, a composition's) are bound first.
    if let Err(why) = bind(store.data_mut(), pre.component()).await {
        return TaskStatus::Trapped(format!("cannot start: {why}"));
    }
    let instance = match Box::pin(pre.instantiate_async(&mut store)).await {
        Ok(i) => i,
        Err(e) => return crate::host::classify(&e, &shared, "cannot start: "),
    };
    let kernel = store.data().groups.typed.kernel.clone().expect("prepared");
    let running = match server.running(store, &instance) {
        Ok(r) => r,
        Err(why) => return TaskStatus::Trapped(format!("cannot start: {why}")),
    };
    let service = Service::direct(shared.id, server.clone());
    let (install, keep) = match server.is_passive() {
        true => (Some(running), None),
        false => (None, Some(running)),
    };
    server.install(install, ServiceRef::new(&service));
    if let Err(e) = kernel
        .names
        .register(&name, PortalRef::new(&service), &shared, exported)
    {
        return TaskStatus::Trapped(format!("cannot register its service {name:?}: {e}"));
    }
    server.serve(keep).await
}

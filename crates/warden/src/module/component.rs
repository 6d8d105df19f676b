//! Components (WASI 0.2) as a task's code: recognised by their header,
//! compiled once (and cached) like modules, their imports checked against
//! what the component group of `host` provides, and pre-linked for the
//! world their entry runs: `wasi:cli/command` (`wasi:cli/run` is called)
//! or `wasi:http/proxy` (`wasi:http/incoming-handler` is called per
//! request).

use super::{Code, Entry, Loader};
use crate::host::TaskData;
use std::path::Path;
use wasmtime::component::{Component, InstancePre};
use wasmtime::Engine;
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi_http::p2::bindings::ProxyPre;

/// A component pre-linked for its entry's world.
pub(crate) enum Linked {
    /// A `wasi:cli/command`.
    Command(CommandPre<TaskData>),
    /// A `wasi:cli/command` importing typed interfaces, bound at its
    /// start (see `host::typed`).
    Client(CommandPre<TaskData>),
    /// A `wasi:http/proxy`.
    Proxy(ProxyPre<TaskData>),
    /// A component exporting interfaces and no `wasi:cli/run`: a typed
    /// server's (see `host::typed`).
    Reactor(InstancePre<TaskData>),
}

impl Linked {
    /// The component.
    pub(crate) fn component(&self) -> &Component {
        match self {
            Linked::Command(pre) | Linked::Client(pre) => pre.instance_pre().component(),
            Linked::Proxy(pre) => pre.instance_pre().component(),
            Linked::Reactor(pre) => pre.component(),
        }
    }

    /// The component pre-linked, whatever its world.
    pub(crate) fn instance_pre(&self) -> &InstancePre<TaskData> {
        match self {
            Linked::Command(pre) | Linked::Client(pre) => pre.instance_pre(),
            Linked::Proxy(pre) => pre.instance_pre(),
            Linked::Reactor(pre) => pre,
        }
    }
}

/// Why a `wasi:http/proxy` component cannot run as a task that has no
/// name to serve under.
pub(crate) const PROXY_AS_TASK: &str = "a wasi:http/proxy component (it exports \
     wasi:http/incoming-handler, not wasi:cli/run): serve it with `warden serve`, a route's \
     `component`, or as a component servlet, a task with a `provides` name that a route's \
     `service` names";

/// Whether `bytes` are a component's binary: WebAssembly's magic number,
/// then the component encoding's version and layer (`0d 00 01 00`).
pub(super) fn is_component(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\0asm") && bytes.get(4..8) == Some(&[0x0d, 0x00, 0x01, 0x00])
}

/// The component in `bytes`, compiled (or fetched from the cache).
pub(super) fn compile(
    loader: &Loader,
    path: &Path,
    bytes: &[u8],
) -> Result<(Component, Option<crate::cache::CacheOutcome>), String> {
    match loader.cache {
        Some(c) => c
            .load_or_compile_component(loader.engine, bytes)
            .map(|(m, o)| (m, Some(o))),
        None => Component::from_binary(loader.engine, bytes).map(|m| (m, None)),
    }
    .map_err(|e| format!("{}: invalid component: {e:#}", path.display()))
}

/// A component `warden compile` wrote, if it may be trusted.
pub(super) fn precompiled(
    engine: &Engine,
    path: &Path,
    bytes: &[u8],
    trusted: bool,
) -> Result<Component, String> {
    if !trusted {
        return Err(super::untrusted(path));
    }
    // SAFETY: as for a precompiled module (see `super::precompiled`).
    unsafe { Component::deserialize(engine, bytes) }.map_err(|e| {
        format!(
            "{}: cannot load precompiled component ({e:#}); compile it again",
            path.display()
        )
    })
}

/// `component`'s code for `entry`: every import one the host provides
/// (else refused naming the first that is not), pre-linked, and the
/// entry's export there.
pub(super) fn link(
    loader: &Loader,
    path: &Path,
    component: Component,
    entry: Entry,
) -> Result<Code, String> {
    let shown = path.display();
    let pre = pre_link(loader, &component, entry).map_err(|e| format!("{shown}: {e}"))?;
    let exports = |world| {
        format!(
            "{shown}: {}",
            missing_export(&component, loader.engine, world)
        )
    };
    // Neither a command nor an HTTP handler (whose errors say which it
    // is), and an interface of its own exported: a typed server.
    let command = has_export(&component, loader.engine, "wasi:cli/run@0.2.");
    let http = has_export(&component, loader.engine, "wasi:http/incoming-handler@");
    Ok(Code::Component(match entry {
        Entry::Command if !command && !http && exports_interfaces(&component, loader.engine) => {
            Linked::Reactor(pre)
        }
        // A component servlet's (or else refused when spawned: see
        // `PROXY_AS_TASK`).
        Entry::Command if !command && http => {
            Linked::Proxy(ProxyPre::new(pre).map_err(|_| exports(Entry::Http))?)
        }
        Entry::Command => {
            let command = CommandPre::new(pre).map_err(|_| exports(entry))?;
            match crate::host::typed_imports(&component, loader.engine).is_empty() {
                true => Linked::Command(command),
                false => Linked::Client(command),
            }
        }
        Entry::Http => Linked::Proxy(ProxyPre::new(pre).map_err(|_| exports(entry))?),
        Entry::Passive => {
            return Err(format!(
                "{shown}: a component cannot be a passive task (a passive task is a core \
                 reactor module exporting `warden_passive_call`)"
            ))
        }
    }))
}

/// `component` linked: WASI 0.2 from the shared linker, and for a
/// command or a typed server a stub for each function of each interface
/// it imports that Warden does not provide (bound when a task starts).
/// Any other import is refused, naming it.
fn pre_link(
    loader: &Loader,
    component: &Component,
    entry: Entry,
) -> Result<InstancePre<TaskData>, String> {
    let typed = crate::host::typed_imports(component, loader.engine);
    let stubbed = |name: &str| entry == Entry::Command && typed.iter().any(|(n, _)| n == name);
    if let Some(import) = crate::host::unprovided_import(component, loader.engine, &stubbed) {
        return Err(format!(
            "imports `{import}`, which Warden does not provide (components may import the 0.2 \
             versions of {}, warden:kernel 0.1, and a task's component interfaces its `binds` \
             names)",
            crate::host::PROVIDED_PACKAGES.join(", ")
        ));
    }
    let linked = match typed.is_empty() || entry != Entry::Command {
        true => loader.components.instantiate_pre(component),
        false => {
            let mut linker = loader.components.clone();
            crate::host::typed_stubs(&mut linker, component)
                .and_then(|()| linker.instantiate_pre(component))
        }
    };
    linked.map_err(|e| format!("{e:#}"))
}

fn has_export(component: &Component, engine: &Engine, prefix: &str) -> bool {
    let ty = component.component_type();
    let found = ty.exports(engine).any(|(name, _)| name.starts_with(prefix));
    found
}

/// Whether `component` exports an interface (an instance) of its own,
/// not one of WASI's worlds' (`wasi:http/incoming-handler`).
fn exports_interfaces(component: &Component, engine: &Engine) -> bool {
    use wasmtime::component::types::ComponentItem;
    let ty = component.component_type();
    let found = ty.exports(engine).any(|(name, item)| {
        matches!(item.ty, ComponentItem::ComponentInstance(_)) && !name.starts_with("wasi:")
    });
    found
}

/// Why a component does not fit `entry`'s world: the export it lacks,
/// and what it exports instead if that fits another entry.
fn missing_export(component: &Component, engine: &Engine, entry: Entry) -> String {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let has = |interface: &str| exports.iter().any(|e| e.starts_with(interface));
    match entry {
        Entry::Http if has("wasi:cli/run@") => "a wasi:cli/command component, not a \
             wasi:http/proxy one (it exports wasi:cli/run, not wasi:http/incoming-handler): \
             run it as a task"
            .into(),
        Entry::Http => "no `wasi:http/incoming-handler@0.2` export: a route's component \
             targets the wasi:http/proxy world"
            .into(),
        _ if has("wasi:http/incoming-handler@") => PROXY_AS_TASK.into(),
        _ => format!(
            "no `wasi:cli/run@0.2` export: Warden runs wasi:cli/command components \
             (it exports: {})",
            if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            }
        ),
    }
}

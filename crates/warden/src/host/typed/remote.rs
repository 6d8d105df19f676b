//! Typed calls across nodes. A typed import whose service another node
//! serves (an exported typed service, reached through the cluster's
//! relay as a byte service is) is bound and called with byte calls
//! through that portal, in frames the serving node's host answers for
//! its typed server ([`serve_bytes`]):
//!
//! - `wtc1`, an operation byte, the client's interface name (a u32
//!   length and its UTF-8), then the operation's part;
//! - **check** (1): the number of functions (u32), then each function's
//!   name and type as WIT writes it (`func(key: string) -> u32`), both
//!   strings: the server compares them with its export's, as a local
//!   binding compares types (the texts spell out every record, variant
//!   and resource name, so equal texts are equal types);
//! - **call** (2): the function's name, then its arguments (`wire`).
//!
//! The answer is a byte, 0 for done (then `wtc1` for a check, the call's
//! results, `wire`, for a call) or 1 for failed (then why, in UTF-8). Resources do not
//! cross nodes: an interface with one is refused at bind. The call is a
//! byte call of the client's: its `max_message_bytes` bounds both ways,
//! its `call_timeout` the wait, and a node's death is `peer-died`.

use super::server::{Failed, TypedServer};
use super::{check, copy, wire};
use crate::host::TaskData;
use crate::ipc::service::{CallSlot, PortalRef, Service};
use crate::ipc::Errno;
use crate::task::TaskShared;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::types::{ComponentItem, Type};
use wasmtime::component::{Component, Val};
use wasmtime::StoreContextMut;

const MAGIC: &[u8; 4] = b"wtc1";
const CHECK: u8 = 1;
const CALL: u8 = 2;

/// A typed import bound to a service on another node.
pub(super) struct Remote {
    pub(super) iface: String,
    service: Arc<Service>,
    via: usize,
    /// Each imported function: its name, parameter and result types.
    funcs: Vec<(String, Vec<Type>, Vec<Type>)>,
    /// Each one's failures: a `warden:kernel` error, or a trap.
    pub(super) soft: Vec<bool>,
    /// Its calls' request and answer, one at a time.
    slot: Arc<CallSlot>,
    _portal: PortalRef,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
}

fn header(op: u8, iface: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(op);
    put_str(&mut out, iface);
    out
}

/// A frame being read.
struct Frame<'a>(&'a [u8]);

impl<'a> Frame<'a> {
    fn u32(&mut self) -> Result<u32, String> {
        let (n, rest) = self.0.split_first_chunk::<4>().ok_or("a frame cut short")?;
        self.0 = rest;
        Ok(u32::from_le_bytes(*n))
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.u32()? as usize;
        let s = self.0.get(..n).ok_or("a frame cut short")?;
        self.0 = &self.0[n..];
        std::str::from_utf8(s).map_err(|_| "a name that is not UTF-8".into())
    }
}

/// The answer to a frame from another node for the typed server
/// `server` (a byte call reaching it through the cluster).
pub(crate) async fn serve_bytes(server: &TypedServer, request: &[u8]) -> Result<Vec<u8>, Errno> {
    let rest = request.strip_prefix(MAGIC).ok_or(Errno::Inval)?;
    let (&op, rest) = rest.split_first().ok_or(Errno::Inval)?;
    let mut f = Frame(rest);
    let answer = match (op, f.str()) {
        (_, Err(e)) => Err(e),
        (CHECK, Ok(iface)) => checked(server, iface, &mut f),
        (CALL, Ok(iface)) => called(server, iface, &mut f).await,
        _ => Err("an unknown operation".into()),
    };
    Ok(match answer {
        Ok(mut bytes) => {
            bytes.insert(0, 0);
            bytes
        }
        Err(why) => [&[1u8][..], why.as_bytes()].concat(),
    })
}

/// The served export the client's `iface` is, and its type.
fn export_of(
    server: &TypedServer,
    iface: &str,
) -> Result<(String, wasmtime::component::types::ComponentInstance), String> {
    let export = (server.serves.iter())
        .find(|s| super::compatible(iface, s))
        .ok_or_else(|| format!("the server does not serve {iface}"))?;
    let engine = server.component.engine();
    match (server.component.component_type())
        .get_export(engine, export)
        .map(|e| e.ty)
    {
        Some(ComponentItem::ComponentInstance(inst)) => Ok((export.clone(), inst)),
        _ => Err(format!("the server does not serve {iface}")),
    }
}

fn checked(server: &TypedServer, iface: &str, f: &mut Frame<'_>) -> Result<Vec<u8>, String> {
    let engine = server.component.engine();
    let (_, inst) = export_of(server, iface)?;
    if !check::resources(engine, &inst).is_empty() {
        return Err(format!("{iface}: its resources do not cross nodes"));
    }
    let have = check::texts(engine, &inst);
    for _ in 0..f.u32()? {
        let (name, want) = (f.str()?, f.str()?);
        match have.iter().find(|(n, _)| n == name) {
            None => {
                return Err(format!(
                    "{iface}: the server has no function {name} (the client imports {want})"
                ))
            }
            Some((_, t)) if t != want => {
                return Err(format!(
                    "{iface}: function {name}: the client's type is {want} but the server's is {t}"
                ))
            }
            Some(_) => {}
        }
    }
    // Said back, so that a byte service answering anything is no match.
    Ok(MAGIC.to_vec())
}

async fn called(server: &TypedServer, iface: &str, f: &mut Frame<'_>) -> Result<Vec<u8>, String> {
    let engine = server.component.engine();
    let (export, inst) = export_of(server, iface)?;
    let name = f.str()?;
    let func = server.func_index(&export, name).ok_or("no such function")?;
    let Some(ComponentItem::ComponentFunc(ty)) = inst.get_export(engine, name).map(|e| e.ty) else {
        return Err("no such function".into());
    };
    let params: Vec<Type> = ty.params().map(|(_, t)| t).collect();
    let results: Vec<Type> = ty.results().collect();
    let vals = wire::read_all(f.0, &params)?;
    let began = crate::clock::ticks::now();
    let out = server.call_from_host(func, vals, results.len()).await;
    let stats = &server.funcs[func].stats;
    stats.count(crate::clock::ticks::ns_since(began));
    let out = out.inspect_err(|_| stats.fail()).map_err(|e| e.why)?;
    let mut bytes = Vec::new();
    for (v, t) in out.iter().zip(&results) {
        wire::write(v, t, &mut bytes)?;
    }
    stats.copied((f.0.len() + bytes.len()) as u64);
    Ok(bytes)
}

/// Binds the import `iface` of `component` (its functions `funcs`) to
/// `service`, which `portal` reaches on another node: checked there.
pub(super) async fn bind(
    shared: &Arc<TaskShared>,
    component: &Component,
    (iface, funcs): (&str, &[String]),
    (portal, service): (PortalRef, &str),
) -> Result<Remote, String> {
    let engine = component.engine();
    let ty = component.component_type();
    let Some(ComponentItem::ComponentInstance(inst)) = ty.get_import(engine, iface).map(|e| e.ty)
    else {
        return Err(format!("{iface}: not an interface"));
    };
    if !check::resources(engine, &inst).is_empty() {
        return Err(format!(
            "binds {iface} to {service:?}, served on another node: its resources do not cross nodes"
        ));
    }
    let texts = check::texts(engine, &inst);
    let mut frame = header(CHECK, iface);
    frame.extend((texts.len() as u32).to_le_bytes());
    for (name, text) in &texts {
        put_str(&mut frame, name);
        put_str(&mut frame, text);
    }
    let remote = Remote {
        iface: iface.to_string(),
        service: portal.service().clone(),
        via: portal.via(),
        funcs: funcs.iter().map(|f| types_of(engine, &inst, f)).collect(),
        soft: super::soft_funcs(component, iface, funcs),
        slot: CallSlot::new(shared.clone()),
        _portal: portal,
    };
    let answer = byte_call(shared, &remote, &frame, Some(super::BIND_WAIT)).await;
    match answer.as_deref().map(<[u8]>::split_first) {
        Ok(Some((0, said))) if said == MAGIC => Ok(remote),
        Ok(Some((1, why))) => Err(String::from_utf8_lossy(why).into_owned()),
        Ok(_) => Err(format!(
            "binds {iface} to {service:?}, which is not a typed service"
        )),
        Err(e) => Err(format!(
            "binds {iface} to {service:?}, whose check failed: {e}"
        )),
    }
}

fn types_of(
    engine: &wasmtime::Engine,
    inst: &wasmtime::component::types::ComponentInstance,
    name: &str,
) -> (String, Vec<Type>, Vec<Type>) {
    match inst.get_export(engine, name).map(|e| e.ty) {
        Some(ComponentItem::ComponentFunc(f)) => (
            name.to_string(),
            f.params().map(|(_, t)| t).collect(),
            f.results().collect(),
        ),
        _ => (name.to_string(), Vec::new(), Vec::new()),
    }
}

/// Calls function `j` of `r` with `params` from the task whose store is
/// `store`, its results into `results`.
pub(super) async fn call(
    store: &mut StoreContextMut<'_, TaskData>,
    r: &Remote,
    j: usize,
    params: &[Val],
    results: &mut [Val],
) -> Result<(), Failed> {
    let state = &store.data().groups.typed;
    let (cap, timeout) = (state.max_bytes, state.call_timeout);
    let failed = |errno, why: String| Failed { errno, why };
    copy::size(params, cap)
        .map_err(|n| failed(Errno::Quota, copy::refusal("arguments", n, cap).to_string()))?;
    let (name, ptypes, rtypes) = &r.funcs[j];
    let mut frame = header(CALL, &r.iface);
    put_str(&mut frame, name);
    for (v, t) in params.iter().zip(ptypes) {
        wire::write(v, t, &mut frame).map_err(|e| failed(Errno::Inval, e))?;
    }
    let shared = store.data().shared.clone();
    let answer = byte_call(&shared, r, &frame, timeout).await.map_err(|e| {
        let errno = if e == Errno::Timeout {
            e
        } else {
            Errno::PeerDied
        };
        failed(errno, format!("the call to another node failed: {e}"))
    })?;
    let vals = match answer.split_first() {
        Some((0, rest)) => wire::read_all(rest, rtypes)
            .map_err(|e| failed(Errno::PeerDied, format!("a malformed answer: {e}")))?,
        Some((1, why)) => return Err(String::from_utf8_lossy(why).into_owned().into()),
        _ => return Err(failed(Errno::PeerDied, "an empty answer".into())),
    };
    copy::size(&vals, cap)
        .map_err(|n| failed(Errno::Quota, copy::refusal("results", n, cap).to_string()))?;
    for (slot, v) in results.iter_mut().zip(vals) {
        *slot = v;
    }
    Ok(())
}

/// A byte call of `request` through `r`'s portal from the task
/// `shared`, waiting at most `timeout`: the answer.
async fn byte_call(
    shared: &Arc<TaskShared>,
    r: &Remote,
    request: &[u8],
    timeout: Option<Duration>,
) -> Result<Vec<u8>, Errno> {
    let ns = timeout.map_or(-1, |d| d.as_nanos().min(i64::MAX as u128) as i64);
    let to = (&*r.service, r.via);
    crate::host::calls::call_bytes_in(&r.slot, shared, to, request, ns).await
}

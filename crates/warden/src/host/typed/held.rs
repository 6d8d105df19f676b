//! Resources as capabilities across typed calls (JX's portals to
//! service objects, Luna's revocable remote pointers).
//!
//! A resource a server's interface defines (`resource counter`) lives in
//! the server's store; a handle to it given to a client (`own<counter>`
//! in a result) stays in the server's store too, held by the host. The
//! client gets a handle of its own, to a resource type of its import
//! (one per import and resource, [`type_id`]), whose representation is
//! a slot in its [`Table`]. So a handle means something only in the task
//! it was given to, and only for the service that made it:
//!
//! - a call passing the handle (`borrow<counter>`, `own<counter>`, the
//!   method's `self`) is checked against the binding's server and the
//!   import's resource type, then the server's own handle goes in its
//!   place; passing `own` gives it back (the slot empties);
//! - the client's drop of its handle, or its death (its table goes with
//!   its store), releases the server's: the server's destructor runs on
//!   the server's task, before its next call ([`TypedServer::release`]);
//! - the server's death revokes every handle to its resources: they stay
//!   in clients' tables, and a call with one fails as any call to an
//!   ended server does, naming it;
//! - a client holds at most its `max_handles` of them: a call whose
//!   results would take more fails, its handles released.

use super::server::TypedServer;
use crate::host::TaskData;
use std::sync::Arc;
use wasmtime::component::{ResourceAny, ResourceDynamic, ResourceType, Val};
use wasmtime::StoreContextMut;

/// The client-side resource type of its import `i`'s `k`-th resource:
/// distinct within the client's component, so that Wasmtime refuses one
/// import's handle where another's is expected.
pub(super) fn type_id(i: usize, k: usize) -> u32 {
    ((i as u32) << 16) | k as u32
}

/// One resource a client holds: the server's handle to it (in the
/// server's store), released when this goes.
pub(super) struct Held {
    server: Arc<TypedServer>,
    res: Option<ResourceAny>,
    /// The client's type of it ([`type_id`]).
    ty: u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(r) = self.res.take() {
            self.server.release(r);
        }
    }
}

/// The resources a client holds, by the representation of its handles.
#[derive(Default)]
pub(crate) struct Table {
    slots: Vec<Option<Held>>,
    free: Vec<u32>,
    live: usize,
}

impl Table {
    fn insert(&mut self, held: Held) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(rep) => {
                self.slots[rep as usize] = Some(held);
                rep
            }
            None => {
                self.slots.push(Some(held));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Takes the resource out of slot `rep`: dropped, it is released.
    pub(super) fn take(&mut self, rep: u32) -> Option<Held> {
        let held = self.slots.get_mut(rep as usize)?.take()?;
        self.live -= 1;
        self.free.push(rep);
        Some(held)
    }

    fn get(&self, rep: u32) -> Option<&Held> {
        self.slots.get(rep as usize)?.as_ref()
    }
}

/// How a binding's resource types correspond: the server's type of each,
/// and the client's ([`type_id`]).
pub(super) type Types = Vec<(ResourceType, u32)>;

/// Replaces each of the client's handles in `vals` (its call's
/// arguments) by the server's handle to the same resource, checking it
/// was given by `server`; an `own` handle passed goes back to the server.
pub(super) fn to_server(
    store: &mut StoreContextMut<'_, TaskData>,
    server: &Arc<TypedServer>,
    vals: &mut [Val],
) -> wasmtime::Result<()> {
    each(vals, &mut |v| match v {
        Val::Resource(r) => {
            *r = exchange(store, server, *r)?;
            Ok(())
        }
        _ => Ok(()),
    })
}

fn exchange(
    store: &mut StoreContextMut<'_, TaskData>,
    server: &Arc<TypedServer>,
    mine: ResourceAny,
) -> wasmtime::Result<ResourceAny> {
    let d = ResourceDynamic::try_from_resource_any(mine, &mut *store)?;
    let table = &mut store.data_mut().groups.typed.held;
    let foreign = || wasmtime::Error::msg("a handle this service did not give");
    let held = table.get(d.rep()).ok_or_else(foreign)?;
    if !Arc::ptr_eq(&held.server, server) || held.ty != d.ty() {
        return Err(foreign());
    }
    let theirs = held.res.ok_or_else(foreign)?;
    if d.owned() {
        // Given back: the server's handle is the server's again.
        let mut held = table.take(d.rep()).expect("found above");
        held.res = None;
    }
    Ok(theirs)
}

/// Replaces each of the server's handles in `vals` (a call's results)
/// by a handle of the client's own, of the client's type for it
/// (`types`); once the client would hold more than `cap`, releases them
/// all and fails instead.
pub(super) fn to_client(
    store: &mut StoreContextMut<'_, TaskData>,
    (server, types): (&Arc<TypedServer>, &Types),
    vals: &mut [Val],
    cap: usize,
) -> wasmtime::Result<()> {
    let mut n = 0usize;
    each(vals, &mut |v| {
        n += matches!(v, Val::Resource(_)) as usize;
        Ok(())
    })?;
    let held = store.data().groups.typed.held.live;
    if n > 0 && held.saturating_add(n) > cap {
        release(server, vals);
        return Err(wasmtime::Error::msg(format!(
            "its results hold {n} handles, past the caller's max_handles ({cap}; it holds {held})"
        )));
    }
    let mut out = Ok(());
    each(vals, &mut |v| {
        if let Val::Resource(r) = v {
            match out.is_ok() {
                true => match give(store, (server, types), *r) {
                    Ok(mine) => *r = mine,
                    Err(e) => out = Err(e),
                },
                false => server.release(*r),
            }
        }
        Ok(())
    })?;
    out
}

fn give(
    store: &mut StoreContextMut<'_, TaskData>,
    (server, types): (&Arc<TypedServer>, &Types),
    theirs: ResourceAny,
) -> wasmtime::Result<ResourceAny> {
    let Some(&(_, ty)) = types.iter().find(|(t, _)| *t == theirs.ty()) else {
        server.release(theirs);
        return Err(wasmtime::Error::msg(
            "a handle of a type the interface lacks",
        ));
    };
    let held = Held {
        server: server.clone(),
        res: Some(theirs),
        ty,
    };
    let rep = store.data_mut().groups.typed.held.insert(held);
    ResourceDynamic::new_own(rep, ty).try_into_resource_any(&mut *store)
}

/// Releases every server handle in `vals` (results not delivered).
fn release(server: &TypedServer, vals: &mut [Val]) {
    let _ = each(vals, &mut |v| {
        if let Val::Resource(r) = v {
            server.release(*r);
        }
        Ok(())
    });
}

/// Calls `f` on every value in `vals`, nested ones included.
fn each(
    vals: &mut [Val],
    f: &mut dyn FnMut(&mut Val) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    for v in vals {
        match v {
            Val::List(vs) | Val::Tuple(vs) | Val::FixedLengthList(vs) => each(vs, f)?,
            Val::Record(fs) => {
                for (_, v) in fs {
                    each(std::slice::from_mut(v), f)?;
                }
            }
            Val::Variant(_, Some(b)) | Val::Option(Some(b)) => {
                each(std::slice::from_mut(&mut **b), f)?
            }
            Val::Result(Ok(Some(b))) | Val::Result(Err(Some(b))) => {
                each(std::slice::from_mut(&mut **b), f)?
            }
            other => f(other)?,
        }
    }
    Ok(())
}

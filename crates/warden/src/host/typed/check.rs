//! The binding check: an importer's interface against a server's export,
//! function by function and type by type (structurally: two components'
//! types are never the same objects), and the shapes a typed call cannot
//! carry. Every refusal is one line naming the interface, the function
//! and both types.
//!
//! A resource the interface defines crosses as a handle (see `held`);
//! two resource types are the same if they have the same name in their
//! interfaces. A resource of another interface does not cross.

use wasmtime::component::types::{ComponentFunc, ComponentInstance, ComponentItem, Type};
use wasmtime::component::ResourceType;
use wasmtime::Engine;

/// The resource types an interface defines, with their names.
pub(crate) fn resources(engine: &Engine, inst: &ComponentInstance) -> Vec<(ResourceType, String)> {
    (inst.exports(engine))
        .filter_map(|(name, item)| match item.ty {
            ComponentItem::Resource(r) => Some((r, name.to_string())),
            _ => None,
        })
        .collect()
}

/// Both sides' resource types, by name: how two resource types are
/// compared.
struct Names {
    client: Vec<(ResourceType, String)>,
    server: Vec<(ResourceType, String)>,
}

impl Names {
    fn same(&self, a: &ResourceType, b: &ResourceType) -> bool {
        let name = |all: &[(ResourceType, String)], r: &ResourceType| {
            all.iter().find(|(t, _)| t == r).map(|(_, n)| n.clone())
        };
        matches!((name(&self.client, a), name(&self.server, b)), (Some(x), Some(y)) if x == y)
    }
}

/// Checks that `server` (an exported instance) gives every function
/// `client` (an imported one) expects, with the same types. `iface`
/// names the interface in the refusal.
pub(crate) fn check(
    engine: &Engine,
    iface: &str,
    client: &ComponentInstance,
    server: &ComponentInstance,
) -> Result<(), String> {
    let names = Names {
        client: resources(engine, client),
        server: resources(engine, server),
    };
    for (name, item) in client.exports(engine) {
        let ComponentItem::ComponentFunc(want) = item.ty else {
            continue;
        };
        let Some(ComponentItem::ComponentFunc(have)) =
            server.get_export(engine, name).map(|e| e.ty)
        else {
            return Err(format!(
                "{iface}: the server has no function {name} (the client imports {})",
                func_text(&want, &names.client)
            ));
        };
        if !same_func(&want, &have, &names) {
            return Err(format!(
                "{iface}: function {name}: the client's type is {} but the server's is {}",
                func_text(&want, &names.client),
                func_text(&have, &names.server)
            ));
        }
    }
    Ok(())
}

/// Why `iface`'s functions cannot cross a typed call, if one of them has
/// a shape Warden does not carry (another interface's resources,
/// streams, futures, maps).
pub(crate) fn unsupported(
    engine: &Engine,
    iface: &str,
    inst: &ComponentInstance,
) -> Option<String> {
    let own: Vec<ResourceType> = resources(engine, inst)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    for (name, item) in inst.exports(engine) {
        let why = match item.ty {
            ComponentItem::ComponentFunc(f) => {
                let mut types = f.params().map(|(_, t)| t).chain(f.results());
                types.find_map(|t| carried(&t, &own).err())
            }
            _ => None,
        };
        if let Some(why) = why {
            return Some(format!(
                "{iface}: {name} uses {why}, which cannot cross a typed call between tasks yet"
            ));
        }
    }
    None
}

/// Whether values of `t` can be copied from one task to another, given
/// the resource types `own` of its interface (whose handles cross).
fn carried(t: &Type, own: &[ResourceType]) -> Result<(), String> {
    let each = |ts: &mut dyn Iterator<Item = Type>| -> Result<(), String> {
        ts.map(|t| carried(&t, own)).collect()
    };
    match t {
        Type::List(l) => carried(&l.ty(), own),
        Type::Record(r) => each(&mut r.fields().map(|f| f.ty)),
        Type::Tuple(t) => each(&mut t.types()),
        Type::Variant(v) => each(&mut v.cases().filter_map(|c| c.ty)),
        Type::Option(o) => carried(&o.ty(), own),
        Type::Result(r) => each(&mut r.ok().into_iter().chain(r.err())),
        Type::Own(r) | Type::Borrow(r) if own.contains(r) => Ok(()),
        Type::Own(_) | Type::Borrow(_) => Err("a resource another interface defines".into()),
        Type::Future(_) | Type::Stream(_) | Type::ErrorContext => Err("an async type".into()),
        Type::Map(_) | Type::FixedLengthList(_) => Err(format!("a {}", type_text(t, &[]))),
        _ => Ok(()),
    }
}

fn same_func(a: &ComponentFunc, b: &ComponentFunc, n: &Names) -> bool {
    a.async_() == b.async_()
        && a.params().len() == b.params().len()
        && a.params()
            .zip(b.params())
            .all(|((_, x), (_, y))| same(&x, &y, n))
        && a.results().len() == b.results().len()
        && a.results().zip(b.results()).all(|(x, y)| same(&x, &y, n))
}

/// Structural equality: the same shape, names and order (resource
/// types: the same names, see [`Names`]).
fn same(a: &Type, b: &Type, n: &Names) -> bool {
    let all = |x: &mut dyn ExactSizeIterator<Item = Type>,
               y: &mut dyn ExactSizeIterator<Item = Type>| {
        x.len() == y.len() && x.zip(y).all(|(p, q)| same(&p, &q, n))
    };
    let opt = |x: Option<Type>, y: Option<Type>| match (x, y) {
        (None, None) => true,
        (Some(p), Some(q)) => same(&p, &q, n),
        _ => false,
    };
    match (a, b) {
        (Type::List(x), Type::List(y)) => same(&x.ty(), &y.ty(), n),
        (Type::Record(x), Type::Record(y)) => {
            x.fields().len() == y.fields().len()
                && x.fields()
                    .zip(y.fields())
                    .all(|(p, q)| p.name == q.name && same(&p.ty, &q.ty, n))
        }
        (Type::Tuple(x), Type::Tuple(y)) => all(&mut x.types(), &mut y.types()),
        (Type::Variant(x), Type::Variant(y)) => {
            x.cases().len() == y.cases().len()
                && x.cases()
                    .zip(y.cases())
                    .all(|(p, q)| p.name == q.name && opt(p.ty, q.ty))
        }
        (Type::Enum(x), Type::Enum(y)) => x.names().eq(y.names()),
        (Type::Flags(x), Type::Flags(y)) => x.names().eq(y.names()),
        (Type::Option(x), Type::Option(y)) => same(&x.ty(), &y.ty(), n),
        (Type::Result(x), Type::Result(y)) => opt(x.ok(), y.ok()) && opt(x.err(), y.err()),
        (Type::Own(x), Type::Own(y)) | (Type::Borrow(x), Type::Borrow(y)) => n.same(x, y),
        (Type::Own(_) | Type::Borrow(_), _) | (_, Type::Own(_) | Type::Borrow(_)) => false,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b) && scalar(a),
    }
}

/// Whether `t` has no parts (so that its kind is its whole type).
fn scalar(t: &Type) -> bool {
    matches!(
        t,
        Type::Bool
            | Type::S8
            | Type::U8
            | Type::S16
            | Type::U16
            | Type::S32
            | Type::U32
            | Type::S64
            | Type::U64
            | Type::Float32
            | Type::Float64
            | Type::Char
            | Type::String
    )
}

/// The resource types of an interface, with their names.
type Resources = [(ResourceType, String)];

/// Each function of `inst` with its type as WIT writes it: what two
/// nodes compare when a typed import binds across them.
pub(crate) fn texts(engine: &Engine, inst: &ComponentInstance) -> Vec<(String, String)> {
    let res = resources(engine, inst);
    (inst.exports(engine))
        .filter_map(|(name, item)| match item.ty {
            ComponentItem::ComponentFunc(f) => Some((name.to_string(), func_text(&f, &res))),
            _ => None,
        })
        .collect()
}

/// A function type as WIT writes it: `func(key: string) -> option<u32>`,
/// its resource types named from `res`.
fn func_text(f: &ComponentFunc, res: &Resources) -> String {
    let params: Vec<String> = f
        .params()
        .map(|(n, t)| format!("{n}: {}", type_text(&t, res)))
        .collect();
    let results: Vec<String> = f.results().map(|t| type_text(&t, res)).collect();
    let arrow = match results.len() {
        0 => String::new(),
        _ => format!(" -> {}", results.join(", ")),
    };
    let kind = if f.async_() { "async func" } else { "func" };
    format!("{kind}({}){arrow}", params.join(", "))
}

/// A type as WIT writes it, named types spelt out (`record { a: u32 }`),
/// resource types named from `res`.
fn type_text(t: &Type, res: &Resources) -> String {
    let list = |ts: Vec<String>| ts.join(", ");
    let type_text = |t: &Type| type_text(t, res);
    let name = |r: &ResourceType| {
        let found = res.iter().find(|(x, _)| x == r);
        found.map_or("resource", |(_, n)| n.as_str()).to_string()
    };
    match t {
        Type::List(l) => format!("list<{}>", type_text(&l.ty())),
        Type::Record(r) => format!(
            "record {{ {} }}",
            list(
                r.fields()
                    .map(|f| format!("{}: {}", f.name, type_text(&f.ty)))
                    .collect()
            )
        ),
        Type::Tuple(t) => format!(
            "tuple<{}>",
            list(t.types().map(|t| type_text(&t)).collect())
        ),
        Type::Variant(v) => format!(
            "variant {{ {} }}",
            list(
                v.cases()
                    .map(|c| match c.ty {
                        Some(t) => format!("{}({})", c.name, type_text(&t)),
                        None => c.name.to_string(),
                    })
                    .collect()
            )
        ),
        Type::Enum(e) => format!(
            "enum {{ {} }}",
            list(e.names().map(str::to_string).collect())
        ),
        Type::Flags(f) => format!(
            "flags {{ {} }}",
            list(f.names().map(str::to_string).collect())
        ),
        Type::Option(o) => format!("option<{}>", type_text(&o.ty())),
        Type::Result(r) => {
            let part = |t: Option<Type>| t.map_or("_".to_string(), |t| type_text(&t));
            format!("result<{}, {}>", part(r.ok()), part(r.err()))
        }
        Type::Own(r) => format!("own<{}>", name(r)),
        Type::Borrow(r) => format!("borrow<{}>", name(r)),
        other => scalar_text(other).to_string(),
    }
}

fn scalar_text(t: &Type) -> &'static str {
    match t {
        Type::Bool => "bool",
        Type::S8 => "s8",
        Type::U8 => "u8",
        Type::S16 => "s16",
        Type::U16 => "u16",
        Type::S32 => "s32",
        Type::U32 => "u32",
        Type::S64 => "s64",
        Type::U64 => "u64",
        Type::Float32 => "f32",
        Type::Float64 => "f64",
        Type::Char => "char",
        Type::String => "string",
        Type::Map(_) => "map",
        Type::FixedLengthList(_) => "fixed-length list",
        Type::Future(_) => "future",
        Type::Stream(_) => "stream",
        _ => "error-context",
    }
}

/// Whether `f` returns `result<_, E>` with `E` an enum of exactly the
/// cases of `warden:kernel/errors.error` (used from that package, or a
/// copy of it): a failed call then returns the error instead of
/// trapping its caller.
pub(crate) fn returns_kernel_error(f: &ComponentFunc) -> bool {
    let mut results = f.results();
    let (Some(Type::Result(r)), None) = (results.next(), results.next()) else {
        return false;
    };
    match r.err() {
        Some(Type::Enum(e)) => e.names().eq(crate::ipc::Errno::NAMES),
        _ => false,
    }
}

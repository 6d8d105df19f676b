//! Paths under a served directory, resolved as WASI resolves them: one
//! name at a time from the directory descriptor the call names, with
//! `..` taken from the names walked so far (never from the file
//! system's own `..` entries) and refused above that descriptor, an
//! absolute path or symbolic link target refused, and at most
//! [`MAX_LINKS`] symbolic links followed.

use super::client::{rpc, with_reply, Data};
use super::proto::{errno, Attr, Req, GETATTR, LOOKUP, READLINK};
use crate::host::guest::{memory, range};
use crate::host::TaskData;
use wasmtime::Caller;

/// The most symbolic links one path may pass through (Linux's number).
const MAX_LINKS: u32 = 40;
/// The longest path a call may name.
const MAX_PATH: u32 = 4096;
/// The longest name in a directory.
const MAX_NAME: usize = 255;

/// Where a path leads: its last name in its parent directory, and what
/// that name holds (or why not). A path that ends at a directory it
/// walked through (`.`, `..`, `dir/.`) has an empty name and that
/// directory's attributes.
pub(super) struct Target {
    pub(super) parent: u64,
    pub(super) name: Vec<u8>,
    pub(super) found: Result<Attr, i32>,
    /// The path ended with `/`: it must name a directory.
    pub(super) slash: bool,
}

/// The path of `len` bytes at `ptr` in the task's memory.
pub(super) fn read_path(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32) -> Result<Vec<u8>, i32> {
    let (mem, _) = memory(c).map_err(|_| errno::FAULT)?;
    if len as u32 > MAX_PATH {
        return Err(errno::NAMETOOLONG);
    }
    let r = range(mem.len(), ptr, len as u32 as u64).map_err(|_| errno::FAULT)?;
    let path = mem.read_vec(r);
    if std::str::from_utf8(&path).is_err() {
        return Err(errno::ILSEQ);
    }
    if path.contains(&0) {
        return Err(errno::INVAL);
    }
    Ok(path)
}

/// Resolves `path` from directory `start` of mount `mount`, following a
/// symbolic link in its last name only if `follow` (or the path ends
/// with `/`).
pub(super) async fn resolve(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    start: u64,
    path: &[u8],
    follow: bool,
) -> Result<Target, i32> {
    if path.is_empty() {
        return Err(errno::NOENT);
    }
    if path[0] == b'/' {
        return Err(errno::PERM);
    }
    let slash = path.ends_with(b"/");
    let mut stack = vec![start];
    let mut todo = components(path);
    let mut links = 0;
    while let Some(name) = todo.pop() {
        let last = todo.is_empty();
        match name.as_slice() {
            b"." => {}
            b".." if stack.len() == 1 => return Err(errno::PERM),
            b".." => drop(stack.pop()),
            _ if name.len() > MAX_NAME => return Err(errno::NAMETOOLONG),
            _ => {
                let dir = *stack.last().unwrap();
                let found = lookup(c, mount, dir, &name).await;
                let link = matches!(&found, Ok(a) if a.is_symlink());
                if last && !(link && (follow || slash)) {
                    return Ok(Target {
                        parent: dir,
                        name,
                        found,
                        slash,
                    });
                }
                let attr = found?;
                if link {
                    links += 1;
                    let target = link_target(c, mount, attr.ino, links).await?;
                    todo.extend(components(&target));
                    continue;
                }
                if !attr.is_dir() {
                    return Err(errno::NOTDIR);
                }
                stack.push(attr.ino);
            }
        }
    }
    let dir = *stack.last().unwrap();
    Ok(Target {
        parent: dir,
        name: Vec::new(),
        found: getattr(c, mount, dir).await,
        slash,
    })
}

/// The target of symbolic link `ino`, the `links`th on a path: refused
/// past [`MAX_LINKS`] (`ELOOP`), if absolute (`EPERM`) or empty.
async fn link_target(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    ino: u64,
    links: u32,
) -> Result<Vec<u8>, i32> {
    if links > MAX_LINKS {
        return Err(errno::LOOP);
    }
    let target = readlink(c, mount, ino).await?;
    match target.first() {
        Some(b'/') => Err(errno::PERM),
        None => Err(errno::NOENT),
        Some(_) => Ok(target),
    }
}

/// `path`'s names, last first (so that popping walks them in order).
fn components(path: &[u8]) -> Vec<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|n| !n.is_empty())
        .rev()
        .map(<[u8]>::to_vec)
        .collect()
}

/// The attributes a request that answers with them got.
pub(super) async fn attr_of(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    q: &Req<'_>,
    data: Data<'_>,
) -> Result<Attr, i32> {
    rpc(c, mount, q, data).await?;
    with_reply(c, |_, p| Attr::decode(p))?.2.ok_or(errno::IO)
}

/// What `name` in directory `dir` holds.
pub(super) async fn lookup(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    dir: u64,
    name: &[u8],
) -> Result<Attr, i32> {
    let q = Req {
        name,
        ..Req::on(LOOKUP, dir)
    };
    attr_of(c, mount, &q, Data::None).await
}

/// File `ino`'s attributes.
pub(super) async fn getattr(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    ino: u64,
) -> Result<Attr, i32> {
    attr_of(c, mount, &Req::on(GETATTR, ino), Data::None).await
}

/// Symbolic link `ino`'s target.
pub(super) async fn readlink(
    c: &mut Caller<'_, TaskData>,
    mount: usize,
    ino: u64,
) -> Result<Vec<u8>, i32> {
    rpc(c, mount, &Req::on(READLINK, ino), Data::None).await?;
    Ok(with_reply(c, |_, p| p.to_vec())?.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_walked_in_order_without_empty_ones() {
        let mut c = components(b"a//b/./c/");
        assert_eq!(c.pop().unwrap(), b"a");
        assert_eq!(c.pop().unwrap(), b"b");
        assert_eq!(c.pop().unwrap(), b".");
        assert_eq!(c.pop().unwrap(), b"c");
        assert!(c.is_empty());
    }
}

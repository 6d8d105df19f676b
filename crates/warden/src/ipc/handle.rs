//! A task's handle table.
//!
//! A handle is a non-negative `i32`: bits 0–15 index the table, bits
//! 16–29 hold the entry's generation, which changes every time the entry
//! is reused, so a closed handle stays dead (stale handles fail instead of
//! naming a newer object). An entry whose generation has run through all
//! 16,383 values is retired rather than wrapped, so no handle number is
//! ever handed out twice; a table can hand out about a billion handles
//! (65,536 entries × 16,383) before it refuses more with `Quota`. Bit 30 ([`MOVE`]) is never part of a handle: in
//! a message's handle list it asks to move the handle instead of copying
//! it. Tables are private to their task (only its own host calls touch
//! them), so a number from another task's table means nothing here.
//!
//! Each live entry is charged [`HANDLE_BYTES`] to the task's memory budget,
//! and a table holds at most its task's `max_handles` entries. An entry
//! holding a socket also takes one of the task's socket slots
//! (`max_sockets`) and is charged the socket's host buffers: every holder
//! pays for what it can keep alive.

use super::memobj::MemView;
use super::permit::PermitRef;
use super::service::{CallRef, PortalRef, ServiceRef};
use super::Errno;
use crate::net::socket::{Conn, Listener, LISTENER_BYTES};
use crate::task::TaskShared;
use std::sync::Arc;

/// Bytes charged to a task's memory budget per live handle.
pub const HANDLE_BYTES: u64 = 64;

/// In a message's handle list: move this handle rather than duplicate it.
pub const MOVE: i32 = 1 << 30;

const INDEX_BITS: u32 = 16;
const GEN_MASK: u32 = (1 << 14) - 1;

/// Largest number of entries a table can have.
pub const MAX_HANDLES: usize = 1 << INDEX_BITS;

/// A kernel object as held in a handle table or a message.
pub enum Object {
    /// The right to serve a service.
    Service(ServiceRef),
    /// The right to call a service.
    Portal(PortalRef),
    /// A call received and not yet answered.
    Call(CallRef),
    /// A view of a memory object.
    Mem(MemView),
    /// A permit to another task's memory.
    Permit(PermitRef),
    /// A child task (its parent's handle to it).
    Task(Arc<TaskShared>),
    /// A module the task may spawn children from: its name and file.
    Module(Arc<(String, std::path::PathBuf)>),
    /// A listening TCP socket.
    Listener(Arc<Listener>),
    /// A TCP connection.
    Conn(Arc<Conn>),
    /// A servlet request's exchange (see `exchange`).
    Exchange(super::exchange::ExchangeEnd),
    /// The claim on a block device (not copied, not sent: see `dev`).
    Device(crate::dev::Claim),
    /// A supervisor of the task's children (not copied, not sent:
    /// closing it kills them).
    Supervisor(Arc<super::supervisor::Supervised>),
}

impl Object {
    /// A second reference to the same object (a call cannot be duplicated).
    pub fn dup(&self) -> Result<Object, Errno> {
        Ok(match self {
            Object::Service(s) => Object::Service(s.clone()),
            Object::Portal(p) => Object::Portal(p.clone()),
            Object::Mem(m) => Object::Mem(m.clone()),
            Object::Permit(p) => Object::Permit(p.clone()),
            Object::Task(t) => Object::Task(t.clone()),
            Object::Module(m) => Object::Module(m.clone()),
            Object::Listener(l) => Object::Listener(l.clone()),
            Object::Conn(c) => Object::Conn(c.clone()),
            Object::Exchange(x) => Object::Exchange(x.dup()),
            Object::Call(_) | Object::Device(_) | Object::Supervisor(_) => {
                return Err(Errno::Inval)
            }
        })
    }

    /// Whether the object may travel in a message (services and calls stay
    /// with the task that serves them).
    pub fn transferable(&self) -> bool {
        matches!(
            self,
            Object::Portal(_)
                | Object::Mem(_)
                | Object::Permit(_)
                | Object::Listener(_)
                | Object::Conn(_)
                | Object::Exchange(_)
        )
    }

    /// For a socket, the bytes its holder is charged besides the handle
    /// (its host buffers); `None` for other objects.
    pub fn socket_bytes(&self) -> Option<u64> {
        match self {
            Object::Listener(_) => Some(LISTENER_BYTES),
            Object::Conn(c) => Some(c.bytes()),
            _ => None,
        }
    }
}

struct Entry {
    generation: u32,
    object: Option<Object>,
}

/// One task's handle table.
pub struct HandleTable {
    entries: Vec<Entry>,
    free: Vec<u32>,
    live: usize,
    limit: usize,
    budget: Arc<TaskShared>,
}

impl HandleTable {
    /// An empty table of at most `limit` handles, charging `budget`.
    pub fn new(limit: usize, budget: Arc<TaskShared>) -> Self {
        HandleTable {
            entries: Vec::new(),
            free: Vec::new(),
            live: 0,
            limit: limit.min(MAX_HANDLES),
            budget,
        }
    }

    #[cfg(test)]
    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Free entries left before the limit.
    pub fn room(&self) -> usize {
        self.limit - self.live
    }

    /// Stores `object` and returns its handle. On failure the object is
    /// dropped (and so released).
    pub fn insert(&mut self, object: Object) -> Result<i32, Errno> {
        if self.live >= self.limit {
            return Err(Errno::Quota);
        }
        let socket = object.socket_bytes();
        if let Some(bytes) = socket {
            take_socket(&self.budget, bytes)?;
        }
        if !self.budget.try_charge(HANDLE_BYTES) {
            if let Some(bytes) = socket {
                return_socket(&self.budget, bytes);
            }
            return Err(Errno::NoMem);
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None if self.entries.len() >= MAX_HANDLES => {
                self.budget.refund(HANDLE_BYTES);
                if let Some(bytes) = socket {
                    return_socket(&self.budget, bytes);
                }
                return Err(Errno::Quota);
            }
            None => {
                self.entries.push(Entry {
                    generation: 0,
                    object: None,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let e = &mut self.entries[index as usize];
        e.generation += 1; // 1..=GEN_MASK: retired at GEN_MASK (see `remove`)
        e.object = Some(object);
        self.live += 1;
        Ok(((e.generation << INDEX_BITS) | index) as i32)
    }

    fn slot(&self, handle: i32) -> Result<usize, Errno> {
        if handle < 0 || handle & MOVE != 0 {
            return Err(Errno::BadHandle);
        }
        let index = (handle as u32 & ((1 << INDEX_BITS) - 1)) as usize;
        let generation = handle as u32 >> INDEX_BITS;
        match self.entries.get(index) {
            Some(e) if e.generation == generation && e.object.is_some() => Ok(index),
            _ => Err(Errno::BadHandle),
        }
    }

    /// Every object in the table.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.entries.iter().filter_map(|e| e.object.as_ref())
    }

    /// The object a handle names.
    pub fn get(&self, handle: i32) -> Result<&Object, Errno> {
        let i = self.slot(handle)?;
        Ok(self.entries[i].object.as_ref().expect("live entry"))
    }

    /// Takes the object out of the table; the handle is dead afterwards.
    pub fn remove(&mut self, handle: i32) -> Result<Object, Errno> {
        let i = self.slot(handle)?;
        let object = self.entries[i].object.take().expect("live entry");
        if self.entries[i].generation < GEN_MASK {
            self.free.push(i as u32);
        }
        self.live -= 1;
        self.budget.refund(HANDLE_BYTES);
        if let Some(bytes) = object.socket_bytes() {
            return_socket(&self.budget, bytes);
        }
        Ok(object)
    }
}

/// Takes a socket slot of `task` and charges `bytes` for it.
pub fn take_socket(task: &TaskShared, bytes: u64) -> Result<(), Errno> {
    if !task.net.take_socket() {
        return Err(Errno::Quota);
    }
    if !task.try_charge(bytes) {
        task.net.return_socket();
        return Err(Errno::NoMem);
    }
    Ok(())
}

/// Returns what [`take_socket`] took.
pub fn return_socket(task: &TaskShared, bytes: u64) {
    task.net.return_socket();
    task.refund(bytes);
}

impl Drop for HandleTable {
    fn drop(&mut self) {
        self.budget.refund(HANDLE_BYTES * self.live as u64);
        for e in &self.entries {
            if let Some(bytes) = e.object.as_ref().and_then(Object::socket_bytes) {
                return_socket(&self.budget, bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::service::Service;
    use crate::task::TaskId;

    fn table(limit: usize, memory: Option<u64>) -> HandleTable {
        let shared = TaskShared::new(TaskId(1), "t".into(), None, memory);
        HandleTable::new(limit, Arc::new(shared))
    }

    fn portal() -> Object {
        Object::Portal(PortalRef::new(&Service::new(TaskId(9))))
    }

    #[test]
    fn stale_forged_and_foreign_handles_fail() {
        let mut t = table(8, None);
        let h = t.insert(portal()).unwrap();
        assert!(h >= 0);
        assert!(t.get(h).is_ok());
        t.remove(h).unwrap();
        assert_eq!(t.get(h).err(), Some(Errno::BadHandle), "stale");
        let h2 = t.insert(portal()).unwrap();
        assert_ne!(h, h2, "reused entry gets a new generation");
        assert_eq!(t.get(h).err(), Some(Errno::BadHandle));
        for forged in [-1, 0, 1, h2 + 1, h2 | MOVE, i32::MAX, i32::MIN] {
            assert_eq!(t.get(forged).err(), Some(Errno::BadHandle), "{forged:#x}");
        }
    }

    #[test]
    fn limit_and_budget_are_enforced() {
        let mut t = table(2, None);
        t.insert(portal()).unwrap();
        t.insert(portal()).unwrap();
        assert_eq!(t.insert(portal()).err(), Some(Errno::Quota));
        let mut t = table(100, Some(HANDLE_BYTES * 3));
        for _ in 0..3 {
            t.insert(portal()).unwrap();
        }
        assert_eq!(t.insert(portal()).err(), Some(Errno::NoMem));
        assert_eq!(t.budget.memory.current(), HANDLE_BYTES * 3);
        let budget = t.budget.clone();
        drop(t);
        assert_eq!(budget.memory.current(), 0);
    }

    #[test]
    fn a_closed_handle_never_comes_back() {
        let mut t = table(4, None);
        let mut seen = std::collections::HashSet::new();
        let first = t.insert(portal()).unwrap();
        t.remove(first).unwrap();
        seen.insert(first);
        for _ in 0..(GEN_MASK as usize * 2 + 3) {
            let h = t.insert(portal()).unwrap();
            assert!(h >= 0 && h & MOVE == 0 && h >> INDEX_BITS != 0);
            assert!(seen.insert(h), "handle {h:#x} handed out twice");
            assert_eq!(t.get(first).err(), Some(Errno::BadHandle));
            t.remove(h).unwrap();
        }
        assert!(
            t.is_empty() && t.entries.len() == 3,
            "retired entries: {}",
            t.entries.len()
        );
    }
}

//! Permits (Luna): a task's grant of access to a range of its own linear
//! memory.
//!
//! A holder reads and writes the owner's memory directly through the
//! permit, with every access bounds-checked against the granted range; one
//! permit covers its whole range. Revocation is immediate: it takes the
//! permit's lock for writing, so it waits for accesses in flight and every
//! access after it fails. The owner revokes explicitly, and the kernel
//! revokes all of a task's permits before its memory is released, so a
//! permit can never reach memory that has been given to another task.
//!
//! Accessing another task's memory by address is sound because task
//! memories never move (the engine is configured with
//! `memory_may_move(false)`) and never shrink, and a live permit keeps its
//! owner's memory from being released (rule 5 in [`super`]). The owner may
//! be running on another worker during an access, exactly as with shared
//! memory between threads: the bytes copied are whatever the memory holds.

use super::Errno;
use crate::task::TaskId;
use std::sync::{Arc, RwLock};

/// A grant of access to `len` bytes of the owner's memory.
pub struct Permit {
    /// The task whose memory this is.
    pub owner: TaskId,
    /// Address of the first permitted byte.
    base: usize,
    len: u64,
    writable: bool,
    revoked: RwLock<bool>,
}

/// A handle's reference to a permit.
#[derive(Clone)]
pub struct PermitRef(pub Arc<Permit>);

impl Permit {
    /// A permit for `len` bytes at `base` in `owner`'s memory.
    ///
    /// # Safety
    ///
    /// `base..base + len` must lie inside `owner`'s linear memory, and the
    /// permit must be revoked (see [`Permit::revoke`]) before that memory
    /// is released.
    pub unsafe fn new(owner: TaskId, base: *mut u8, len: u64, writable: bool) -> Arc<Permit> {
        Arc::new(Permit {
            owner,
            base: base as usize,
            len,
            writable,
            revoked: RwLock::new(false),
        })
    }

    /// The permitted length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the permitted range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ends all access, waiting for accesses in flight.
    pub fn revoke(&self) {
        *self.revoked.write().unwrap_or_else(|e| e.into_inner()) = true;
    }

    fn at(&self, off: u64, len: usize) -> Result<usize, Errno> {
        let end = off.checked_add(len as u64).ok_or(Errno::Range)?;
        if end > self.len {
            return Err(Errno::Range);
        }
        Ok(self.base + off as usize)
    }

    /// Copies `len` bytes at `off` of the permitted range to `dst`.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `len` bytes.
    pub unsafe fn read(&self, off: u64, dst: *mut u8, len: usize) -> Result<(), Errno> {
        let revoked = self.revoked.read().unwrap_or_else(|e| e.into_inner());
        if *revoked {
            return Err(Errno::Revoked);
        }
        let src = self.at(off, len)?;
        // SAFETY: `src` is inside the owner's live memory (checked above,
        // and the read lock holds off revocation and release); `dst` is
        // valid by the caller's contract. `copy` allows the two to overlap
        // (a task reading through its own permit).
        unsafe { std::ptr::copy(src as *const u8, dst, len) };
        Ok(())
    }

    /// Copies `len` bytes from `src` to offset `off` of the permitted range.
    ///
    /// # Safety
    ///
    /// `src` must be valid for reads of `len` bytes.
    pub unsafe fn write(&self, off: u64, src: *const u8, len: usize) -> Result<(), Errno> {
        let revoked = self.revoked.read().unwrap_or_else(|e| e.into_inner());
        if *revoked {
            return Err(Errno::Revoked);
        }
        if !self.writable {
            return Err(Errno::Denied);
        }
        let dst = self.at(off, len)?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy(src, dst as *mut u8, len) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_rights_and_revocation() {
        let mut owner_memory = [0u8; 64];
        let base = owner_memory[16..].as_mut_ptr();
        // SAFETY: 32 bytes at offset 16 lie inside the vector, which
        // outlives the permit.
        let p = unsafe { Permit::new(TaskId(1), base, 32, true) };
        let ro = unsafe { Permit::new(TaskId(1), base, 32, false) };
        let mut buf = [0u8; 4];
        unsafe {
            p.write(0, b"wxyz".as_ptr(), 4).unwrap();
            p.read(0, buf.as_mut_ptr(), 4).unwrap();
            assert_eq!(p.read(30, buf.as_mut_ptr(), 4), Err(Errno::Range));
            assert_eq!(p.read(u64::MAX, buf.as_mut_ptr(), 4), Err(Errno::Range));
            assert_eq!(ro.write(0, b"no".as_ptr(), 2), Err(Errno::Denied));
            ro.read(0, buf.as_mut_ptr(), 4).unwrap();
        }
        assert_eq!(&buf, b"wxyz");
        p.revoke();
        unsafe {
            assert_eq!(p.read(0, buf.as_mut_ptr(), 4), Err(Errno::Revoked));
            assert_eq!(p.write(0, b"late".as_ptr(), 4), Err(Errno::Revoked));
        }
        assert_eq!(&owner_memory[16..20], b"wxyz");
        ro.revoke();
    }
}

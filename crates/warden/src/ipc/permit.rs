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
//! owner's memory from being released (rule 5 in [`super`]).
//!
//! The owner may be running on another worker during an access, or be in
//! a host call of its own, so the memory on either side of a copy may be
//! written by another thread at the same moment. Such memory is never
//! turned into a Rust `&[u8]` or `&mut [u8]` here (that would assert that
//! nobody else writes it, a data race in Rust's memory model); it is
//! copied the way Wasmtime treats shared linear memories, with relaxed
//! atomic loads and stores ([`copy_racy`]), or for long copies on x86_64
//! with a string move, whose byte accesses are just as indivisible
//! ([`forward`]). A racing guest sees a mixture of old and new bytes,
//! exactly as two Wasm threads would.

use super::{lock, Errno};
use crate::mapping::{Again, Mappings, Source, PAGE};
use crate::task::TaskId;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
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
    /// The owner (null in unit tests), for its mapping table: an access
    /// to a range of it that is revoked (or, for a write, read-only) is
    /// refused rather than made to fault (see `crate::mapping`). Valid
    /// while the permit is not revoked: the owner's end revokes it before
    /// its shared state can go.
    owner_shared: *const crate::task::TaskShared,
    /// Mappings made through it (see [`Permit::map`]), sealed when it is
    /// revoked: each one's source, holder and placement.
    placed: std::sync::Mutex<Vec<Placement>>,
}

type Placement = (Arc<dyn Source>, Arc<Mappings>, u64);

// SAFETY: `owner_shared` is only read, under the `revoked` read lock,
// while the owner lives (see the field); the rest is `Send` and `Sync`.
unsafe impl Send for Permit {}
// SAFETY: as above.
unsafe impl Sync for Permit {}

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
    #[cfg(test)]
    pub unsafe fn new(owner: TaskId, base: *mut u8, len: u64, writable: bool) -> Arc<Permit> {
        Arc::new(Permit {
            owner,
            base: base as usize,
            len,
            writable,
            revoked: RwLock::new(false),
            owner_shared: std::ptr::null(),
            placed: Default::default(),
        })
    }

    /// As [`Permit::new`], for an owner whose mappings are `maps`.
    ///
    /// # Safety
    ///
    /// As for [`Permit::new`].
    pub unsafe fn of_task(
        owner: &crate::task::TaskShared,
        base: *mut u8,
        len: u64,
        writable: bool,
    ) -> Arc<Permit> {
        Arc::new(Permit {
            owner: owner.id,
            base: base as usize,
            len,
            writable,
            revoked: RwLock::new(false),
            owner_shared: owner,
            placed: Default::default(),
        })
    }

    /// Ends all access, waiting for accesses in flight, and seals every
    /// mapping made through it before it returns.
    pub fn revoke(&self) {
        let mut revoked = self.revoked.write().unwrap_or_else(|e| e.into_inner());
        *revoked = true;
        let placed = std::mem::take(&mut *lock(&self.placed));
        for (source, holder, id) in placed {
            source.seal(&holder, id);
        }
    }

    /// Maps `len` bytes at `off` of the permitted range at `addr` of the
    /// memory whose table is `holder` (now `mem_len` bytes long), when the
    /// owner's memory there is a mapping of a memory object (Luna's
    /// permits on shared data): the same pages, placed again, and sealed
    /// when the permit or the object is revoked. `NotSup` if the range is
    /// not (all) such a mapping.
    pub fn map(
        &self,
        (off, len): (u64, u64),
        holder: &Arc<Mappings>,
        addr: usize,
        mem_len: usize,
        write: bool,
    ) -> Result<(), Errno> {
        let revoked = self.revoked.read().unwrap_or_else(|e| e.into_inner());
        if *revoked {
            return Err(Errno::Revoked);
        }
        if write && !self.writable {
            return Err(Errno::Denied);
        }
        let len = usize::try_from(len).map_err(|_| Errno::Range)?;
        let at = self.at(off, len)?;
        if at % PAGE != 0 || len % PAGE != 0 || len == 0 {
            return Err(Errno::Inval);
        }
        // SAFETY: see `owner_shared`; the read lock of a permit not revoked
        // is held.
        let owner = unsafe { self.owner_shared.as_ref() }.ok_or(Errno::NotSup)?;
        let owner_maps = owner.maps.get().ok_or(Errno::NotSup)?;
        let (source, offset, owner_write, owner_addr) =
            owner_maps.source_at(at, len).ok_or(Errno::NotSup)?;
        if write && !owner_write {
            return Err(Errno::Denied);
        }
        let again = Again {
            owner: owner_maps,
            owner_addr,
            holder,
            offset,
            len,
            addr,
            mem_len,
            write,
        };
        let id = source
            .clone()
            .place_again(again)
            .map_err(super::memobj::map_errno)?;
        let mut placed = lock(&self.placed);
        if placed.len() >= 8 && placed.len().is_power_of_two() {
            placed.retain(|(s, _, id)| s.is_placed(*id));
        }
        placed.push((source, holder.clone(), id));
        Ok(())
    }

    fn at(&self, off: u64, len: usize) -> Result<usize, Errno> {
        let end = off.checked_add(len as u64).ok_or(Errno::Range)?;
        if end > self.len {
            return Err(Errno::Range);
        }
        Ok(self.base + off as usize)
    }

    /// Refuses an access to a revoked mapping of the owner's, or a write
    /// to a read-only one. Called under the `revoked` read lock.
    fn unguarded(&self, at: usize, len: usize, write: bool) -> Result<(), Errno> {
        // SAFETY: see `owner_shared`; the caller holds the read lock of a
        // permit not revoked.
        let owner = unsafe { self.owner_shared.as_ref() };
        match owner.and_then(|o| o.maps.get()) {
            Some(m) if m.guards_host(at, len, write) => Err(Errno::Revoked),
            _ => Ok(()),
        }
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
        self.unguarded(src, len, false)?;
        // SAFETY: `src` is inside the owner's live memory (checked above,
        // and the read lock holds off revocation and release); `dst` is
        // valid by the caller's contract. `copy_racy` allows both to be
        // written concurrently by others and to overlap.
        unsafe { copy_racy(src as *const u8, dst, len) };
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
        self.unguarded(dst, len, true)?;
        // SAFETY: as in `read`.
        unsafe { copy_racy(src, dst as *mut u8, len) };
        Ok(())
    }
}

const WORD: usize = std::mem::size_of::<usize>();

/// Copies at least this long go through [`forward`]'s string move where
/// there is one (below it, its start-up costs more than the word loop).
const STRING_MOVE_MIN: usize = 256;

/// Copies `len` bytes forward, byte after byte as far as any thread can
/// tell, with x86's string move (`rep movsb`): on current cores it moves
/// a cache line or more per cycle, while relaxed atomic words go one at a
/// time (Rust has no atomic `memcpy`). Sound where the word loops are:
/// the instruction's effect is a sequence of single-byte loads and
/// stores, each indivisible, which is what a copy made of relaxed atomic
/// byte accesses may do; the compiler sees only an opaque block that
/// reads `src..src + len` and writes `dst..dst + len`. Forward, so a
/// destination that starts before or at the source is copied right
/// (`memmove`'s case), one inside the source is not. `false` (nothing
/// copied) on other architectures, or for copies under
/// [`STRING_MOVE_MIN`].
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// `dst` must not start inside `src + 1..src + len`.
#[inline]
unsafe fn forward(src: *const u8, dst: *mut u8, len: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    if len >= STRING_MOVE_MIN {
        // SAFETY: the caller's contract; the direction flag is clear on
        // entry to an asm block (the Rust ABI), so the move goes forward;
        // it changes no flags and touches no stack.
        unsafe {
            std::arch::asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rsi") src => _,
                inout("rdi") dst => _,
                options(nostack, preserves_flags),
            );
        }
        return true;
    }
    let _ = (src, dst, len);
    false
}

/// Copies `len` bytes from `src` to `dst` (which may overlap, as
/// `memmove`) when other threads may read or write either range at the
/// same time: every access is a relaxed atomic load or store, word-sized
/// from each side's first word boundary, so no byte is accessed
/// non-atomically and the copy is still a word at a time whatever the
/// two alignments (a long forward copy on x86_64: one string move,
/// [`forward`]).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes for
/// the whole call (their contents may change meanwhile).
pub unsafe fn copy_racy(src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    if d > s && d < s.wrapping_add(len) {
        // `dst` starts inside the source range: copy from the back.
        // SAFETY: the caller's contract, passed on.
        return unsafe { copy_racy_backwards(src, dst, len) };
    }
    // SAFETY: the caller's contract; `dst` does not start inside the
    // source (checked above).
    if unsafe { forward(src, dst, len) } {
        return;
    }
    if s % WORD != d % WORD {
        // SAFETY: the caller's contract, passed on.
        return unsafe { copy_racy_unaligned(src, dst, len) };
    }
    // Bytes up to the first word boundary of both.
    let head = ((WORD - s % WORD) % WORD).min(len);
    let words = (len - head) / WORD;
    // SAFETY (all three loops): every offset is inside both ranges (the
    // caller's contract); the word loop's addresses are word-aligned.
    // Atomic accesses may alias memory that others access atomically or
    // not, and a forward copy is right when `dst` does not start inside
    // the source.
    unsafe {
        for i in 0..head {
            copy_byte(src, dst, i);
        }
        let (ws, wd) = (
            src.add(head) as *const AtomicUsize,
            dst.add(head) as *const AtomicUsize,
        );
        for i in 0..words {
            (*wd.add(i)).store((*ws.add(i)).load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for i in head + words * WORD..len {
            copy_byte(src, dst, i);
        }
    }
}

/// Copies `dst.len()` bytes from `src`, which other threads may write
/// meanwhile, into `dst`, which nobody else touches: relaxed atomic loads
/// on the shared side, a word at a time from its first word boundary
/// whatever the alignment of `dst` (plain writes there). A guest's buffer
/// at an odd offset is thus still copied a word at a time.
///
/// # Safety
///
/// `src` must be valid for reads of `dst.len()` bytes for the whole call
/// (its contents may change meanwhile) and must not overlap `dst`.
pub unsafe fn copy_from_racy(src: *const u8, dst: &mut [u8]) {
    let len = dst.len();
    // SAFETY: the caller's contract; the ranges do not overlap.
    if unsafe { forward(src, dst.as_mut_ptr(), len) } {
        return;
    }
    let head = ((WORD - src as usize % WORD) % WORD).min(len);
    let words = (len - head) / WORD;
    let d = dst.as_mut_ptr();
    // SAFETY: every offset is below `len`, inside both ranges; the word
    // loads are at word-aligned addresses; `dst` is exclusively ours.
    unsafe {
        let byte = |i: usize| (*(src.add(i) as *const AtomicU8)).load(Ordering::Relaxed);
        for i in 0..head {
            *d.add(i) = byte(i);
        }
        let ws = src.add(head) as *const AtomicUsize;
        for i in 0..words {
            let v = (*ws.add(i)).load(Ordering::Relaxed);
            (d.add(head + i * WORD) as *mut usize).write_unaligned(v);
        }
        for i in head + words * WORD..len {
            *d.add(i) = byte(i);
        }
    }
}

/// Copies `src`, which nobody else writes, to `dst`, which other threads
/// may read or write meanwhile: relaxed atomic stores on the shared side,
/// a word at a time from its first word boundary whatever the alignment
/// of `src` (plain reads there).
///
/// # Safety
///
/// `dst` must be valid for writes of `src.len()` bytes for the whole call
/// and must not overlap `src`.
pub unsafe fn copy_to_racy(src: &[u8], dst: *mut u8) {
    let len = src.len();
    // SAFETY: the caller's contract; the ranges do not overlap.
    if unsafe { forward(src.as_ptr(), dst, len) } {
        return;
    }
    let head = ((WORD - dst as usize % WORD) % WORD).min(len);
    let words = (len - head) / WORD;
    let s = src.as_ptr();
    // SAFETY: as in `copy_from_racy`, with the sides swapped.
    unsafe {
        let byte =
            |i: usize| (*(dst.add(i) as *const AtomicU8)).store(*s.add(i), Ordering::Relaxed);
        for i in 0..head {
            byte(i);
        }
        let wd = dst.add(head) as *const AtomicUsize;
        for i in 0..words {
            let v = (s.add(head + i * WORD) as *const usize).read_unaligned();
            (*wd.add(i)).store(v, Ordering::Relaxed);
        }
        for i in head + words * WORD..len {
            byte(i);
        }
    }
}

/// `copy_racy` for ranges whose word boundaries differ, forward: through
/// a buffer on the stack, a chunk at a time, each side still copied a
/// word at a time from its own boundary ([`copy_from_racy`] then
/// [`copy_to_racy`]). A chunk is read whole before it is written, so a
/// source that starts inside the destination is still copied right.
///
/// # Safety
///
/// As for [`copy_racy`].
unsafe fn copy_racy_unaligned(src: *const u8, dst: *mut u8, len: usize) {
    let mut buf = [0u8; 1024];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        // SAFETY: `done..done + n` lies inside both ranges; `buf` is ours.
        unsafe {
            copy_from_racy(src.add(done), &mut buf[..n]);
            copy_to_racy(&buf[..n], dst.add(done));
        }
        done += n;
    }
}

/// `copy_racy` for a destination inside the source: byte by byte from the
/// back (only a task copying within its own memory does this).
///
/// # Safety
///
/// As for [`copy_racy`].
unsafe fn copy_racy_backwards(src: *const u8, dst: *mut u8, len: usize) {
    for i in (0..len).rev() {
        // SAFETY: `i` is inside both ranges.
        unsafe { copy_byte(src, dst, i) };
    }
}

/// Copies byte `i` with a relaxed atomic load and store.
///
/// # Safety
///
/// `src + i` must be readable and `dst + i` writable.
unsafe fn copy_byte(src: *const u8, dst: *mut u8, i: usize) {
    // SAFETY: the caller's contract; a byte is always aligned.
    unsafe {
        let v = (*(src.add(i) as *const AtomicU8)).load(Ordering::Relaxed);
        (*(dst.add(i) as *const AtomicU8)).store(v, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment, length and overlap gives what `memmove` gives.
    #[test]
    fn racy_copy_is_memmove() {
        let pattern: Vec<u8> = (0..700u32).map(|i| (i * 7 % 251) as u8).collect();
        for src_off in 0..9 {
            for dst_off in 0..9 {
                // Both sides of the string move's threshold.
                for len in [0, 1, 7, 8, 9, 15, 16, 17, 40, 255, 256, 257, 520] {
                    // Separate buffers.
                    let mut dst = vec![0xAAu8; 600];
                    let mut want = dst.clone();
                    want[dst_off..dst_off + len].copy_from_slice(&pattern[src_off..src_off + len]);
                    unsafe {
                        copy_racy(
                            pattern[src_off..].as_ptr(),
                            dst[dst_off..].as_mut_ptr(),
                            len,
                        )
                    };
                    assert_eq!(dst, want, "{src_off} -> {dst_off}, {len}");
                    // Within one buffer, overlapping either way.
                    let mut buf = pattern.clone();
                    let mut want = pattern.clone();
                    want.copy_within(src_off..src_off + len, dst_off);
                    let base = buf.as_mut_ptr();
                    unsafe { copy_racy(base.add(src_off), base.add(dst_off), len) };
                    assert_eq!(buf, want, "within: {src_off} -> {dst_off}, {len}");
                }
            }
        }
    }

    /// The one-sided copies give what `copy_from_slice` gives for every
    /// alignment of either side and every length.
    #[test]
    fn one_sided_copies_are_memcpy() {
        let pattern: Vec<u8> = (0..700u32).map(|i| (i * 7 % 251) as u8).collect();
        for src_off in 0..9 {
            for dst_off in 0..9 {
                for len in [0, 1, 7, 8, 9, 15, 16, 17, 40, 101, 255, 256, 257, 520] {
                    let src = &pattern[src_off..src_off + len];
                    let mut want = vec![0xAAu8; 600];
                    want[dst_off..dst_off + len].copy_from_slice(src);
                    let mut got = vec![0xAAu8; 600];
                    unsafe { copy_from_racy(src.as_ptr(), &mut got[dst_off..dst_off + len]) };
                    assert_eq!(got, want, "from: {src_off} -> {dst_off}, {len}");
                    let mut got = vec![0xAAu8; 600];
                    unsafe { copy_to_racy(src, got[dst_off..].as_mut_ptr()) };
                    assert_eq!(got, want, "to: {src_off} -> {dst_off}, {len}");
                }
            }
        }
    }

    /// Copies longer than the bounce buffer between unequal alignments,
    /// apart and overlapping, give what `memmove` gives.
    #[test]
    fn long_unaligned_copies_are_memmove() {
        let pattern: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (src_off, dst_off) in [(3, 0), (0, 5), (11, 2), (1, 1000)] {
            let len = 3900;
            let mut dst = vec![0u8; 5000];
            unsafe {
                copy_racy(
                    pattern[src_off..].as_ptr(),
                    dst[dst_off..].as_mut_ptr(),
                    len,
                )
            };
            assert_eq!(dst[dst_off..dst_off + len], pattern[src_off..src_off + len]);
            let mut buf = pattern.clone();
            let mut want = pattern.clone();
            want.copy_within(src_off..src_off + len, dst_off);
            let base = buf.as_mut_ptr();
            unsafe { copy_racy(base.add(src_off), base.add(dst_off), len) };
            assert!(buf == want, "within: {src_off} -> {dst_off}");
        }
    }

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

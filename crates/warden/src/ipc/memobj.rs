//! Memory objects (JX): kernel-owned byte buffers passed by handle.
//!
//! A [`MemObject`] is charged to the task that created it until its last
//! view is gone. Tasks hold [`MemView`]s: a range of the object, read-only
//! or writable, guarded by a revocation token. Revoking a range marks every
//! token whose range overlaps it, so every outstanding view of those bytes
//! fails from then on; the revoker gets a fresh view of the same range.
//! Only a writable view may revoke. When the creator dies, its objects are
//! revoked entirely and their bytes freed at once.
//!
//! An object of a page or more keeps its bytes in a shared-memory file,
//! so that a task may map them into its own memory ([`MemView::map`], see
//! `crate::mapping`): a revoke, or the creator's death, takes every
//! mapping of the revoked bytes back before it returns.

use super::Errno;
use crate::mapping::{Again, MapError, Mappings, SharedPages, Source, PAGE};
use crate::task::TaskShared;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// Bytes charged for an object beyond its contents.
pub const OBJECT_OVERHEAD: u64 = 128;

/// A view's revocation flag.
#[derive(Default)]
pub struct Token {
    revoked: AtomicBool,
}

/// A kernel-owned buffer.
pub struct MemObject {
    id: u64,
    bytes: RwLock<Bytes>,
    charged: u64,
    creator: Arc<TaskShared>,
    tokens: Mutex<Vec<(Weak<Token>, u64, u64)>>,
    /// Where its pages are mapped (see `crate::mapping`'s lock order:
    /// this list, then a holder's table).
    placed: Mutex<Vec<Placed>>,
}

/// An object's bytes.
enum Bytes {
    /// Less than a page: on the heap, never mapped.
    Heap(Box<[u8]>),
    /// A shared-memory file that tasks may map.
    Shared(SharedPages),
    /// Freed by its creator's death.
    Freed,
}

impl Bytes {
    fn ptr(&self) -> *mut u8 {
        match self {
            Bytes::Heap(b) => b.as_ptr().cast_mut(),
            Bytes::Shared(p) => p.as_ptr(),
            Bytes::Freed => std::ptr::NonNull::dangling().as_ptr(),
        }
    }
}

/// One mapping of an object's pages in a task's memory.
struct Placed {
    id: u64,
    holder: Arc<Mappings>,
    addr: usize,
    start: u64,
    len: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_PLACEMENT: AtomicU64 = AtomicU64::new(1);

/// A task's access to a range of a memory object.
#[derive(Clone)]
pub struct MemView {
    object: Arc<MemObject>,
    start: u64,
    len: u64,
    readonly: bool,
    token: Arc<Token>,
}

/// `len` zero bytes, or `None` if the allocator cannot give them. Large
/// objects come from fresh mappings whose pages the kernel supplies as
/// they are first touched: a task that creates a big object and uses a
/// little of it makes the process resident in that little only (it is
/// charged for all of it, to its budget and the root).
fn zeroed(len: usize) -> Option<Box<[u8]>> {
    if len == 0 {
        return Some(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` has a non-zero size; a non-null result is `len`
    // initialised (zero) bytes allocated with the global allocator and
    // `Layout::array::<u8>(len)`, which is how a `Box<[u8]>` of that
    // length is freed.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        if p.is_null() {
            return None;
        }
        Some(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)))
    }
}

impl MemObject {
    /// A zero-filled object of `size` bytes charged to `creator`; returns
    /// a writable view of all of it.
    pub fn create(
        size: u64,
        creator: &Arc<TaskShared>,
    ) -> Result<(Arc<MemObject>, MemView), Errno> {
        let len = usize::try_from(size).map_err(|_| Errno::NoMem)?;
        let charged = size.checked_add(OBJECT_OVERHEAD).ok_or(Errno::NoMem)?;
        if !creator.try_charge(charged) {
            return Err(Errno::NoMem);
        }
        let bytes = match len >= PAGE {
            true => SharedPages::new(len).ok().map(Bytes::Shared),
            false => zeroed(len).map(Bytes::Heap),
        };
        let Some(bytes) = bytes else {
            creator.refund(charged);
            return Err(Errno::NoMem);
        };
        let object = Arc::new(MemObject {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            bytes: RwLock::new(bytes),
            charged,
            creator: creator.clone(),
            tokens: Mutex::new(Vec::new()),
            placed: Mutex::new(Vec::new()),
        });
        let view = object.view(0, size, false);
        Ok((object, view))
    }

    fn view(self: &Arc<Self>, start: u64, len: u64, readonly: bool) -> MemView {
        let token = Arc::new(Token::default());
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if tokens.len() >= 16 && tokens.len().is_power_of_two() {
            tokens.retain(|(t, _, _)| t.strong_count() > 0);
        }
        tokens.push((Arc::downgrade(&token), start, start + len));
        MemView {
            object: self.clone(),
            start,
            len,
            readonly,
            token,
        }
    }

    fn placed(&self) -> std::sync::MutexGuard<'_, Vec<Placed>> {
        super::lock(&self.placed)
    }

    /// Seals every mapping of bytes in `start..end` in its holder's
    /// memory, and forgets it; returns how many there were.
    fn unplace(&self, start: u64, end: u64) -> usize {
        let mut placed = self.placed();
        let before = placed.len();
        placed.retain(|p| {
            let overlaps = p.start < end && start < p.start + p.len;
            if overlaps {
                p.holder.revoke(p.addr);
            }
            !overlaps
        });
        before - placed.len()
    }

    fn revoke_range(&self, start: u64, end: u64) {
        self.revoke_tokens(start, end);
        self.unplace(start, end);
    }

    fn revoke_tokens(&self, start: u64, end: u64) {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        for (t, s, e) in tokens.iter() {
            // Overlap of [s, e) with [start, end); empty ranges overlap
            // when they sit inside the revoked one.
            let overlaps = *s < end && start < *e || (s == e && start <= *s && *s < end);
            if overlaps {
                if let Some(t) = t.upgrade() {
                    t.revoked.store(true, Ordering::Release);
                }
            }
        }
    }

    /// The creator died: revoke every view and free the bytes now.
    pub fn revoke_all_and_free(&self) {
        self.revoke_range(0, u64::MAX);
        let mut b = self.bytes.write().unwrap_or_else(|e| e.into_inner());
        *b = Bytes::Freed;
    }
}

/// Where [`MemObject::place`] maps: holder, offset in the object, length,
/// address, the holder's memory length, and whether writable.
type At<'a> = (&'a Arc<Mappings>, usize, usize, usize, usize, bool);

impl MemObject {
    /// Maps bytes of the object into a holder (its list `placed` locked);
    /// the placement's id.
    fn place(
        self: &Arc<Self>,
        mut placed: std::sync::MutexGuard<'_, Vec<Placed>>,
        (holder, offset, len, addr, mem_len, write): At<'_>,
    ) -> Result<u64, Errno> {
        let bytes = self.bytes.read().unwrap_or_else(|e| e.into_inner());
        let Bytes::Shared(pages) = &*bytes else {
            return Err(Errno::NotSup);
        };
        let source = self.clone() as Arc<dyn Source>;
        holder
            .insert(addr, len, mem_len, pages, offset, write, source)
            .map_err(map_errno)?;
        let id = NEXT_PLACEMENT.fetch_add(1, Ordering::Relaxed);
        placed.push(Placed {
            id,
            holder: holder.clone(),
            addr,
            start: offset as u64,
            len: len as u64,
        });
        Ok(id)
    }
}

impl Source for MemObject {
    fn id(&self) -> u64 {
        self.id
    }

    fn detach(&self, holder: &Arc<Mappings>, addr: usize) {
        let mut placed = self.placed();
        placed.retain(|p| !(Arc::ptr_eq(&p.holder, holder) && p.addr == addr));
        holder.remove(addr);
    }

    fn place_again(self: Arc<Self>, a: Again<'_>) -> Result<u64, MapError> {
        let placed = self.placed();
        let owner_there = placed.iter().any(|p| {
            Arc::ptr_eq(&p.holder, a.owner)
                && p.addr == a.owner_addr
                && p.start <= a.offset as u64
                && a.offset as u64 + a.len as u64 <= p.start + p.len
        });
        if !owner_there {
            return Err(MapError::Unsupported); // revoked meanwhile
        }
        let at = (a.holder, a.offset, a.len, a.addr, a.mem_len, a.write);
        self.place(placed, at).map_err(|e| match e {
            Errno::Exists => MapError::Overlap,
            Errno::BadPtr => MapError::OutOfMemory,
            Errno::Denied => MapError::Initial,
            Errno::Inval => MapError::Unaligned,
            Errno::Quota => MapError::Quota,
            _ => MapError::Unsupported,
        })
    }

    fn seal(&self, holder: &Arc<Mappings>, id: u64) {
        let mut placed = self.placed();
        if let Some(i) = placed
            .iter()
            .position(|p| p.id == id && Arc::ptr_eq(&p.holder, holder))
        {
            let p = placed.swap_remove(i);
            p.holder.revoke(p.addr);
        }
    }

    fn is_placed(&self, id: u64) -> bool {
        self.placed().iter().any(|p| p.id == id)
    }
}

impl Drop for MemObject {
    fn drop(&mut self) {
        self.creator.refund(self.charged);
    }
}

/// The error code a refused mapping returns.
pub fn map_errno(e: MapError) -> Errno {
    match e {
        MapError::Unaligned => Errno::Inval,
        MapError::OutOfMemory => Errno::BadPtr,
        MapError::Initial => Errno::Denied,
        MapError::Overlap => Errno::Exists,
        MapError::NotMapped => Errno::Inval,
        MapError::Unsupported => Errno::NotSup,
        MapError::System => Errno::NoMem,
        MapError::Quota => Errno::Quota,
    }
}

impl MemView {
    fn check(&self) -> Result<(), Errno> {
        if self.token.revoked.load(Ordering::Acquire) {
            Err(Errno::Revoked)
        } else {
            Ok(())
        }
    }

    /// Offset `off` plus `len` within the view, as an absolute range.
    fn range(&self, off: u64, len: u64) -> Result<std::ops::Range<usize>, Errno> {
        let end = off.checked_add(len).ok_or(Errno::Range)?;
        if end > self.len {
            return Err(Errno::Range);
        }
        Ok((self.start + off) as usize..(self.start + end) as usize)
    }

    /// The view's length in bytes.
    pub fn size(&self) -> Result<u64, Errno> {
        self.check()?;
        Ok(self.len)
    }

    #[cfg(test)]
    /// Whether writes through this view are refused.
    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// Copies `dst.len()` bytes at `off` into `dst`.
    pub fn read(&self, off: u64, dst: &mut [u8]) -> Result<(), Errno> {
        let n = dst.len();
        // SAFETY: `read_with` gives `n` readable bytes; `dst` is ours.
        self.read_with(off, n, |b| unsafe {
            crate::ipc::permit::copy_racy(b, dst.as_mut_ptr(), n)
        })
    }

    /// Lets `copy` read the `len` bytes at `off`, from their address:
    /// tasks that mapped them may write them meanwhile, so `copy` reads
    /// them with the racy copies (`ipc::permit::copy_racy`).
    pub fn read_with(
        &self,
        off: u64,
        len: usize,
        copy: impl FnOnce(*const u8),
    ) -> Result<(), Errno> {
        self.check()?;
        let r = self.range(off, len as u64)?;
        let bytes = self.object.bytes.read().unwrap_or_else(|e| e.into_inner());
        self.check()?; // revoked (and maybe freed) while we waited
                       // SAFETY: `r` lies inside the object's bytes (checked against the
                       // view, which lies inside the object), freed only under the write
                       // lock after a revoke (checked above).
        copy(unsafe { bytes.ptr().add(r.start) });
        Ok(())
    }

    /// Copies `src` to offset `off`.
    pub fn write(&self, off: u64, src: &[u8]) -> Result<(), Errno> {
        // SAFETY: `write_with` gives `src.len()` writable bytes.
        self.write_with(off, src.len(), |b| unsafe {
            crate::ipc::permit::copy_racy(src.as_ptr(), b, src.len())
        })
    }

    /// Lets `copy` write the `len` bytes at `off`, at their address (as
    /// in [`MemView::read_with`]).
    pub fn write_with(
        &self,
        off: u64,
        len: usize,
        copy: impl FnOnce(*mut u8),
    ) -> Result<(), Errno> {
        self.check()?;
        if self.readonly {
            return Err(Errno::Denied);
        }
        let r = self.range(off, len as u64)?;
        let bytes = self.object.bytes.read().unwrap_or_else(|e| e.into_inner());
        self.check()?;
        // SAFETY: as in `read_with`.
        copy(unsafe { bytes.ptr().add(r.start) });
        Ok(())
    }

    /// Maps the `len` bytes at `off` of the view at `addr` of the memory
    /// `holder` is the table of, now `mem_len` bytes long; writable if
    /// `write` (refused for a read-only view).
    pub fn map(
        &self,
        holder: &Arc<Mappings>,
        (off, len): (u64, u64),
        addr: usize,
        mem_len: usize,
        write: bool,
    ) -> Result<(), Errno> {
        if write && self.readonly {
            return Err(Errno::Denied);
        }
        let r = self.range(off, len)?;
        let placed = self.object.placed();
        // Checked under the list's lock: a revoke marks the token first,
        // then takes the list, so it sees this mapping or we see the mark.
        self.check()?;
        let at = (holder, r.start, r.len(), addr, mem_len, write);
        self.object.place(placed, at).map(|_| ())
    }

    /// A view of `len` bytes at `off`, read-only if asked or if this view is.
    pub fn sub(&self, off: u64, len: u64, readonly: bool) -> Result<MemView, Errno> {
        self.check()?;
        let r = self.range(off, len)?;
        Ok(self
            .object
            .view(r.start as u64, len, readonly || self.readonly))
    }

    /// Revokes every view overlapping this one's range (this one too) and
    /// returns a fresh view of the same range with the same rights.
    pub fn revoke(&self) -> Result<MemView, Errno> {
        self.check()?;
        if self.readonly {
            return Err(Errno::Denied);
        }
        self.object.revoke_range(self.start, self.start + self.len);
        Ok(self.object.view(self.start, self.len, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;

    fn creator(limit: Option<u64>) -> Arc<TaskShared> {
        Arc::new(TaskShared::new(TaskId(1), "c".into(), None, limit))
    }

    #[test]
    fn read_write_bounds_and_readonly() {
        let c = creator(None);
        let (_o, v) = MemObject::create(16, &c).unwrap();
        v.write(4, b"abcd").unwrap();
        let mut buf = [0u8; 6];
        v.read(2, &mut buf).unwrap();
        assert_eq!(&buf, b"\0\0abcd");
        assert_eq!(v.write(14, b"abc"), Err(Errno::Range));
        assert_eq!(v.read(u64::MAX, &mut buf), Err(Errno::Range));
        let sub = v.sub(4, 4, true).unwrap();
        assert_eq!(sub.size(), Ok(4));
        let mut four = [0u8; 4];
        sub.read(0, &mut four).unwrap();
        assert_eq!(&four, b"abcd");
        assert_eq!(sub.write(0, b"x"), Err(Errno::Denied));
        assert_eq!(sub.revoke().err(), Some(Errno::Denied));
        assert!(
            sub.sub(0, 2, false).unwrap().readonly(),
            "read-only is inherited"
        );
        assert_eq!(v.sub(10, 7, false).err(), Some(Errno::Range));
    }

    #[test]
    fn revoke_fails_overlapping_views_and_returns_a_fresh_one() {
        let c = creator(None);
        let (_o, whole) = MemObject::create(100, &c).unwrap();
        let low = whole.sub(0, 10, false).unwrap();
        let high = whole.sub(50, 50, false).unwrap();
        let copy = low.clone();
        let fresh = low.revoke().unwrap();
        assert_eq!(low.size(), Err(Errno::Revoked));
        assert_eq!(
            copy.size(),
            Err(Errno::Revoked),
            "duplicates share the fate"
        );
        assert_eq!(whole.size(), Err(Errno::Revoked), "overlapping parent too");
        assert_eq!(high.size(), Ok(50), "disjoint view untouched");
        assert_eq!(fresh.size(), Ok(10));
        fresh.write(0, b"mine").unwrap();
    }

    #[test]
    fn charged_to_creator_until_last_view_and_freed_on_creator_death() {
        let c = creator(Some(1000));
        assert_eq!(MemObject::create(2000, &c).err(), Some(Errno::NoMem));
        let (o, v) = MemObject::create(500, &c).unwrap();
        let used = || c.memory.current();
        assert_eq!(used(), 500 + OBJECT_OVERHEAD);
        let held_elsewhere = v.clone();
        o.revoke_all_and_free();
        assert_eq!(held_elsewhere.size(), Err(Errno::Revoked));
        drop((o, v, held_elsewhere));
        assert_eq!(used(), 0);
        assert_eq!(MemObject::create(u64::MAX, &c).err(), Some(Errno::NoMem));
    }
}

/// Revocation racing with mapping, unmapping and the holder's end, on
/// real pages: nothing deadlocks, no mapping outlives its holder's
/// release, and every object is freed (its charge refunded) at the end.
#[cfg(test)]
mod stress {
    use super::*;
    use crate::mapping::{pages::SharedPages as Scratch, Mappings, PAGE};
    use crate::task::TaskId;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn revoke_races_map_unmap_and_release() {
        crate::mapping::install();
        let creator = Arc::new(TaskShared::new(TaskId(1), "c".into(), None, None));
        // Stands for a task's memory: 16 pages, none of them "initial".
        let memory = Scratch::new(16 * PAGE).unwrap();
        let base = memory.as_ptr();
        let stop = Arc::new(AtomicBool::new(false));
        let current: Arc<Mutex<Option<MemView>>> = Arc::default();
        let revoker = {
            let (current, stop) = (current.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let view = current.lock().unwrap().clone();
                    if let Some(fresh) = view.and_then(|v| v.revoke().ok()) {
                        *current.lock().unwrap() = Some(fresh);
                    }
                }
            })
        };
        for round in 0..200 {
            let holder = Mappings::new(base, 0).unwrap();
            let (_object, view) = MemObject::create(4 * PAGE as u64, &creator).unwrap();
            *current.lock().unwrap() = Some(view);
            for i in 0..50 {
                let Some(v) = current.lock().unwrap().clone() else {
                    continue;
                };
                let at = (i % 12) * PAGE;
                let _ = v.map(&holder, (0, PAGE as u64 * 4), at, 16 * PAGE, i % 2 == 0);
                if i % 3 == 0 {
                    let _ = holder.unmap(at, 4 * PAGE);
                }
            }
            holder.release();
            assert_eq!(
                holder.totals().0,
                0,
                "round {round}: a mapping outlived its holder"
            );
            *current.lock().unwrap() = None;
        }
        stop.store(true, Ordering::Relaxed);
        revoker.join().unwrap();
        // The revoker may have put a fresh view back after the last round.
        *current.lock().unwrap() = None;
        assert_eq!(creator.memory.current(), 0, "every object freed");
    }
}

//! A task's linear memory as the host functions touch it.
//!
//! Another thread may write a task's memory while one of its host calls
//! runs: a task holding a writable permit to it copies in from its own
//! worker. So the host never makes a Rust `&[u8]` or `&mut [u8]` of guest
//! memory (either would claim that nobody else writes those bytes
//! meanwhile, a data race in Rust's memory model). It keeps a base pointer
//! and a length, as Wasmtime does for shared memories, and every access is
//! indivisible per byte or word: a copy ([`copy_from_racy`],
//! [`copy_to_racy`]: relaxed atomic words, or one string move when long)
//! or, for one word, a relaxed atomic load ([`GuestMem::read_u32`]). A
//! guest racing its own host call through a permit sees a mixture of old
//! and new bytes, never a host fault; the host reads each value it acts
//! on exactly once.

use super::TaskData;
use crate::ipc::permit::{copy_from_racy, copy_to_racy};
use crate::ipc::Errno;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};
use wasmtime::{AsContextMut, Caller};

/// The calling task's memory for the duration of one host call.
#[derive(Clone, Copy)]
pub(super) struct GuestMem<'a> {
    base: *mut u8,
    len: usize,
    _call: PhantomData<&'a ()>,
}

/// A task's exported memory as host calls find it: the memory, its base
/// address, and its length with the budget's growth count when it was
/// read (see [`memory_len`]).
pub(crate) struct MemoryCache {
    pub(crate) memory: Option<wasmtime::Memory>,
    base: usize,
    len: (usize, u64),
}

impl Default for MemoryCache {
    fn default() -> Self {
        MemoryCache {
            memory: None,
            base: 0,
            len: (0, u64::MAX),
        }
    }
}

impl MemoryCache {
    /// Records the task's exported memory and its base address. A task's
    /// memory never moves (it lives in a fixed slot of the pooling
    /// allocator, and the engine is configured with `memory_may_move`
    /// off), so host calls take the address from here rather than look
    /// it up in the store each time; the length, which grows, is looked up
    /// again only after a growth.
    pub(crate) fn set(&mut self, memory: Option<wasmtime::Memory>, base: *mut u8) {
        self.memory = memory;
        self.base = if memory.is_some() { base as usize } else { 0 };
        self.len = (0, u64::MAX);
    }
}

/// The caller's memory and store data. A module without an exported
/// memory gets `BadPtr` from every call that needs one.
pub(super) fn memory<'a>(
    caller: &'a mut Caller<'_, TaskData>,
) -> Result<(GuestMem<'a>, &'a mut TaskData), Errno> {
    let mem = GuestMem::of(&mut *caller).ok_or(Errno::BadPtr)?;
    Ok((mem, caller.data_mut()))
}

/// The length of the task's exported memory `memory`: the one recorded
/// in its data while the store's limiter has seen no memory ask to grow
/// since it was read, otherwise read from the store again (and
/// recorded). Every growth asks the limiter first and a memory never
/// shrinks, so the recorded length is never more than the memory has.
fn memory_len(mut store: impl AsContextMut<Data = TaskData>, memory: wasmtime::Memory) -> usize {
    let mut cx = store.as_context_mut();
    let grows = cx.data().budget.memory_grows();
    match cx.data().memory.len {
        (len, at) if at == grows => len,
        _ => {
            let len = memory.data_size(&cx);
            cx.data_mut().memory.len = (len, grows);
            len
        }
    }
}

impl<'a> GuestMem<'a> {
    /// The exported memory of the task whose store this is (a host
    /// call's, or a passive server's), if it has one. Its address is the
    /// one recorded when the task started (see [`MemoryCache::set`]),
    /// its length [`memory_len`]'s. The caller ties the result to its
    /// borrow of the store.
    pub(super) fn of(mut store: impl AsContextMut<Data = TaskData>) -> Option<Self> {
        let cache = &store.as_context().data().memory;
        let (memory, base) = (cache.memory?, cache.base);
        debug_assert_eq!(
            base,
            memory.data_ptr(&store) as usize,
            "memories never move"
        );
        let len = memory_len(&mut store, memory);
        debug_assert_eq!(
            len,
            memory.data_size(&store),
            "every growth passes the limiter"
        );
        Some(GuestMem {
            base: base as *mut u8,
            len,
            _call: PhantomData,
        })
    }

    /// `memory` of `store`, looked up there (a module's start function
    /// runs before the task's memory is recorded).
    pub(super) fn looked_up(memory: wasmtime::Memory, store: &impl wasmtime::AsContext) -> Self {
        GuestMem {
            base: memory.data_ptr(store),
            len: memory.data_size(store),
            _call: PhantomData,
        }
    }
}

impl GuestMem<'_> {
    /// A host buffer standing in for a task's memory, in unit tests.
    #[cfg(test)]
    pub(super) fn of_test_buffer(bytes: &mut [u8]) -> GuestMem<'_> {
        GuestMem {
            base: bytes.as_mut_ptr(),
            len: bytes.len(),
            _call: PhantomData,
        }
    }

    /// Bytes of memory.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The address of byte `at` (in bounds: callers pass checked ranges).
    pub(super) fn at(&self, at: usize) -> *mut u8 {
        debug_assert!(at <= self.len);
        self.base.wrapping_add(at)
    }

    /// Copies the checked range `r` into `dst` (of the same length).
    pub(super) fn read(&self, r: Range<usize>, dst: &mut [u8]) {
        assert!(r.end <= self.len && r.len() == dst.len());
        // SAFETY: `r` lies inside the memory, which stays mapped for the
        // whole host call (memories never move or shrink); `dst` is ours,
        // so not inside it.
        unsafe { copy_from_racy(self.at(r.start), dst) }
    }

    /// Copies `src` to the checked offset `at`.
    pub(super) fn write(&self, at: usize, src: &[u8]) {
        assert!(at.checked_add(src.len()).is_some_and(|end| end <= self.len));
        // SAFETY: as in `read`, for the destination range.
        unsafe { copy_to_racy(src, self.at(at)) }
    }

    /// The checked range `r` as a new vector.
    pub(super) fn read_vec(&self, r: Range<usize>) -> Vec<u8> {
        let mut v = vec![0; r.len()];
        self.read(r, &mut v);
        v
    }

    /// The little-endian word at `ptr`: one relaxed atomic load where it
    /// is aligned (as a guest's words are), else four byte loads combined
    /// in a register (a byte-wise copy into an array read back as a word
    /// would make the word's load wait for the four byte stores).
    pub(super) fn read_u32(&self, ptr: i32) -> Result<u32, Errno> {
        let p = self.at(range(self.len, ptr, 4)?.start);
        // SAFETY: the four bytes at `p` lie inside the memory (checked
        // just above), which stays mapped for the whole host call; the
        // word load is aligned; relaxed atomic loads may race with any
        // other thread's accesses (see the module doc).
        unsafe {
            if (p as usize).is_multiple_of(4) {
                return Ok(u32::from_le((*(p as *const AtomicU32)).load(Relaxed)));
            }
            Ok((0..4).fold(0, |v, i| {
                v | u32::from((*(p.add(i) as *const AtomicU8)).load(Relaxed)) << (8 * i)
            }))
        }
    }

    /// Writes `bytes` at `ptr`, checked.
    pub(super) fn put(&self, ptr: i32, bytes: &[u8]) -> Result<(), Errno> {
        let r = range(self.len, ptr, bytes.len() as u64)?;
        self.write(r.start, bytes);
        Ok(())
    }
}

/// A result as the guest sees it: the value, or the error code.
pub(super) fn ret32(r: Result<i32, Errno>) -> i32 {
    r.unwrap_or_else(Errno::code)
}

pub(super) fn ret64(r: Result<i64, Errno>) -> i64 {
    r.unwrap_or_else(|e| e.code() as i64)
}

/// `len` bytes at guest address `ptr`, checked against memory of
/// `mem_len` bytes. Arguments arrive as `i32` and are read as unsigned.
pub(super) fn range(mem_len: usize, ptr: i32, len: u64) -> Result<Range<usize>, Errno> {
    let start = ptr as u32 as u64;
    let end = start.checked_add(len).ok_or(Errno::BadPtr)?;
    if end > mem_len as u64 {
        return Err(Errno::BadPtr);
    }
    Ok(start as usize..end as usize)
}

pub(super) fn read_u32(mem: GuestMem, ptr: i32) -> Result<u32, Errno> {
    mem.read_u32(ptr)
}

pub(super) fn write_u32(mem: GuestMem, ptr: i32, v: u32) -> Result<(), Errno> {
    mem.put(ptr, &v.to_le_bytes())
}

pub(super) fn write_u64(mem: GuestMem, ptr: i32, v: u64) -> Result<(), Errno> {
    mem.put(ptr, &v.to_le_bytes())
}

/// A length argument, which must not be negative when read as `i32` is
/// not the question: wasm32 lengths are unsigned.
pub(super) fn len32(len: i32) -> u64 {
    len as u32 as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(bytes: &mut [u8]) -> GuestMem<'_> {
        GuestMem::of_test_buffer(bytes)
    }

    #[test]
    fn words_are_read_little_endian_at_any_alignment() {
        // A u32 array makes offset 0 word-aligned whatever the allocator does.
        let mut words = [0u32; 3];
        // SAFETY: the array's 12 bytes, viewed as bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), 12) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        let m = mem(bytes);
        assert_eq!(m.read_u32(0), Ok(0x0403_0201));
        assert_eq!(m.read_u32(4), Ok(0x0807_0605));
        for at in [1, 2, 3, 5, 7] {
            let b = at as u32 + 1;
            let want = b | (b + 1) << 8 | (b + 2) << 16 | (b + 3) << 24;
            assert_eq!(m.read_u32(at), Ok(want), "offset {at}");
        }
        assert_eq!(m.read_u32(8), Ok(0x0c0b_0a09));
        assert!(m.read_u32(9).is_err());
        assert!(m.read_u32(-1).is_err());
    }

    #[test]
    fn ranges_reject_wild_pointers_and_huge_lengths() {
        assert_eq!(range(100, 0, 100), Ok(0..100));
        assert_eq!(range(100, 99, 1), Ok(99..100));
        assert_eq!(range(100, 100, 0), Ok(100..100));
        assert_eq!(range(100, 99, 2), Err(Errno::BadPtr));
        assert_eq!(range(100, -1, 1), Err(Errno::BadPtr)); // 0xffff_ffff
        assert_eq!(range(100, 0, u64::MAX), Err(Errno::BadPtr));
        assert_eq!(range(usize::MAX, -1, u64::MAX), Err(Errno::BadPtr));
    }
}

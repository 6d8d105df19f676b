//! Mappings: another object's pages placed in a task's linear memory, so
//! the task reads and writes them with plain loads and stores (JX's memory
//! objects, Luna's permits, at the speed of a load).
//!
//! A task's [`Mappings`] is its table of placed ranges. Each range comes
//! from a [`Source`] (a memory object) that keeps its own list of where
//! its pages are placed, so that revoking the source, or its owner's
//! death, can take them back from every task at once:
//!
//! - *map*: the source, its list locked, asks the holder's table to place
//!   the pages ([`Mappings::insert`]);
//! - *revoke*: the source, its list locked, has each holder's table seal
//!   the range ([`Mappings::revoke`]): the pages there become
//!   inaccessible before the revoke returns, so the holder's next access
//!   faults. The table keeps the sealed range, naming the object, until
//!   the holder unmaps it or ends;
//! - *unmap* and the holder's end: the table asks the source to forget
//!   the range ([`Source::detach`]), which calls back to remove it
//!   ([`Mappings::remove`]); the range gets fresh zero pages.
//!
//! Lock order: a source's list, then a holder's table, never the other
//! way. A table calls its sources only with its own lock released.
//!
//! What may be mapped: whole host pages ([`PAGE`]) of the memory the task
//! grew beyond its initial size. The initial pages hold the module's data
//! (Wasmtime maps them from the module's image, which the slot's next
//! task reuses) and, in C, the stack; they are never replaced.

mod fault;
pub mod pages;

pub use fault::install;
pub use pages::{SharedPages, PAGE};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where mapped pages come from: a memory object.
pub trait Source: Send + Sync {
    /// The object's number, for reasons and listings.
    fn id(&self) -> u64;
    /// Forgets that `holder` has its pages at `addr`: takes the source's
    /// own lock, then [`Mappings::remove`]s the range.
    fn detach(&self, holder: &Arc<Mappings>, addr: usize);
    /// Maps the same pages as `owner`'s mapping at `owner_addr` does, from
    /// `offset` of the source, into `holder` (a permit to memory that is
    /// a mapping: see [`Mappings::source_at`]), checking under the source's
    /// lock that the owner's mapping is still there. The placement's id.
    fn place_again(self: Arc<Self>, again: Again<'_>) -> Result<u64, MapError>;
    /// Seals the placement `id` in `holder` and forgets it (a permit it
    /// was made through was revoked).
    fn seal(&self, holder: &Arc<Mappings>, id: u64);
    /// Whether the placement `id` is still there.
    fn is_placed(&self, id: u64) -> bool;
}

/// What [`Source::place_again`] needs.
pub struct Again<'a> {
    /// The mapping the new one copies, and where it is.
    pub owner: &'a Arc<Mappings>,
    pub owner_addr: usize,
    /// The new mapping.
    pub holder: &'a Arc<Mappings>,
    pub offset: usize,
    pub len: usize,
    pub addr: usize,
    pub mem_len: usize,
    pub write: bool,
}

/// Why a mapping was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// Not page-aligned, empty, or beyond the source.
    Unaligned,
    /// Outside the task's memory.
    OutOfMemory,
    /// In the memory's initial pages.
    Initial,
    /// Over another mapping.
    Overlap,
    /// No mapping there (unmap).
    NotMapped,
    /// The task ended, or mappings cannot be made in this process.
    Unsupported,
    /// The system refused the mapping.
    System,
    /// Over [`MAX_PER_TASK`] or [`MAX_IN_PROCESS`] mappings.
    Quota,
}

/// Mappings one task may have at once.
pub const MAX_PER_TASK: usize = 256;
/// Mappings all tasks may have at once. Each splits its task's memory
/// into up to three kernel mappings (areas), and a process may have
/// about 65,000 areas in all (`vm.max_map_count`): a task making
/// thousands of small mappings must not use up the areas other tasks'
/// memories, threads and files need.
pub const MAX_IN_PROCESS: usize = 16_384;

/// Mappings placed now, in all tasks.
static PLACED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts one more mapping, for a task that has `held`: `Quota` past
/// either limit.
fn take_quota(held: usize) -> Result<(), MapError> {
    if held >= MAX_PER_TASK {
        return Err(MapError::Quota);
    }
    if PLACED.fetch_add(1, Ordering::AcqRel) >= MAX_IN_PROCESS {
        PLACED.fetch_sub(1, Ordering::AcqRel);
        return Err(MapError::Quota);
    }
    Ok(())
}

/// A placed range.
struct Entry {
    addr: usize,
    len: usize,
    /// Where in the source its pages start.
    offset: usize,
    id: u64,
    write: bool,
    /// `None` once revoked: the range is sealed.
    source: Option<Arc<dyn Source>>,
}

struct Inner {
    /// Its guard while the task lives (`None` once released).
    guard: Option<fault::GuardSlot>,
    entries: Vec<Entry>,
}

/// A task's placed ranges.
pub struct Mappings {
    /// The memory's host address.
    base: usize,
    /// Bytes at its start that may not be mapped over (its initial size).
    floor: usize,
    inner: Mutex<Inner>,
    /// Ranges revoked while placed here.
    revoked: AtomicU64,
}

impl std::fmt::Debug for Mappings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, bytes, revoked) = self.totals();
        write!(f, "Mappings({n} placed, {bytes} bytes, {revoked} revoked)")
    }
}

/// The place `addr..addr + len` of a table's memory, checked.
fn aligned(addr: usize, len: usize) -> bool {
    addr % PAGE == 0 && len % PAGE == 0 && len > 0
}

impl Mappings {
    /// The table of a memory at host address `base` whose first `floor`
    /// bytes may not be mapped over.
    pub fn new(base: *mut u8, floor: usize) -> Result<Arc<Mappings>, MapError> {
        if !fault::installed() {
            return Err(MapError::Unsupported);
        }
        let guard = fault::claim().ok_or(MapError::Unsupported)?;
        Ok(Arc::new(Mappings {
            base: base as usize,
            floor,
            inner: Mutex::new(Inner {
                guard: Some(guard),
                entries: Vec::new(),
            }),
            revoked: AtomicU64::new(0),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn at(&self, addr: usize) -> *mut u8 {
        (self.base + addr) as *mut u8
    }

    /// Places `len` bytes of `pages` from `offset` at `addr` of a memory
    /// now `mem_len` bytes long. Called by `source` with its list locked.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &self,
        addr: usize,
        len: usize,
        mem_len: usize,
        pages: &SharedPages,
        offset: usize,
        write: bool,
        source: Arc<dyn Source>,
    ) -> Result<(), MapError> {
        if !aligned(addr, len) || offset % PAGE != 0 {
            return Err(MapError::Unaligned);
        }
        let end = addr.checked_add(len).ok_or(MapError::OutOfMemory)?;
        if end > mem_len {
            return Err(MapError::OutOfMemory);
        }
        if addr < self.floor {
            return Err(MapError::Initial);
        }
        let mut inner = self.lock();
        let Some(guard) = &inner.guard else {
            return Err(MapError::Unsupported);
        };
        if inner
            .entries
            .iter()
            .any(|e| e.addr < end && addr < e.addr + e.len)
        {
            return Err(MapError::Overlap);
        }
        take_quota(inner.entries.len())?;
        // SAFETY: the range is page-aligned, inside the task's memory and
        // past its initial pages (checked above), and no other mapping is
        // there; the table's lock is held.
        if unsafe { pages.place(offset, len, self.at(addr), write) }.is_err() {
            PLACED.fetch_sub(1, Ordering::AcqRel);
            return Err(MapError::System);
        }
        guard.widen(self.base + addr, self.base + end);
        let id = source.id();
        inner.entries.push(Entry {
            addr,
            len,
            offset,
            id,
            write,
            source: Some(source),
        });
        Ok(())
    }

    /// Seals the range at `addr` (its source was revoked): every access
    /// faults from now on. Called by the source with its list locked.
    pub fn revoke(&self, addr: usize) {
        let mut inner = self.lock();
        let Some(e) = inner.entries.iter_mut().find(|e| e.addr == addr) else {
            return;
        };
        // SAFETY: our own placed range, the lock held. If sealing fails
        // the range gets zero pages: the object's pages are gone either way.
        if unsafe { pages::seal(self.at(e.addr), e.len) }.is_err() {
            // SAFETY: as above.
            let _ = unsafe { pages::restore(self.at(e.addr), e.len) };
        }
        let source = e.source.take();
        self.revoked.fetch_add(1, Ordering::Relaxed);
        drop(inner);
        drop(source);
    }

    /// Removes the range at `addr`, putting zero pages there. Called by
    /// its source with its list locked, or for a revoked range.
    pub fn remove(&self, addr: usize) {
        let mut inner = self.lock();
        let Some(i) = inner.entries.iter().position(|e| e.addr == addr) else {
            return;
        };
        let e = inner.entries.swap_remove(i);
        PLACED.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: our own placed range, the lock held. Restoring replaces
        // one area by another, which needs no new area (the limits above
        // keep the process well under the system's).
        let _ = unsafe { pages::restore(self.at(e.addr), e.len) };
        drop(inner);
        drop(e);
    }

    /// Whether `addr..addr + len` is one mapping exactly (revoked or not).
    pub fn is_mapped(&self, addr: usize, len: usize) -> bool {
        self.lock()
            .entries
            .iter()
            .any(|e| e.addr == addr && e.len == len)
    }

    /// The holder unmaps `addr..addr + len`, which must be one mapping
    /// exactly (revoked or not).
    pub fn unmap(self: &Arc<Self>, addr: usize, len: usize) -> Result<(), MapError> {
        let source = {
            let inner = self.lock();
            let e = inner
                .entries
                .iter()
                .find(|e| e.addr == addr && e.len == len);
            e.ok_or(MapError::NotMapped)?.source.clone()
        };
        match source {
            Some(s) => s.detach(self, addr),
            None => self.remove(addr),
        }
        Ok(())
    }

    /// The holder ends: every range is given back and no more are made.
    /// Run before its memory is released.
    pub fn release(self: &Arc<Self>) {
        loop {
            let next = {
                let inner = self.lock();
                inner.entries.first().map(|e| (e.addr, e.source.clone()))
            };
            match next {
                Some((addr, Some(s))) => s.detach(self, addr),
                Some((addr, None)) => self.remove(addr),
                None => break,
            }
            // A range a revoke sealed meanwhile is removed on the next
            // turn; one its source forgot is gone.
        }
        self.lock().guard = None;
    }

    /// Why an access at `wasm_addr` faulted, if a mapping made it fault:
    /// the range was revoked, or is read-only.
    pub fn describe(&self, wasm_addr: usize) -> Option<String> {
        let inner = self.lock();
        let e = inner
            .entries
            .iter()
            .find(|e| e.addr <= wasm_addr && wasm_addr < e.addr + e.len)?;
        Some(match (&e.source, e.write) {
            (None, _) => format!("access to revoked memory object {} at {wasm_addr:#x}", e.id),
            (Some(_), false) => format!(
                "store to read-only memory object {} at {wasm_addr:#x}",
                e.id
            ),
            (Some(_), true) => return None,
        })
    }

    /// Why the task must end because its host code touched a guarded
    /// page (see `fault`), once.
    pub fn take_hit(&self) -> Option<String> {
        let hit = self.lock().guard.as_ref()?.take_hit()?;
        let addr = hit.checked_sub(self.base)?;
        let why = self.describe(addr);
        Some(why.unwrap_or_else(|| format!("access to a guarded page at {addr:#x}")))
    }

    /// Mappings placed now, their bytes, and ranges revoked while placed.
    pub fn totals(&self) -> (u64, u64, u64) {
        let inner = self.lock();
        let live = inner.entries.iter().filter(|e| e.source.is_some());
        let (n, bytes) = live.fold((0, 0), |(n, b), e| (n + 1, b + e.len as u64));
        (n, bytes, self.revoked.load(Ordering::Relaxed))
    }

    /// The live mapping holding all of the host range `at..at + len`: its
    /// source, where in the source `at` is, whether it is writable, and
    /// the mapping's own address (for [`Source::place_again`]).
    pub fn source_at(
        &self,
        at: usize,
        len: usize,
    ) -> Option<(Arc<dyn Source>, usize, bool, usize)> {
        let addr = at.checked_sub(self.base)?;
        let end = addr.checked_add(len)?;
        let inner = self.lock();
        let e = inner
            .entries
            .iter()
            .find(|e| e.addr <= addr && end <= e.addr + e.len)?;
        let source = e.source.clone()?;
        Some((source, e.offset + (addr - e.addr), e.write, e.addr))
    }

    /// Whether any part of the host range `at..at + len` is a revoked
    /// mapping, or for a `write` a read-only one (host code accessing it
    /// would fault).
    pub fn guards_host(&self, at: usize, len: usize, write: bool) -> bool {
        let wasm_addr = at.wrapping_sub(self.base);
        let end = wasm_addr.saturating_add(len);
        let inner = self.lock();
        inner.entries.iter().any(|e| {
            e.addr < end && wasm_addr < e.addr + e.len && (e.source.is_none() || write && !e.write)
        })
    }
}

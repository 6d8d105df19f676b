//! A pool of fiber stacks for tasks' async calls.
//!
//! Every task runs its guest on a fiber with its own native stack. With
//! Wasmtime's default, each stack is mapped when a task starts and unmapped
//! when it ends; in a multi-threaded process each unmap costs a TLB
//! shootdown across cores, which dominated spawn time. [`StackPool`] keeps
//! up to a fixed number of freed stacks mapped and hands them to the next
//! task instead. A reused stack keeps the pages the last task touched
//! resident (typically a few tens of KiB), so the pool's idle cost is
//! bounded by `max_idle` times that.
//!
//! Each stack has a guard region of [`GUARD`] bytes below it, mapped with
//! no access, so a native stack overflow faults instead of corrupting
//! memory. Stacks that must be zeroed are always freshly mapped.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use wasmtime::{StackCreator, StackMemory};

/// Size of the inaccessible guard below each stack.
pub const GUARD: usize = 64 * 1024;

struct Mapping {
    /// Start of the mapping (the guard's lowest address).
    base: usize,
    /// Usable stack bytes above the guard.
    size: usize,
}

impl Mapping {
    fn new(size: usize) -> std::io::Result<Mapping> {
        let len = size + GUARD;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mapping = Mapping {
            base: base as usize,
            size,
        };
        // SAFETY: the range lies inside the mapping just created.
        let rc = unsafe {
            libc::mprotect(
                (mapping.base + GUARD) as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()); // `mapping` unmaps on drop
        }
        Ok(mapping)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping is owned by `self` and no longer used.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.size + GUARD) };
    }
}

struct PoolInner {
    idle: Mutex<Vec<Mapping>>,
    max_idle: usize,
}

/// A [`StackCreator`] that reuses freed stacks; see the module docs.
#[derive(Clone)]
pub struct StackPool {
    inner: Arc<PoolInner>,
}

impl StackPool {
    /// A pool keeping at most `max_idle` freed stacks.
    pub fn new(max_idle: usize) -> Self {
        StackPool {
            inner: Arc::new(PoolInner {
                idle: Mutex::new(Vec::new()),
                max_idle,
            }),
        }
    }

    /// Stacks currently idle in the pool.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.inner.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

struct PooledStack {
    mapping: Option<Mapping>,
    pool: Arc<PoolInner>,
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        if let Some(m) = self.mapping.take() {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < self.pool.max_idle {
                idle.push(m);
            }
        }
    }
}

// SAFETY: each stack is page aligned, its range is readable and writable
// and exclusively owned by the fiber using it until dropped, and the guard
// range below it is mapped with no access.
unsafe impl StackMemory for PooledStack {
    fn top(&self) -> *mut u8 {
        let m = self.mapping.as_ref().expect("live stack");
        (m.base + GUARD + m.size) as *mut u8
    }

    fn range(&self) -> Range<usize> {
        let m = self.mapping.as_ref().expect("live stack");
        m.base + GUARD..m.base + GUARD + m.size
    }

    fn guard_range(&self) -> Range<*mut u8> {
        let m = self.mapping.as_ref().expect("live stack");
        m.base as *mut u8..(m.base + GUARD) as *mut u8
    }
}

// SAFETY: see `StackMemory` above; stacks handed out are never shared.
unsafe impl StackCreator for StackPool {
    fn new_stack(&self, size: usize, zeroed: bool) -> wasmtime::Result<Box<dyn StackMemory>> {
        let reused = if zeroed {
            None
        } else {
            let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.iter()
                .rposition(|m| m.size == size)
                .map(|i| idle.swap_remove(i))
        };
        let mapping = match reused {
            Some(m) => m,
            None => Mapping::new(size)
                .map_err(|e| wasmtime::format_err!("cannot map a {size}-byte fiber stack: {e}"))?,
        };
        Ok(Box::new(PooledStack {
            mapping: Some(mapping),
            pool: self.inner.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_reused_up_to_max_idle() {
        let pool = StackPool::new(2);
        let a = pool.new_stack(256 * 1024, false).unwrap();
        let b = pool.new_stack(256 * 1024, false).unwrap();
        let c = pool.new_stack(256 * 1024, false).unwrap();
        let a_range = a.range();
        assert_eq!(a_range.len(), 256 * 1024);
        assert_eq!(a.top() as usize, a_range.end);
        assert_eq!(a.guard_range().end as usize, a_range.start);
        // Usable memory is writable.
        unsafe { std::ptr::write_bytes(a_range.start as *mut u8, 7, a_range.len()) };
        drop((a, b, c));
        assert_eq!(pool.idle(), 2);
        let d = pool.new_stack(256 * 1024, false).unwrap();
        assert_eq!(pool.idle(), 1);
        let other_size = pool.new_stack(128 * 1024, false).unwrap();
        assert_eq!(other_size.range().len(), 128 * 1024);
        assert_eq!(pool.idle(), 1);
        let zeroed = pool.new_stack(256 * 1024, true).unwrap();
        let r = zeroed.range();
        assert!(unsafe { std::slice::from_raw_parts(r.start as *const u8, r.len()) }
            .iter()
            .all(|&b| b == 0));
        drop((d, other_size, zeroed));
    }
}

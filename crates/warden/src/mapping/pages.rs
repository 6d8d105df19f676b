//! Pages that can be in two places at once: a memory object's bytes in a
//! shared-memory file, mapped once for the host and, on demand, again
//! into task memories.
//!
//! The file's descriptor is closed as soon as the host's mapping is made:
//! further mappings of the same pages are made from that mapping
//! (`mremap` with an old size of zero duplicates a shared mapping), so an
//! object holds no descriptor, however many tasks map it.

use std::io;
use std::ptr;

/// The host's page size, which mappings are aligned to.
pub const PAGE: usize = 4096;

/// Bytes rounded up to whole pages (`None` on overflow).
pub fn whole_pages(len: usize) -> Option<usize> {
    len.checked_add(PAGE - 1).map(|l| l & !(PAGE - 1))
}

/// A shared-memory file of whole pages, mapped for the host.
pub struct SharedPages {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pages are plain bytes; every access goes through raw
// pointers with the racy copies (see `ipc::permit::copy_racy`).
unsafe impl Send for SharedPages {}
// SAFETY: as above.
unsafe impl Sync for SharedPages {}

fn check(r: libc::c_int) -> io::Result<()> {
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl SharedPages {
    /// `len` zero bytes (rounded up to whole pages) in a fresh file.
    pub fn new(len: usize) -> io::Result<SharedPages> {
        let len =
            whole_pages(len.max(1)).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: plain system calls on a descriptor this function owns
        // and closes on every path.
        unsafe {
            let fd = libc::memfd_create(c"warden-memory-object".as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let sized = check(libc::ftruncate(fd, len as libc::off_t));
            let p = match sized {
                Ok(()) => libc::mmap(
                    ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                ),
                Err(_) => libc::MAP_FAILED,
            };
            let err = io::Error::last_os_error();
            libc::close(fd);
            sized?;
            if p == libc::MAP_FAILED {
                return Err(err);
            }
            Ok(SharedPages { ptr: p.cast(), len })
        }
    }

    /// The host's mapping of the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Maps the `len` bytes at `offset` at the address `at`, replacing
    /// whatever was mapped there, writable or read-only. A read-only
    /// mapping is made read-only before it is moved into place, so no
    /// store through it ever reaches the file.
    ///
    /// # Safety
    ///
    /// `at..at + len` must be page-aligned memory of the caller's that
    /// nothing else relies on the contents of (a task's own linear
    /// memory, under its mapping table's lock).
    pub unsafe fn place(
        &self,
        offset: usize,
        len: usize,
        at: *mut u8,
        write: bool,
    ) -> io::Result<()> {
        assert!(offset % PAGE == 0 && len % PAGE == 0 && offset + len <= self.len);
        // SAFETY: the source lies inside our shared mapping (asserted);
        // the target is the caller's (see above).
        unsafe {
            let src = self.ptr.add(offset).cast::<libc::c_void>();
            let fixed = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
            if write {
                let p = libc::mremap(src, 0, len, fixed, at.cast::<libc::c_void>());
                return match p == libc::MAP_FAILED {
                    true => Err(io::Error::last_os_error()),
                    false => Ok(()),
                };
            }
            let staged = libc::mremap(src, 0, len, libc::MREMAP_MAYMOVE);
            if staged == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let ro = check(libc::mprotect(staged, len, libc::PROT_READ));
            let moved = ro.and_then(|()| {
                match libc::mremap(staged, len, len, fixed, at.cast::<libc::c_void>()) {
                    p if p == libc::MAP_FAILED => Err(io::Error::last_os_error()),
                    _ => Ok(()),
                }
            });
            if moved.is_err() {
                libc::munmap(staged, len);
            }
            moved
        }
    }
}

impl Drop for SharedPages {
    fn drop(&mut self) {
        // SAFETY: our mapping, made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Puts fresh zero pages, readable and writable, at `at..at + len`: a
/// task memory's range as it was before anything was mapped there.
///
/// # Safety
///
/// As for [`SharedPages::place`].
pub unsafe fn restore(at: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe { anonymous(at, len, libc::PROT_READ | libc::PROT_WRITE) }
}

/// Puts inaccessible pages at `at..at + len`: every access faults.
///
/// # Safety
///
/// As for [`SharedPages::place`].
pub unsafe fn seal(at: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe { anonymous(at, len, libc::PROT_NONE) }
}

unsafe fn anonymous(at: *mut u8, len: usize, prot: libc::c_int) -> io::Result<()> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE;
    // SAFETY: the caller's contract.
    let p = unsafe { libc::mmap(at.cast(), len, prot, flags, -1, 0) };
    match p == libc::MAP_FAILED {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anonymous pages of the test's own, standing for a task's memory.
    fn scratch(len: usize) -> *mut u8 {
        // SAFETY: a fresh private mapping.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn a_placed_range_shares_the_objects_pages_until_restored() {
        let pages = SharedPages::new(3 * PAGE).unwrap();
        let mem = scratch(4 * PAGE);
        // SAFETY: `mem` is ours; offsets stay inside both mappings.
        unsafe {
            *mem.add(PAGE) = 7;
            pages.place(PAGE, 2 * PAGE, mem.add(PAGE), true).unwrap();
            assert_eq!(*mem.add(PAGE), 0, "the object's page, not the old one");
            *pages.as_ptr().add(PAGE + 5) = 42;
            assert_eq!(*mem.add(PAGE + 5), 42, "a store by the host is seen");
            *mem.add(2 * PAGE) = 9;
            assert_eq!(*pages.as_ptr().add(2 * PAGE), 9, "and the other way round");
            restore(mem.add(PAGE), 2 * PAGE).unwrap();
            assert_eq!(*mem.add(PAGE + 5), 0, "zero pages again");
            assert_eq!(
                *pages.as_ptr().add(PAGE + 5),
                42,
                "the object keeps its bytes"
            );
            libc::munmap(mem.cast(), 4 * PAGE);
        }
    }

    #[test]
    fn a_read_only_placement_is_read_only_from_the_start() {
        let pages = SharedPages::new(PAGE).unwrap();
        let mem = scratch(PAGE);
        // SAFETY: as above; the protection is read back, not tried.
        unsafe {
            *pages.as_ptr() = 3;
            pages.place(0, PAGE, mem, false).unwrap();
            assert_eq!(*mem, 3);
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            let at = format!("{:x}-", mem as usize);
            let line = maps.lines().find(|l| l.starts_with(&at)).unwrap();
            assert!(line.contains(" r--s "), "{line}");
            libc::munmap(mem.cast(), PAGE);
        }
    }
}

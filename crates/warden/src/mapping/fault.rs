//! Faults on guarded pages taken by host code.
//!
//! A task's read-only and revoked mappings are pages the hardware guards:
//! a store to a read-only one, any access to a revoked one, faults. When
//! the task's own code faults, Wasmtime's signal handler turns the fault
//! into a trap of that task (its memory holds the address), and the
//! task's end names the object (see [`super::Mappings::describe`]).
//!
//! Host code may touch the same pages: a host call given a pointer into
//! them, a bulk memory instruction (`memory.copy` and `memory.fill` are
//! host functions in Wasmtime), WASI writing a read into them. Wasmtime
//! passes such a fault, which is not in compiled code, on to the handler
//! installed before it: this one, if [`install`] ran before the first
//! engine was made (the runtime's setup sees to it). It looks the address
//! up in the [`Guard`]s, which every task with mappings has one of: an
//! address inside one is a guarded page. The page is replaced by a fresh
//! zero page, so the access goes on harmlessly (it reads zeros; a store
//! lands in a page of the task's own that nothing else sees), and the
//! guard records the address: the task is ended with the object's name at
//! its next deadline tick. Any other fault is passed on to the handler
//! before this one, as Wasmtime does.
//!
//! Everything the handler touches is a static array of atomics, and the
//! only call it makes is `mmap`, so it can run at any point of any thread.
//!
//! Should an engine have been made before [`install`] (a program that
//! uses Wasmtime itself before it starts a runtime), this handler stands
//! before Wasmtime's, and a task's own code touching a guarded page is
//! handled the same way: its access reads zeros or stores into a page of
//! its own, and it ends at its next tick with the same reason, instead
//! of trapping at once. Nothing of the object's is reached either way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// Tasks that may have mappings at one time.
pub const GUARDS: usize = 4096;

/// The address range of one task's mappings, and the guarded address its
/// host code last touched (plus one; zero: none).
struct Guard {
    taken: AtomicBool,
    lo: AtomicUsize,
    hi: AtomicUsize,
    hit: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Guard = Guard {
    taken: AtomicBool::new(false),
    lo: AtomicUsize::new(0),
    hi: AtomicUsize::new(0),
    hit: AtomicUsize::new(0),
};

static TABLE: [Guard; GUARDS] = [FREE; GUARDS];

/// One past the highest guard ever taken: the handler looks no further.
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// A task's guard, free again when dropped.
pub struct GuardSlot(usize);

/// A free guard, or `None` if [`GUARDS`] tasks have mappings now.
pub fn claim() -> Option<GuardSlot> {
    let i = TABLE.iter().position(|g| {
        g.taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    IN_USE.fetch_max(i + 1, Ordering::AcqRel);
    Some(GuardSlot(i))
}

impl GuardSlot {
    /// Makes the guard cover `lo..hi` too (host addresses).
    pub fn widen(&self, lo: usize, hi: usize) {
        let g = &TABLE[self.0];
        let old_lo = g.lo.load(Ordering::Acquire);
        if old_lo == 0 || lo < old_lo {
            g.lo.store(lo, Ordering::Release);
        }
        g.hi.fetch_max(hi, Ordering::AcqRel);
    }

    /// The guarded host address the task's host code touched, once.
    pub fn take_hit(&self) -> Option<usize> {
        match TABLE[self.0].hit.swap(0, Ordering::AcqRel) {
            0 => None,
            a => Some(a - 1),
        }
    }
}

impl Drop for GuardSlot {
    fn drop(&mut self) {
        let g = &TABLE[self.0];
        g.lo.store(0, Ordering::Release);
        g.hi.store(0, Ordering::Release);
        g.hit.store(0, Ordering::Release);
        g.taken.store(false, Ordering::Release);
    }
}

/// The handler in place before ours, called for faults that are not ours.
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();
static INSTALL: Once = Once::new();

/// Installs the handler (once per process). Call it before the first
/// Wasmtime engine is made, so that Wasmtime's handler, installed by the
/// engine, passes faults outside compiled code on to it.
pub fn install() {
    INSTALL.call_once(|| {
        // SAFETY: `PREVIOUS` is written here, once, before the handler
        // that reads it can run; the handler is a plain function.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
            action.sa_sigaction = on_fault as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = (&raw mut PREVIOUS).cast::<libc::sigaction>();
            if libc::sigaction(libc::SIGSEGV, &action, previous) != 0 {
                // Not installed: host code touching a guarded page then
                // crashes, so mapping stays off (see `installed`).
                return;
            }
            INSTALLED.store(true, Ordering::Release);
        }
    });
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether the handler is in place (mappings are refused otherwise).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// The guard whose range holds `addr`, if any.
fn guard_of(addr: usize) -> Option<&'static Guard> {
    let n = IN_USE.load(Ordering::Acquire).min(GUARDS);
    TABLE[..n].iter().find(|g| {
        let lo = g.lo.load(Ordering::Acquire);
        lo != 0 && lo <= addr && addr < g.hi.load(Ordering::Acquire)
    })
}

extern "C" fn on_fault(
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let previous = (&raw const PREVIOUS).cast::<libc::sigaction>();
    // SAFETY: the kernel passes a valid `siginfo_t` for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(g) = guard_of(addr) {
        let page = addr & !(super::pages::PAGE - 1);
        // SAFETY: the page lies in the guarded range of a task's memory,
        // which holds nothing but the mapping's pages (see module docs).
        if unsafe { super::pages::restore(page as *mut u8, super::pages::PAGE) }.is_ok() {
            let _ = g
                .hit
                .compare_exchange(0, addr + 1, Ordering::AcqRel, Ordering::Relaxed);
            return;
        }
    }
    // SAFETY: `PREVIOUS` was written before this handler was installed.
    unsafe { delegate(previous, signum, info, context) }
}

/// Passes the fault to the handler that was in place before ours; with
/// none, restores the default action and returns, so the access faults
/// again and the process ends as it would have without us.
unsafe fn delegate(
    previous: *const libc::sigaction,
    signum: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: a handler's address, as the kernel gave it to `sigaction`.
    unsafe {
        let previous = *previous;
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(previous.sa_sigaction);
            f(signum, info, context)
        } else if previous.sa_sigaction == libc::SIG_DFL || previous.sa_sigaction == libc::SIG_IGN {
            libc::sigaction(signum, &previous, std::ptr::null_mut());
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(previous.sa_sigaction);
            f(signum)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_access_to_a_guarded_page_reads_zero_and_is_recorded() {
        install();
        let pages = super::super::pages::SharedPages::new(2 * super::super::pages::PAGE).unwrap();
        let at = pages.as_ptr();
        let guard = claim().unwrap();
        // SAFETY: our own shared mapping; the sealed page is restored by
        // the handler on first touch.
        unsafe {
            *at.add(5000) = 1;
            super::super::pages::seal(at, super::super::pages::PAGE).unwrap();
            guard.widen(at as usize, at as usize + super::super::pages::PAGE);
            let v = std::ptr::read_volatile(at.add(10));
            assert_eq!(v, 0);
            assert_eq!(*at.add(5000), 1, "the page beside it untouched");
        }
        assert_eq!(guard.take_hit(), Some(at as usize + 10));
        assert_eq!(guard.take_hit(), None);
    }
}

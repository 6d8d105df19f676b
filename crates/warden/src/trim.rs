//! Handing free heap back to the system from every thread that holds some.
//!
//! An allocator with thread-local heaps (mimalloc, which the `warden`
//! command uses) returns a thread's free pages to the system only when
//! that thread next calls into it; a worker that goes idle after 10,000
//! tasks died on it would keep their freed heap resident for ever. So a
//! program sets the allocator's own collection as the hook
//! ([`set_heap_trim`]), a mass death asks every thread for it
//! ([`ask_all`]), and each worker runs it once before it next sleeps
//! ([`if_asked`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();
/// Bumped by every request; a thread that has seen it has trimmed.
static ASKED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// Sets how a thread hands its free heap back to the system (for
/// mimalloc: `mi_collect(true)`); once per process, later calls are
/// ignored.
pub fn set_heap_trim(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// Asks every thread to trim (and trims this one now).
pub(crate) fn ask_all() {
    ASKED.fetch_add(1, Ordering::Relaxed);
    if_asked();
}

/// Trims this thread if asked since it last did (a worker about to
/// sleep; a relaxed load when not).
pub(crate) fn if_asked() {
    let asked = ASKED.load(Ordering::Relaxed);
    if SEEN.with(|s| s.replace(asked)) != asked {
        if let Some(hook) = HOOK.get() {
            hook();
        }
    }
}

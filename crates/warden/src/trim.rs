//! Handing free heap back to the system from every thread that holds some.
//!
//! An allocator with thread-local heaps (mimalloc, which the `warden`
//! command uses) returns a thread's free pages to the system only when
//! that thread next calls into it; a worker that goes idle after 10,000
//! tasks died on it would keep their freed heap resident for ever. So a
//! program gives its runtime the allocator's own collection as the hook
//! ([`crate::RuntimeConfig::heap_trim`]), a mass death asks every worker
//! for it ([`HeapTrim::ask_all`]), and each worker runs it once before it
//! next sleeps ([`HeapTrim::if_asked`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One runtime's heap trimming: its hook and its requests.
#[derive(Debug, Default)]
pub struct HeapTrim {
    hook: Option<fn()>,
    /// Bumped by every request; a thread that has seen it has trimmed.
    asked: AtomicU64,
}

thread_local! {
    /// The trim this thread last did: whose (its address) and which
    /// request.
    static SEEN: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

impl HeapTrim {
    /// Trims with `hook` (for mimalloc: `mi_collect(true)`); `None`:
    /// nothing to do beyond what the runtime does with the C allocator.
    pub fn new(hook: Option<fn()>) -> HeapTrim {
        HeapTrim {
            hook,
            asked: AtomicU64::new(0),
        }
    }

    /// Asks every worker to trim (and trims this thread now).
    pub(crate) fn ask_all(&self) {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.if_asked();
    }

    /// Trims this thread if asked since it last did (a worker about to
    /// sleep; a relaxed load when not).
    pub(crate) fn if_asked(&self) {
        let Some(hook) = self.hook else { return };
        let asked = self.asked.load(Ordering::Relaxed);
        let seen = (self as *const HeapTrim as usize, asked);
        if asked != 0 && SEEN.with(|s| s.replace(seen)) != seen {
            hook();
        }
    }
}

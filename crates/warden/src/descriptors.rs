//! The process's descriptors that tasks may hold: their open files and
//! their sockets together, at most half of the process's limit on open
//! descriptors. The other half is kept for Warden itself — its web
//! servers' and control API's connections, the broker, the event log,
//! compiled code — so no task, or set of tasks, can leave the servers
//! unable to accept.
//!
//! One atomic counter, taken with a compare-and-swap that never passes
//! the limit; a [`Descriptor`] gives its place back when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Descriptors held by tasks now.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// How many descriptors tasks together may hold: half the process's
/// soft limit (read once, after `raise_descriptor_limit`), at least 16.
pub fn limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        // SAFETY: getrlimit writes the struct it is given.
        let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
        let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } {
            0 => usize::try_from(l.rlim_cur).unwrap_or(usize::MAX),
            _ => 1024,
        };
        (soft / 2).max(16)
    })
}

/// Descriptors held by tasks now.
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Takes one place if there is room.
pub(crate) fn take() -> bool {
    let limit = limit();
    HELD.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
        (n < limit).then_some(n + 1)
    })
    .is_ok()
}

/// Gives back `n` places taken with [`take`].
pub(crate) fn give(n: usize) {
    HELD.fetch_sub(n, Ordering::AcqRel);
}

/// One descriptor held by a task, until dropped.
#[derive(Debug)]
pub struct Descriptor(());

impl Descriptor {
    /// A place for one more descriptor, or the error a task gets when
    /// the process has none left for tasks (`ENFILE`).
    pub fn take() -> std::io::Result<Descriptor> {
        if take() {
            Ok(Descriptor(()))
        } else {
            Err(std::io::Error::from_raw_os_error(libc::ENFILE))
        }
    }
}

impl Drop for Descriptor {
    fn drop(&mut self) {
        give(1);
    }
}

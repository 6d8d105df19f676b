//! A waker for unit tests that counts its wakes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// How many times its waker was woken.
pub(crate) struct WakeCount(AtomicUsize);

impl WakeCount {
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker, and the count of its wakes.
pub(crate) fn counting_waker() -> (Arc<WakeCount>, Waker) {
    let c = Arc::new(WakeCount(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

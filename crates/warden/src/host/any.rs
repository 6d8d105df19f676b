//! Waiting for the first of several waits of one kind (`poll` over
//! several handles, `poll_oneoff` over several sockets): the waits share
//! one vector, instead of one box each.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Resolves when any of its waits does; never, if it has none.
pub(super) struct AnyOf<F> {
    /// Filled once, at construction, and never resized or moved from
    /// after: each wait stays where it was first polled until the vector
    /// drops it in place.
    waits: Vec<F>,
}

/// The first of `waits` to resolve (see [`AnyOf`]).
pub(super) fn any_of<F: Future<Output = ()>>(waits: impl IntoIterator<Item = F>) -> AnyOf<F> {
    AnyOf {
        waits: waits.into_iter().collect(),
    }
}

// Moving an `AnyOf` moves the vector's header, never the waits in its
// buffer, so it may move between polls whatever its waits are.
impl<F> Unpin for AnyOf<F> {}

impl<F: Future<Output = ()>> Future for AnyOf<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        for w in self.get_mut().waits.iter_mut() {
            // SAFETY: `w` lives in the vector's buffer, which is never
            // reallocated (`waits` is not resized after construction) and
            // from which nothing is moved: it stays put until dropped.
            if unsafe { Pin::new_unchecked(w) }.poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::counting_waker;

    #[test]
    fn resolves_with_the_first_ready_wait_and_not_before() {
        let (tx1, rx1) = tokio::sync::oneshot::channel::<()>();
        let (tx2, rx2) = tokio::sync::oneshot::channel::<()>();
        let (_tx3, rx3) = tokio::sync::oneshot::channel::<()>();
        let mut any = std::pin::pin!(any_of([rx1, rx2, rx3].map(|rx| async move {
            let _ = rx.await;
        })));
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(any.as_mut().poll(&mut cx).is_pending());
        tx2.send(()).unwrap();
        assert_eq!(count.get(), 1, "the second wait woke");
        assert!(any.as_mut().poll(&mut cx).is_ready());
        drop(tx1);
    }

    #[test]
    fn with_no_waits_it_never_resolves() {
        let mut any = std::pin::pin!(any_of(std::iter::empty::<std::future::Ready<()>>()));
        let (_, waker) = counting_waker();
        assert!(any
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
}

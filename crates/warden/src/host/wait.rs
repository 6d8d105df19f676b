//! Waiting in host calls: for a value until a timeout ([`wait_for`]), and
//! for the first of several waits of one kind (`poll` over several
//! handles, `poll_oneoff` over several sockets), which share one vector
//! instead of one box each ([`any_of`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The portal registered under `name` in the name service, waiting at
/// most `timeout_ns` (as [`wait_for`]) for it to be registered; a wait
/// that times out is withdrawn from the name service.
pub(super) async fn name(
    kernel: &crate::ipc::Kernel,
    name: &str,
    timeout_ns: i64,
) -> Option<crate::ipc::service::PortalRef> {
    let mut waker = None;
    let found = wait_for(timeout_ns, |cx| {
        waker = Some(cx.waker().clone());
        kernel.names.poll_lookup(name, cx)
    })
    .await;
    if found.is_none() {
        if let Some(w) = waker {
            kernel.names.cancel_wait(name, &w);
        }
    }
    found
}

/// Polls `ready` until it yields a value, or until `timeout_ns` passes
/// (`None`); a negative timeout waits forever, zero does not wait.
pub(super) async fn wait_for<T>(
    timeout_ns: i64,
    mut ready: impl FnMut(&mut std::task::Context<'_>) -> std::task::Poll<T>,
) -> Option<T> {
    let mut deadline = (timeout_ns > 0).then(|| {
        Box::pin(tokio::time::sleep(std::time::Duration::from_nanos(
            timeout_ns as u64,
        )))
    });
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = ready(cx) {
            return Poll::Ready(Some(v));
        }
        let expired = timeout_ns == 0
            || deadline
                .as_mut()
                .is_some_and(|d| d.as_mut().poll(cx).is_ready());
        if expired {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// How many entries a poll's reusable buffers keep between calls: a task
/// that once polled thousands of handles does not hold their buffers for
/// ever.
pub(super) const KEPT: usize = 64;

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

//! A per-request task as its request holds it: the route's slot, and
//! the kill of a task whose request was abandoned.

use crate::runtime::Runtime;
use crate::task::TaskStatus;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// A per-request task while its request is wanted. Dropped before the
/// task's code has ended (the client reset the stream or closed the
/// connection, the server stopped: its request's future was dropped),
/// it kills the task and keeps the route's slot until the task is gone,
/// so abandoned requests never have more tasks alive than the route has
/// slots. Once the code has ended, the slot is free: what is left is the
/// host releasing the store, which no guest can prolong.
pub(super) struct Running {
    rt: Runtime,
    id: crate::task::TaskId,
    done: Option<tokio::sync::oneshot::Receiver<crate::report::TaskReport>>,
    slot: Option<OwnedSemaphorePermit>,
    ended: bool,
}

impl Running {
    pub(super) fn new(
        rt: &Runtime,
        id: crate::task::TaskId,
        done: tokio::sync::oneshot::Receiver<crate::report::TaskReport>,
        slot: OwnedSemaphorePermit,
    ) -> Running {
        Running {
            rt: rt.clone(),
            id,
            done: Some(done),
            slot: Some(slot),
            ended: false,
        }
    }

    /// How the task ended: as soon as its code returned (`ended`), or
    /// else from its report; `None` if the runtime dropped it.
    pub(super) async fn ending(
        &mut self,
        ended: &mut tokio::sync::oneshot::Receiver<TaskStatus>,
    ) -> Option<TaskStatus> {
        let done = self.done.as_mut().expect("taken only when dropped");
        tokio::select! {
            biased;
            Ok(status) = ended => Some(status),
            report = done => report.ok().map(|r| r.ending()),
        }
    }

    /// As `ending`, polled.
    pub(super) fn poll_ending(
        &mut self,
        ended: &mut tokio::sync::oneshot::Receiver<TaskStatus>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<TaskStatus>> {
        use std::future::Future;
        use std::task::Poll;
        if let Poll::Ready(Ok(status)) = std::pin::Pin::new(&mut *ended).poll(cx) {
            return Poll::Ready(Some(status));
        }
        let Some(done) = self.done.as_mut() else {
            return Poll::Ready(None);
        };
        std::pin::Pin::new(done)
            .poll(cx)
            .map(|report| report.ok().map(|r| r.ending()))
    }

    /// The answer is out: the task keeps the route's slot until it ends,
    /// and is killed if it has not by `deadline`.
    pub(super) fn release_by(&mut self, deadline: Instant) {
        let Some(mut done) = self.done.take() else {
            return;
        };
        self.ended = true;
        let slot = self.slot.take();
        if !matches!(
            done.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        ) {
            return;
        }
        let (rt, id) = (self.rt.clone(), self.id);
        if let Ok(here) = tokio::runtime::Handle::try_current() {
            here.spawn(async move {
                if tokio::time::timeout_at(deadline, &mut done).await.is_err() {
                    let _ = rt.kill(id, "still running at its route's timeout");
                    let _ = done.await;
                }
                drop(slot);
            });
        }
    }

    /// Kills the task for `why`, without waiting for it.
    pub(super) fn kill(&self, why: &str) {
        let _ = self.rt.kill(self.id, why);
    }

    /// Its code has ended: dropping it kills nothing.
    pub(super) fn set_ended(&mut self) {
        self.ended = true;
    }

    /// Kills the task for `why` and waits until it is gone.
    pub(super) async fn end(&mut self, why: &str) {
        let _ = self.rt.kill(self.id, why);
        // Kept until the report came: dropped before (the request
        // abandoned while it waits), the slot still waits for the task.
        if let Some(done) = self.done.as_mut() {
            let _ = done.await;
        }
        self.done = None;
        self.ended = true;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut done) = self.done.take().filter(|_| !self.ended) else {
            return;
        };
        if !matches!(
            done.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        ) {
            return;
        }
        let _ = self.rt.kill(self.id, "its request was abandoned");
        let slot = self.slot.take();
        if let Ok(here) = tokio::runtime::Handle::try_current() {
            here.spawn(async move {
                let _ = done.await;
                drop(slot);
            });
        }
    }
}

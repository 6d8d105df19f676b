//! A call between tasks: its slot, owned by the calling task and reused
//! for each of its calls (so a call in steady state allocates nothing),
//! the state the client and the server share through it, and where the
//! call came from. Services queue slots (`service`).

use super::{Errno, Object};
use crate::task::{TaskId, TaskShared};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use super::lock;

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No call in the slot.
    Idle,
    /// Waiting in the service's queue.
    Queued,
    /// Taken by the server, not yet answered.
    Received,
    /// Finished: 0 for a reply, else an error code.
    Done(i32),
    /// The client died; nobody wants the answer.
    Abandoned,
}

/// The state of one client's call.
pub struct CallState {
    /// Incremented for every call made through the slot.
    pub seq: u64,
    /// Where the call is.
    pub phase: Phase,
    /// Request bytes.
    pub request: Vec<u8>,
    /// Request handles' objects.
    pub request_objects: Vec<Object>,
    /// Reply bytes.
    pub reply: Vec<u8>,
    /// Reply handles' objects.
    pub reply_objects: Vec<Object>,
    /// The blocked client.
    pub client: Option<Waker>,
    /// Where the call came from, if not from the client task itself (a
    /// call relayed from another node of a cluster).
    pub origin: Option<Origin>,
    /// The span the call is made in, when tracing (see `telemetry`): a
    /// call to another node carries it in its frame.
    pub trace: Option<crate::telemetry::Context>,
    /// The portal grant the call was made through (`PortalRef::via`), 0
    /// if none: a revoke of that portal fails it.
    pub via: usize,
}

/// The caller of a call relayed from another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The calling node.
    pub node: String,
    /// The calling task, on that node.
    pub task: u64,
}

/// One client task's call, reused for each of its calls. Its buffers are
/// charged to the client's memory budget as they grow (a queued message is
/// an allocation made on the client's behalf).
pub struct CallSlot {
    state: Mutex<CallState>,
    owner: Arc<TaskShared>,
}

impl CallState {
    /// Replaces the request bytes, charging buffer growth to `owner`.
    #[cfg(test)]
    pub fn set_request(&mut self, owner: &TaskShared, bytes: &[u8]) -> Result<(), Errno> {
        fill(&mut self.request, owner, bytes.len(), |b| {
            b.copy_from_slice(bytes)
        })
    }

    /// Replaces the request with `len` bytes that `copy` writes, charging
    /// buffer growth to `owner`.
    pub fn set_request_with(
        &mut self,
        owner: &TaskShared,
        len: usize,
        copy: impl FnOnce(&mut [u8]),
    ) -> Result<(), Errno> {
        fill(&mut self.request, owner, len, copy)
    }
}

/// Makes `buf` `len` bytes long and lets `copy` write them, charging any
/// growth of its capacity to `owner`. The buffer keeps its capacity, and
/// bytes it already had are overwritten rather than zeroed first, so a
/// call in steady state neither allocates nor clears.
fn fill(
    buf: &mut Vec<u8>,
    owner: &TaskShared,
    len: usize,
    copy: impl FnOnce(&mut [u8]),
) -> Result<(), Errno> {
    let old = buf.capacity();
    if len > old {
        buf.clear();
        buf.try_reserve_exact(len).map_err(|_| Errno::NoMem)?;
        if !owner.try_charge((buf.capacity() - old) as u64) {
            buf.shrink_to(old);
            return Err(Errno::NoMem);
        }
    }
    buf.truncate(len);
    buf.resize(len, 0);
    copy(buf);
    Ok(())
}

impl CallSlot {
    /// An idle slot for the client `owner`.
    pub fn new(owner: Arc<TaskShared>) -> Arc<CallSlot> {
        Arc::new(CallSlot {
            state: Mutex::new(CallState {
                seq: 0,
                phase: Phase::Idle,
                request: Vec::new(),
                request_objects: Vec::new(),
                reply: Vec::new(),
                reply_objects: Vec::new(),
                client: None,
                origin: None,
                trace: None,
                via: 0,
            }),
            owner,
        })
    }

    /// The client task the slot belongs to.
    pub fn owner(&self) -> &TaskShared {
        &self.owner
    }

    /// Locks the slot's state.
    pub fn lock(&self) -> MutexGuard<'_, CallState> {
        lock(&self.state)
    }

    /// Ends the call with `code` (unless it already ended) and wakes the
    /// client.
    pub fn finish(&self, seq: u64, code: i32) {
        let mut st = self.lock();
        if st.seq == seq && matches!(st.phase, Phase::Queued | Phase::Received) {
            st.phase = Phase::Done(code);
            if let Some(w) = st.client.take() {
                drop(st);
                w.wake();
            }
        }
    }

    /// Whether the call `seq` is under way (queued or being served) and
    /// was made through the portal grant `via`.
    pub fn is_via(&self, seq: u64, via: usize) -> bool {
        let st = self.lock();
        st.seq == seq && st.via == via && matches!(st.phase, Phase::Queued | Phase::Received)
    }

    /// For the client: ready with the result once the call is done.
    pub fn poll_done(&self, cx: &mut Context<'_>) -> Poll<i32> {
        let mut st = self.lock();
        match st.phase {
            Phase::Done(code) => Poll::Ready(code),
            _ => {
                match &st.client {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => st.client = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }

    /// The client is gone (killed mid-call): drop the request and reply
    /// at once and tell the server, should it answer, that nobody listens.
    pub fn abandon(&self) {
        let mut st = self.lock();
        if matches!(st.phase, Phase::Queued | Phase::Received) {
            st.phase = Phase::Abandoned;
        }
        st.client = None;
        let objects = (
            std::mem::take(&mut st.request_objects),
            std::mem::take(&mut st.reply_objects),
        );
        drop(st);
        drop(objects);
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.owner
            .refund((st.request.capacity() + st.reply.capacity()) as u64);
    }
}

/// The server's reference to a call it received and must answer.
pub struct CallRef {
    slot: Option<Arc<CallSlot>>,
    seq: u64,
}

impl CallRef {
    /// A reference to the slot's call number `seq`.
    pub fn new(slot: Arc<CallSlot>, seq: u64) -> Self {
        CallRef {
            slot: Some(slot),
            seq,
        }
    }

    /// The call's number in its slot.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The client waiting for the answer.
    pub fn client(&self) -> TaskId {
        self.slot.as_ref().map_or(TaskId(0), |s| s.owner.id)
    }

    /// Answers the call with `reply` (see [`CallRef::reply_with`]).
    #[cfg(test)]
    pub fn reply(self, reply: &[u8], objects: Vec<Object>) -> Result<(), (Errno, Vec<Object>)> {
        self.reply_with(reply.len(), |b| b.copy_from_slice(reply), objects)
    }

    /// Answers the call with a reply of `len` bytes, which `copy` writes
    /// into the client's buffer, and its objects. Fails with `PeerDied`
    /// (handing the objects back) if the client is gone, and with `NoMem`
    /// if the reply does not fit the client's memory budget (the client's
    /// call then fails with `NoMem` too).
    pub fn reply_with(
        self,
        len: usize,
        copy: impl FnOnce(&mut [u8]),
        objects: Vec<Object>,
    ) -> Result<(), (Errno, Vec<Object>)> {
        self.answer(len, copy, objects, Waker::wake)
    }

    /// As [`CallRef::reply_with`], from a thread that is no worker (a
    /// cluster node's relay): if a worker is idle, the client's next slice
    /// runs on this thread, at once (see
    /// [`crate::executor::host_hand_off`]), rather than on a worker woken
    /// for it.
    pub fn reply_handing_off(
        self,
        len: usize,
        copy: impl FnOnce(&mut [u8]),
        objects: Vec<Object>,
    ) -> Result<(), (Errno, Vec<Object>)> {
        self.answer(len, copy, objects, crate::executor::host_hand_off)
    }

    fn answer(
        mut self,
        len: usize,
        copy: impl FnOnce(&mut [u8]),
        objects: Vec<Object>,
        wake: fn(Waker),
    ) -> Result<(), (Errno, Vec<Object>)> {
        let slot = self.slot.take().expect("unanswered call");
        let mut st = slot.lock();
        if st.seq != self.seq || st.phase != Phase::Received {
            return Err((Errno::PeerDied, objects));
        }
        let filled = fill(&mut st.reply, &slot.owner, len, copy);
        if filled.is_ok() {
            st.reply_objects = objects;
            st.phase = Phase::Done(0);
        } else {
            st.phase = Phase::Done(Errno::NoMem.code());
        }
        let w = st.client.take();
        drop(st);
        if let Some(w) = w {
            wake(w);
        }
        filled.map_err(|e| (e, Vec::new()))
    }

    /// Ends the call without a reply: the client gets `NoReply`.
    pub fn close(self) {
        self.fail(Errno::NoReply)
    }

    /// Ends the call with the error `e` for the client.
    pub fn fail(mut self, e: Errno) {
        if let Some(slot) = self.slot.take() {
            slot.finish(self.seq, e.code());
        }
    }

    /// Whether the call's client still waits for this answer (it has
    /// not timed out, been cancelled or died since).
    pub fn is_waiting(&self) -> bool {
        self.slot.as_ref().is_some_and(|slot| {
            let st = slot.lock();
            st.seq == self.seq && st.phase == Phase::Received
        })
    }

    /// The call's slot (its request, for a server that is not a task).
    pub fn slot(&self) -> &CallSlot {
        self.slot.as_ref().expect("unanswered call")
    }
}

impl Drop for CallRef {
    fn drop(&mut self) {
        // Dropped unanswered: the server died holding it (rule 2).
        if let Some(slot) = self.slot.take() {
            slot.finish(self.seq, Errno::PeerDied.code());
        }
    }
}

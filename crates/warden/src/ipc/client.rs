//! Calls into task services from outside any task: how the host (the
//! HTTP server's servlet routes, an embedder) is a client of a service.
//!
//! A [`HostClient`] is a client with its own identity (an id taken from
//! the task ids, so it never collides with a task's) and a pool of call
//! slots, one per call in flight, reused between calls. A call has the
//! semantics of a task's portal call: the request is copied into the
//! kernel, queued FIFO on the service, and the reply copied out; if the
//! caller gives up (its future is dropped, e.g. on a timeout) the call is
//! abandoned and the server's late reply gets `PeerDied`. Calls carry
//! objects both ways (a servlet request's exchange, the cluster's relays). The host lends no
//! scheduling context: the server runs on its own.
//!
//! When a call finds its server waiting in `recv` while the client has
//! other calls in progress (the web server under load), the calling
//! thread runs the server's slice itself if a worker is idle
//! ([`crate::executor::host_hand_off`]): the answer comes without two
//! thread switches. A lone call wakes the server on a worker instead: a
//! worker that is still awake from the last call (see
//! [`crate::executor::IDLE_SPIN`]) answers it sooner than a thread that
//! goes idle between requests, whose wake-up on a virtual machine costs
//! tens of microseconds. (Measured with wrk on a 2-vCPU machine: at 64
//! connections the hand-off gave 3-5% more requests per second; at one
//! connection, always handing off gave about half.) A client whose calls
//! come further apart than a worker stays awake hands off lone calls too
//! ([`HostClient::handing_off`]: a cluster node's calls from other nodes).
//! The same goes for answers: a cluster node's relay answers its caller
//! with [`super::service::CallRef::reply_handing_off`].

use super::service::{CallSlot, Origin, Phase};
use super::{Errno, Kernel};
use crate::task::{TaskId, TaskShared};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Slots kept for reuse; more calls at once allocate their own.
const POOL: usize = 256;

/// Largest request or reply buffer a slot kept for reuse may have.
const POOLED_BUFFER: usize = 256 << 10;

/// Runs a direct service's call (a passive task's handler or a host
/// service, see [`super::service::Direct`]) for a client that is not a
/// task: the host layer, which knows the concrete handlers, provides it.
pub type DirectCall = for<'a> fn(
    &'a super::service::Direct,
    &'a TaskShared,
    &'a [u8],
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<u8>, Errno>> + Send + 'a>,
>;

/// Where a host client's call comes from, beside the client itself.
#[derive(Debug, Clone, Default)]
pub struct Calling {
    /// The remote caller it is made for (a call relayed from another
    /// node).
    pub origin: Option<Origin>,
    /// The span it is made in, when tracing.
    pub trace: Option<crate::telemetry::Context>,
}

/// A client of the kernel's services that is not a task.
pub struct HostClient {
    kernel: Arc<Kernel>,
    owner: Arc<TaskShared>,
    pool: Mutex<Vec<Arc<CallSlot>>>,
    direct: DirectCall,
    /// Calls in progress (see [`HostClient::call_portal`]).
    calls: AtomicUsize,
    /// Whether a lone call hands off too (see [`HostClient::handing_off`]).
    lone_hand_off: bool,
}

/// Counts a call in progress until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Abandons the call unless it was answered (see the module docs).
struct Waiting<'a> {
    slot: &'a CallSlot,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.slot.abandon();
        }
    }
}

impl HostClient {
    /// A client named `name` (as servers see it) with the id `id`.
    /// A direct service's calls run through `direct`.
    pub(crate) fn new(
        kernel: Arc<Kernel>,
        id: TaskId,
        name: String,
        direct: DirectCall,
    ) -> HostClient {
        HostClient {
            kernel,
            owner: Arc::new(TaskShared::new(id, name, None, None)),
            pool: Mutex::new(Vec::new()),
            direct,
            calls: AtomicUsize::new(0),
            lone_hand_off: false,
        }
    }

    /// This client with every call handed off to the calling thread when
    /// a worker is idle, a lone one too: for a caller whose calls come
    /// further apart than a worker stays awake (a cluster node's calls
    /// from other nodes, one broker round trip apart), where waking the
    /// server on a worker would cost a thread's wake-up, and the answer
    /// another.
    pub(crate) fn handing_off(mut self) -> HostClient {
        self.lone_hand_off = true;
        self
    }

    /// The id servers see as the caller's.
    pub fn id(&self) -> TaskId {
        self.owner.id
    }

    /// The kernel whose services it calls.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// A portal to the live service `name` here, or else on a node of
    /// the cluster known to serve it, without waiting for one.
    pub fn lookup_now(&self, name: &str) -> Option<super::service::PortalRef> {
        if let Some(p) = self.kernel.names.lookup(name) {
            return Some(p);
        }
        let waker = std::task::Waker::noop();
        let found = self
            .kernel
            .names
            .poll_lookup(name, &mut std::task::Context::from_waker(waker));
        self.kernel.names.cancel_wait(name, waker);
        match found {
            std::task::Poll::Ready(p) => Some(p),
            std::task::Poll::Pending => None,
        }
    }

    /// Calls through `portal` with `request` and its `objects`, as `from`
    /// says; the reply's bytes and objects. A direct service takes
    /// bytes only (`Inval` for objects).
    pub async fn call_portal(
        &self,
        from: Calling,
        portal: super::service::PortalRef,
        request: &[u8],
        objects: Vec<super::Object>,
    ) -> Result<(Vec<u8>, Vec<super::Object>), Errno> {
        self.call_portal_within(from, portal, request, objects, &|_| Ok(()))
            .await
    }

    /// As [`HostClient::call_portal`], made as `from` says (on behalf
    /// of an origin, which the server may ask for; in a trace): `Denied`
    /// if no live task provides the name; `PeerDied` if the server dies
    /// or closes the service first; or the error `admit_reply` gives for
    /// the reply's length (the reply is then dropped with the call's
    /// buffer). An admitted reply is the call's buffer itself, not a
    /// copy.
    pub async fn call_portal_within(
        &self,
        from: Calling,
        portal: super::service::PortalRef,
        request: &[u8],
        objects: Vec<super::Object>,
        admit_reply: &(dyn Fn(usize) -> Result<(), Errno> + Sync),
    ) -> Result<(Vec<u8>, Vec<super::Object>), Errno> {
        if let Some(handler) = portal.service().direct_handler().cloned() {
            drop(portal);
            if !objects.is_empty() {
                return Err(Errno::Inval);
            }
            let reply = (self.direct)(&handler, &self.owner, request).await?;
            admit_reply(reply.len())?;
            return Ok((reply, Vec::new()));
        }
        let others = self.calls.fetch_add(1, Ordering::Relaxed);
        let _in_flight = InFlight(&self.calls);
        let slot = self.slot();
        let seq = self.load(&slot, from, request, objects)?;
        let mut waiting = Waiting {
            slot: &slot,
            answered: false,
        };
        let receiver = portal.service().enqueue(&slot, seq).inspect_err(|_| {
            waiting.answered = true;
            let mut st = slot.lock();
            st.phase = Phase::Idle;
            st.request_objects.clear();
        })?;
        match receiver {
            // Among other calls, a server waiting in `recv` may answer on
            // this thread, now (a lone call is left to a worker unless
            // this client hands off every call, see the module docs).
            Some(receiver) if others > 0 || self.lone_hand_off => {
                crate::executor::host_hand_off(receiver)
            }
            Some(receiver) => receiver.wake(),
            None => {}
        }
        drop(portal);
        let code = std::future::poll_fn(|cx| slot.poll_done(cx)).await;
        waiting.answered = true;
        drop(waiting);
        let reply = self.take_answer(&slot, code, admit_reply);
        self.give_back(slot);
        reply
    }

    /// Puts a call's request in `slot`, queued; its number.
    fn load(
        &self,
        slot: &CallSlot,
        from: Calling,
        request: &[u8],
        objects: Vec<super::Object>,
    ) -> Result<u64, Errno> {
        let mut st = slot.lock();
        st.set_request_with(&self.owner, request.len(), |b| b.copy_from_slice(request))?;
        st.request_objects = objects;
        st.reply_objects.clear();
        st.origin = from.origin;
        st.trace = from.trace;
        st.seq += 1;
        st.phase = Phase::Queued;
        Ok(st.seq)
    }

    /// The answer in `slot` of a call that ended with `code`: an error, or
    /// the reply and its objects if `admit_reply` takes its length.
    fn take_answer(
        &self,
        slot: &CallSlot,
        code: i32,
        admit_reply: &(dyn Fn(usize) -> Result<(), Errno> + Sync),
    ) -> Result<(Vec<u8>, Vec<super::Object>), Errno> {
        let mut st = slot.lock();
        st.phase = Phase::Idle;
        st.request_objects.clear();
        let objects = std::mem::take(&mut st.reply_objects);
        match code {
            c if c < 0 => Err(Errno::from_code(c)),
            // Taken, not copied: the slot's buffer leaves the client's
            // account with it (a slot that carried a large reply would
            // not be kept anyway).
            _ => admit_reply(st.reply.len()).map(|()| {
                let reply = std::mem::take(&mut st.reply);
                self.owner.refund(reply.capacity() as u64);
                (reply, objects)
            }),
        }
    }

    fn slot(&self) -> Arc<CallSlot> {
        let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        pooled.unwrap_or_else(|| CallSlot::new(self.owner.clone()))
    }

    fn give_back(&self, slot: Arc<CallSlot>) {
        {
            // A slot that carried a large call is not kept: its buffers
            // would stay as large for as long as the client lives.
            let st = slot.lock();
            if st.request.capacity().max(st.reply.capacity()) > POOLED_BUFFER {
                return;
            }
        }
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(slot);
        }
    }
}

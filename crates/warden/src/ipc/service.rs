//! Services, portals and calls.
//!
//! A [`Service`] is a queue of calls and the server's waker. Its holders
//! ([`ServiceRef`]) may receive calls; its clients ([`PortalRef`]) may
//! make them. Both are counted, and the counts drive termination: the
//! last `ServiceRef` closes the service, the last `PortalRef` tells the
//! server it has no clients.
//!
//! Each client task owns one reusable [`CallSlot`] (a task is one thread,
//! so it makes one call at a time): the request and reply buffers keep
//! their capacity between calls, so a call in steady state allocates
//! nothing. The server names a received call with a [`CallRef`], which
//! carries the slot's sequence number so a stale reference cannot answer
//! a later call. Slots and call references are the `call` module's.

use super::Errno;
use crate::task::{TaskId, TaskShared};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::lock;

pub use super::call::{CallRef, CallSlot, CallState, Origin, Phase};

struct ServiceState {
    queue: VecDeque<(Arc<CallSlot>, u64)>,
    receiver: Option<Waker>,
    portals: usize,
    holders: usize,
    closed: bool,
    /// Set when the service was retired in favour of another (a live
    /// upgrade): calls queue there instead, and the server's `recv` finds
    /// the service gone once it has answered what it had received.
    successor: Option<Arc<Service>>,
}

/// The handler of a *direct* service: one whose calls run on the
/// caller's thread, inside its `call`, instead of queueing for a server
/// task (a passive task's handler, or a host service). Only the host
/// functions know the concrete types; here it is an opaque object.
pub type Direct = Arc<dyn std::any::Any + Send + Sync>;

/// A service: calls queue here until its server receives them.
pub struct Service {
    /// The task that created (and serves) it.
    pub owner: TaskId,
    /// The serving task's shared state, to lend it callers' scheduling
    /// contexts (CPU inheritance).
    server: Option<Arc<TaskShared>>,
    /// For a direct service, what runs its calls (nothing queues).
    direct: Option<Direct>,
    state: Mutex<ServiceState>,
}

impl Service {
    /// A new open service of the task `server`.
    pub fn of(server: &Arc<TaskShared>) -> Arc<Service> {
        Self::build(server.id, Some(server.clone()), None)
    }

    /// A new open direct service of `owner` (a passive task, or for a
    /// host service an id no task has), whose calls `handler` runs.
    pub fn direct(owner: TaskId, handler: Direct) -> Arc<Service> {
        Self::build(owner, None, Some(handler))
    }

    /// What runs the calls of a direct service.
    pub fn direct_handler(&self) -> Option<&Direct> {
        self.direct.as_ref()
    }

    /// A new open service with no holders or portals yet, served by the
    /// host rather than a task (`owner` is an id no task has).
    pub fn hosted(owner: TaskId) -> Arc<Service> {
        Self::build(owner, None, None)
    }

    #[cfg(test)]
    /// A new open service with no holders or portals yet.
    pub fn new(owner: TaskId) -> Arc<Service> {
        Self::hosted(owner)
    }

    /// The serving task, if known.
    pub fn server(&self) -> Option<&Arc<TaskShared>> {
        self.server.as_ref()
    }

    fn build(
        owner: TaskId,
        server: Option<Arc<TaskShared>>,
        direct: Option<Direct>,
    ) -> Arc<Service> {
        Arc::new(Service {
            owner,
            server,
            direct,
            state: Mutex::new(ServiceState {
                queue: VecDeque::new(),
                receiver: None,
                portals: 0,
                holders: 0,
                closed: false,
                successor: None,
            }),
        })
    }

    /// Queues the slot's current call (FIFO) and returns the waker of the
    /// server waiting for one, if it waits: the caller must wake it (or
    /// run it: a direct hand-off). Fails with `PeerDied` if the service is
    /// closed.
    #[must_use = "a waiting server must be woken"]
    pub fn enqueue(&self, slot: &Arc<CallSlot>, seq: u64) -> Result<Option<Waker>, Errno> {
        let mut st = lock(&self.state);
        if let Some(next) = st.successor.clone() {
            drop(st);
            return next.enqueue(slot, seq);
        }
        if st.closed {
            return Err(Errno::PeerDied);
        }
        st.queue.push_back((slot.clone(), seq));
        Ok(st.receiver.take())
    }

    /// Retires this service in favour of `next` (a live upgrade: the
    /// new server's service under the same name): the calls queued here
    /// and every later call through a portal to this one go to `next`,
    /// and this server's `recv` finds the service gone once it has
    /// answered the calls it had received. A service is retired once;
    /// `next` must not lead back to it.
    pub fn retire(&self, next: &Arc<Service>) {
        let mut st = lock(&self.state);
        if st.successor.is_some() || st.closed {
            return;
        }
        st.successor = Some(next.clone());
        let queued: Vec<_> = st.queue.drain(..).collect();
        let receiver = st.receiver.take();
        drop(st);
        for (slot, seq) in queued {
            match next.enqueue(&slot, seq) {
                Ok(Some(w)) => w.wake(),
                Ok(None) => {}
                Err(e) => slot.finish(seq, e.code()),
            }
        }
        if let Some(w) = receiver {
            w.wake();
        }
    }

    /// Wakes the server waiting in `recv` on it, if one is (to look at
    /// its task's hand-over: see `task::handover`).
    pub fn wake_receiver(&self) {
        let receiver = lock(&self.state).receiver.take();
        if let Some(w) = receiver {
            w.wake();
        }
    }

    #[cfg(test)]
    /// Whether the service was retired (see [`Service::retire`]).
    pub fn is_retired(&self) -> bool {
        lock(&self.state).successor.is_some()
    }

    /// For the server: the next live call, marked received; `NoClients`
    /// once the queue is empty and no portal is left.
    pub fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Result<(Arc<CallSlot>, u64), Errno>> {
        let mut st = lock(&self.state);
        while let Some((slot, seq)) = st.queue.pop_front() {
            let mut call = slot.lock();
            if call.seq == seq && call.phase == Phase::Queued {
                call.phase = Phase::Received;
                drop(call);
                return Poll::Ready(Ok((slot, seq)));
            }
        }
        if st.closed {
            return Poll::Ready(Err(Errno::PeerDied));
        }
        if st.portals == 0 || st.successor.is_some() {
            return Poll::Ready(Err(Errno::NoClients));
        }
        match &st.receiver {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.receiver = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// For a server that handed its state over (a live upgrade): ready,
    /// with the error its `recv` returns, once the service is retired,
    /// closed or has no portal left; calls are left queued.
    pub fn poll_gone(&self, cx: &mut Context<'_>) -> Poll<Errno> {
        let mut st = lock(&self.state);
        if st.closed {
            return Poll::Ready(Errno::PeerDied);
        }
        if st.portals == 0 || st.successor.is_some() {
            return Poll::Ready(Errno::NoClients);
        }
        match &st.receiver {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.receiver = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// For `poll`: ready once `recv` would return at once (a call waits,
    /// or the service closed or lost its last portal), without taking
    /// anything; otherwise the waker is kept as the receiver's.
    pub fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = lock(&self.state);
        if Self::ready_in(&st) {
            return Poll::Ready(());
        }
        match &st.receiver {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.receiver = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Whether `recv` would return at once (see [`Service::poll_ready`]).
    pub fn is_ready(&self) -> bool {
        Self::ready_in(&lock(&self.state))
    }

    fn ready_in(st: &ServiceState) -> bool {
        let waiting = st.queue.iter().any(|(slot, seq)| {
            let call = slot.lock();
            call.seq == *seq && call.phase == Phase::Queued
        });
        waiting || st.closed || st.portals == 0 || st.successor.is_some()
    }

    #[cfg(test)]
    /// Portals currently open to the service.
    pub fn portals(&self) -> usize {
        lock(&self.state).portals
    }

    /// Whether the service has closed (its last holder is gone).
    pub fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    fn close(&self) {
        let mut st = lock(&self.state);
        st.closed = true;
        // A retired service keeps its successor: portals to it still
        // reach the new server.
        let queued: Vec<_> = st.queue.drain(..).collect();
        drop(st);
        for (slot, seq) in queued {
            slot.finish(seq, Errno::PeerDied.code());
        }
    }
}

/// A holder's reference: the right to receive the service's calls.
pub struct ServiceRef(Arc<Service>);

impl ServiceRef {
    /// Creates a reference to `service`.
    pub fn new(service: &Arc<Service>) -> Self {
        lock(&service.state).holders += 1;
        ServiceRef(service.clone())
    }

    /// The service.
    pub fn service(&self) -> &Arc<Service> {
        &self.0
    }
}

impl Clone for ServiceRef {
    fn clone(&self) -> Self {
        ServiceRef::new(&self.0)
    }
}

impl Drop for ServiceRef {
    fn drop(&mut self) {
        let last = {
            let mut st = lock(&self.0.state);
            st.holders -= 1;
            st.holders == 0
        };
        if last {
            self.0.close();
        }
    }
}

/// A client's reference: the right to call the service. Duplicates of a
/// portal (by `dup`, in messages, through the name service) share one
/// [`Grant`], which the service's task may revoke: every copy, wherever
/// it went, fails from then on (J-Kernel's revocable capabilities).
pub struct PortalRef {
    service: Arc<Service>,
    grant: Arc<Grant>,
}

/// What the copies of one portal share: whether it was revoked. Its
/// address names the calls made through it (`CallState::via`).
#[derive(Default)]
pub struct Grant {
    revoked: std::sync::atomic::AtomicBool,
}

impl PortalRef {
    /// Creates a portal to `service`, with a grant of its own.
    pub fn new(service: &Arc<Service>) -> Self {
        Self::sharing(service, Arc::default())
    }

    fn sharing(service: &Arc<Service>, grant: Arc<Grant>) -> Self {
        lock(&service.state).portals += 1;
        PortalRef {
            service: service.clone(),
            grant,
        }
    }

    /// The service called through this portal.
    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// `Revoked` once the portal was revoked.
    pub fn check(&self) -> Result<(), Errno> {
        match self
            .grant
            .revoked
            .load(std::sync::atomic::Ordering::Acquire)
        {
            true => Err(Errno::Revoked),
            false => Ok(()),
        }
    }

    /// What names the calls made through this portal and its copies.
    pub fn via(&self) -> usize {
        Arc::as_ptr(&self.grant) as usize
    }

    /// Revokes every copy of this portal: later calls fail with
    /// `Revoked`, and so do the calls through it waiting in the service's
    /// queue. The calls its server has received are failed by the server's
    /// revoke (`host::warden::ipc`), which holds them.
    pub fn revoke(&self) {
        self.grant
            .revoked
            .store(true, std::sync::atomic::Ordering::Release);
        let via = self.via();
        let queued: Vec<_> = lock(&self.service.state)
            .queue
            .iter()
            .filter(|(slot, seq)| slot.is_via(*seq, via))
            .cloned()
            .collect();
        for (slot, seq) in queued {
            slot.finish(seq, Errno::Revoked.code());
        }
    }
}

impl Clone for PortalRef {
    fn clone(&self) -> Self {
        PortalRef::sharing(&self.service, self.grant.clone())
    }
}

impl Drop for PortalRef {
    fn drop(&mut self) {
        let mut st = lock(&self.service.state);
        st.portals -= 1;
        let w = if st.portals == 0 {
            st.receiver.take()
        } else {
            None
        };
        drop(st);
        if let Some(w) = w {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::counting_waker as waker;

    fn slot() -> Arc<CallSlot> {
        CallSlot::new(Arc::new(TaskShared::new(TaskId(5), "c".into(), None, None)))
    }

    fn call(slot: &Arc<CallSlot>, s: &Service, bytes: &[u8]) -> u64 {
        let seq = {
            let mut st = slot.lock();
            st.seq += 1;
            st.phase = Phase::Queued;
            st.set_request(slot.owner(), bytes).unwrap();
            st.seq
        };
        if let Some(w) = s.enqueue(slot, seq).unwrap() {
            w.wake();
        }
        seq
    }

    #[test]
    fn fifo_reply_roundtrip() {
        let s = Service::new(TaskId(1));
        let holder = ServiceRef::new(&s);
        let portal = PortalRef::new(&s);
        let (a, b) = (slot(), slot());
        call(&a, &s, b"first");
        call(&b, &s, b"second");
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(Ok((got, seq))) = s.poll_next(&mut cx) else {
            panic!()
        };
        assert_eq!(got.lock().request, b"first");
        let (client, cw) = waker();
        assert!(a.poll_done(&mut Context::from_waker(&cw)).is_pending());
        CallRef::new(got, seq)
            .reply(b"ok", vec![])
            .map_err(|e| e.0)
            .unwrap();
        assert_eq!(client.get(), 1, "client woken");
        assert_eq!(a.poll_done(&mut cx), Poll::Ready(0));
        assert_eq!(a.lock().reply, b"ok");
        drop((holder, portal));
    }

    #[test]
    fn closing_the_service_fails_queued_and_received_calls() {
        let s = Service::new(TaskId(1));
        let holder = ServiceRef::new(&s);
        let _portal = PortalRef::new(&s);
        let (a, b) = (slot(), slot());
        call(&a, &s, b"x");
        call(&b, &s, b"y");
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(Ok((got, seq))) = s.poll_next(&mut cx) else {
            panic!()
        };
        let in_progress = CallRef::new(got, seq);
        drop(holder); // the server dies: its service closes...
        assert_eq!(b.poll_done(&mut cx), Poll::Ready(Errno::PeerDied.code()));
        drop(in_progress); // ...and so does the call it held
        assert_eq!(a.poll_done(&mut cx), Poll::Ready(Errno::PeerDied.code()));
        let c = slot();
        c.lock().seq = 1;
        assert!(matches!(s.enqueue(&c, 1), Err(Errno::PeerDied)));
    }

    /// A retired service sends its queued calls, and every later call
    /// through a portal to it (after its server died too), to its
    /// successor; its own server's `recv` finds it gone.
    #[test]
    fn a_retired_service_sends_its_calls_on() {
        let (old, new) = (Service::new(TaskId(1)), Service::new(TaskId(2)));
        let (old_holder, _new_holder) = (ServiceRef::new(&old), ServiceRef::new(&new));
        let (held, _p) = (PortalRef::new(&old), PortalRef::new(&new));
        let (a, b, c) = (slot(), slot(), slot());
        call(&a, &old, b"queued");
        old.retire(&new);
        call(&b, held.service(), b"after");
        drop(old_holder);
        call(&c, held.service(), b"after its death");
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        for want in [&a, &b, &c] {
            let Poll::Ready(Ok((got, _))) = new.poll_next(&mut cx) else {
                panic!("a call did not reach the successor")
            };
            assert!(Arc::ptr_eq(&got, want));
        }
        let lone = Service::new(TaskId(3));
        let _h = ServiceRef::new(&lone);
        let _p = PortalRef::new(&lone);
        lone.retire(&new);
        assert!(matches!(
            lone.poll_next(&mut cx),
            Poll::Ready(Err(Errno::NoClients))
        ));
    }

    #[test]
    fn last_portal_wakes_the_server_with_no_clients() {
        let s = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&s);
        let portal = PortalRef::new(&s);
        let second = portal.clone();
        let (woken, w) = waker();
        let mut cx = Context::from_waker(&w);
        assert!(s.poll_next(&mut cx).is_pending());
        drop(portal);
        assert_eq!(woken.get(), 0);
        drop(second);
        assert_eq!(woken.get(), 1);
        assert!(matches!(
            s.poll_next(&mut cx),
            Poll::Ready(Err(Errno::NoClients))
        ));
    }

    #[test]
    fn abandoned_calls_are_skipped_and_replies_refused() {
        let s = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&s);
        let _portal = PortalRef::new(&s);
        let (a, b) = (slot(), slot());
        call(&a, &s, b"dead client");
        call(&b, &s, b"live client");
        a.abandon();
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(Ok((got, seq))) = s.poll_next(&mut cx) else {
            panic!()
        };
        assert!(Arc::ptr_eq(&got, &b));
        b.abandon();
        let err = CallRef::new(got, seq).reply(b"late", vec![]).err().unwrap();
        assert_eq!(err.0, Errno::PeerDied);
    }

    #[test]
    fn buffers_are_charged_to_the_client() {
        let owner = Arc::new(TaskShared::new(TaskId(5), "c".into(), None, Some(1000)));
        let a = CallSlot::new(owner.clone());
        let used = || owner.memory.current();
        a.lock().set_request(&owner, &[1; 600]).unwrap();
        assert!(used() >= 600);
        assert_eq!(a.lock().set_request(&owner, &[1; 2000]), Err(Errno::NoMem));
        a.lock().set_request(&owner, &[1; 100]).unwrap();
        let s = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&s);
        let _portal = PortalRef::new(&s);
        let seq = call(&a, &s, b"q");
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(Ok((got, seq2))) = s.poll_next(&mut cx) else {
            panic!()
        };
        assert_eq!(seq, seq2);
        let err = CallRef::new(got, seq)
            .reply(&[0; 900], vec![])
            .err()
            .unwrap();
        assert_eq!(err.0, Errno::NoMem);
        assert_eq!(a.poll_done(&mut cx), Poll::Ready(Errno::NoMem.code()));
        drop(a);
        assert_eq!(used(), 0);
    }

    #[test]
    fn closed_call_gets_no_reply() {
        let s = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&s);
        let _portal = PortalRef::new(&s);
        let a = slot();
        call(&a, &s, b"q");
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(Ok((got, seq))) = s.poll_next(&mut cx) else {
            panic!()
        };
        CallRef::new(got, seq).close();
        assert_eq!(a.poll_done(&mut cx), Poll::Ready(Errno::NoReply.code()));
    }
}

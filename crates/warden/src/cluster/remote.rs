//! The calling side: names other nodes serve, as services here.
//!
//! Each remote name a task looks up gets one local *relay* service (no
//! task serves it: a host loop receives its calls). A task's call through
//! the portal is therefore an ordinary call — its request copied into the
//! kernel under the task's own quotas and budget, its timeout and death
//! handled as for any call — and the relay sends it to one of the nodes
//! serving the name, picked at random for each call (the next one if the
//! broker says nobody listens there any more), sealed for that node (see
//! [`super::seal`]); its answer must be sealed by that node.
//!
//! Answers come back on this node's inbox, one subject per call, and
//! the inbox's listener answers the waiting call itself ([`Pending`]):
//! no task waits per call, and the relay sends each call from its own
//! loop (a call whose request carries portals, which must be lent first,
//! from a task of its own). The serving node sends a progress frame every
//! [`super::PROGRESS`] while it works; a call that hears nothing for
//! [`super::SILENCE`] fails with `PeerDied` (the node died, or the broker
//! is gone), and so does a call made while this node is cut off from the
//! broker, or to a name nobody serves any more (the broker's "no
//! responders").
//!
//! Portals in a request are lent, and portals in a reply borrowed, as
//! [`super::portal`] describes.

use super::wire::{self, Answer, Reply};
use super::Shared;
use crate::ipc::names::Remote;
use crate::ipc::service::{CallRef, PortalRef, Service, ServiceRef};
use crate::ipc::Errno;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

/// The label of borrowed portals' calls in the counts.
pub(super) const LENT: &str = "(portal)";

/// A remote name's relay: the portal that keeps it open (as a name's
/// registration does for a local service).
pub(super) struct Relay {
    portal: PortalRef,
}

/// A call sent to another node and waiting for its answer: the secret
/// its answer's subject carries, the node that must have sealed the
/// answer (in a keyed cluster) and the number of the last seal heard from
/// it for this call (a frame of the call's sealed with the same or a
/// lower number is a replay), when the call last heard from that node
/// (see [`Shared::silence_loop`]), the call itself, and for a name's call
/// what it takes to send it to the next node serving the name.
pub(super) struct Pending {
    token: u64,
    from: Arc<str>,
    last_seq: u64,
    heard_ms: u64,
    sending: Sending,
    next: Option<Next>,
}

/// A call on its way: the task's call, its label in the counts, the
/// bytes of its frame, and the portals lent for it (given back if the
/// call fails before a node has borrowed them).
struct Sending {
    call: CallRef,
    label: Arc<str>,
    sent: usize,
    lent: Vec<String>,
}

/// A name's call, as it would go to another node serving the name: the
/// name, where the turn started and how far it got, and the frame
/// unsealed (the front of the sealed one, shared with it).
struct Next {
    name: Arc<str>,
    first: usize,
    attempt: usize,
    frame: bytes::Bytes,
}

/// How often calls are checked for [`super::SILENCE`]: a call fails at
/// most this long after it has heard nothing for that long.
const SWEEP: std::time::Duration = std::time::Duration::from_millis(100);

/// Where a relay's calls go.
#[derive(Clone)]
pub(super) enum Dest {
    /// To one of the nodes serving a name.
    Name(Arc<str>),
    /// To the node that lent a portal, on the portal's subject.
    Portal(async_nats::Subject),
}

impl Remote for Shared {
    fn poll_lookup(&self, name: &str, cx: &mut Context<'_>) -> Poll<PortalRef> {
        let mut names = self.lock_names();
        if names.served.contains_key(name) {
            return Poll::Ready(self.relay(&mut names.relays, name));
        }
        if !names
            .waiters
            .iter()
            .any(|(n, w)| n == name && w.will_wake(cx.waker()))
        {
            names.waiters.push((name.to_string(), cx.waker().clone()));
        }
        Poll::Pending
    }

    fn cancel_wait(&self, name: &str, waker: &Waker) {
        self.lock_names()
            .waiters
            .retain(|(n, w)| !(n == name && w.will_wake(waker)));
    }

    fn exported(&self, _name: &str) {
        self.exports_changed.notify_one();
    }
}

impl Shared {
    /// A portal to the relay for `name`, made on first use.
    fn relay(
        &self,
        relays: &mut std::collections::HashMap<String, Relay>,
        name: &str,
    ) -> PortalRef {
        if let Some(r) = relays.get(name) {
            return r.portal.clone();
        }
        let service = Service::hosted(self.host.id());
        let holder = ServiceRef::new(&service);
        let portal = PortalRef::new(&service);
        let task = self.tokio.spawn(relay_loop(
            self.me.clone(),
            Dest::Name(name.into()),
            name.into(),
            holder,
        ));
        self.tasks.push(task.abort_handle());
        relays.insert(
            name.to_string(),
            Relay {
                portal: portal.clone(),
            },
        );
        portal
    }

    /// Sends one call to `dest` (its portals lent first); its answer
    /// reaches it through [`Shared::heard`]. `label` names it in the
    /// counts.
    async fn forward(self: Arc<Self>, dest: Dest, label: Arc<str>, call: CallRef) {
        let objects = std::mem::take(&mut call.slot().lock().request_objects);
        let unsent = |call| Sending {
            call,
            label: label.clone(),
            sent: 0,
            lent: Vec::new(),
        };
        let portals = if objects.is_empty() {
            Vec::new()
        } else {
            // What can refuse the call is checked before its portals are
            // lent (and checked again as it is sent).
            if let Err(e) = self.can_send(&dest, &call, objects.len()) {
                return self.failed(unsent(call), e);
            }
            match self.lend_all(objects).await {
                Ok(portals) => portals,
                Err(e) => return self.failed(unsent(call), e),
            }
        };
        let mut frame = Vec::new();
        {
            let st = call.slot().lock();
            let task = call.client().0;
            let trace = st.trace.map(|c| (c.trace, c.span));
            wire::encode_call(&mut frame, (&self.node, task, trace), &portals, &st.request);
        }
        let sent = frame.len();
        let sending = Sending {
            call,
            label,
            sent,
            lent: portals,
        };
        match dest {
            Dest::Portal(subject) => {
                let lender = self.subjects.lender_of(&subject).unwrap_or("");
                let to = (lender.into(), 0);
                self.exchange(subject.clone(), to, frame, sending, None)
                    .await;
            }
            // Calls are spread over the nodes serving the name.
            Dest::Name(name) => {
                let first = rand::random::<u32>() as usize;
                self.to_provider((name, first, 0), frame, sending).await;
            }
        }
    }

    /// Whether a call to `dest` with `portals` portals could be sent now:
    /// this node is connected, some node serves the name, and the frame,
    /// its portals' subjects at their longest, fits the broker's payload.
    fn can_send(&self, dest: &Dest, call: &CallRef, portals: usize) -> Result<(), Errno> {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(Errno::PeerDied);
        }
        if let Dest::Name(name) = dest {
            if !self.lock_names().served.contains_key(&**name) {
                return Err(Errno::PeerDied);
            }
        }
        let request = call.slot().lock().request.len();
        let most = wire::call_len(&self.node, portals, request) + MAX_SEAL;
        if most > self.client.max_payload() {
            return Err(Errno::Quota);
        }
        Ok(())
    }

    /// Sends a name's call to node `first + attempt` (in turn) of those
    /// serving the name; fails it with `PeerDied` once each has had it.
    async fn to_provider(
        &self,
        (name, first, attempt): (Arc<str>, usize, usize),
        frame: Vec<u8>,
        sending: Sending,
    ) {
        let provider = {
            let names = self.lock_names();
            let all = names.served.get(&*name).map_or(&[][..], |v| &v[..]);
            (attempt < all.len()).then(|| all[first.wrapping_add(attempt) % all.len()].clone())
        };
        let Some(provider) = provider else {
            return self.failed(sending, Errno::PeerDied);
        };
        let to = (provider.node, provider.instance);
        let next = Some((name, first, attempt));
        self.exchange(provider.subject, to, frame, sending, next)
            .await;
    }

    /// Publishes a call frame on `subject`, sealed for instance `to` of
    /// node `from`, with a reply subject of its own, after entering the
    /// call in the table of those waiting for answers.
    async fn exchange(
        &self,
        subject: async_nats::Subject,
        (from, to): (Arc<str>, u64),
        frame: Vec<u8>,
        sending: Sending,
        name: Option<(Arc<str>, usize, usize)>,
    ) {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return self.failed(sending, Errno::PeerDied);
        }
        if frame.len() + MAX_SEAL > self.client.max_payload() {
            return self.failed(sending, Errno::Quota);
        }
        let id = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The answer's subject carries a secret of this call: nobody who
        // has not seen the call can answer it.
        let token: u64 = rand::random();
        let reply_to = wire::reply_subject(&self.inbox, id, token);
        let body = frame.len();
        let frame = self.sealed(&subject, &reply_to, frame, (&from, to));
        let next = name.map(|(name, first, attempt)| Next {
            name,
            first,
            attempt,
            frame: frame.slice(..body),
        });
        if self.left.load(std::sync::atomic::Ordering::Acquire) {
            return self.failed(sending, Errno::PeerDied);
        }
        // Its portals are lent to the node it goes to, and no other.
        self.lend_to(&sending.lent, &from);
        let pending = Pending {
            token,
            from,
            last_seq: 0,
            heard_ms: self.now_ms(),
            sending,
            next,
        };
        self.lock_pending().insert(id, pending);
        let sent = self
            .client
            .publish_with_reply(subject, reply_to, frame)
            .await;
        if sent.is_err() {
            let gone = self.lock_pending().remove(&id);
            if let Some(p) = gone {
                self.failed(p.sending, Errno::PeerDied);
            }
        }
    }

    /// Ends a call that got no answer with `e`, giving back the portals
    /// lent for it.
    fn failed(&self, sending: Sending, e: Errno) {
        self.stats.called(&sending.label, sending.sent, Err(()));
        self.unlend(&sending.lent);
        sending.call.fail(e);
    }

    /// Fails every call waiting for an answer (the node is leaving).
    pub(super) fn fail_all_pending(&self) {
        let all: Vec<Pending> = self.lock_pending().drain().map(|(_, p)| p).collect();
        for p in all {
            self.failed(p.sending, Errno::PeerDied);
        }
    }

    /// Ends a call with the answer its node sent.
    fn answered(&self, sending: Sending, result: Result<Reply<'_>, Errno>) {
        let counted = result.as_ref().map(|r| r.bytes.len()).map_err(|_| ());
        self.stats.called(&sending.label, sending.sent, counted);
        match result {
            Ok(r) if r.portals.iter().all(|p| self.subjects.owns_portal(p)) => {
                let objects = self.borrow_all(&r.portals);
                let copy = |b: &mut [u8]| b.copy_from_slice(r.bytes);
                let _ = sending.call.reply_handing_off(r.bytes.len(), copy, objects);
            }
            Ok(_) => {
                self.stats.drop_frame();
                sending.call.fail(Errno::PeerDied);
            }
            // Refused before the node borrowed the request's portals.
            Err(Errno::Busy) => {
                self.unlend(&sending.lent);
                sending.call.fail(Errno::Busy);
            }
            Err(e) => sending.call.fail(e),
        }
    }

    /// Every [`SWEEP`], fails with `PeerDied` each call that has heard
    /// nothing for [`super::SILENCE`] (its node died, or the broker is
    /// gone), and forgets those its task no longer waits for (timed out,
    /// or the task died).
    pub(super) async fn silence_loop(self: Arc<Self>) {
        let mut sweep = tokio::time::interval(SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence = super::SILENCE.as_millis() as u64;
        loop {
            sweep.tick().await;
            let now = self.now_ms();
            // Lock order: the pending table, then each call's slot.
            let silent: Vec<(u64, Pending)> = self
                .lock_pending()
                .extract_if(|_, p| {
                    now.saturating_sub(p.heard_ms) >= silence || !p.sending.call.is_waiting()
                })
                .collect();
            let mut abandoned = self.lock_abandoned();
            for (id, p) in &silent {
                abandoned.insert(*id, p.token, p.from.clone());
            }
            drop(abandoned);
            for (_, p) in silent {
                self.failed(p.sending, Errno::PeerDied);
            }
        }
    }

    /// Takes what a message heard on this node's inbox says to its call.
    pub(super) async fn heard(&self, msg: async_nats::Message) {
        let Some((id, token)) = wire::reply_call(&self.inbox, &msg.subject) else {
            self.stats.drop_frame();
            return;
        };
        if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
            // Nobody listens where the call went (the node just died):
            // the next node serving the name gets it. No seal covers this
            // status, and whoever reads the call can send it: a keyed
            // cluster does not take its word (the call would run twice),
            // and the call fails on silence instead.
            if self.keyed() {
                return;
            }
            let Ok(Some(p)) = self.waiting(id, token, None, true) else {
                return;
            };
            return match p.next {
                Some(n) => {
                    let name = (n.name, n.first, n.attempt + 1);
                    self.to_provider(name, n.frame.to_vec(), p.sending).await
                }
                None => self.failed(p.sending, Errno::PeerDied),
            };
        }
        let Some((frame, seal)) = self.opened(&msg) else {
            return;
        };
        let signer = seal.map(|s| (s.signer, s.seq));
        match wire::decode_answer(frame) {
            Some(Answer::Progress) => drop(self.waiting(id, token, signer, false)),
            Some(Answer::Done(result)) => match self.waiting(id, token, signer, true) {
                Ok(Some(p)) => self.answered(p.sending, result),
                Ok(None) | Err(NotWaiting::Forged) => {}
                Err(NotWaiting::Gone) => {
                    let signer = signer.map(|(s, _)| s);
                    let from = self.lock_abandoned().take(id, token, signer);
                    if let Some(from) = from {
                        self.orphaned(result, &from).await;
                    }
                }
            },
            None => self.stats.drop_frame(),
        }
    }

    /// Gives back the portals node `from` lent in its late answer to an
    /// abandoned call: nothing here will borrow them, and `from` would
    /// keep them lent until its end.
    async fn orphaned(&self, result: Result<Reply<'_>, Errno>, from: &str) {
        let Ok(reply) = result else { return };
        for &subject in &reply.portals {
            let theirs = self.subjects.lender_of(subject) == Some(from);
            if !theirs || !self.subjects.owns_portal(subject) {
                continue;
            }
            self.release(subject.into(), from).await;
        }
    }

    /// Tells `lender` that the portal it lent on `subject` is borrowed no
    /// more here.
    async fn release(&self, subject: async_nats::Subject, lender: &str) {
        let release = self.sealed(&subject, "", wire::encode_release(), (lender, 0));
        let _ = self.client.publish(subject, release).await;
    }

    /// Marks call `id` as heard from, if `token` is its secret and `seal`
    /// (in a keyed cluster: signer and number) names the node it went to
    /// and a frame newer than the last heard for the call; the call, taken
    /// out of the table, if `ends`. A wrong secret, signer or number is
    /// counted as forged.
    fn waiting(
        &self,
        id: u64,
        token: u64,
        seal: Option<(&str, u64)>,
        ends: bool,
    ) -> Result<Option<Pending>, NotWaiting> {
        let now = self.now_ms();
        let mut pending = self.lock_pending();
        let fresh = |p: &Pending| seal.is_none_or(|(s, n)| s == &*p.from && n > p.last_seq);
        match pending.get_mut(&id) {
            Some(p) if p.token == token && fresh(p) => {
                p.heard_ms = now;
                p.last_seq = seal.map_or(0, |(_, n)| n);
                Ok(ends.then(|| pending.remove(&id)).flatten())
            }
            Some(_) => {
                drop(pending);
                self.stats.forged();
                Err(NotWaiting::Forged)
            }
            None => Err(NotWaiting::Gone),
        }
    }
}

/// Calls given up on (silent too long, or no longer waited for) whose
/// answers may still come, by number, the latest [`ABANDONED`] of them
/// (calls are numbered in the order they are made): each one's secret
/// and the node it went to. A late answer to one gives back the portals
/// lent in it, once (a replay finds nothing).
#[derive(Default)]
pub(super) struct Abandoned {
    calls: std::collections::BTreeMap<u64, (u64, Arc<str>)>,
}

/// How many abandoned calls are remembered.
const ABANDONED: usize = 1024;

impl Abandoned {
    fn insert(&mut self, id: u64, token: u64, from: Arc<str>) {
        self.calls.insert(id, (token, from));
        if self.calls.len() > ABANDONED {
            self.calls.pop_first();
        }
    }

    /// The node abandoned call `id` went to, forgotten, if `token` is
    /// its secret and `signer` (in a keyed cluster) is that node.
    fn take(&mut self, id: u64, token: u64, signer: Option<&str>) -> Option<Arc<str>> {
        let (t, from) = self.calls.get(&id)?;
        if *t != token || signer.is_some_and(|s| s != &**from) {
            return None;
        }
        self.calls.remove(&id).map(|(_, from)| from)
    }
}

/// Why an answer found no call to take it.
enum NotWaiting {
    /// No call of its number waits (any more).
    Gone,
    /// Its call waits, but the answer is not from where the call went.
    Forged,
}

/// The most a seal adds to a frame.
const MAX_SEAL: usize = 256;

/// Receives the relay's calls and sends each to `dest`, from this loop
/// (a call with portals to lend, from a task of its own). A borrowed
/// portal's relay ends when its last portal here is closed, and tells the
/// lender so.
pub(super) async fn relay_loop(
    shared: Weak<Shared>,
    dest: Dest,
    label: Arc<str>,
    holder: ServiceRef,
) {
    let service = holder.service().clone();
    while let Ok((slot, seq)) = std::future::poll_fn(|cx| service.poll_next(cx)).await {
        let call = CallRef::new(slot, seq);
        let Some(s) = shared.upgrade() else { return };
        let lends = !call.slot().lock().request_objects.is_empty();
        let forward = s.clone().forward(dest.clone(), label.clone(), call);
        if lends {
            s.tokio.spawn(forward);
        } else {
            forward.await;
        }
    }
    if let (Some(s), Dest::Portal(subject)) = (shared.upgrade(), dest) {
        let lender = s.subjects.lender_of(&subject).unwrap_or("");
        s.release(subject.clone(), lender).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An abandoned call's late answer is taken once, with its secret and
    /// from its node only; the oldest are forgotten past the bound.
    #[test]
    fn abandoned_calls_are_taken_once_and_bounded() {
        let mut a = Abandoned::default();
        a.insert(1, 7, "a".into());
        assert_eq!(a.take(1, 8, None), None, "wrong secret");
        assert_eq!(a.take(1, 7, Some("c")), None, "another node's seal");
        assert_eq!(a.take(1, 7, Some("a")).as_deref(), Some("a"));
        assert_eq!(a.take(1, 7, Some("a")), None, "a replay");
        for id in 0..ABANDONED as u64 + 10 {
            a.insert(id, id, "b".into());
        }
        assert_eq!(a.calls.len(), ABANDONED);
        assert_eq!(a.take(9, 9, None), None, "forgotten");
        assert!(a.take(10, 10, None).is_some());
    }
}

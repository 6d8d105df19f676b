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
//! Answers come back on this node's inbox, one subject per call. The
//! serving node sends a progress frame every [`super::PROGRESS`] while it
//! works; a call that hears nothing for [`super::SILENCE`] fails with
//! `PeerDied` (the node died, or the broker is gone), and so does a call
//! made while this node is cut off from the broker, or to a name nobody
//! serves any more (the broker's "no responders").
//!
//! Portals in a request are lent, and portals in a reply borrowed, as
//! [`super::portal`] describes.

use super::wire::{self, Answer};
use super::Shared;
use crate::ipc::names::Remote;
use crate::ipc::service::{CallRef, PortalRef, Service, ServiceRef};
use crate::ipc::Errno;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use tokio::sync::mpsc;

/// The label of borrowed portals' calls in the counts.
pub(super) const LENT: &str = "(portal)";

/// A reply from another node: its bytes and its portals' subjects.
type Answered = Result<(Vec<u8>, Vec<String>), Errno>;

/// What a call's inbox subject delivered.
pub(super) enum Heard {
    Progress,
    Done(Answered),
    /// The broker's "no responders": nobody listens on the subject.
    Nobody,
}

/// A remote name's relay: the portal that keeps it open (as a name's
/// registration does for a local service).
pub(super) struct Relay {
    portal: PortalRef,
}

/// A call waiting for its answer: the secret its answer's subject
/// carries, the node that must have sealed the answer (in a keyed
/// cluster), where the answer goes, and when the call last heard from
/// that node (see [`Shared::silence_loop`]).
pub(super) struct Pending {
    token: u64,
    from: Arc<str>,
    tx: mpsc::Sender<Heard>,
    heard_ms: u64,
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
    Portal(Arc<str>),
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

    /// Sends one call to `dest` and answers it; `label` names it in the
    /// counts.
    async fn forward(self: Arc<Self>, dest: Dest, label: Arc<str>, call: CallRef) {
        let objects = std::mem::take(&mut call.slot().lock().request_objects);
        let (sent, result) = match self.lend_all(objects).await {
            Ok(portals) => {
                let mut frame = Vec::new();
                {
                    let st = call.slot().lock();
                    let task = call.client().0;
                    wire::encode_call(&mut frame, &self.node, task, &portals, &st.request);
                }
                (frame.len(), self.send_call(&dest, frame).await)
            }
            Err(e) => (0, Err(e)),
        };
        let counted = result.as_ref().map(|(b, _)| b.len()).map_err(|_| ());
        self.stats.called(&label, sent, counted);
        match result {
            Ok((reply, portals)) if portals.iter().all(|p| self.subjects.owns_portal(p)) => {
                let subjects: Vec<&str> = portals.iter().map(String::as_str).collect();
                let objects = self.borrow_all(&subjects);
                let copy = |b: &mut [u8]| b.copy_from_slice(&reply);
                let _ = call.reply_handing_off(reply.len(), copy, objects);
            }
            Ok(_) => {
                self.stats.drop_frame();
                call.fail(Errno::PeerDied);
            }
            Err(e) => call.fail(e),
        }
    }

    /// Sends a call frame to `dest` and waits for its answer. A name's
    /// call goes to one of the nodes serving it, taken in turn; if the
    /// broker says nobody listens there (the node just died), to the
    /// next.
    async fn send_call(&self, dest: &Dest, mut frame: Vec<u8>) -> Answered {
        let name = match dest {
            Dest::Portal(subject) => {
                let lender = self.subjects.lender_of(subject).unwrap_or("");
                let ask = self.exchange(subject, lender.into(), 0, frame).await;
                return ask.unwrap_or(Err(Errno::PeerDied));
            }
            Dest::Name(name) => name,
        };
        let body = frame.len();
        // Spread calls over the nodes serving the name.
        let first = rand::random::<u32>() as usize;
        for attempt in 0.. {
            let provider = {
                let names = self.lock_names();
                let all = names.served.get(&**name).map_or(&[][..], |v| &v[..]);
                if attempt >= all.len() {
                    return Err(Errno::PeerDied);
                }
                all[first.wrapping_add(attempt) % all.len()].clone()
            };
            let subject = self.subjects.call(&self.node, &provider.node, name);
            frame.truncate(body);
            let asked = self.exchange(&subject, provider.node, provider.instance, frame.clone());
            if let Some(answered) = asked.await {
                return answered;
            }
        }
        Err(Errno::PeerDied)
    }

    /// Publishes a call frame, sealed for instance `to` of node `from`,
    /// and waits for its answer (see the module docs for when it gives
    /// up); `None` if nobody listens on `subject`.
    async fn exchange(
        &self,
        subject: &str,
        from: Arc<str>,
        to: u64,
        frame: Vec<u8>,
    ) -> Option<Answered> {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Some(Err(Errno::PeerDied));
        }
        if frame.len() + MAX_SEAL > self.client.max_payload() {
            return Some(Err(Errno::Quota));
        }
        let id = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The answer's subject carries a secret of this call: nobody who
        // has not seen the call can answer it.
        let token: u64 = rand::random();
        let (tx, mut rx) = mpsc::channel(4);
        let heard_ms = self.now_ms();
        let pending = Pending {
            token,
            from: from.clone(),
            tx,
            heard_ms,
        };
        self.lock_pending().insert(id, pending);
        let _forget = Forget(self, id);
        let reply_to = format!("{}.{id}_{token:016x}", self.inbox);
        let frame = self.sealed(subject, &reply_to, frame, (&from, to));
        let sent = self
            .client
            .publish_with_reply(subject.to_string(), reply_to, frame)
            .await;
        if sent.is_err() {
            return Some(Err(Errno::PeerDied));
        }
        // No timer per call: the silence loop drops the call's sender
        // once it has heard nothing for too long.
        loop {
            match rx.recv().await {
                Some(Heard::Progress) => continue,
                Some(Heard::Done(result)) => return Some(result),
                Some(Heard::Nobody) => return None,
                None => return Some(Err(Errno::PeerDied)),
            }
        }
    }

    /// Every [`SWEEP`], ends the wait of each call that has heard nothing
    /// for [`super::SILENCE`] (its node died, or the broker is gone): its
    /// entry goes, and with it the sender its wait listens to.
    pub(super) async fn silence_loop(self: Arc<Self>) {
        let mut sweep = tokio::time::interval(SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence = super::SILENCE.as_millis() as u64;
        loop {
            sweep.tick().await;
            let now = self.now_ms();
            self.lock_pending()
                .retain(|_, p| now.saturating_sub(p.heard_ms) < silence);
        }
    }

    /// Routes a message heard on this node's inbox to its call.
    pub(super) fn heard(&self, msg: async_nats::Message) {
        let id = msg
            .subject
            .as_str()
            .strip_prefix(self.inbox.as_str())
            .and_then(|rest| rest.strip_prefix('.')?.split_once('_'))
            .and_then(|(id, token)| {
                let token = u64::from_str_radix(token, 16).ok()?;
                Some((id.parse::<u64>().ok()?, token))
            });
        let Some((id, token)) = id else {
            self.stats.drop_frame();
            return;
        };
        let (heard, signer) = if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
            (Heard::Nobody, None)
        } else {
            let Some((frame, seal)) = self.opened(&msg) else {
                return;
            };
            let Some(heard) = decode_heard(frame) else {
                self.stats.drop_frame();
                return;
            };
            (heard, seal.map(|s| s.signer))
        };
        let now = self.now_ms();
        let mut pending = self.lock_pending();
        match pending.get_mut(&id) {
            Some(p) if p.token == token && signer.is_none_or(|s| s == &*p.from) => {
                p.heard_ms = now;
                drop(p.tx.try_send(heard));
            }
            Some(_) => {
                drop(pending);
                self.stats.forged();
            }
            None => {}
        }
    }
}

/// The most a seal adds to a frame.
const MAX_SEAL: usize = 256;

/// What a frame on a call's inbox subject says.
fn decode_heard(frame: &[u8]) -> Option<Heard> {
    Some(match wire::decode_answer(frame)? {
        Answer::Progress => Heard::Progress,
        Answer::Done(r) => Heard::Done(r.map(|r| {
            let portals = r.portals.iter().map(|s| s.to_string()).collect();
            (r.bytes.to_vec(), portals)
        })),
    })
}

/// Removes a call's inbox entry however its wait ends.
struct Forget<'a>(&'a Shared, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.lock_pending().remove(&self.1);
    }
}

/// Receives the relay's calls and forwards each on its own to `dest`.
/// A borrowed portal's relay ends when its last portal here is closed,
/// and tells the lender so.
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
        let tokio = s.tokio.clone();
        tokio.spawn(s.forward(dest.clone(), label.clone(), call));
    }
    if let (Some(s), Dest::Portal(subject)) = (shared.upgrade(), dest) {
        let lender = s.subjects.lender_of(&subject).unwrap_or("");
        let release = s.sealed(&subject, "", wire::encode_release(), (lender, 0));
        let _ = s.client.publish(subject.to_string(), release).await;
    }
}

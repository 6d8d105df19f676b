//! The calling side: names other nodes serve, as services here.
//!
//! Each remote name a task looks up gets one local *relay* service (no
//! task serves it: a host loop receives its calls). A task's call through
//! the portal is therefore an ordinary call — its request copied into the
//! kernel under the task's own quotas and budget, its timeout and death
//! handled as for any call — and the relay sends it to the name's subject,
//! where the broker gives it to one of the nodes serving the name.
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
}

/// A remote name's relay: the portal that keeps it open (as a name's
/// registration does for a local service).
pub(super) struct Relay {
    portal: PortalRef,
}

impl Remote for Shared {
    fn poll_lookup(&self, name: &str, cx: &mut Context<'_>) -> Poll<PortalRef> {
        let mut dir = self.lock_dir();
        if dir.directory.serves(name, self.now_ms()) {
            return Poll::Ready(self.relay(&mut dir.relays, name));
        }
        if !dir
            .waiters
            .iter()
            .any(|(n, w)| n == name && w.will_wake(cx.waker()))
        {
            dir.waiters.push((name.to_string(), cx.waker().clone()));
        }
        Poll::Pending
    }

    fn cancel_wait(&self, name: &str, waker: &Waker) {
        self.lock_dir()
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
            self.subjects.call(&self.node, name).into(),
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

    /// Sends one call to `subject` (the nodes serving a name, or the node
    /// that lent a portal) and answers it; `label` names it in the counts.
    async fn forward(self: Arc<Self>, subject: Arc<str>, label: Arc<str>, call: CallRef) {
        let objects = std::mem::take(&mut call.slot().lock().request_objects);
        let (sent, result) = match self.lend_all(objects).await {
            Ok(portals) => {
                let mut frame = Vec::new();
                {
                    let st = call.slot().lock();
                    let task = call.client().0;
                    wire::encode_call(&mut frame, &self.node, task, &portals, &st.request);
                }
                (frame.len(), self.exchange(&subject, frame).await)
            }
            Err(e) => (0, Err(e)),
        };
        let counted = result.as_ref().map(|(b, _)| b.len()).map_err(|_| ());
        self.stats.called(&label, sent, counted);
        match result {
            Ok((reply, portals)) if portals.iter().all(|p| self.subjects.owns_portal(p)) => {
                let subjects: Vec<&str> = portals.iter().map(String::as_str).collect();
                let objects = self.borrow_all(&subjects);
                let _ = call.reply_with(reply.len(), |b| b.copy_from_slice(&reply), objects);
            }
            Ok(_) => {
                self.stats.drop_frame();
                call.fail(Errno::PeerDied);
            }
            Err(e) => call.fail(e),
        }
    }

    /// Publishes a call frame and waits for its answer (see the module
    /// docs for when it gives up).
    async fn exchange(&self, subject: &str, frame: Vec<u8>) -> Answered {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(Errno::PeerDied);
        }
        if frame.len() > self.client.server_info().max_payload {
            return Err(Errno::Quota);
        }
        let id = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The answer's subject carries a secret of this call: nobody who
        // has not seen the call can answer it.
        let token: u64 = rand::random();
        let (tx, mut rx) = mpsc::channel(4);
        self.lock_pending().insert(id, (token, tx));
        let _forget = Forget(self, id);
        let reply_to = format!("{}.{id}_{token:016x}", self.inbox);
        self.client
            .publish_with_reply(subject.to_string(), reply_to, frame.into())
            .await
            .map_err(|_| Errno::PeerDied)?;
        loop {
            match tokio::time::timeout(super::SILENCE, rx.recv()).await {
                Ok(Some(Heard::Progress)) => continue,
                Ok(Some(Heard::Done(result))) => return result,
                Ok(None) | Err(_) => return Err(Errno::PeerDied),
            }
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
        let heard = if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
            Some(Heard::Done(Err(Errno::PeerDied)))
        } else {
            match wire::decode_answer(&msg.payload) {
                Some(Answer::Progress) => Some(Heard::Progress),
                Some(Answer::Done(r)) => Some(Heard::Done(r.map(|r| {
                    let portals = r.portals.iter().map(|s| s.to_string()).collect();
                    (r.bytes.to_vec(), portals)
                }))),
                None => None,
            }
        };
        let (Some((id, token)), Some(heard)) = (id, heard) else {
            self.stats.drop_frame();
            return;
        };
        let tx = match self.lock_pending().get(&id) {
            Some((t, tx)) if *t == token => Some(tx.clone()),
            Some(_) => None,
            None => return,
        };
        match tx {
            Some(tx) => drop(tx.try_send(heard)),
            None => self.stats.drop_frame(),
        }
    }
}

/// Removes a call's inbox entry however its wait ends.
struct Forget<'a>(&'a Shared, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.lock_pending().remove(&self.1);
    }
}

/// Receives the relay's calls and forwards each on its own to
/// `subject`. A borrowed portal's relay ends when its last portal here is
/// closed, and tells the lender so.
pub(super) async fn relay_loop(
    shared: Weak<Shared>,
    subject: Arc<str>,
    label: Arc<str>,
    holder: ServiceRef,
) {
    let service = holder.service().clone();
    while let Ok((slot, seq)) = std::future::poll_fn(|cx| service.poll_next(cx)).await {
        let call = CallRef::new(slot, seq);
        let Some(s) = shared.upgrade() else { return };
        let tokio = s.tokio.clone();
        tokio.spawn(s.forward(subject.clone(), label.clone(), call));
    }
    if let Some(s) = shared.upgrade() {
        let release = wire::encode_release();
        let _ = s.client.publish(subject.to_string(), release.into()).await;
    }
}

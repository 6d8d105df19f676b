//! The serving side: this node's exported names (and the portals it lent,
//! see [`super::portal`]), offered to the others.
//!
//! Every live exported name has a subscription on the subject of its
//! calls to this node (each caller picks one of the nodes serving a
//! name). A call is checked — its caller named alike by subject, frame
//! and (in a keyed cluster) seal, sealed for this instance, not a replay
//! — and becomes a host client's call to the local service on behalf of
//! the remote caller (its node and task travel in the frame, and the
//! server may ask for them), made from the subscription's own loop until
//! it first waits ([`Shared::serve_here`]). While the local call runs, a
//! progress frame goes back every [`super::PROGRESS`], so the caller can
//! tell a slow service from a dead node. At most
//! [`MAX_IN_FLIGHT`] remote calls run at once; the others wait, and what
//! waits is bounded ([`Waiting`]): past [`NAME_BYTES`] of calls for one
//! name, or [`NODE_BYTES`] of them from one calling node, a call is
//! answered `Busy` at once, before anything is spawned for it.

use super::wire;
use super::{seal, Shared};
use crate::ipc::client::Calling;
use crate::ipc::service::{Origin, PortalRef};
use crate::ipc::{Errno, Object};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use tokio::task::AbortHandle;

/// Most calls from other nodes served at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Request bytes of the calls admitted for one name and not yet answered
/// (waiting for a permit, or running).
pub const NAME_BYTES: usize = 64 << 20;
/// Of those, what the calls from one calling node may hold.
pub const NODE_BYTES: usize = 16 << 20;
/// Calls admitted for one name and not yet answered.
pub const NAME_CALLS: usize = 4 * MAX_IN_FLIGHT;
/// What one call counts for beside its bytes (its task and frame).
const CALL_COST: usize = 512;

/// The calls admitted for one name and not yet answered: their bytes,
/// and those from each calling node. A node's entry stays when it drops
/// to nothing, so that its next call takes no allocation, while at most
/// [`IDLE_NODES`] entries are kept.
#[derive(Default)]
pub(super) struct Waiting {
    calls: usize,
    bytes: usize,
    by_node: HashMap<Arc<str>, usize>,
}

/// Most calling nodes whose entries in a [`Waiting`] are kept at zero.
const IDLE_NODES: usize = 64;

impl Waiting {
    /// Admits a call of `bytes` from `node`, if it fits: the node's name
    /// as the entry holds it.
    fn admit(&mut self, node: &str, bytes: usize) -> Option<Arc<str>> {
        let bytes = bytes + CALL_COST;
        let known = self.by_node.get_key_value(node);
        let from = known.map_or(0, |(_, n)| *n);
        if self.calls >= NAME_CALLS || self.bytes + bytes > NAME_BYTES || from + bytes > NODE_BYTES
        {
            return None;
        }
        let name = known.map_or_else(|| node.into(), |(name, _)| name.clone());
        self.calls += 1;
        self.bytes += bytes;
        self.by_node.insert(name.clone(), from + bytes);
        Some(name)
    }

    /// Gives back what [`admit`](Self::admit) took.
    fn release(&mut self, node: &str, bytes: usize) {
        let bytes = bytes + CALL_COST;
        self.calls -= 1;
        self.bytes -= bytes;
        if let Some(n) = self.by_node.get_mut(node) {
            *n -= bytes;
            if *n == 0 && self.by_node.len() > IDLE_NODES {
                self.by_node.remove(node);
            }
        }
    }
}

/// A call's place in its name's [`Waiting`], given back when dropped.
pub(super) struct Admitted {
    waiting: Arc<std::sync::Mutex<Waiting>>,
    node: Arc<str>,
    bytes: usize,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        w.release(&self.node, self.bytes);
    }
}

/// What a call from another node is for.
pub(super) enum Target {
    /// The service registered here under an exported name.
    Name(Arc<str>),
    /// A portal this node lent.
    Portal(PortalRef),
}

/// This node's subscriptions, by exported name.
#[derive(Default)]
pub(super) struct Offered(HashMap<String, AbortHandle>);

impl Drop for Offered {
    fn drop(&mut self) {
        for (_, task) in self.0.drain() {
            task.abort();
        }
    }
}

impl Shared {
    /// Subscribes to the names exported now and drops the names no
    /// longer served here; returns the names served.
    pub(super) async fn offer(self: &Arc<Self>, offered: &mut Offered) -> Vec<String> {
        let Some(kernel) = self.kernel.upgrade() else {
            return Vec::new();
        };
        let now = kernel.names.exported();
        offered.0.retain(|name, task| {
            let keep = now.binary_search(name).is_ok() && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for name in &now {
            if offered.0.contains_key(name) {
                continue;
            }
            let subject = self.subjects.calls_to(&self.node, name);
            match self.client.subscribe(subject).await {
                Ok(sub) => {
                    let task =
                        self.tokio
                            .spawn(serve_name(self.clone(), name.clone(), self.feed(sub)));
                    offered.0.insert(name.clone(), task.abort_handle());
                }
                // Cut off from the broker: the next round tries again.
                Err(_) => break,
            }
        }
        offered.0.keys().cloned().collect()
    }

    /// Serves one call from another node and sends its answer; `label`
    /// names it in the counts.
    pub(super) async fn serve_call(
        self: Arc<Self>,
        label: Arc<str>,
        target: Target,
        msg: async_nats::Message,
        _admitted: Admitted,
    ) {
        let Some(reply_to) = msg.reply.clone() else {
            self.stats.drop_frame();
            return;
        };
        let Some(call) = wire::decode_call(&msg.payload) else {
            self.stats.drop_frame();
            return;
        };
        if !call.portals.iter().all(|p| self.subjects.owns_portal(p)) {
            self.stats.drop_frame();
            return;
        }
        let caller = call.node;
        // A traced call is served in a span of its own, the caller's
        // call span its parent.
        let traced = call.trace.map(|(trace, span)| {
            let at = crate::telemetry::Context { trace, span };
            (at.child(), span, crate::telemetry::unix_ns())
        });
        let from = Calling {
            origin: Some(Origin {
                node: call.node.to_string(),
                task: call.task,
            }),
            trace: traced.map(|(at, _, _)| at),
        };
        // The permit is waited for under progress notes too: a call queued
        // behind MAX_IN_FLIGHT others is slow, not lost. It is held until
        // the answer is sent (see `drain`).
        let work = async {
            let permit = self.in_flight.acquire().await;
            let objects = self.borrow_all(&call.portals);
            let portal = match target {
                Target::Name(name) => self.host.kernel().names.lookup(&name),
                Target::Portal(p) => Some(p),
            };
            let result = match portal {
                Some(portal) => {
                    let request = call.request;
                    self.host.call_portal(from, portal, request, objects).await
                }
                None => Err(Errno::Denied),
            };
            (result, permit)
        };
        tokio::pin!(work);
        // A server given the call on this thread (see `HostClient::
        // handing_off`) has often answered by now: then no timer is set.
        let answered = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
        let (result, _permit) = match answered {
            Poll::Ready(r) => r,
            Poll::Pending => self.with_progress((&reply_to, caller), work).await,
        };
        if let (Some(t), Some(spans)) = (traced, &self.spans) {
            spans.record(self.serve_span(t, &label, caller, &result));
        }
        self.answer(&label, (reply_to, caller), result).await;
    }

    /// The span of a traced call served here for node `caller`:
    /// `(its context, its parent span, when it began)`.
    fn serve_span(
        &self,
        (at, parent, began): (crate::telemetry::Context, [u8; 8], u64),
        label: &str,
        caller: &str,
        result: &Result<(Vec<u8>, Vec<Object>), Errno>,
    ) -> crate::telemetry::Span {
        use serde_json::json;
        let mut attributes = vec![
            ("warden.service", json!(label)),
            ("warden.node", json!(self.node)),
            ("warden.call.caller_node", json!(caller)),
        ];
        match result {
            Ok((reply, _)) => attributes.push(("warden.call.reply_bytes", json!(reply.len()))),
            Err(e) => attributes.push(("warden.call.error", json!(e.to_string()))),
        }
        crate::telemetry::Span {
            at,
            parent: Some(parent),
            name: format!("serve {label}"),
            kind: 2,
            start_ns: began,
            end_ns: crate::telemetry::unix_ns(),
            attributes,
            error: result.is_err(),
        }
    }

    /// Sends a served call's answer to `reply_to` on node `caller`: the
    /// reply with its portals lent to the caller's node, or the error.
    async fn answer(
        self: &Arc<Self>,
        label: &str,
        (reply_to, caller): (async_nats::Subject, &str),
        result: Result<(Vec<u8>, Vec<Object>), Errno>,
    ) {
        let result = match result {
            Ok((bytes, objects)) if objects.is_empty() => Ok((bytes, Vec::new())),
            // Portals in the reply are lent to the caller's node.
            Ok((bytes, objects)) => match self.lend_all(objects).await {
                Ok(subjects) => {
                    self.lend_to(&subjects, caller);
                    Ok((bytes, subjects))
                }
                Err(e) => Err(e),
            },
            // The name went away here since the broker chose this node:
            // to the caller, its server died.
            Err(Errno::Denied) => Err(Errno::PeerDied),
            Err(e) => Err(e),
        };
        self.stats.served(label, result.is_ok());
        let reply = result
            .as_ref()
            .map(|(b, s)| (&b[..], &s[..]))
            .map_err(|e| *e);
        let mut frame = self.sealed(&reply_to, "", wire::encode_reply(reply), (caller, 0));
        if frame.len() > self.client.max_payload() {
            if let Ok((_, lent)) = &result {
                self.unlend(lent);
            }
            let quota = wire::encode_reply(Err(Errno::Quota));
            frame = self.sealed(&reply_to, "", quota, (caller, 0));
        }
        let _ = self.client.publish(reply_to, frame).await;
    }

    /// Waits for `work`, sending a progress frame to `reply_to` on node
    /// `caller` every [`super::PROGRESS`] meanwhile.
    async fn with_progress<T>(
        &self,
        (reply_to, caller): (&async_nats::Subject, &str),
        work: std::pin::Pin<&mut impl Future<Output = T>>,
    ) -> T {
        let mut work = work;
        // The first note is due after one period (a fresh interval's
        // immediate first tick would wait for the timer wheel's next
        // millisecond).
        let first = tokio::time::Instant::now() + super::PROGRESS;
        let mut progress = tokio::time::interval_at(first, super::PROGRESS);
        loop {
            tokio::select! {
                r = &mut work => return r,
                _ = progress.tick() => {
                    let note = self.sealed(reply_to, "", wire::encode_progress(), (caller, 0));
                    let _ = self.client.publish(reply_to.clone(), note).await;
                }
            }
        }
    }
}

/// Serves the calls arriving for `name` until the subscription ends:
/// each is checked, then admitted to the name's [`Waiting`] or answered
/// `Busy`, here, before a task is spawned for it.
async fn serve_name(shared: Arc<Shared>, name: String, mut sub: super::intake::Feed) {
    let name: Arc<str> = name.into();
    let waiting = Arc::default();
    while let Some(msg) = sub.next().await {
        let Some(msg) = shared.unsealed(msg, |subject, frame, seal| {
            // A call names its caller in its subject (which a broker can
            // hold each node to), in its frame and in its seal: they must
            // agree, and the seal be for this instance and new.
            let Some(call) = wire::decode_call(frame) else {
                return Check::Malformed;
            };
            if shared.subjects.caller_of(subject) != Some(call.node) {
                return Check::Malformed;
            }
            match seal {
                Some(s) if s.signer != call.node || s.to != shared.instance => Check::Forged,
                Some(s) if !shared.take(call.node, &name, &s) => Check::Forged,
                _ => Check::Good,
            }
        }) else {
            continue;
        };
        let Some(call) = wire::decode_call(&msg.payload) else {
            continue;
        };
        let Some(place) = shared.admit(&waiting, &name, call.node, &msg).await else {
            continue;
        };
        let target = Target::Name(name.clone());
        let s = shared.clone();
        shared
            .serve_here(s.serve_call(name.clone(), target, msg, place))
            .await;
    }
}

/// What a check of a frame from another node found.
pub(super) enum Check {
    Good,
    /// Out of shape: dropped and counted as such.
    Malformed,
    /// Refused for its seal: counted as forged.
    Forged,
}

impl Shared {
    /// `msg` with its seal taken off, if `check(subject, frame, seal)`
    /// finds it good (and, in a keyed cluster, the seal holds).
    pub(super) fn unsealed(
        &self,
        mut msg: async_nats::Message,
        check: impl FnOnce(&str, &[u8], Option<seal::Seal<'_>>) -> Check,
    ) -> Option<async_nats::Message> {
        let (frame, seal) = self.opened(&msg)?;
        let len = frame.len();
        match check(msg.subject.as_str(), frame, seal) {
            Check::Good => {
                msg.payload = msg.payload.slice(..len);
                Some(msg)
            }
            Check::Malformed => {
                self.stats.drop_frame();
                None
            }
            Check::Forged => {
                self.stats.forged();
                None
            }
        }
    }

    /// Runs `serving`, a call being served, on this thread until it first
    /// waits, then as a task of its own: a service that answers while it
    /// is handed the call here has its answer sent with no task spawned.
    pub(super) async fn serve_here(&self, serving: impl Future<Output = ()> + Send + 'static) {
        let mut serving = Box::pin(serving);
        let first = std::future::poll_fn(|cx| Poll::Ready(serving.as_mut().poll(cx))).await;
        if first.is_pending() {
            self.tokio.spawn(serving);
        }
    }

    /// Takes `seal`'s number in the window of `node`'s calls to `name`.
    fn take(&self, node: &str, name: &Arc<str>, seal: &seal::Seal<'_>) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let by_name = match windows.get_mut(node) {
            Some(w) => w,
            None => windows.entry(node.to_string()).or_default(),
        };
        let window = match by_name.get_mut(&**name) {
            Some(w) => w,
            None => by_name.entry(name.clone()).or_default(),
        };
        window.take(seal.instance, seal.seq)
    }

    /// A place in `waiting` for the call `msg` from `node` (as its
    /// decoded frame says), or `None` once it has been answered `Busy`.
    pub(super) async fn admit(
        &self,
        waiting: &Arc<std::sync::Mutex<Waiting>>,
        label: &str,
        node: &str,
        msg: &async_nats::Message,
    ) -> Option<Admitted> {
        let bytes = msg.payload.len();
        let admitted = {
            let mut w = waiting.lock().unwrap_or_else(|e| e.into_inner());
            w.admit(node, bytes)
        };
        if let Some(node) = admitted {
            let waiting = waiting.clone();
            return Some(Admitted {
                waiting,
                node,
                bytes,
            });
        }
        self.stats.busy(label);
        if let Some(reply) = msg.reply.clone() {
            let busy = wire::encode_reply(Err(Errno::Busy));
            let frame = self.sealed(&reply, "", busy, (node, 0));
            let _ = self.client.publish(reply, frame).await;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_calls_are_bounded_per_name_and_per_node() {
        let mut w = Waiting::default();
        // Almost a node's whole share: four nodes fill the name's.
        let big = NODE_BYTES - 4096;
        assert_eq!(NAME_BYTES, 4 * NODE_BYTES);
        assert!(
            w.admit("a", big).is_some() && w.admit("a", big).is_none(),
            "a node's share"
        );
        for node in ["b", "c", "d"] {
            assert!(w.admit(node, big).is_some(), "{node}");
        }
        assert!(w.admit("e", big).is_none(), "the name's bytes");
        w.release("a", big);
        assert!(w.admit("e", big).is_some(), "room again");
        for node in ["b", "c", "d", "e"] {
            w.release(node, big);
        }
        assert_eq!((w.calls, w.bytes), (0, 0));
        assert!(w.by_node.values().all(|n| *n == 0));
        let admitted = (0..NAME_CALLS + 1).filter(|i| w.admit(&i.to_string(), 0).is_some());
        assert_eq!(admitted.count(), NAME_CALLS, "the name's calls");
        // Past IDLE_NODES, the nodes with nothing waiting are forgotten.
        for i in 0..NAME_CALLS {
            w.release(&i.to_string(), 0);
        }
        assert_eq!((w.calls, w.bytes), (0, 0));
        assert!(w.by_node.len() <= IDLE_NODES, "{}", w.by_node.len());
    }
}

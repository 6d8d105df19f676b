//! The serving side: this node's exported names (and the portals it lent,
//! see [`super::portal`]), offered to the others.
//!
//! Every live exported name has a queue-group subscription on its call
//! subject, so that the broker gives each call to one of the nodes
//! serving the name. A call becomes a host client's call to the local
//! service, on behalf of the remote caller (its node and task travel in
//! the frame, and the server may ask for them). While the local call
//! runs, a progress frame goes back every [`super::PROGRESS`], so the
//! caller can tell a slow service from a dead node. At most
//! [`MAX_IN_FLIGHT`] remote calls run at once; the others wait.

use super::wire;
use super::Shared;
use crate::ipc::service::{Origin, PortalRef};
use crate::ipc::Errno;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::task::AbortHandle;

/// Most calls from other nodes served at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// The queue group every node serving a name joins.
const QUEUE: &str = "warden";

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
            let subject = wire::call_subject(name);
            match self.client.queue_subscribe(subject, QUEUE.into()).await {
                Ok(sub) => {
                    let task = self
                        .tokio
                        .spawn(serve_name(self.clone(), name.clone(), sub));
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
    ) {
        let Some(reply_to) = msg.reply.clone() else {
            self.stats.drop_frame();
            return;
        };
        let Some(call) = wire::decode_call(&msg.payload) else {
            self.stats.drop_frame();
            return;
        };
        let origin = Some(Origin {
            node: call.node.to_string(),
            task: call.task,
        });
        let _permit = self.in_flight.acquire().await;
        let objects = self.borrow_all(&call.portals);
        let host = &self.host;
        let work = async move {
            let portal = match target {
                Target::Name(name) => host.kernel().names.lookup(&name).ok_or(Errno::Denied)?,
                Target::Portal(p) => p,
            };
            host.call_portal(origin, portal, call.request, objects)
                .await
        };
        tokio::pin!(work);
        // The first note is due after one period (a fresh interval's
        // immediate first tick would wait for the timer wheel's next
        // millisecond).
        let first = tokio::time::Instant::now() + super::PROGRESS;
        let mut progress = tokio::time::interval_at(first, super::PROGRESS);
        let result = loop {
            tokio::select! {
                r = &mut work => break r,
                _ = progress.tick() => {
                    let note = wire::encode_progress();
                    let _ = self.client.publish(reply_to.clone(), note.into()).await;
                }
            }
        };
        let result = match result {
            // Portals in the reply are lent to the caller's node.
            Ok((bytes, objects)) => match self.lend_all(objects).await {
                Ok(subjects) => Ok((bytes, subjects)),
                Err(e) => Err(e),
            },
            // The name went away here since the broker chose this node:
            // to the caller, its server died.
            Err(Errno::Denied) => Err(Errno::PeerDied),
            Err(e) => Err(e),
        };
        self.stats.served(&label, result.is_ok());
        let reply = result
            .as_ref()
            .map(|(b, s)| (&b[..], &s[..]))
            .map_err(|e| *e);
        let mut frame = wire::encode_reply(reply);
        if frame.len() > self.client.server_info().max_payload {
            frame = wire::encode_reply(Err(Errno::Quota));
        }
        let _ = self.client.publish(reply_to, frame.into()).await;
    }
}

/// Serves the calls arriving for `name` until the subscription ends.
async fn serve_name(shared: Arc<Shared>, name: String, mut sub: async_nats::Subscriber) {
    let name: Arc<str> = name.into();
    while let Some(msg) = sub.next().await {
        let target = Target::Name(name.clone());
        let s = shared.clone();
        shared.tokio.spawn(s.serve_call(name.clone(), target, msg));
    }
}

//! Portals that cross nodes.
//!
//! A portal in a message to another node is *lent*: this node subscribes
//! to a fresh subject ([`wire::Subjects::portal`]) and serves the calls
//! arriving there through the portal, as [`super::serve`] serves an
//! exported name's. The message carries the subject; the receiving node
//! *borrows* it as a relay service of its own (see [`super::remote`]), and
//! hands its task a portal to that. When the borrowing node's last portal
//! to the relay is closed, it sends a release frame and the lender drops
//! the subject and its reference. A node lends at most [`MAX_LENT`]
//! portals at once (`Quota` past that); a borrower that dies without
//! releasing keeps its loans until the lender's end.
//!
//! A loan is to one node: the one the frame carrying it is sent to
//! ([`Shared::lend_to`], before the frame leaves). In a keyed cluster
//! only that node's sealed frames are taken on the portal's subject, so
//! a member that learns the subject (it travels in frames the broker
//! forwards) still cannot call through it or release it; in an open
//! cluster, a call must name that node.
//!
//! Only portals cross: any other object in a message is `Inval`.

use super::serve::Check;
use super::wire::{self, PortalFrame};
use super::{replay, Shared};
use crate::ipc::service::{PortalRef, Service, ServiceRef};
use crate::ipc::{Errno, Object};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Most portals one node lends at once.
pub const MAX_LENT: usize = 4096;

/// A portal lent: the task serving its subject, and the node it is lent
/// to (none until the frame carrying it is sent).
pub(super) struct Loan {
    pub(super) task: tokio::task::AbortHandle,
    borrower: Option<Arc<str>>,
}

impl Shared {
    /// Lends every object of a message; their subjects. `Inval` if one is
    /// not a portal, `Quota` past [`MAX_LENT`]. (Boxed: serving a lent
    /// portal's call may lend again, and the future's type cannot hold
    /// itself.)
    pub(super) fn lend_all(
        self: &Arc<Self>,
        objects: Vec<Object>,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, Errno>> + Send + 'static>> {
        let me = self.clone();
        Box::pin(async move {
            if objects.len() > wire::MAX_PORTALS {
                return Err(Errno::Quota);
            }
            let mut portals = Vec::with_capacity(objects.len());
            for o in objects {
                match o {
                    Object::Portal(p) => portals.push(p),
                    _ => return Err(Errno::Inval),
                }
            }
            let mut subjects = Vec::with_capacity(portals.len());
            for p in portals {
                match me.lend(p).await {
                    Ok(subject) => subjects.push(subject),
                    Err(e) => {
                        me.unlend(&subjects);
                        return Err(e);
                    }
                }
            }
            Ok(subjects)
        })
    }

    /// Serves `portal` on a fresh subject; the subject. A loan being made
    /// (subscribing) counts against [`MAX_LENT`] as one made does.
    async fn lend(self: &Arc<Self>, portal: PortalRef) -> Result<String, Errno> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = {
            let lent = self.lock_lent();
            if lent.len() + self.lending.load(Relaxed) >= MAX_LENT {
                return Err(Errno::Quota);
            }
            self.lending.fetch_add(1, Relaxed);
            self.next_call.fetch_add(1, Relaxed)
        };
        let subject = self
            .subjects
            .portal(&self.node, self.instance, n, rand::random());
        let sub = self.client.subscribe(subject.clone()).await;
        let mut lent = self.lock_lent();
        self.lending.fetch_sub(1, Relaxed);
        let sub = sub.map_err(|_| Errno::PeerDied)?;
        let task = self
            .tokio
            .spawn(serve_lent(self.clone(), n, portal, self.feed(sub)));
        let loan = Loan {
            task: task.abort_handle(),
            borrower: None,
        };
        lent.insert(n, loan);
        Ok(subject)
    }

    /// Makes the portals lent on `subjects` node `node`'s: the frame
    /// carrying them goes there (a call sent on to another node after no
    /// one took it moves them with it).
    pub(super) fn lend_to(&self, subjects: &[String], node: &str) {
        if subjects.is_empty() {
            return;
        }
        let node: Arc<str> = node.into();
        let mut lent = self.lock_lent();
        for s in subjects {
            let n = self.subjects.portal_number(&self.node, s);
            if let Some(loan) = n.and_then(|n| lent.get_mut(&n)) {
                loan.borrower = Some(node.clone());
            }
        }
    }

    /// The node portal `n` is lent to, if it is lent and sent.
    fn borrower(&self, n: u64) -> Option<Arc<str>> {
        self.lock_lent().get(&n).and_then(|l| l.borrower.clone())
    }

    /// Stops lending the portals this node lent on `subjects` (for a
    /// message that never reached a node that would borrow them).
    pub(super) fn unlend(&self, subjects: &[String]) {
        if subjects.is_empty() {
            return;
        }
        let mut lent = self.lock_lent();
        for s in subjects {
            let n = self.subjects.portal_number(&self.node, s);
            if let Some(loan) = n.and_then(|n| lent.remove(&n)) {
                loan.task.abort();
            }
        }
    }

    /// Portals, as objects for a local task, to the subjects another node
    /// lent.
    pub(super) fn borrow_all(&self, subjects: &[&str]) -> Vec<Object> {
        subjects
            .iter()
            .map(|s| Object::Portal(self.borrow(s)))
            .collect()
    }

    fn borrow(&self, subject: &str) -> PortalRef {
        let service = Service::hosted(self.host.id());
        let holder = ServiceRef::new(&service);
        let portal = PortalRef::new(&service);
        let task = self.tokio.spawn(super::remote::relay_loop(
            self.me.clone(),
            super::remote::Dest::Portal(subject.into()),
            super::remote::LENT.into(),
            holder,
        ));
        self.tasks.push(task.abort_handle());
        portal
    }

    /// Portals lent now.
    pub(super) fn lent(&self) -> usize {
        self.lock_lent().len()
    }
}

/// Serves the calls through one lent portal until it is released.
async fn serve_lent(shared: Arc<Shared>, n: u64, portal: PortalRef, mut sub: super::intake::Feed) {
    let label: Arc<str> = super::remote::LENT.into();
    let waiting = Arc::default();
    // Replay windows of the members calling through the portal.
    let mut windows: HashMap<String, replay::Window> = HashMap::new();
    while let Some(msg) = sub.next().await {
        let Some(msg) = shared.unsealed(msg, |_, frame, seal| {
            let Some(f) = wire::decode_portal_frame(frame) else {
                return Check::Malformed;
            };
            let borrower = shared.borrower(n);
            let is_borrower = |node: &str| borrower.as_deref() == Some(node);
            let Some(seal) = seal else {
                return match f {
                    PortalFrame::Call(c) if !is_borrower(c.node) => Check::Forged,
                    _ => Check::Good,
                };
            };
            let caller = match f {
                PortalFrame::Call(c) => c.node,
                PortalFrame::Release => seal.signer,
            };
            if seal.signer != caller || !is_borrower(seal.signer) {
                return Check::Forged;
            }
            let window = windows.entry(seal.signer.to_string()).or_default();
            match window.take(seal.instance, seal.seq) {
                true => Check::Good,
                false => Check::Forged,
            }
        }) else {
            continue;
        };
        match wire::decode_portal_frame(&msg.payload) {
            Some(PortalFrame::Release) => break,
            Some(PortalFrame::Call(c)) => {
                let Some(place) = shared.admit(&waiting, &label, c.node, &msg).await else {
                    continue;
                };
                let target = super::serve::Target::Portal(portal.clone());
                let s = shared.clone();
                shared
                    .serve_here(s.serve_call(label.clone(), target, msg, place))
                    .await;
            }
            None => shared.stats.drop_frame(),
        }
    }
    shared.lock_lent().remove(&n);
}

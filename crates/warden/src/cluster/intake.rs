//! What a node holds of the frames the broker has delivered and its
//! loops have not yet checked, bounded in bytes.
//!
//! The broker's client queues each subscription's messages by count
//! (see `broker::SUBSCRIPTION_CAPACITY`): a flood of the broker's largest
//! frames (1 MiB by default) could park hundreds of MiB in a node before
//! a loop looked at one. So every subscription is drained at once by a
//! pump into its [`Feed`], and all of a node's feeds together hold at
//! most [`MAX_INTAKE_BYTES`]: a frame past that is dropped unread and
//! counted ([`Intake::overflowed`]). Bytes are charged when a frame is
//! queued and released when its loop takes it (or its feed is dropped).

use async_nats::{Message, Subscriber};
use futures_util::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The most bytes of unchecked frames (payload, subject and reply) a
/// node holds across all its subscriptions.
pub const MAX_INTAKE_BYTES: u64 = 32 << 20;

/// A node's account of the frames its feeds hold.
#[derive(Debug, Default)]
pub(crate) struct Intake {
    held: AtomicU64,
    overflowed: AtomicU64,
}

impl Intake {
    /// Charges `n` bytes if they fit; else counts a dropped frame.
    fn admit(&self, n: u64) -> bool {
        let fits = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|&t| t <= MAX_INTAKE_BYTES)
            })
            .is_ok();
        if !fits {
            self.overflowed.fetch_add(1, Ordering::Relaxed);
        }
        fits
    }

    fn release(&self, n: u64) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }

    /// Frames dropped because the node held its most.
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }
}

/// The bytes a frame is charged.
fn size(m: &Message) -> u64 {
    let reply = m.reply.as_ref().map_or(0, |r| r.len());
    (m.payload.len() + m.subject.len() + reply) as u64
}

/// One subscription's frames, drained from the broker's client as they
/// arrive; the subscription ends when the feed is dropped.
pub(crate) struct Feed {
    rx: mpsc::UnboundedReceiver<Message>,
    intake: Arc<Intake>,
    pump: tokio::task::AbortHandle,
}

impl Feed {
    /// Starts draining `sub` on `tokio`, charging `intake`.
    pub fn new(sub: Subscriber, intake: Arc<Intake>, tokio: &tokio::runtime::Handle) -> Feed {
        let (tx, rx) = mpsc::unbounded_channel();
        let pump = tokio.spawn(pump(sub, tx, intake.clone())).abort_handle();
        Feed { rx, intake, pump }
    }

    /// The next frame; `None` once the subscription has ended.
    pub async fn next(&mut self) -> Option<Message> {
        let m = self.rx.recv().await?;
        self.intake.release(size(&m));
        Some(m)
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.pump.abort();
        self.rx.close();
        while let Ok(m) = self.rx.try_recv() {
            self.intake.release(size(&m));
        }
    }
}

async fn pump(mut sub: Subscriber, tx: mpsc::UnboundedSender<Message>, intake: Arc<Intake>) {
    while let Some(m) = sub.next().await {
        let n = size(&m);
        if intake.admit(n) && tx.send(m).is_err() {
            intake.release(n);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_kept_and_overflow_counted() {
        let i = Intake::default();
        assert!(i.admit(MAX_INTAKE_BYTES - 10));
        assert!(!i.admit(11));
        assert!(i.admit(10));
        assert!(!i.admit(1));
        assert_eq!((i.held(), i.overflowed()), (MAX_INTAKE_BYTES, 2));
        i.release(MAX_INTAKE_BYTES);
        assert!(i.admit(1 << 20));
        assert!(!i.admit(u64::MAX));
    }
}

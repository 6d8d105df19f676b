//! Taking surplus back for a guarantee (MVM's overuse policy).
//!
//! A new guarantee (a spawn, a request admitted to a route) whose bytes
//! fit among the guarantees but not in the root, because others' surplus
//! fills it, takes surplus back from its holders: lowest
//! `memory_priority` first, then the largest surplus (see
//! [`crate::task::root::reclaim_order`]), as few as cover the need. The
//! spawner's own ancestors are never chosen (their end would end it).
//!
//! WebAssembly memory cannot shrink, so surplus comes back only when its
//! holder ends. Each holder's `on_memory_limit` decides:
//!
//! - `kill`: the holder is killed, and its memory returns as its store is
//!   dropped (at once for a queued or blocked task, at its next epoch
//!   tick for a running one);
//! - `notify`: the holder may grow no further beyond its guarantee, and
//!   its parent gets a memory event (it may end the holder, which returns
//!   the memory); without a parent this is `deny`;
//! - `deny`: the holder may grow no further beyond its guarantee; what
//!   it holds stays.
//!
//! The spawn then waits, at most [`RECLAIM_WAIT`] and only if a holder
//! was killed or a parent told, until the guarantee fits; otherwise it is
//! refused with the reason. A request to a route does not wait: it is
//! answered 503 with the reason, and a later request finds the memory
//! back.

use super::*;
use crate::task::root::{reclaim_order, GuaranteeRefused, Holder};
use crate::task::{MemoryPolicy, EVENT_MEMORY};
use crate::units::format_size;
use std::time::Duration;

/// How long a spawn waits for reclaimed surplus to come back.
pub const RECLAIM_WAIT: Duration = Duration::from_secs(2);

impl Runtime {
    /// Reserves the guarantee of the task `shared` describes (see
    /// [`Runtime::reserve_guarantee`]), then enters it in the task table
    /// with `enter`; the guarantee goes back if it cannot enter. A
    /// request's handler passes `wait` false: it is answered 503 at once
    /// rather than hold the server's thread while surplus comes back.
    pub(super) fn admit(
        &self,
        shared: &TaskShared,
        wait: bool,
        enter: impl FnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.reserve_guarantee(shared, wait)?;
        enter().inspect_err(|_| {
            if shared.guarantee > 0 {
                self.inner.tasks.root.release_guarantee(shared.guarantee);
            }
        })
    }

    /// Reserves the guarantee of the task `shared` describes (nothing for
    /// a task without one), reclaiming surplus if it must, and waiting for
    /// it to come back if `wait`.
    fn reserve_guarantee(&self, shared: &TaskShared, wait: bool) -> Result<(), Error> {
        let bytes = shared.guarantee;
        if bytes == 0 {
            return Ok(());
        }
        if bytes > shared.memory.limit() {
            return Err(Error::Memory(format!(
                "memory guarantee of {} is more than the task's memory limit of {}",
                format_size(bytes),
                format_size(shared.memory.limit())
            )));
        }
        let root = &self.inner.tasks.root;
        let need = match root.reserve_guarantee(bytes) {
            Ok(()) => return Ok(()),
            Err(GuaranteeRefused::Unreserved(left)) => return Err(unreserved(bytes, left)),
            Err(GuaranteeRefused::Full(r)) => r.wanted.saturating_sub(r.limit),
        };
        let coming = self.reclaim(need, shared) && wait;
        let deadline = Instant::now() + RECLAIM_WAIT;
        loop {
            match root.reserve_guarantee(bytes) {
                Ok(()) => return Ok(()),
                Err(GuaranteeRefused::Unreserved(left)) => return Err(unreserved(bytes, left)),
                Err(GuaranteeRefused::Full(_)) if coming && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(GuaranteeRefused::Full(r)) => {
                    return Err(Error::Memory(format!(
                        "memory guarantee of {} cannot be reserved: the machine's budget is full \
                         ({} of {} charged, {} of it surplus whose holders keep it)",
                        format_size(bytes),
                        format_size(root.account().current()),
                        format_size(r.limit),
                        format_size(root.surplus()),
                    )))
                }
            }
        }
    }

    /// Takes back at least `need` bytes of surplus for `for_task`, by each
    /// chosen holder's policy; whether any of it is on its way back (a
    /// holder killed or a parent told).
    fn reclaim(&self, need: u64, for_task: &TaskShared) -> bool {
        let (mut order, holders) = self.surplus_holders(for_task);
        reclaim_order(&mut order, need);
        let mut coming = false;
        for h in &order {
            let Some(holder) = holders.iter().find(|t| t.id.0 == h.id) else {
                continue;
            };
            coming |= self.take_back(holder, h.surplus, for_task);
        }
        coming
    }

    /// Live tasks holding surplus that can still give some back: not
    /// `for_task`'s ancestors, not dying, not already denied.
    fn surplus_holders(&self, for_task: &TaskShared) -> (Vec<Holder>, Vec<Arc<TaskShared>>) {
        let mut ancestors = Vec::new();
        let mut p = for_task.parent();
        while let Some(t) = p {
            ancestors.push(t.id);
            p = t.parent();
        }
        let t = self.inner.tasks.lock();
        let (mut order, mut holders) = (Vec::new(), Vec::new());
        for s in t.live.values().map(|l| &l.shared) {
            if ancestors.contains(&s.id) || s.kill_requested() || s.surplus_is_denied() {
                continue;
            }
            let surplus = s.surplus();
            if surplus > 0 {
                order.push(Holder {
                    priority: s.memory_priority,
                    surplus,
                    id: s.id.0,
                });
                holders.push(s.clone());
            }
        }
        (order, holders)
    }

    /// Applies `holder`'s policy to its `surplus`; true if memory is on
    /// its way back (killed) or may be (its parent told).
    fn take_back(&self, holder: &Arc<TaskShared>, surplus: u64, for_task: &TaskShared) -> bool {
        let action = Action::of(holder);
        holder.event("reclaim", || {
            serde_json::json!({ "surplus_bytes": surplus, "action": action.said(),
                "for_task": for_task.id.0, "for_name": for_task.name })
        });
        match action {
            Action::Kill => {
                let reason = format!(
                    "its {} of surplus memory was reclaimed for the guarantee of task {} ({})",
                    format_size(surplus),
                    for_task.id,
                    for_task.name
                );
                self.inner.exec.kill(holder.id, &reason)
            }
            Action::Notify => {
                holder.deny_surplus();
                holder
                    .family
                    .post_event(EVENT_MEMORY, holder.memory.current());
                true
            }
            Action::Deny => {
                holder.deny_surplus();
                false
            }
        }
    }
}

/// What taking a holder's surplus back does to it.
#[derive(Clone, Copy)]
enum Action {
    Kill,
    Notify,
    Deny,
}

impl Action {
    /// The holder's `on_memory_limit`; `notify` without a parent is `deny`.
    fn of(holder: &TaskShared) -> Action {
        match holder.memory_policy {
            MemoryPolicy::Kill => Action::Kill,
            MemoryPolicy::Notify if holder.parent().is_some() => Action::Notify,
            _ => Action::Deny,
        }
    }

    /// As the event log says it.
    fn said(self) -> &'static str {
        match self {
            Action::Kill => "killed",
            Action::Notify => "parent notified",
            Action::Deny => "denied further surplus",
        }
    }
}

/// The refusal of a guarantee that would take the guarantees past the
/// root.
fn unreserved(bytes: u64, left: u64) -> Error {
    Error::Memory(format!(
        "memory guarantee of {} cannot be reserved: {} unreserved",
        format_size(bytes),
        format_size(left)
    ))
}

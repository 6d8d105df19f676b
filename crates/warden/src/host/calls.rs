//! Calls to an active service under way, shared by the import groups
//! that make them: the `warden` group's `call` and `call_fast`, and the
//! WASI group's file calls carried to a file-system task (see
//! `wasi::served`). [`start`] queues a call whose request waits in the
//! client's call slot and lends the client's context to the server;
//! [`InFlight`] undoes that however the call ends.

use crate::ipc::service::{CallSlot, Phase, Service};
use crate::ipc::Errno;
use crate::task::TaskShared;
use std::sync::Arc;

/// An active call under way. On any end — an answer taken, a timeout,
/// or the client's death (its future or its store dropped) — it
/// withdraws the context the client lent the server; unless answered, it
/// also abandons the call, so the server's late reply gets `PeerDied`.
///
/// It borrows the client's slot and the server while the host call that
/// made it runs ([`Made`]) and owns them ([`InFlight::into_owned`]) only
/// once it is kept past that call: a call answered at once (a direct
/// hand-off) counts no references.
pub(crate) struct InFlight<S = Arc<CallSlot>, T = Arc<TaskShared>>
where
    S: AsRef<CallSlot>,
    T: AsRef<TaskShared>,
{
    pub(in crate::host) slot: S,
    pub(in crate::host) server: Option<T>,
    pub(in crate::host) answered: bool,
}

/// A call under way, borrowed from the host call that made it.
pub(in crate::host) type Made<'a> = InFlight<&'a Arc<CallSlot>, &'a Arc<TaskShared>>;

impl<S: AsRef<CallSlot>, T: AsRef<TaskShared>> Drop for InFlight<S, T> {
    fn drop(&mut self) {
        let slot = self.slot.as_ref();
        if let Some(server) = &self.server {
            server.as_ref().inherit.withdraw(slot.owner().id);
        }
        if !self.answered {
            slot.abandon();
        }
    }
}

impl Made<'_> {
    /// The same call, kept past the host call that made it.
    pub(in crate::host) fn into_owned(self) -> InFlight {
        let made = std::mem::ManuallyDrop::new(self);
        InFlight {
            slot: made.slot.clone(),
            server: made.server.cloned(),
            answered: made.answered,
        }
    }
}

/// Starts an active call whose request `load_request` put in `slot` as
/// call number `seq`: the client's context lent to the server (CPU
/// inheritance: the server runs on it while the client waits, and a
/// higher-priority caller boosts it), the call queued and, if its server
/// waits for it on this worker, handed off to it at once (only to a
/// server that runs on lent contexts).
pub(in crate::host) fn start<'a>(
    slot: &'a Arc<CallSlot>,
    client: &'a Arc<TaskShared>,
    service: &'a Service,
    seq: u64,
) -> Result<Made<'a>, Errno> {
    let server = service.server();
    if let Some(server) = server {
        server.inherit.lend(client.id, client.context());
    }
    let mut flight = InFlight {
        slot,
        server,
        answered: false,
    };
    let receiver = match service.enqueue(slot, seq) {
        Ok(receiver) => receiver,
        Err(e) => {
            flight.answered = true;
            let mut st = slot.lock();
            st.phase = Phase::Idle;
            st.request_objects.clear();
            return Err(e);
        }
    };
    // A server waiting in `recv` may answer right here (direct hand-off),
    // if it runs on its callers' contexts: one that does not waits for its
    // own turn in the run queue.
    match (receiver, server) {
        (Some(receiver), _) => {
            if server.is_some_and(|s| s.inherit.donor_id().is_some()) {
                let own = client.inherit.donor_id().is_none();
                crate::executor::hand_off(receiver, own.then_some(client));
            } else {
                receiver.wake();
            }
        }
        // Queued under its own key before it was lent this context: moved
        // under the client's once the client blocks.
        (None, Some(s)) if s.state.load().is_queued() => {
            client
                .lent_while_queued
                .store(s.id.0, std::sync::atomic::Ordering::Relaxed);
        }
        (None, _) => {}
    }
    Ok(flight)
}

/// A whole byte call from the host's side of a task: `request` put in
/// `slot` (the client's), queued on `service` through the portal grant
/// `via`, waited for at most `timeout_ns` (negative: for ever); the
/// answer's bytes. Handles carry neither way: any in the answer are
/// closed. (The `warden` module's `call` copies to and from guest memory
/// instead; `warden:kernel`'s `call` and typed calls to other nodes use
/// this.)
pub(in crate::host) async fn call_bytes_in(
    slot: &Arc<CallSlot>,
    client: &Arc<TaskShared>,
    (service, via): (&Service, usize),
    request: &[u8],
    timeout_ns: i64,
) -> Result<Vec<u8>, Errno> {
    let seq = {
        let mut st = slot.lock();
        st.set_request_with(slot.owner(), request.len(), |b| b.copy_from_slice(request))?;
        st.trace = client.trace;
        st.via = via;
        st.request_objects.clear();
        st.reply_objects.clear();
        st.seq += 1;
        st.phase = Phase::Queued;
        st.seq
    };
    let mut flight = start(slot, client, service, seq)?.into_owned();
    let code = crate::host::wait::wait_for(timeout_ns, |cx| flight.slot.poll_done(cx)).await;
    let code = code.ok_or(Errno::Timeout)?;
    flight.answered = true;
    let mut st = flight.slot.lock();
    st.phase = Phase::Idle;
    st.reply_objects.clear();
    // Copied, not taken: the slot's buffer is charged to the client and
    // refunded when the slot goes, and is reused by its next call.
    match code < 0 {
        true => Err(Errno::from_code(code)),
        false => Ok(st.reply.clone()),
    }
}

//! A worker thread: takes a task from its hand-off slot or the run queue,
//! polls it for one slice, and hands it back as its lifecycle word says.

use super::harness::{finish_killed, kill_group, kill_id};
use super::{Queue, Shared, TaskCell, HANDOFF, HANDOFF_LIMIT, LAST_POLL_END, NESTED, POLLING};
use crate::cpu;
use crate::task::state::{AfterPoll, Start};
use crate::task::{TaskShared, TaskStatus};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

/// The loop of the worker in place `slot`, until the executor shuts down.
pub(super) fn run(exec: &Arc<Shared>, slot: usize) {
    let _tokio = exec.tokio.enter();
    super::spare::enter(slot);
    let mut handoffs = 0u32;
    loop {
        let next = HANDOFF.with(|h| h.borrow_mut().take());
        let cell = match next {
            Some(cell) if handoffs < HANDOFF_LIMIT => {
                handoffs += 1;
                cell
            }
            other => {
                handoffs = 0;
                if let Some(bumped) = other {
                    // Back of the run queue, behind whoever waits; this
                    // worker pops next, so no other needs waking.
                    exec.lock().push(&bumped.shared);
                }
                match next_queued(exec) {
                    Some(cell) => cell,
                    None => return,
                }
            }
        };
        match cell.shared.state.start() {
            Start::Run => super::spare::timed(exec, || run_slice(exec, &cell, None)),
            // Parked (suspended) or finished while queued: nothing to do.
            Start::Parked | Start::Done => {}
        }
    }
}

/// Counts a worker among those looking for work from the moment it finds
/// none until it returns (see `host_hand_off`).
struct Looking<'a>(Option<&'a Shared>);

impl Drop for Looking<'_> {
    fn drop(&mut self) {
        if let Some(exec) = self.0 {
            exec.looking.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The next task from the run queue, waiting for one; `None` at shutdown.
fn next_queued(exec: &Arc<Shared>) -> Option<Arc<TaskCell>> {
    let mut looking = Looking(None);
    let mut q = exec.lock();
    let mut spun = false;
    // When this worker began a spin that found nothing (it slept since).
    let mut missed: Option<std::time::Instant> = None;
    loop {
        if q.shutdown {
            return None;
        }
        if let Some(cell) = q.pop(crate::clock::now()) {
            if let Some(began) = missed {
                exec.spin.woke_after(began.elapsed());
            }
            return Some(cell);
        }
        if looking.0.is_none() {
            exec.looking.fetch_add(1, Ordering::AcqRel);
            looking.0 = Some(exec);
        }
        // Pushes bump this under the lock: a change means work came.
        let seen = exec.pushes.load(Ordering::Acquire);
        // Idle: bring CPU figures up to date before sleeping.
        drop(q);
        LAST_POLL_END.with(|l| l.set(0));
        cpu::settle();
        charge_policy(exec);
        // Look for work awake for a moment before sleeping (once per
        // idle spell: a worker woken for throttled tasks does not spin).
        if !spun {
            spun = true;
            let began = std::time::Instant::now();
            if exec
                .spin
                .until(|| exec.pushes.load(Ordering::Acquire) != seen)
            {
                q = exec.lock();
                continue;
            }
            missed = Some(began);
        }
        // About to sleep: what the spin used is nobody's (see `cpu::settle`).
        cpu::reconcile();
        exec.trim.if_asked();
        q = exec.lock();
        if q.shutdown {
            return None;
        }
        // Work that came meanwhile. (Not "the queue is not empty":
        // throttled tasks are queued too, and with only those the worker
        // sleeps until the first is released, rather than spin till then.)
        if let Some(cell) = q.pop(crate::clock::now()) {
            return Some(cell);
        }
        q = sleep(exec, q);
    }
}

/// Sleeps until woken, or, with only throttled tasks queued, until the
/// first of them may run again.
fn sleep<'a>(exec: &'a Shared, mut q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
    q.idle += 1;
    q = match q.policy.next_release() {
        Some(at) => {
            let wait = Duration::from_nanos(at.saturating_sub(crate::clock::now()).max(1));
            exec.ready
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0
        }
        None => exec.ready.wait(q).unwrap_or_else(|e| e.into_inner()),
    };
    q.idle -= 1;
    q
}

/// Polls a running task once and hands it on (lifecycle rules 4 and 5).
/// `lent` is the context the task is known to run on, if its caller knows
/// (a direct hand-off: the client that just lent it); it is used if it
/// is still the task's donor.
pub(super) fn run_slice(exec: &Arc<Shared>, cell: &Arc<TaskCell>, lent: Option<&Arc<TaskShared>>) {
    let shared = &cell.shared;
    let mut slot = cell.future.lock().unwrap_or_else(|e| e.into_inner());
    let donor;
    let result = match slot.as_mut() {
        Some(future) if !shared.kill_requested() => {
            // CPU inheritance: a server running for a blocked client is
            // scheduled and charged as that client.
            let account = match (lent, shared.inherit.donor_id()) {
                (Some(lent), Some(id)) if lent.id.0 == id => lent,
                (_, None) => shared,
                _ => {
                    donor = shared.inherit.donor().map(|c| c.task);
                    donor.as_ref().unwrap_or(shared)
                }
            };
            let result = poll_once(exec, cell, future, account);
            enforce_group_quotas(exec, shared, account);
            Some((result, account))
        }
        _ => None,
    };
    match result {
        Some((Ok(Poll::Pending), account)) => {
            drop(slot);
            enforce_cpu_limits(exec, shared, account);
            match shared.state.end_poll() {
                AfterPoll::Idle => refile_stranded(exec, shared),
                AfterPoll::Parked => {}
                AfterPoll::Requeue => requeue(exec, cell),
                AfterPoll::Finish => finish_killed(cell, false),
            }
        }
        ended => {
            let status = match ended {
                Some((Ok(Poll::Ready(status)), _)) => status,
                Some((Err(msg), _)) => {
                    TaskStatus::Trapped(format!("internal error while running task: {msg}"))
                }
                _ => TaskStatus::Killed(shared.kill_reason()),
            };
            let future = slot.take();
            drop(slot);
            shared.state.complete();
            exec.complete(cell, future, status);
        }
    }
}

/// Step 2 of the run queue's stranding protocol (see `queue`): a task
/// that just blocked takes back, under its key, the servers it lends its
/// context to that were queued under their own while it was runnable.
/// So does one whose call found its server already queued under its own
/// key (`TaskShared::lent_while_queued`).
fn refile_stranded(exec: &Shared, shared: &TaskShared) {
    let queued = shared.lent_while_queued.swap(0, Ordering::Relaxed);
    if queued != 0 {
        exec.lock().refile_server(queued, shared.id.0);
    }
    std::sync::atomic::fence(Ordering::SeqCst);
    if exec.stranded.load(Ordering::SeqCst) != 0 {
        exec.lock().refile(shared.id.0);
    }
}

/// Queues a task that must run again. One that ran nested in a hand-off
/// goes back to the hand-off slot instead: its caller's poll is still in
/// progress, and by the time the worker takes the slot the caller waits
/// for it, so it runs (or, bumped, is queued under the caller's context)
/// as the caller's CPU inheritance says. Queued now, it would be filed
/// under its own context, as if nobody waited for it.
fn requeue(exec: &Arc<Shared>, cell: &Arc<TaskCell>) {
    if !NESTED.with(|n| n.get()) {
        return exec.enqueue(cell);
    }
    if let Some(bumped) = HANDOFF.with(|h| h.borrow_mut().replace(cell.clone())) {
        exec.enqueue(&bumped);
    }
}

type PollResult = Result<Poll<TaskStatus>, String>;

/// One poll of the task's future, timed by the worker's CPU meter. A panic
/// inside the poll (a kernel bug) ends the task, not the worker.
fn poll_once(
    exec: &Arc<Shared>,
    cell: &Arc<TaskCell>,
    future: &mut super::TaskFuture,
    account: &Arc<TaskShared>,
) -> PollResult {
    let shared = &cell.shared;
    let waker = super::waker::waker_ref(cell);
    let mut cx = Context::from_waker(&waker);
    shared
        .slice_start_tick
        .store(exec.clock.now(), Ordering::Relaxed);
    // SAFETY: the caller holds the account and this task's cell (and so
    // the task) until the poll has ended, below.
    let start = unsafe { cpu::begin(account, shared) };
    let last = LAST_POLL_END.with(|l| l.get());
    if last != 0 {
        exec.switches.fetch_add(1, Ordering::Relaxed);
        let ns = crate::clock::ticks::to_ns(start.saturating_sub(last));
        exec.switch_ns.fetch_add(ns, Ordering::Relaxed);
    }
    POLLING.with(|p| p.set(Arc::as_ptr(exec)));
    let result = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
    POLLING.with(|p| p.set(std::ptr::null()));
    let finished = !matches!(result, Ok(Poll::Pending));
    // Limits are checked against exact figures: bring them up to date
    // after each poll of a limited task, or of one on a limited account.
    let exact = finished
        || shared.cpu.limited
        || account.cpu.limited
        || !shared.groups.is_empty()
        || !account.groups.is_empty();
    let (_, end) = cpu::end(exact);
    LAST_POLL_END.with(|l| l.set(end));
    exec.polls.fetch_add(1, Ordering::Relaxed);
    charge_policy(exec);
    result.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into())
    })
}

/// Hands the CPU the meter charged to the run queue, if its policy uses
/// charges (stride, lottery, caps): at most once a window, or after a
/// poll of a task whose figures are exact.
pub(super) fn charge_policy(exec: &Shared) {
    if !cpu::has_charges() {
        return;
    }
    if exec.charges.load(Ordering::Relaxed) {
        let now = crate::clock::now();
        let mut q = exec.lock();
        cpu::take_charges(|key, ns| q.policy.charge(key, ns, now));
    } else {
        cpu::take_charges(|_, _| {});
    }
}

/// Kills the members of any group whose quota the slice used up.
fn enforce_group_quotas(exec: &Arc<Shared>, shared: &TaskShared, account: &TaskShared) {
    let mut groups = shared.groups.iter().chain(&account.groups);
    if let Some(group) = groups.find(|g| g.over_quota().is_some()) {
        kill_group(exec, group);
    }
}

/// After a slice: every CPU limit the slice touched is enforced, whoever's
/// account it was charged to.
///
/// - The task's own limit bounds all it ran, served CPU included: at it,
///   the task is killed, or suspended with its parent notified.
/// - An ancestor's limit bounds its subtree: the ancestor dies, and with
///   it the subtree.
/// - The account's limit (a client lending its context) bounds what was
///   spent on its behalf: the client is killed (it is blocked in the call,
///   so at once, and its call is abandoned) or, with notify, suspended and
///   its context withdrawn, so the server runs on its own again.
fn enforce_cpu_limits(exec: &Arc<Shared>, shared: &TaskShared, account: &Arc<TaskShared>) {
    if let Some((task, reason)) = shared.cpu_breach() {
        if task.id != shared.id {
            kill_id(exec, task.id, &reason);
        } else if !shared.cpu_limit_notify() {
            // Running: the kill flag makes end_poll finish it.
            shared.request_kill(&reason);
        }
    }
    if account.id == shared.id {
        return;
    }
    if let Some((task, reason)) = account.cpu_breach() {
        if task.id != account.id || !account.cpu_limit_notify() {
            kill_id(exec, task.id, &reason);
        } else {
            shared.inherit.withdraw(account.id);
        }
    }
}

//! A task's lifecycle as one atomic word.
//!
//! Who may poll a task's future, who must queue it, who finishes it: all
//! of it is decided by compare-and-swap on this one word, so no decision
//! ever reads one flag and then writes another (the gap in which a wake-up
//! used to get lost). The word holds three exclusive *positions* and three
//! *flags*:
//!
//! | bit | name | meaning |
//! |---|---|---|
//! | `RUNNING` | position | a worker owns the future and is polling it |
//! | `QUEUED` | position | the task is in the run queue or a hand-off slot, or just spawned and held by its spawner |
//! | `DONE` | position | finished: whoever set it owns the future and finishes the task |
//! | `NOTIFIED` | flag | woken while running, or while set aside suspended |
//! | `KILLED` | flag | a kill was requested |
//! | `SUSPENDED` | flag | not to run until resumed |
//!
//! With no position bit set the task is *idle*: blocked, owned by nobody
//! but its wakers, or *parked* (idle + `SUSPENDED` + `NOTIFIED`: runnable
//! but set aside).
//!
//! # Protocol
//!
//! 1. **Spawn.** A task starts `QUEUED`; the spawner queues it, or keeps
//!    it (a spawn that runs it on the spawner's thread while a worker is
//!    idle) and takes it at once by rule 3, as a worker would from the
//!    queue: a kill meanwhile finds it `QUEUED` and finishes it, and the
//!    spawner's start then finds it done.
//! 2. **Wake** ([`State::wake`]). Idle and not suspended → `QUEUED`, and the
//!    waker must queue it. Idle and suspended → `NOTIFIED` only (parked).
//!    Running → `NOTIFIED` (the worker requeues it after the poll). Queued
//!    or done → nothing.
//!    **Claim** ([`State::claim`]) is a wake by a worker that will poll the
//!    task itself at once (a direct hand-off): idle and not suspended →
//!    `RUNNING`, and the claimer polls it (rule 3 without the queue);
//!    otherwise exactly as a wake, which never leaves anything to queue.
//! 3. **Start** ([`State::start`]). A worker that takes a task from the
//!    queue moves `QUEUED` → `RUNNING` and polls it; if it is suspended it
//!    moves it to parked instead and does not poll it; if it is done (killed
//!    while queued) it drops it.
//! 4. **End of poll** ([`State::end_poll`]), future still pending, from
//!    `RUNNING`: killed → `DONE` (the worker finishes it); notified and
//!    suspended → parked; notified → `QUEUED` (the worker queues it);
//!    otherwise → idle.
//! 5. **Complete** ([`State::complete`]). The future returned: `RUNNING` →
//!    `DONE`; the worker finishes it.
//! 6. **Kill** ([`State::kill`]). Sets `KILLED`. From idle or `QUEUED` the
//!    killer also moves it to `DONE` and finishes it (removing it from the
//!    queue if it was queued); a running task is finished by its worker at
//!    rule 4 (its deadline callback ends the poll at the next epoch
//!    check, which the killer brings forward by advancing the epoch).
//! 7. **Suspend** ([`State::suspend`]). Sets `SUSPENDED`; a running task
//!    yields at its next tick and parks at rule 4, a queued one parks at
//!    rule 3, an idle one parks when woken (rule 2).
//! 8. **Resume** ([`State::resume`]). Clears `SUSPENDED`; from parked it
//!    also moves to `QUEUED` in the same exchange, and the resumer must
//!    queue it. A resume can therefore never miss a wake that parked it.
//! 9. **Reap.** `DONE` is final: nothing leaves it, and exactly one party
//!    (the one whose exchange set it) finishes the task.
//!
//! Every transition is one compare-and-swap loop over the whole word, so
//! any two of them, racing, are ordered as if one ran first. The models in
//! the `loom` tests run each pair under every interleaving.

use crate::loom::{AtomicU32, Ordering};

const RUNNING: u32 = 1 << 0;
const QUEUED: u32 = 1 << 1;
const DONE: u32 = 1 << 2;
const NOTIFIED: u32 = 1 << 3;
const KILLED: u32 = 1 << 4;
const SUSPENDED: u32 = 1 << 5;
const POSITION: u32 = RUNNING | QUEUED | DONE;

/// A task's lifecycle word (see the module docs for the protocol).
#[derive(Debug)]
pub struct State(AtomicU32);

/// A copy of the word at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(u32);

impl Snapshot {
    /// A worker is polling the task.
    pub fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }
    /// The task waits in the run queue (or a hand-off slot).
    pub fn is_queued(self) -> bool {
        self.0 & QUEUED != 0
    }
    /// The task is finished (or being finished).
    pub fn is_done(self) -> bool {
        self.0 & DONE != 0
    }
    /// Blocked or parked: neither queued, running nor done.
    pub fn is_idle(self) -> bool {
        self.0 & POSITION == 0
    }
    /// A kill was requested.
    pub fn is_killed(self) -> bool {
        self.0 & KILLED != 0
    }
    /// Suspended by its parent, an operator or its CPU limit.
    pub fn is_suspended(self) -> bool {
        self.0 & SUSPENDED != 0
    }
    #[cfg(test)]
    /// Woken while running or parked.
    pub fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }
}

/// What a worker does with a task it took from the queue (rule 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Poll it: it is now running.
    Run,
    /// It was suspended and is now parked: leave it.
    Parked,
    /// It was finished meanwhile: drop the reference.
    Done,
}

/// What a worker does with a task after a pending poll (rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterPoll {
    /// Blocked: its waker will queue it.
    Idle,
    /// Woken while running: queue it.
    Requeue,
    /// Suspended: set aside until resumed.
    Parked,
    /// Killed: finish it.
    Finish,
}

/// What a kill request leaves to the killer (rule 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// The killer moved it to `DONE` and finishes it; `queued` says whether
    /// it must also be taken out of the run queue.
    Finish {
        /// It was queued.
        queued: bool,
    },
    /// It is running: its worker finishes it.
    Running,
    /// It was already done.
    AlreadyDone,
}

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

impl State {
    /// A new task's word: queued (rule 1).
    pub fn new() -> State {
        State(AtomicU32::new(QUEUED))
    }

    /// The word now.
    pub fn load(&self) -> Snapshot {
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// Applies `f` to the word until the exchange succeeds; `f` returns the
    /// new word, or `None` to leave it. Returns the word `f` last saw.
    fn transition(&self, mut f: impl FnMut(u32) -> Option<u32>) -> u32 {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let Some(next) = f(cur) else {
                return cur;
            };
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Rule 2. Returns true if the caller must queue the task.
    pub fn wake(&self) -> bool {
        self.wake_into(QUEUED)
    }

    /// Rule 2, claimed: true if the caller now runs the task (it was idle
    /// and not suspended); otherwise the wake was recorded as rule 2 says.
    pub fn claim(&self) -> bool {
        self.wake_into(RUNNING)
    }

    /// Rule 2, an idle task that is not suspended moving to `position`
    /// (`QUEUED` for a wake, `RUNNING` for a claim); whether it did.
    fn wake_into(&self, position: u32) -> bool {
        let before = self.transition(|s| match s & POSITION {
            0 if s & SUSPENDED != 0 => (s & NOTIFIED == 0).then_some(s | NOTIFIED),
            0 => Some(s | position),
            RUNNING => (s & NOTIFIED == 0).then_some(s | NOTIFIED),
            _ => None,
        });
        before & (POSITION | SUSPENDED) == 0
    }

    /// Rule 3.
    pub fn start(&self) -> Start {
        let before = self.transition(|s| {
            if s & QUEUED == 0 {
                None
            } else if s & SUSPENDED != 0 {
                Some((s & !QUEUED) | NOTIFIED)
            } else {
                Some((s & !QUEUED) | RUNNING)
            }
        });
        if before & QUEUED == 0 {
            debug_assert!(before & DONE != 0, "started a task that was not queued");
            Start::Done
        } else if before & SUSPENDED != 0 {
            Start::Parked
        } else {
            Start::Run
        }
    }

    /// Rule 4.
    pub fn end_poll(&self) -> AfterPoll {
        let before = self.transition(|s| {
            debug_assert!(s & RUNNING != 0, "ended a poll of a task not running");
            let rest = s & !RUNNING;
            Some(if s & KILLED != 0 {
                rest | DONE
            } else if s & NOTIFIED != 0 && s & SUSPENDED != 0 {
                rest
            } else if s & NOTIFIED != 0 {
                (rest & !NOTIFIED) | QUEUED
            } else {
                rest
            })
        });
        if before & KILLED != 0 {
            AfterPoll::Finish
        } else if before & NOTIFIED != 0 && before & SUSPENDED != 0 {
            AfterPoll::Parked
        } else if before & NOTIFIED != 0 {
            AfterPoll::Requeue
        } else {
            AfterPoll::Idle
        }
    }

    /// Rule 5.
    pub fn complete(&self) {
        self.transition(|s| Some((s & !(RUNNING | QUEUED)) | DONE));
    }

    /// Rule 6.
    pub fn kill(&self) -> Kill {
        let before = self.transition(|s| match s & POSITION {
            0 | QUEUED => Some((s & !QUEUED) | KILLED | DONE),
            _ if s & KILLED == 0 => Some(s | KILLED),
            _ => None,
        });
        match before & POSITION {
            0 => Kill::Finish { queued: false },
            QUEUED => Kill::Finish { queued: true },
            RUNNING => Kill::Running,
            _ => Kill::AlreadyDone,
        }
    }

    /// Rule 7. False if the task is done.
    pub fn suspend(&self) -> bool {
        let before = self.transition(|s| (s & (DONE | SUSPENDED) == 0).then_some(s | SUSPENDED));
        before & DONE == 0
    }

    /// Rule 8. Returns true if the caller must queue the task.
    pub fn resume(&self) -> bool {
        let before = self.transition(|s| {
            if s & SUSPENDED == 0 {
                None
            } else if s & POSITION == 0 && s & NOTIFIED != 0 {
                Some((s & !(SUSPENDED | NOTIFIED)) | QUEUED)
            } else {
                Some(s & !SUSPENDED)
            }
        });
        before & SUSPENDED != 0 && before & POSITION == 0 && before & NOTIFIED != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_task_is_queued_once_by_wakes() {
        let s = State::new();
        assert_eq!(s.start(), Start::Run);
        assert_eq!(s.end_poll(), AfterPoll::Idle);
        assert!(s.wake());
        assert!(!s.wake(), "queued twice");
        assert!(s.load().is_queued());
    }

    #[test]
    fn a_claim_runs_a_blocked_task_and_is_a_wake_otherwise() {
        let s = State::new();
        s.start();
        assert!(!s.claim(), "running: only notified");
        assert_eq!(s.end_poll(), AfterPoll::Requeue);
        assert!(!s.claim(), "queued: nothing");
        s.start();
        assert_eq!(s.end_poll(), AfterPoll::Idle);
        assert!(s.claim());
        assert!(s.load().is_running() && !s.load().is_queued());
        assert_eq!(s.end_poll(), AfterPoll::Idle);
        s.suspend();
        assert!(!s.claim(), "suspended: parked");
        assert!(s.resume(), "the parked claim is queued by the resume");
    }

    #[test]
    fn a_wake_while_running_requeues_after_the_poll() {
        let s = State::new();
        s.start();
        assert!(!s.wake());
        assert_eq!(s.end_poll(), AfterPoll::Requeue);
        assert!(s.load().is_queued() && !s.load().is_notified());
    }

    #[test]
    fn suspend_parks_and_resume_requeues_exactly_once() {
        let s = State::new();
        assert!(s.suspend());
        assert_eq!(s.start(), Start::Parked);
        assert!(!s.wake(), "a parked task is not queued by a wake");
        assert!(s.resume());
        assert!(!s.resume());
        assert_eq!(s.start(), Start::Run);
    }

    #[test]
    fn suspended_while_blocked_runs_only_after_resume_and_wake() {
        let s = State::new();
        s.start();
        assert_eq!(s.end_poll(), AfterPoll::Idle);
        s.suspend();
        assert!(!s.resume(), "nothing to run: not woken");
        s.suspend();
        assert!(!s.wake(), "woken while suspended: parked");
        assert!(s.resume());
    }

    #[test]
    fn kill_finishes_idle_and_queued_tasks_and_leaves_running_ones() {
        let s = State::new();
        assert_eq!(s.kill(), Kill::Finish { queued: true });
        assert_eq!(s.start(), Start::Done);
        assert_eq!(s.kill(), Kill::AlreadyDone);
        let r = State::new();
        r.start();
        assert_eq!(r.kill(), Kill::Running);
        assert!(!r.wake());
        assert_eq!(r.end_poll(), AfterPoll::Finish);
        assert!(r.load().is_done());
        assert!(!r.suspend() && !r.resume() && !r.wake());
    }
}

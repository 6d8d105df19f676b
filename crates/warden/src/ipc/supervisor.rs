//! A guest's supervisor of its own children (the calls are
//! `host/warden/supervise.rs`): OTP's supervisor as a kernel object a task
//! holds, with Alta's accounting — the task that supervises is the parent
//! of every run, so each restart's memory is carved from its budget and
//! the work of restarting is done, and charged, in its own calls.
//!
//! The supervisor keeps each member's recipe (module, arguments, budget,
//! and duplicates of the handles it was granted) and its current run. A
//! run's end is judged by `warden_policy::supervise` when the parent next
//! waits on the supervisor; a restart the policy decides is made after
//! its backoff, in that wait. Nothing runs behind the parent's back: a
//! parent that never waits has its children end for good.

use super::Object;
use crate::task::{ChildBudget, TaskId, TaskShared};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use warden_policy::supervise::{Decision, Ending, Plan, Restart, Supervisor};

/// Most members one supervisor has.
pub const MAX_MEMBERS: usize = 256;

/// Kills a run (its id, why).
pub type KillFn = Arc<dyn Fn(TaskId, &str) + Send + Sync>;

/// What a child is spawned from: the module, arguments, budget and the
/// objects granted (duplicates of the parent's handles).
pub struct Recipe {
    pub module: Arc<(String, std::path::PathBuf)>,
    pub args: Vec<String>,
    pub budget: ChildBudget,
    pub grants: Vec<Object>,
}

/// A supervisor held by a task's handle.
pub struct Supervised {
    state: Mutex<SupState>,
    kill: KillFn,
}

/// A supervisor's members and the policy's state.
pub struct SupState {
    pub policy: Supervisor,
    pub members: Vec<Member>,
    epoch: Instant,
    /// Members to start again once its time has come.
    pub pending: Option<Pending>,
    pub given_up: bool,
    /// Runs it killed that have not ended yet: a restart waits for them,
    /// so that their budgets are back before new runs are carved.
    stopping: Vec<Arc<TaskShared>>,
}

/// One member: how to start it, its run now, its restarts.
pub struct Member {
    pub recipe: Recipe,
    pub run: Option<Arc<TaskShared>>,
    pub restarts: u32,
}

/// A restart decided and not yet made.
pub struct Pending {
    pub at: Instant,
    pub start: Vec<usize>,
    /// The member whose end called for it, and how it ended.
    pub member: usize,
    pub status: i32,
}

/// What a wait on the supervisor reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub kind: i32,
    pub member: i32,
    pub status: i32,
    pub restarts: u32,
}

/// Report kinds (`WARDEN_SUPERVISOR_*` in the C SDK).
pub const RESTARTED: i32 = 1;
pub const ENDED: i32 = 2;
pub const GAVE_UP: i32 = 3;

/// What the supervisor's wait does next.
pub enum Step {
    /// Start these members again (a restart come due).
    Start(Pending),
    /// Report this.
    Report(Report),
    /// Wait for a run to end, or until this time (a restart due).
    Wait(Option<Instant>),
}

impl Supervised {
    pub fn new(plan: Plan, kill: KillFn) -> Supervised {
        let state = SupState {
            policy: Supervisor::new(plan),
            members: Vec::new(),
            epoch: Instant::now(),
            pending: None,
            given_up: false,
            stopping: Vec::new(),
        };
        Supervised {
            state: Mutex::new(state),
            kill,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, SupState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a member with `restart`, running `run`; its index.
    pub fn add(&self, recipe: Recipe, restart: Restart, run: Arc<TaskShared>) -> usize {
        let mut st = self.lock();
        let place = st.policy.add_member(restart);
        st.members.push(Member {
            recipe,
            run: Some(run),
            restarts: 0,
        });
        place
    }

    /// The runs going now and those being stopped (for a wait to be
    /// woken by their ends).
    pub fn runs(&self) -> Vec<Arc<TaskShared>> {
        let st = self.lock();
        let going = st.members.iter().filter_map(|m| m.run.clone());
        going.chain(st.stopping.iter().cloned()).collect()
    }

    /// Whether a restart that is due may be made now: every run it
    /// stopped has ended.
    pub fn may_start(st: &mut SupState) -> bool {
        st.stopping.retain(|r| r.family.exit().status.is_none());
        st.stopping.is_empty()
    }

    /// What to do now: a restart come due, a run's end judged, or wait.
    pub fn next_step(&self) -> Step {
        let mut st = self.lock();
        if st.given_up {
            return Step::Wait(None);
        }
        let due = st.pending.as_ref().is_some_and(|p| p.at <= Instant::now());
        if due && Self::may_start(&mut st) {
            return Step::Start(st.pending.take().expect("checked"));
        }
        for i in 0..st.members.len() {
            let Some(code) = st.members[i]
                .run
                .as_ref()
                .and_then(|r| r.family.exit().status)
            else {
                continue;
            };
            st.members[i].run = None;
            if let Some(r) = self.judge(&mut st, i, code) {
                return Step::Report(r);
            }
        }
        // A due restart waiting for stopped runs is woken by their ends.
        Step::Wait(st.pending.as_ref().map(|p| p.at).filter(|_| !due))
    }

    /// What member `i`'s end with `code` calls for: a report, or `None`
    /// (a restart is pending).
    pub fn judge(&self, st: &mut SupState, i: usize, code: i32) -> Option<Report> {
        let ending = if code == 0 {
            Ending::Normal
        } else {
            Ending::Failed
        };
        let now = st.epoch.elapsed();
        let restarts = st.members[i].restarts;
        let report = |kind| Report {
            kind,
            member: i as i32,
            status: code,
            restarts,
        };
        match st.policy.ended(i, ending, now) {
            Decision::Nothing => Some(report(ENDED)),
            Decision::Restart { stop, start, after } => {
                for s in stop {
                    self.stop(st, s, "restarted with its supervisor's member");
                }
                self.plan_start(st, start, after, (i, code));
                None
            }
            Decision::GiveUp => {
                for s in 0..st.members.len() {
                    self.stop(st, s, "its supervisor gave up");
                }
                (st.pending, st.given_up) = (None, true);
                Some(report(GAVE_UP))
            }
        }
    }

    /// Puts `start` back to be started at once (a restart cut short).
    pub fn requeue(&self, st: &mut SupState, start: Vec<usize>, why: (usize, i32)) {
        if !start.is_empty() {
            self.plan_start(st, start, Duration::ZERO, why);
        }
    }

    fn plan_start(&self, st: &mut SupState, start: Vec<usize>, after: Duration, why: (usize, i32)) {
        let at = Instant::now() + after;
        match &mut st.pending {
            Some(p) => {
                p.at = p.at.max(at);
                p.start.extend(start);
                p.start.sort_unstable();
                p.start.dedup();
            }
            None => {
                let (member, status) = why;
                st.pending = Some(Pending {
                    at,
                    start,
                    member,
                    status,
                });
            }
        }
    }

    fn stop(&self, st: &mut SupState, member: usize, why: &str) {
        if let Some(run) = st.members[member].run.take() {
            (self.kill)(run.id, why);
            st.stopping.push(run);
        }
    }
}

impl Drop for Supervised {
    /// A supervisor closed takes its children with it.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for m in &mut st.members {
            if let Some(run) = m.run.take() {
                (self.kill)(run.id, "its supervisor was closed");
            }
        }
    }
}

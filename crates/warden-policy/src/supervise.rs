//! Supervision: what a supervisor does when one of its members ends —
//! Erlang/OTP's restart policies and strategies, with OTP's intensity
//! limit and a doubling backoff, decided from the members' endings and a
//! clock passed in.
//!
//! A member's [`Restart`] policy says whether its end calls for a
//! restart at all: a *permanent* member always does, a *transient* one
//! only when it failed (anything but exit status 0), a *temporary* one
//! never. The supervisor's [`Strategy`] says which members the restart
//! takes with it: only the one that ended, all of them, or it and every
//! member after it (members are ordered as they were declared).
//!
//! Intensity bounds what a crash loop may cost: at most `max_restarts`
//! restarts in any window of `within`. The restart that would exceed it
//! is refused and the supervisor [gives up](Decision::GiveUp): its
//! members are stopped and its own end goes to its parent. Each restart
//! waits `backoff · 2^(k−1)` first (k: restarts in the window, this one
//! included), at most [`MAX_BACKOFF`], so that a member failing at once
//! on every start cannot take the CPU its neighbours are owed.
//!
//! ```
//! use std::time::Duration;
//! use warden_policy::supervise::*;
//!
//! let plan = Plan {
//!     strategy: Strategy::RestForOne,
//!     intensity: Intensity { max_restarts: 1, within: Duration::from_secs(10) },
//!     backoff: Duration::from_millis(50),
//!     members: vec![Restart::Permanent, Restart::Permanent, Restart::Temporary],
//! };
//! let mut sup = Supervisor::new(plan);
//! let now = Duration::from_secs(1);
//! let d = sup.ended(0, Ending::Failed, now);
//! // The first member is restarted with the second; the third, temporary,
//! // is stopped and not started again.
//! assert_eq!(d, Decision::Restart { stop: vec![2, 1], start: vec![0, 1], after: Duration::from_millis(50) });
//! assert_eq!(sup.ended(1, Ending::Failed, now), Decision::GiveUp);
//! ```

use std::collections::VecDeque;
use std::time::Duration;

/// The longest wait before a restart, however many came before it.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// When a member's end calls for its restart (OTP's restart types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restart {
    /// Always restarted, whatever its end.
    Permanent,
    /// Restarted only if it failed: trapped, was killed, or exited with a
    /// status other than 0.
    Transient,
    /// Never restarted.
    #[default]
    Temporary,
}

impl Restart {
    /// The policy a manifest names: `permanent`, `transient` or
    /// `temporary`.
    pub fn parse(text: &str) -> Option<Restart> {
        match text {
            "permanent" => Some(Restart::Permanent),
            "transient" => Some(Restart::Transient),
            "temporary" => Some(Restart::Temporary),
            _ => None,
        }
    }

    /// Its name in a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Restart::Permanent => "permanent",
            Restart::Transient => "transient",
            Restart::Temporary => "temporary",
        }
    }
}

/// Which members a restart takes with it (OTP's strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Only the member that ended.
    #[default]
    OneForOne,
    /// Every member: the others are stopped, then all start again.
    OneForAll,
    /// The member that ended and every member declared after it.
    RestForOne,
}

impl Strategy {
    /// The strategy a manifest names: `one_for_one`, `one_for_all` or
    /// `rest_for_one`.
    pub fn parse(text: &str) -> Option<Strategy> {
        match text {
            "one_for_one" => Some(Strategy::OneForOne),
            "one_for_all" => Some(Strategy::OneForAll),
            "rest_for_one" => Some(Strategy::RestForOne),
            _ => None,
        }
    }

    /// Its name in a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::OneForOne => "one_for_one",
            Strategy::OneForAll => "one_for_all",
            Strategy::RestForOne => "rest_for_one",
        }
    }
}

/// At most `max_restarts` restarts in any window of `within`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    /// Restarts allowed in a window.
    pub max_restarts: u32,
    /// The window.
    pub within: Duration,
}

impl Default for Intensity {
    /// OTP's own default is 1 in 5 s; Warden's root supervisor allows 5
    /// in 10 s.
    fn default() -> Self {
        Intensity {
            max_restarts: 5,
            within: Duration::from_secs(10),
        }
    }
}

/// How a member ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with status 0.
    Normal,
    /// It trapped, was killed, exited with another status, or (a
    /// supervisor) gave up.
    Failed,
}

/// A supervisor's settings and its members' restart policies, in
/// declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Which members a restart takes with it.
    pub strategy: Strategy,
    /// How many restarts in how long.
    pub intensity: Intensity,
    /// The first restart's delay in a window; each further one doubles it.
    pub backoff: Duration,
    /// Each member's policy.
    pub members: Vec<Restart>,
}

/// What a supervisor does about an ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: the member stays ended (or was already gone).
    Nothing,
    /// Stop the members in `stop` (in that order: the reverse of their
    /// declaration), then, after `after`, start those in `start` (in
    /// declaration order).
    Restart {
        /// Members still running that the restart takes with it.
        stop: Vec<usize>,
        /// Members to start again.
        start: Vec<usize>,
        /// How long to wait first.
        after: Duration,
    },
    /// The restart would exceed the intensity: stop every member and
    /// report the supervisor's own end to its parent.
    GiveUp,
}

/// One supervisor's state: its plan, which members have ended for good,
/// and when its recent restarts were.
#[derive(Debug, Clone)]
pub struct Supervisor {
    plan: Plan,
    /// Members ended for good (temporary ones, or transient ones that
    /// exited normally): never started again.
    gone: Vec<bool>,
    /// When each restart in the current window was decided.
    recent: VecDeque<Duration>,
}

impl Supervisor {
    /// A supervisor with no restarts behind it.
    pub fn new(plan: Plan) -> Supervisor {
        let gone = vec![false; plan.members.len()];
        Supervisor {
            plan,
            gone,
            recent: VecDeque::new(),
        }
    }

    /// Its plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether `member` has ended for good.
    pub fn is_gone(&self, member: usize) -> bool {
        self.gone.get(member).copied().unwrap_or(true)
    }

    /// Adds a member with `restart` after the others; its index.
    pub fn add_member(&mut self, restart: Restart) -> usize {
        self.plan.members.push(restart);
        self.gone.push(false);
        self.plan.members.len() - 1
    }

    /// Marks `member` ended for good (it never started).
    pub fn forget(&mut self, member: usize) {
        if let Some(g) = self.gone.get_mut(member) {
            *g = true;
        }
    }

    /// Gives it a new strategy, intensity and backoff, keeping its
    /// members' state and its recent restarts (a manifest reload).
    pub fn set_terms(&mut self, strategy: Strategy, intensity: Intensity, backoff: Duration) {
        self.plan.strategy = strategy;
        self.plan.intensity = intensity;
        self.plan.backoff = backoff;
    }

    /// Gives `member` a new restart policy (a manifest reload).
    pub fn set_restart(&mut self, member: usize, restart: Restart) {
        if let Some(r) = self.plan.members.get_mut(member) {
            *r = restart;
        }
    }

    /// Brings `member` back after it ended for good (an operator started
    /// it again): its ends are judged again.
    pub fn revive(&mut self, member: usize) {
        if let Some(g) = self.gone.get_mut(member) {
            *g = false;
        }
    }

    /// Forgets every restart and ending: as it was when new (a supervisor
    /// restarted by its own parent starts afresh, as in OTP).
    pub fn reset(&mut self) {
        self.gone.iter_mut().for_each(|g| *g = false);
        self.recent.clear();
    }

    /// Restarts decided within the window ending `now`.
    pub fn restarts_within(&mut self, now: Duration) -> u32 {
        self.forget_before(now);
        self.recent.len() as u32
    }

    /// Decides what `member`'s `ending` at `now` calls for.
    pub fn ended(&mut self, member: usize, ending: Ending, now: Duration) -> Decision {
        let Some(&policy) = self.plan.members.get(member) else {
            return Decision::Nothing;
        };
        if self.gone[member] {
            return Decision::Nothing;
        }
        let wanted = match policy {
            Restart::Permanent => true,
            Restart::Transient => ending == Ending::Failed,
            Restart::Temporary => false,
        };
        if !wanted {
            self.gone[member] = true;
            return Decision::Nothing;
        }
        self.forget_before(now);
        if self.recent.len() >= self.plan.intensity.max_restarts as usize {
            return Decision::GiveUp;
        }
        self.recent.push_back(now);
        let after = self.delay(self.recent.len() as u32);
        let (stop, start) = self.affected(member);
        Decision::Restart { stop, start, after }
    }

    /// The members a restart of `member` stops (the others it takes with
    /// it, latest declared first) and starts (in declaration order; a
    /// temporary member is stopped but not started, and ends for good).
    fn affected(&mut self, member: usize) -> (Vec<usize>, Vec<usize>) {
        let n = self.plan.members.len();
        let range = match self.plan.strategy {
            Strategy::OneForOne => member..member + 1,
            Strategy::OneForAll => 0..n,
            Strategy::RestForOne => member..n,
        };
        let taken: Vec<usize> = range.filter(|&m| !self.gone[m]).collect();
        let stop = taken
            .iter()
            .rev()
            .copied()
            .filter(|&m| m != member)
            .collect();
        let mut start = Vec::with_capacity(taken.len());
        for m in taken {
            match self.plan.members[m] {
                Restart::Temporary => self.gone[m] = true,
                _ => start.push(m),
            }
        }
        (stop, start)
    }

    /// The wait before the `k`th restart of a window (k ≥ 1).
    fn delay(&self, k: u32) -> Duration {
        let doubled = self
            .plan
            .backoff
            .saturating_mul(1u32 << (k.saturating_sub(1)).min(20));
        doubled.min(MAX_BACKOFF)
    }

    fn forget_before(&mut self, now: Duration) {
        let within = self.plan.intensity.within;
        while let Some(&at) = self.recent.front() {
            if now.saturating_sub(at) < within {
                break;
            }
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn sup(strategy: Strategy, members: &[Restart], max: u32) -> Supervisor {
        Supervisor::new(Plan {
            strategy,
            intensity: Intensity {
                max_restarts: max,
                within: Duration::from_secs(10),
            },
            backoff: 50 * MS,
            members: members.to_vec(),
        })
    }

    fn restart(stop: &[usize], start: &[usize], after: Duration) -> Decision {
        Decision::Restart {
            stop: stop.to_vec(),
            start: start.to_vec(),
            after,
        }
    }

    use Restart::{Permanent as P, Temporary as Tm, Transient as Tr};

    #[test]
    fn policies_decide_whether_an_end_is_restarted() {
        let mut s = sup(Strategy::OneForOne, &[P, Tr, Tm], 100);
        assert_eq!(s.ended(0, Ending::Normal, MS), restart(&[], &[0], 50 * MS));
        assert_eq!(s.ended(1, Ending::Normal, MS), Decision::Nothing);
        assert!(s.is_gone(1));
        // Gone for good: a later failure of the same member is nothing.
        assert_eq!(s.ended(1, Ending::Failed, MS), Decision::Nothing);
        assert_eq!(s.ended(2, Ending::Failed, MS), Decision::Nothing);
        let mut s = sup(Strategy::OneForOne, &[Tr], 100);
        assert_eq!(s.ended(0, Ending::Failed, MS), restart(&[], &[0], 50 * MS));
    }

    #[test]
    fn strategies_take_the_right_members_in_the_right_order() {
        let m = [P, P, P, P];
        let mut s = sup(Strategy::OneForAll, &m, 100);
        assert_eq!(
            s.ended(2, Ending::Failed, MS),
            restart(&[3, 1, 0], &[0, 1, 2, 3], 50 * MS)
        );
        let mut s = sup(Strategy::RestForOne, &m, 100);
        assert_eq!(
            s.ended(1, Ending::Failed, MS),
            restart(&[3, 2], &[1, 2, 3], 50 * MS)
        );
        let mut s = sup(Strategy::RestForOne, &m, 100);
        assert_eq!(s.ended(3, Ending::Failed, MS), restart(&[], &[3], 50 * MS));
        let mut s = sup(Strategy::OneForOne, &m, 100);
        assert_eq!(s.ended(1, Ending::Failed, MS), restart(&[], &[1], 50 * MS));
    }

    #[test]
    fn members_gone_for_good_are_neither_stopped_nor_started() {
        let mut s = sup(Strategy::OneForAll, &[P, Tr, Tm], 100);
        assert_eq!(s.ended(1, Ending::Normal, MS), Decision::Nothing);
        // The temporary member is stopped with the rest, and not started.
        assert_eq!(s.ended(0, Ending::Failed, MS), restart(&[2], &[0], 50 * MS));
        assert!(s.is_gone(2));
        assert_eq!(s.ended(0, Ending::Failed, MS), restart(&[], &[0], 100 * MS));
        s.reset();
        assert!(!s.is_gone(1) && !s.is_gone(2));
    }

    #[test]
    fn intensity_gives_up_on_the_restart_past_it_and_forgets_old_ones() {
        let mut s = sup(Strategy::OneForOne, &[P], 3);
        let t = Duration::from_secs(1);
        for _ in 0..3 {
            assert!(matches!(
                s.ended(0, Ending::Failed, t),
                Decision::Restart { .. }
            ));
        }
        assert_eq!(s.restarts_within(t), 3);
        assert_eq!(s.ended(0, Ending::Failed, t), Decision::GiveUp);
        // Ten seconds after the first restarts, the window is empty again.
        let later = t + Duration::from_secs(10);
        assert_eq!(s.restarts_within(later), 0);
        assert_eq!(
            s.ended(0, Ending::Failed, later),
            restart(&[], &[0], 50 * MS)
        );
        // A window is any 10 s: one restart in each half of it still counts.
        let mut s = sup(Strategy::OneForOne, &[P], 2);
        s.ended(0, Ending::Failed, Duration::from_secs(1));
        s.ended(0, Ending::Failed, Duration::from_secs(9));
        assert_eq!(
            s.ended(0, Ending::Failed, Duration::from_secs(10)),
            Decision::GiveUp
        );
    }

    #[test]
    fn backoff_doubles_within_a_window_up_to_its_bound() {
        let mut s = sup(Strategy::OneForOne, &[P], 100);
        let waits: Vec<Duration> = (0..10)
            .map(|_| match s.ended(0, Ending::Failed, MS) {
                Decision::Restart { after, .. } => after,
                d => panic!("{d:?}"),
            })
            .collect();
        assert_eq!(&waits[..4], &[50 * MS, 100 * MS, 200 * MS, 400 * MS]);
        assert_eq!(waits[9], MAX_BACKOFF);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn no_intensity_gives_up_at_the_first_restart() {
        let mut s = sup(Strategy::OneForOne, &[P], 0);
        assert_eq!(s.ended(0, Ending::Failed, MS), Decision::GiveUp);
        assert_eq!(s.ended(5, Ending::Failed, MS), Decision::Nothing);
    }

    #[test]
    fn names_round_trip() {
        for r in [P, Tr, Tm] {
            assert_eq!(Restart::parse(r.as_str()), Some(r));
        }
        for s in [
            Strategy::OneForOne,
            Strategy::OneForAll,
            Strategy::RestForOne,
        ] {
            assert_eq!(Strategy::parse(s.as_str()), Some(s));
        }
        assert_eq!(Restart::parse("always"), None);
        assert_eq!(Strategy::parse("one-for-one"), None);
    }

    #[test]
    fn new_terms_keep_the_window_and_new_policies_apply_to_the_next_end() {
        let mut s = sup(Strategy::OneForOne, &[P, P], 2);
        assert!(matches!(
            s.ended(0, Ending::Failed, MS),
            Decision::Restart { .. }
        ));
        s.set_terms(
            Strategy::OneForAll,
            Intensity {
                max_restarts: 1,
                within: Duration::from_secs(10),
            },
            MS,
        );
        // The restart before the change still counts: one more is too many.
        assert_eq!(s.ended(1, Ending::Failed, 2 * MS), Decision::GiveUp);
        let mut s = sup(Strategy::OneForOne, &[P], 5);
        s.set_restart(0, Tm);
        assert_eq!(s.ended(0, Ending::Failed, MS), Decision::Nothing);
    }
}

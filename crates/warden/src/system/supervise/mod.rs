//! Supervision of a system's tasks: the mechanism under
//! `warden_policy::supervise`. One thread per system holds the
//! supervision tree, hears each supervised task's end from the runtime,
//! asks the member's supervisor what to do, stops and starts members
//! accordingly (after the backoff the policy gives), and carries a
//! supervisor's giving up to its parent — and from a top supervisor to
//! the system, which then ends with the reason.
//!
//! A restarted task is a fresh task from the same spec: its names are
//! registered again by its own code, its grants, limits, group and
//! devices are the spec's, and its memory is carved from the same
//! budgets as the first one's was. What a restart costs the host is
//! bounded three ways: the intensity (restarts per window), the backoff
//! (doubling within a window), and a supervisor's `cpu_limit` (the CPU
//! its spawns took, measured on this thread).
//!
//! Every supervised report the runtime hands over holds the system open
//! (`Runtime::spawn_supervised`) until this thread has restarted the task
//! or let it go, so a system never ends in the gap between a death and
//! its restart.

mod operator;
mod reshape;

pub(super) use reshape::Reshape;

use crate::report::TaskReport;
use crate::task::{Restart, SupervisorSpec, TaskId, TaskSpec};
use crate::Runtime;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden_policy::supervise::{Decision, Ending, Plan, Supervisor};

/// How long a restart waits for the tasks it stopped to end (OTP's
/// shutdown time); a task still running then is left to its kill.
const STOPPED: Duration = Duration::from_secs(5);

/// The system's root supervisor's name: it supervises, one for one, the
/// tasks with a `restart` policy that no `[[supervisor]]` names.
const ROOT: &str = "root";

/// Told the reason when a top supervisor gives up and the system ends.
#[derive(Clone)]
pub struct FailureSink(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for FailureSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailureSink")
    }
}

/// A running supervision tree: its thread, and how to stop it.
pub(super) struct Supervision {
    tx: Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    failure: Arc<Mutex<Option<String>>>,
    /// The supervised tasks' names.
    names: Arc<Mutex<Vec<String>>>,
}

/// The tree as a live upgrade reaches it: replacing a supervised task's
/// running task, and putting it back.
#[derive(Clone)]
pub(super) struct Handle {
    tx: Sender<Msg>,
    names: Arc<Mutex<Vec<String>>>,
}

enum Msg {
    /// A supervised task ended (`held`: its report holds the system open).
    Ended {
        task: usize,
        report: Box<TaskReport>,
        held: bool,
    },
    /// Start `spec` in place of the member it names (a live upgrade),
    /// answering with the old task's id and the new one's.
    Replace {
        spec: Box<TaskSpec>,
        reply: Sender<Result<(TaskId, TaskId), String>>,
    },
    /// The member named by `spec` is the task `id` again, with `spec`
    /// (an upgrade rolled back).
    Revert {
        spec: Box<TaskSpec>,
        id: TaskId,
    },
    /// Start `spec` as a new member of the root supervisor, answering
    /// with its task's id.
    Adopt {
        spec: Box<TaskSpec>,
        reply: Sender<Result<TaskId, String>>,
    },
    /// Start the member `name` afresh, answering with its new task's id.
    Restart {
        name: String,
        reply: Sender<Result<TaskId, String>>,
    },
    /// A manifest reload's change of the tree, answered with what was
    /// done, line by line, or what failed.
    Reshape {
        change: Box<Reshape>,
        reply: Sender<Result<Vec<String>, Vec<String>>>,
    },
    Stop,
}

/// A member of a supervisor: a task or another supervisor.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Node {
    Task(usize),
    Sup(usize),
    /// A member a manifest reload removed.
    Gone,
}

struct Sup {
    name: String,
    policy: Supervisor,
    members: Vec<Node>,
    /// Its own supervisor and its place there (`None`: a top one).
    parent: Option<(usize, usize)>,
    cpu_limit: Option<Duration>,
    cpu_used: Duration,
}

struct Member {
    spec: TaskSpec,
    /// Its supervisor and its place there.
    at: (usize, usize),
    /// The task running it: an end reported for another (one this
    /// supervisor stopped, or an upgrade replaced) is not judged.
    live: Option<TaskId>,
    restarts: u32,
}

/// Members to start once `at` has come, and the holds they keep.
struct Pending {
    at: Instant,
    sup: usize,
    start: Vec<usize>,
    holds: usize,
    why: Why,
    /// The tasks the restart stopped: waited for (at most 5 s) before
    /// the start, so that their names and budgets are free again.
    stopped: Vec<TaskId>,
}

/// Why members are restarted: how the run that called for it ended.
#[derive(Clone)]
struct Why {
    status: &'static str,
    reason: String,
}

struct Tree {
    rt: Runtime,
    tx: Sender<Msg>,
    sups: Vec<Sup>,
    tasks: Vec<Member>,
    pending: Vec<Pending>,
    epoch: Instant,
    failure: Arc<Mutex<Option<String>>>,
    on_failure: Option<FailureSink>,
    /// The supervised tasks' names, as the handles see them.
    names: Arc<Mutex<Vec<String>>>,
}

/// Whether `spec` is supervised in a system with `supervisors`.
pub(super) fn supervised(spec: &TaskSpec, supervisors: &[SupervisorSpec]) -> bool {
    spec.restart != Restart::Temporary || supervisors.iter().any(|s| s.members.contains(&spec.name))
}

impl Supervision {
    /// Builds the tree of `supervisors` over the supervised ones of
    /// `tasks` (the root supervisor takes the loose ones), without
    /// starting anything: [`Supervision::start`] starts each task, in
    /// the system's order, and [`Supervision::run`] then hands the tree
    /// to its thread.
    pub(super) fn build(
        rt: &Runtime,
        tasks: &[TaskSpec],
        supervisors: &[SupervisorSpec],
        on_failure: Option<FailureSink>,
    ) -> (Supervision, Starter) {
        let (tx, rx) = std::sync::mpsc::channel();
        let failure = Arc::new(Mutex::new(None));
        let names = Arc::new(Mutex::new(tasks.iter().map(|t| t.name.clone()).collect()));
        let mut tree = Tree::new(
            rt,
            tx.clone(),
            tasks,
            supervisors,
            (failure.clone(), on_failure),
        );
        tree.names = Arc::clone(&names);
        let supervision = Supervision {
            tx,
            thread: None,
            failure,
            names,
        };
        (supervision, Starter { tree, rx })
    }

    /// Why the system ended because a top supervisor gave up, if it did.
    pub(super) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What a live upgrade needs of the tree, for other threads.
    pub(super) fn handle(&self) -> Handle {
        Handle {
            tx: self.tx.clone(),
            names: self.names.clone(),
        }
    }

    /// Stops the thread: nothing is restarted any more, and holds still
    /// taken are given back.
    pub(super) fn stop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Supervision {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The tree before its thread runs: starts its tasks on the system's
/// thread, in the system's order.
pub(super) struct Starter {
    tree: Tree,
    rx: Receiver<Msg>,
}

impl Starter {
    /// Whether the task named `name` is one of the tree's.
    pub(super) fn has(&self, name: &str) -> bool {
        self.tree.task_index(name).is_some()
    }

    /// Starts the tree's task named `name`.
    pub(super) fn start(&mut self, name: &str) -> Result<(), crate::Error> {
        let t = self.tree.task_index(name).expect("a task of the tree");
        self.tree.spawn(t, None).map(drop)
    }

    /// Hands the tree to its thread.
    pub(super) fn run(self, supervision: &mut Supervision) {
        let Starter { tree, rx } = self;
        let thread = std::thread::Builder::new()
            .name("warden-supervisor".into())
            .spawn(move || tree.serve(rx));
        supervision.thread = thread.ok();
    }
}

impl Tree {
    fn new(
        rt: &Runtime,
        tx: Sender<Msg>,
        tasks: &[TaskSpec],
        specs: &[SupervisorSpec],
        (failure, on_failure): (Arc<Mutex<Option<String>>>, Option<FailureSink>),
    ) -> Tree {
        let mut tree = Tree {
            rt: rt.clone(),
            tx,
            sups: Vec::new(),
            tasks: Vec::new(),
            pending: Vec::new(),
            epoch: Instant::now(),
            failure,
            on_failure,
            names: Arc::default(),
        };
        let named = |t: &TaskSpec| specs.iter().any(|s| s.members.contains(&t.name));
        let loose: Vec<String> = (tasks.iter())
            .filter(|t| t.restart != Restart::Temporary && !named(t))
            .map(|t| t.name.clone())
            .collect();
        let mut all = vec![SupervisorSpec::new(ROOT, loose)];
        all.extend(specs.iter().cloned());
        for s in &all {
            tree.add_sup(s, tasks);
        }
        tree.link_sups(&all, 0);
        tree
    }

    /// Adds a supervisor, and its task members.
    fn add_sup(&mut self, spec: &SupervisorSpec, tasks: &[TaskSpec]) {
        let sup = self.sups.len();
        let mut members = Vec::new();
        let mut policies = Vec::new();
        for (i, name) in spec.members.iter().enumerate() {
            match tasks.iter().find(|t| &t.name == name) {
                Some(t) => {
                    members.push(Node::Task(self.tasks.len()));
                    policies.push(t.restart);
                    self.tasks.push(Member {
                        spec: t.clone(),
                        at: (sup, i),
                        live: None,
                        restarts: 0,
                    });
                }
                // A supervisor member, found by `link_sups`.
                None => {
                    members.push(Node::Sup(usize::MAX));
                    policies.push(Restart::Permanent);
                }
            }
        }
        let plan = Plan {
            strategy: spec.strategy,
            intensity: spec.intensity,
            backoff: spec.backoff,
            members: policies,
        };
        self.sups.push(Sup {
            name: spec.name.clone(),
            policy: Supervisor::new(plan),
            members,
            parent: None,
            cpu_limit: spec.cpu_limit,
            cpu_used: Duration::ZERO,
        });
    }

    /// Points each supervisor member at its supervisor, and back: the
    /// supervisors from `first` on are those of `specs`, in order.
    fn link_sups(&mut self, specs: &[SupervisorSpec], first: usize) {
        for p in first..self.sups.len() {
            for i in 0..self.sups[p].members.len() {
                if self.sups[p].members[i] != Node::Sup(usize::MAX) {
                    continue;
                }
                let name = &specs[p - first].members[i];
                let c = specs.iter().position(|s| &s.name == name);
                let c = first + c.expect("a manifest's members are tasks or supervisors");
                self.sups[p].members[i] = Node::Sup(c);
                self.sups[c].parent = Some((p, i));
            }
        }
    }

    fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|m| m.spec.name == name)
    }

    /// The supervision loop: ends heard and restarts made when due,
    /// until told to stop.
    fn serve(mut self, rx: Receiver<Msg>) {
        loop {
            let due = self.pending.iter().map(|p| p.at).min();
            let msg = match due {
                None => rx.recv().unwrap_or(Msg::Stop),
                Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => {
                        self.start_due();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => Msg::Stop,
                },
            };
            match msg {
                Msg::Ended { task, report, held } => self.ended(task, &report, usize::from(held)),
                Msg::Replace { spec, reply } => {
                    let _ = reply.send(self.replace(*spec));
                }
                Msg::Revert { spec, id } => self.revert(*spec, id),
                Msg::Adopt { spec, reply } => {
                    let _ = reply.send(self.adopt(*spec));
                }
                Msg::Restart { name, reply } => {
                    let _ = reply.send(self.restart_by_hand(&name));
                }
                Msg::Reshape { change, reply } => {
                    let _ = reply.send(self.reshape(*change));
                }
                Msg::Stop => break,
            }
        }
        // Closed first: no report takes a hold from now on (holds are
        // taken under the task table's lock, and so is this), so every
        // hold taken is in a message already sent, and the drain below
        // gives each one back.
        self.rt.close();
        let holds: usize = self.pending.drain(..).map(|p| p.holds).sum();
        self.release(holds);
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Ended { held: true, .. } = msg {
                self.release(1);
            }
        }
    }

    fn release(&self, holds: usize) {
        for _ in 0..holds {
            self.rt.release_hold();
        }
    }

    /// A supervised task's end, judged by its supervisor.
    fn ended(&mut self, task: usize, report: &TaskReport, holds: usize) {
        let m = &mut self.tasks[task];
        if m.live != Some(report.id) || self.rt.closing() {
            return self.release(holds);
        }
        m.live = None;
        let (sup, place) = m.at;
        let ending = match report.succeeded() {
            true => Ending::Normal,
            false => Ending::Failed,
        };
        let why = Why {
            status: report.status,
            reason: format!("task {:?} {}", report.name, ending_text(report)),
        };
        self.decide(sup, place, ending, why, holds);
    }

    /// What `sup` does about its member `place`'s ending.
    fn decide(&mut self, sup: usize, place: usize, ending: Ending, why: Why, holds: usize) {
        let now = self.epoch.elapsed();
        match self.sups[sup].policy.ended(place, ending, now) {
            Decision::Nothing => self.release(holds),
            Decision::Restart { stop, start, after } => {
                let stopping = format!("restarted with its supervisor's member: {}", why.reason);
                let mut stopped = Vec::new();
                for m in stop {
                    self.live_under(self.sups[sup].members[m], &mut stopped);
                    self.stop_node(self.sups[sup].members[m], &stopping);
                }
                self.pending.push(Pending {
                    at: Instant::now() + after,
                    sup,
                    start,
                    holds,
                    why,
                    stopped,
                });
            }
            Decision::GiveUp => {
                let s = &self.sups[sup];
                let intensity = s.policy.plan().intensity;
                let reason = format!(
                    "supervisor {:?} gave up: more than {} restarts within {:?} (last: {})",
                    s.name, intensity.max_restarts, intensity.within, why.reason
                );
                self.give_up(sup, reason);
                self.release(holds);
            }
        }
    }

    /// Stops `sup`'s members and carries its end to its parent, or, for
    /// a top supervisor, ends the system.
    fn give_up(&mut self, sup: usize, reason: String) {
        self.stop_members(sup, &reason);
        match self.sups[sup].parent {
            Some((parent, place)) => {
                let why = Why {
                    status: "killed",
                    reason: reason.clone(),
                };
                self.decide(parent, place, Ending::Failed, why, 0);
            }
            None => self.fail(reason),
        }
    }

    /// Ends the system for `reason`.
    fn fail(&mut self, reason: String) {
        say!("warden: {reason}; the system ends");
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
        self.rt.kill_all(&reason);
        if let Some(sink) = &self.on_failure {
            (sink.0)(&reason);
        }
    }

    /// Stops every member of `sup` (latest first) and forgets its
    /// pending starts, and those of the supervisors under it.
    fn stop_members(&mut self, sup: usize, reason: &str) {
        let members = self.sups[sup].members.clone();
        for node in members.into_iter().rev() {
            self.stop_node(node, reason);
        }
        let holds: usize = (self.pending.iter())
            .filter(|p| p.sup == sup)
            .map(|p| p.holds)
            .sum();
        self.pending.retain(|p| p.sup != sup);
        self.release(holds);
    }

    fn stop_node(&mut self, node: Node, reason: &str) {
        match node {
            Node::Task(t) => {
                let m = &mut self.tasks[t];
                if let Some(id) = m.live.take() {
                    let _ = self.rt.kill(id, reason);
                }
            }
            Node::Sup(s) => self.stop_members(s, reason),
            Node::Gone => {}
        }
    }

    /// Starts the members whose backoff is over.
    fn start_due(&mut self) {
        let now = Instant::now();
        let (due, later): (Vec<Pending>, Vec<Pending>) =
            self.pending.drain(..).partition(|p| p.at <= now);
        self.pending = later;
        for p in due {
            for &id in &p.stopped {
                let _ = self.rt.wait_timeout(id, Some(STOPPED));
            }
            if !self.rt.closing() {
                self.restart(p.sup, &p.start, &p.why);
            }
            self.release(p.holds);
        }
    }

    /// Starts `sup`'s members `start` again, charging the spawns' CPU to
    /// it; a member that cannot start counts as a failed one.
    fn restart(&mut self, sup: usize, start: &[usize], why: &Why) {
        let began = crate::clock::thread_cpu_ns();
        let mut failed = None;
        for &place in start {
            if let Err(e) = self.start_node(self.sups[sup].members[place], Some(why)) {
                failed = Some((place, e));
                break;
            }
        }
        let cost = Duration::from_nanos(crate::clock::thread_cpu_ns().saturating_sub(began));
        let s = &mut self.sups[sup];
        s.cpu_used += cost;
        if let Some(limit) = s.cpu_limit.filter(|l| s.cpu_used > *l) {
            let reason = format!(
                "supervisor {:?} gave up: its restarts used more than its cpu_limit of {limit:?}",
                s.name
            );
            return self.give_up(sup, reason);
        }
        if let Some((place, e)) = failed {
            let why = Why {
                status: "trapped",
                reason: format!("a member could not start again: {e}"),
            };
            self.decide(sup, place, Ending::Failed, why, 0);
        }
    }

    /// Starts a member: a task, or a supervisor afresh with its members.
    fn start_node(&mut self, node: Node, why: Option<&Why>) -> Result<(), crate::Error> {
        match node {
            Node::Task(t) => self.spawn(t, why).map(drop),
            Node::Sup(s) => {
                self.sups[s].policy.reset();
                for (place, node) in self.sups[s].members.clone().into_iter().enumerate() {
                    if !self.sups[s].policy.is_gone(place) {
                        self.start_node(node, why)?;
                    }
                }
                Ok(())
            }
            Node::Gone => Ok(()),
        }
    }

    /// Spawns task `t` (again, if `why` says why), supervised.
    fn spawn(&mut self, t: usize, why: Option<&Why>) -> Result<TaskId, crate::Error> {
        let m = &mut self.tasks[t];
        let restarts = m.restarts + u32::from(why.is_some());
        let tx = self.tx.clone();
        let tell = move |report, held| {
            let msg = Msg::Ended {
                task: t,
                report: Box::new(report),
                held,
            };
            tx.send(msg).is_ok()
        };
        let id = self.rt.spawn_supervised(&m.spec, restarts, tell)?;
        m.live = Some(id);
        m.restarts = restarts;
        if let Some(why) = why {
            self.rt
                .note_restart(&m.spec.name, id, why.status, &why.reason);
        }
        Ok(id)
    }
}

/// How a report's run ended, in words.
fn ending_text(r: &TaskReport) -> String {
    match (&r.reason, r.exit_code) {
        (Some(reason), _) => format!("{}: {reason}", r.status),
        (None, Some(code)) => format!("exited with {code}"),
        (None, None) => r.status.to_string(),
    }
}

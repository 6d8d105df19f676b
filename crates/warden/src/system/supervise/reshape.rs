//! A manifest reload's change of the supervision tree, made on the
//! tree's thread in one message: supervisors removed with everything
//! under them, members of the root supervisor removed, supervisors'
//! terms and members' restart policies changed in place, subtrees added
//! (one whose top has the name of a supervisor just removed takes its
//! place under the same parent), and new loose tasks adopted by the root.
//!
//! A removed member's place stays in its supervisor as `Node::Gone`, so
//! the others keep their places (and `rest_for_one` its order). A task
//! removed is killed and waited for (at most 5 s), so a task started in
//! the same reload may register the names it held; its end is not a
//! failure of the system's.

use super::{Node, Tree};
use crate::task::{Restart, SupervisorSpec, TaskId, TaskSpec};
use std::collections::HashMap;
use std::time::Duration;

/// What a manifest reload changes in the tree, applied in this order.
#[derive(Default)]
pub(in crate::system) struct Reshape {
    /// Supervisors removed, each with everything under it.
    pub remove_sups: Vec<String>,
    /// Tasks removed from their supervisor (the root's, or one kept).
    pub remove_tasks: Vec<String>,
    /// Kept supervisors with new terms (strategy, intensity, backoff,
    /// CPU limit).
    pub tune: Vec<SupervisorSpec>,
    /// Kept members with a new restart policy.
    pub restart: Vec<(String, Restart)>,
    /// Subtrees added: their supervisors (the top first) and tasks.
    pub add: Vec<(Vec<SupervisorSpec>, Vec<TaskSpec>)>,
    /// New tasks of the root supervisor.
    pub adopt: Vec<TaskSpec>,
}

/// How long a removed task's end is waited for.
const REMOVED: Duration = Duration::from_secs(5);

const WHY: &str = "removed by a manifest reload";

impl Tree {
    /// Applies `c`: what was done, line by line, or what failed.
    pub(super) fn reshape(&mut self, c: Reshape) -> Result<Vec<String>, Vec<String>> {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        let mut vacated = HashMap::new();
        for name in &c.remove_sups {
            match self.sups.iter().position(|s| &s.name == name) {
                Some(s) => {
                    vacated.insert(name.clone(), self.remove_sup(s));
                    done.push(format!("supervisor {name:?} removed"));
                }
                None => failed.push(format!("no supervisor {name:?} to remove")),
            }
        }
        for name in &c.remove_tasks {
            match self.task_index(name) {
                Some(t) => self.remove_task(t),
                None => failed.push(format!("no supervised task {name:?} to remove")),
            }
        }
        for spec in &c.tune {
            self.tune(spec);
            done.push(format!("supervisor {:?}: new terms", spec.name));
        }
        for (name, restart) in &c.restart {
            if let Some(t) = self.task_index(name) {
                let (sup, place) = self.tasks[t].at;
                self.sups[sup].policy.set_restart(place, *restart);
                self.tasks[t].spec.restart = *restart;
            }
        }
        for (sups, tasks) in &c.add {
            let at = vacated.remove(&sups[0].name).flatten();
            match self.add_subtree(sups, tasks, at) {
                Ok(()) => done.push(format!("supervisor {:?} started", sups[0].name)),
                Err(e) => failed.push(format!("supervisor {:?}: {e}", sups[0].name)),
            }
        }
        for spec in c.adopt {
            let name = spec.name.clone();
            match self.adopt(spec) {
                Ok(id) => done.push(format!("task {name:?} started as task {id}")),
                Err(e) => failed.push(format!("task {name:?} did not start: {e}")),
            }
        }
        self.refresh_names();
        match failed.is_empty() {
            true => Ok(done),
            false => Err(failed),
        }
    }

    /// Removes supervisor `s` and everything under it: its tasks killed
    /// and waited for. The place it had in its parent, if it had one.
    fn remove_sup(&mut self, s: usize) -> Option<(usize, usize)> {
        let mut ids = Vec::new();
        self.live_under(Node::Sup(s), &mut ids);
        for &id in &ids {
            self.rt.mark_replaced(id);
        }
        self.stop_members(s, WHY);
        for id in ids {
            let _ = self.rt.wait_timeout(id, Some(REMOVED));
        }
        self.bury(Node::Sup(s));
        let parent = self.sups[s].parent.take();
        if let Some((p, place)) = parent {
            self.sups[p].members[place] = Node::Gone;
            self.sups[p].policy.forget(place);
        }
        parent
    }

    /// Removes task member `t` from its supervisor: killed and waited
    /// for.
    fn remove_task(&mut self, t: usize) {
        if let Some(id) = self.tasks[t].live.take() {
            crate::system::upgrade::stop(&self.rt, id, WHY);
        }
        let (sup, place) = self.tasks[t].at;
        self.sups[sup].members[place] = Node::Gone;
        self.sups[sup].policy.forget(place);
        self.bury(Node::Task(t));
    }

    /// The live tasks under `node`.
    pub(super) fn live_under(&self, node: Node, ids: &mut Vec<TaskId>) {
        match node {
            Node::Task(t) => ids.extend(self.tasks[t].live),
            Node::Sup(s) => (self.sups[s].members.iter()).for_each(|&n| self.live_under(n, ids)),
            Node::Gone => {}
        }
    }

    /// Forgets the names under `node` (stopped already), so that a
    /// reload may use them again.
    fn bury(&mut self, node: Node) {
        match node {
            Node::Task(t) => {
                self.tasks[t].spec.name.clear();
                self.tasks[t].live = None;
            }
            Node::Sup(s) => {
                self.sups[s].name.clear();
                for n in std::mem::take(&mut self.sups[s].members) {
                    self.bury(n);
                }
            }
            Node::Gone => {}
        }
    }

    /// Gives the supervisor `spec` names its new terms.
    fn tune(&mut self, spec: &SupervisorSpec) {
        if let Some(s) = self.sups.iter_mut().find(|s| s.name == spec.name) {
            s.policy
                .set_terms(spec.strategy, spec.intensity, spec.backoff);
            s.cpu_limit = spec.cpu_limit;
        }
    }

    /// Adds the supervisors `sups` (the top first) over `tasks`, in the
    /// place `at` if given, and starts them.
    fn add_subtree(
        &mut self,
        sups: &[SupervisorSpec],
        tasks: &[TaskSpec],
        at: Option<(usize, usize)>,
    ) -> Result<(), String> {
        let first = self.sups.len();
        for s in sups {
            self.add_sup(s, tasks);
        }
        self.link_sups(sups, first);
        if let Some((p, place)) = at {
            self.sups[p].members[place] = Node::Sup(first);
            self.sups[p].policy.revive(place);
            self.sups[first].parent = Some((p, place));
        }
        self.start_node(Node::Sup(first), None)
            .map_err(|e| e.to_string())
    }

    /// The handles' list of supervised names, from the tree.
    fn refresh_names(&self) {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        *names = (self.tasks.iter())
            .filter(|m| !m.spec.name.is_empty())
            .map(|m| m.spec.name.clone())
            .collect();
    }
}

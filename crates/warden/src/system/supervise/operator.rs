//! What operators ask of a supervision tree, from other threads: a live
//! upgrade's replacement of a member's task (and its rollback), a
//! restart by hand, and a task spawned with a restart policy adopted by
//! the root supervisor.

use super::{Ending, Handle, Member, Msg, Node, Tree, Why};
use crate::task::{TaskId, TaskSpec};

impl Handle {
    /// Whether the task named `name` is supervised.
    pub(in crate::system) fn supervises(&self, name: &str) -> bool {
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names.iter().any(|n| n == name)
    }

    /// Starts `spec` as a new member of the root supervisor; its task's id.
    pub(in crate::system) fn adopt(&self, spec: TaskSpec) -> Result<TaskId, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        let name = spec.name.clone();
        let msg = Msg::Adopt {
            spec: Box::new(spec),
            reply,
        };
        self.tx.send(msg).map_err(|_| "the system is ending")?;
        let id = answer.recv().map_err(|_| "the system is ending")??;
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name);
        Ok(id)
    }

    /// Starts `spec` in place of the supervised task of its name (a live
    /// upgrade); the old task's id and the new one's.
    pub(in crate::system) fn replace(&self, spec: TaskSpec) -> Result<(TaskId, TaskId), String> {
        let (reply, answer) = std::sync::mpsc::channel();
        let msg = Msg::Replace {
            spec: Box::new(spec),
            reply,
        };
        self.tx.send(msg).map_err(|_| "the system is ending")?;
        answer.recv().map_err(|_| "the system is ending")?
    }

    /// Starts the supervised task `name` afresh (an operator's restart),
    /// killing the one running first; the new task's id.
    pub(in crate::system) fn restart(&self, name: &str) -> Result<TaskId, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        let msg = Msg::Restart {
            name: name.to_string(),
            reply,
        };
        self.tx.send(msg).map_err(|_| "the system is ending")?;
        answer.recv().map_err(|_| "the system is ending")?
    }

    /// Applies a manifest reload's change of the tree: what was done,
    /// line by line, or what failed.
    pub(in crate::system) fn reshape(
        &self,
        change: super::Reshape,
    ) -> Result<Vec<String>, Vec<String>> {
        let (reply, answer) = std::sync::mpsc::channel();
        let msg = Msg::Reshape {
            change: Box::new(change),
            reply,
        };
        let ending = || vec!["the system is ending".to_string()];
        self.tx.send(msg).map_err(|_| ending())?;
        answer.recv().map_err(|_| ending())?
    }

    /// Makes task `id`, with `spec`, its member again (an upgrade rolled
    /// back).
    pub(in crate::system) fn revert(&self, spec: TaskSpec, id: TaskId) {
        let _ = self.tx.send(Msg::Revert {
            spec: Box::new(spec),
            id,
        });
    }
}

impl Tree {
    /// Starts `spec` in place of its member's running task (a live
    /// upgrade): the member is the new task from now on, and the old
    /// one's end is not judged.
    pub(super) fn replace(&mut self, mut spec: TaskSpec) -> Result<(TaskId, TaskId), String> {
        let t = self.task_index(&spec.name).ok_or("not supervised")?;
        let old = self.tasks[t]
            .live
            .ok_or("not running (its supervisor is restarting it)")?;
        spec.replaces = Some(old);
        let previous = std::mem::replace(&mut self.tasks[t].spec, spec);
        let restarts = self.tasks[t].restarts;
        match self.spawn(t, None) {
            Ok(new) => {
                // The state it was handed is its first start's alone.
                self.tasks[t].restarts = restarts;
                self.tasks[t].spec.handed = None;
                Ok((old, new))
            }
            Err(e) => {
                let m = &mut self.tasks[t];
                (m.spec, m.live) = (previous, Some(old));
                Err(e.to_string())
            }
        }
    }

    /// Adds `spec` to the root supervisor (index 0) and starts it.
    pub(super) fn adopt(&mut self, spec: TaskSpec) -> Result<TaskId, String> {
        let place = self.sups[0].policy.add_member(spec.restart);
        let t = self.tasks.len();
        self.sups[0].members.push(Node::Task(t));
        self.tasks.push(Member {
            spec,
            at: (0, place),
            live: None,
            restarts: 0,
        });
        self.spawn(t, None).map_err(|e| {
            // Not started: never a member to restart.
            self.sups[0].policy.forget(place);
            e.to_string()
        })
    }

    /// Starts member `name` afresh for an operator: the running task (if
    /// any) killed and waited for, a member that had ended for good
    /// brought back; not counted against the intensity.
    pub(super) fn restart_by_hand(&mut self, name: &str) -> Result<TaskId, String> {
        let t = self.task_index(name).ok_or("not supervised")?;
        if let Some(id) = self.tasks[t].live.take() {
            crate::system::upgrade::stop(&self.rt, id, "restarted by the operator");
        }
        let (sup, place) = self.tasks[t].at;
        self.sups[sup].policy.revive(place);
        let why = Why {
            status: "killed",
            reason: "restarted by the operator".into(),
        };
        self.spawn(t, Some(&why)).map_err(|e| e.to_string())
    }

    /// The member named by `spec` is task `id` again (an upgrade rolled
    /// back); if that task has ended meanwhile, it is judged as a failure.
    pub(super) fn revert(&mut self, spec: TaskSpec, id: TaskId) {
        let Some(t) = self.task_index(&spec.name) else {
            return;
        };
        let m = &mut self.tasks[t];
        let current = m.live.replace(id);
        m.spec = spec;
        // A restart of the new code meanwhile is not the member any more.
        if let Some(other) = current.filter(|c| *c != id) {
            let _ = self.rt.kill(other, "its upgrade was rolled back");
        }
        if !self.rt.live_tasks().iter().any(|v| v.id == id) {
            let (sup, place) = self.tasks[t].at;
            self.tasks[t].live = None;
            let why = Why {
                status: "killed",
                reason: format!("task {:?} ended during an upgrade", self.tasks[t].spec.name),
            };
            self.decide(sup, place, Ending::Failed, why, 0);
        }
    }
}

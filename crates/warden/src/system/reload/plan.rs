//! What a reload changes: the new manifest compared with the old, entry
//! by entry, as the steps `Upgrades::apply` carries out.

use crate::http::{HttpSpec, RouteSpec};
use crate::module::Entry;
use crate::system::supervise::Reshape;
use crate::system::ModuleUse;
use crate::task::{Restart, SupervisorSpec, TaskSpec};
use crate::{LoadedModule, Manifest, Runtime};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

/// The steps of a reload, in the order they are taken.
#[derive(Default)]
pub(super) struct Plan {
    /// Tasks outside supervision killed (removed, or moved under it).
    pub stop: Vec<String>,
    /// The supervision tree's change.
    pub reshape: Reshape,
    /// Tasks outside supervision started (added, or moved out of it).
    pub spawn: Vec<TaskSpec>,
    /// Tasks upgraded in place to their new entry.
    pub upgrade: Vec<TaskSpec>,
    /// Names of the tasks the new manifest has no more.
    pub removed: Vec<String>,
    /// Each web server's routes, by the address its `[[http]]` entry
    /// listens on and which entry on that address it is (see `servers`).
    pub routes: Vec<(String, usize, Vec<RouteSpec>)>,
    /// What the route changes are, in words.
    pub route_lines: Vec<String>,
}

/// Who restarts a task.
#[derive(Clone, Debug, PartialEq)]
enum Home {
    Nobody,
    Root,
    Sup(String),
}

/// The manifest parts a running system cannot change, where `new`'s
/// differ from `old`'s.
pub(super) fn fixed_parts(old: &Manifest, new: &Manifest) -> Vec<String> {
    let differ =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    let mut problems = Vec::new();
    let parts: [(&str, bool); 5] = [
        ("[runtime]", differ(&old.runtime, &new.runtime)),
        ("[[group]]", differ(&old.groups, &new.groups)),
        ("[[device]]", differ(&old.devices, &new.devices)),
        ("[cluster]", differ(&old.cluster, &new.cluster)),
        ("[telemetry]", differ(&old.telemetry, &new.telemetry)),
    ];
    for (part, changed) in parts {
        if changed {
            problems.push(format!(
                "{part} changed: a running system keeps it (restart the system to change it)"
            ));
        }
    }
    let settings = |h: &crate::http::HttpSpec| {
        let mut h = h.clone();
        h.routes.clear();
        format!("{h:?}")
    };
    let listens = |m: &Manifest| m.http.iter().map(|h| h.listen.clone()).collect::<Vec<_>>();
    let (mut a, mut b) = (listens(old), listens(new));
    (a.sort(), b.sort());
    if a != b {
        problems.push(format!(
            "[[http]] servers changed (listening on {} before, {} now): a running system keeps \
             its web servers, and a reload changes their routes",
            a.join(", "),
            b.join(", ")
        ));
    }
    for (o, h, _) in servers(old, new) {
        if settings(o) != settings(h) {
            problems.push(format!(
                "[[http]] on {}: its settings changed: a reload changes only its routes",
                h.listen
            ));
        }
    }
    problems
}

/// The `[[http]]` entries of `old` and `new` that are one server: the
/// k-th entry listening on an address in one is the k-th on it in the
/// other (two may name `127.0.0.1:0`); with k.
pub(super) fn servers<'a>(
    old: &'a Manifest,
    new: &'a Manifest,
) -> Vec<(&'a HttpSpec, &'a HttpSpec, usize)> {
    let nth = |m: &'a Manifest, listen: &str, k: usize| {
        m.http.iter().filter(|h| h.listen == listen).nth(k)
    };
    (old.http.iter().enumerate())
        .filter_map(|(i, o)| {
            let k = old.http[..i]
                .iter()
                .filter(|h| h.listen == o.listen)
                .count();
            nth(new, &o.listen, k).map(|n| (o, n, k))
        })
        .collect()
}

/// Compiles every module of `m`: a module loaded before whose file has
/// changed is compiled afresh and returned (installed only once the whole
/// manifest is good); one not loaded yet is loaded. Problems go to
/// `problems`.
pub(super) fn compile(
    rt: &Runtime,
    m: &Manifest,
    problems: &mut Vec<String>,
) -> Vec<(PathBuf, Entry, Arc<LoadedModule>)> {
    let mut fresh = Vec::new();
    for module in crate::system::modules(&m.tasks, &m.http) {
        let entry = match module.1 {
            ModuleUse::Task | ModuleUse::Wagi => Entry::Command,
            ModuleUse::Passive => Entry::Passive,
            ModuleUse::HttpComponent => Entry::Http,
        };
        match rt.recompile_changed(module.0, entry) {
            Some(Ok(loaded)) => fresh.push((module.0.clone(), entry, loaded)),
            Some(Err(e)) => problems.push(e.to_string()),
            None => {
                if let Err(e) = crate::system::load(rt, &module) {
                    problems.push(e.to_string());
                }
            }
        }
    }
    fresh
}

impl Plan {
    /// The steps that take a system from `old` to `new`, whose modules
    /// at `changed` were compiled afresh.
    pub(super) fn of(old: &Manifest, new: &Manifest, changed: &[PathBuf]) -> Plan {
        let tree = Tree { old, new };
        let mut plan = Plan::default();
        tree.supervisors(&mut plan);
        for t in &old.tasks {
            tree.old_task(t, &mut plan);
        }
        for t in &new.tasks {
            tree.new_task(t, changed, &mut plan);
        }
        plan.routes_of(old, new);
        plan
    }

    fn routes_of(&mut self, old: &Manifest, new: &Manifest) {
        let key = |r: &RouteSpec| format!("{r:?}");
        for (o, n, k) in servers(old, new) {
            let before: HashSet<String> = o.routes.iter().map(key).collect();
            let after: HashSet<String> = n.routes.iter().map(key).collect();
            for r in &n.routes {
                let was = o.routes.iter().any(|x| x.name == r.name);
                if !before.contains(&key(r)) {
                    let what = if was { "changed" } else { "added" };
                    self.route_lines
                        .push(format!("route {:?} on {} {what}", r.name, n.listen));
                }
            }
            for r in o.routes.iter().filter(|r| !after.contains(&key(r))) {
                if !n.routes.iter().any(|x| x.name == r.name) {
                    self.route_lines
                        .push(format!("route {:?} on {} removed", r.name, o.listen));
                }
            }
            self.routes.push((n.listen.clone(), k, n.routes.clone()));
        }
    }
}

/// The two manifests, for questions about their supervision trees.
struct Tree<'a> {
    old: &'a Manifest,
    new: &'a Manifest,
}

fn sup<'a>(m: &'a Manifest, name: &str) -> Option<&'a SupervisorSpec> {
    m.supervisors.iter().find(|s| s.name == name)
}

/// The supervisor of `m` that has `name` as a member.
fn parent<'a>(m: &'a Manifest, name: &str) -> Option<&'a str> {
    (m.supervisors.iter())
        .find(|s| s.members.iter().any(|x| x == name))
        .map(|s| s.name.as_str())
}

fn home(m: &Manifest, t: &TaskSpec) -> Home {
    match parent(m, &t.name) {
        Some(s) => Home::Sup(s.to_string()),
        None if t.restart != Restart::Temporary => Home::Root,
        None => Home::Nobody,
    }
}

impl Tree<'_> {
    /// Whether supervisor `s` differs between the manifests in what it
    /// supervises or where it is (not only in its terms).
    fn reshaped(&self, s: &str) -> bool {
        match (sup(self.old, s), sup(self.new, s)) {
            (Some(a), Some(b)) => {
                a.members != b.members || parent(self.old, s) != parent(self.new, s)
            }
            _ => true,
        }
    }

    /// Whether the old manifest's supervisor `s` is stopped: it or one
    /// above it is reshaped.
    fn stopped(&self, s: &str) -> bool {
        self.reshaped(s) || parent(self.old, s).is_some_and(|p| self.stopped(p))
    }

    /// Whether the new manifest's supervisor `s` is started afresh.
    fn started(&self, s: &str) -> bool {
        self.reshaped(s) || parent(self.new, s).is_some_and(|p| self.started(p))
    }

    fn supervisors(&self, plan: &mut Plan) {
        for s in &self.old.supervisors {
            let top = !parent(self.old, &s.name).is_some_and(|p| self.stopped(p));
            if self.stopped(&s.name) && top {
                plan.reshape.remove_sups.push(s.name.clone());
            }
        }
        for s in &self.new.supervisors {
            let top = !parent(self.new, &s.name).is_some_and(|p| self.started(p));
            if self.started(&s.name) {
                if top {
                    plan.reshape.add.push(self.subtree(s));
                }
            } else if sup(self.old, &s.name).is_some_and(|o| terms(o) != terms(s)) {
                plan.reshape.tune.push(s.clone());
            }
        }
    }

    /// Supervisor `s` of the new manifest with those under it (it first),
    /// and their tasks.
    fn subtree(&self, s: &SupervisorSpec) -> (Vec<SupervisorSpec>, Vec<TaskSpec>) {
        let (mut sups, mut tasks) = (vec![s.clone()], Vec::new());
        let mut i = 0;
        while i < sups.len() {
            for m in sups[i].members.clone() {
                match sup(self.new, &m) {
                    Some(c) => sups.push(c.clone()),
                    None => tasks.extend(self.new.tasks.iter().find(|t| t.name == m).cloned()),
                }
            }
            i += 1;
        }
        (sups, tasks)
    }

    /// Whether a task at `home` is stopped (old) or started (new) with
    /// its supervisor.
    fn moves_with(&self, home: &Home, old: bool) -> bool {
        match home {
            Home::Sup(s) if old => self.stopped(s),
            Home::Sup(s) => self.started(s),
            _ => false,
        }
    }

    /// An old task: removed, or taken from where it was.
    fn old_task(&self, t: &TaskSpec, plan: &mut Plan) {
        let was = home(self.old, t);
        let now = self.new.tasks.iter().find(|n| n.name == t.name);
        let stays = now.is_some_and(|n| home(self.new, n) == was && !self.moves_with(&was, true));
        if now.is_none() {
            plan.removed.push(t.name.clone());
        }
        if stays {
            return;
        }
        match was {
            Home::Nobody => plan.stop.push(t.name.clone()),
            Home::Root => plan.reshape.remove_tasks.push(t.name.clone()),
            // Stopped with its supervisor, or taken from one kept.
            Home::Sup(s) if !self.stopped(&s) => plan.reshape.remove_tasks.push(t.name.clone()),
            Home::Sup(_) => {}
        }
    }

    /// A new task: added, put where it now is, or changed in place.
    fn new_task(&self, t: &TaskSpec, changed: &[PathBuf], plan: &mut Plan) {
        let now = home(self.new, t);
        let before = self.old.tasks.iter().find(|o| o.name == t.name);
        let stays =
            before.is_some_and(|o| home(self.old, o) == now && !self.moves_with(&now, false));
        if let (true, Some(o)) = (stays, before) {
            if o.restart != t.restart {
                plan.reshape.restart.push((t.name.clone(), t.restart));
            }
            if format!("{o:?}") != format!("{t:?}") || changed.contains(&t.module) {
                plan.upgrade.push(t.clone());
            }
            return;
        }
        match now {
            Home::Nobody => plan.spawn.push(t.clone()),
            Home::Root => plan.reshape.adopt.push(t.clone()),
            Home::Sup(_) => {} // started with its supervisor
        }
    }
}

/// A supervisor's terms: what changes in place.
fn terms(s: &SupervisorSpec) -> String {
    format!(
        "{:?} {:?} {:?} {:?}",
        s.strategy, s.intensity, s.backoff, s.cpu_limit
    )
}

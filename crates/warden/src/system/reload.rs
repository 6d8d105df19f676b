//! Manifest reload (`warden reload`, SIGHUP to `warden run`): a changed
//! manifest applied to the running system.
//!
//! The new manifest is checked whole before anything changes: parsed
//! with every problem found, each module it names compiled (one whose
//! file changed since it was loaded compiled afresh), each task and route
//! checked against its memory limit, and the parts a running system
//! cannot change refused (`[runtime]`, groups, devices, the cluster,
//! telemetry, the web servers' addresses and settings). A bad manifest
//! changes nothing, and the answer lists every problem.
//!
//! A good one is compared with the manifest the system last ran, entry
//! by entry (`reload::plan`):
//! - a task added is started (under its supervisor, if it has one); a
//!   task removed is killed, its end no failure;
//! - a task whose entry or module file changed is upgraded in place (see
//!   `system::upgrade`): its calls go on to the new task without a
//!   failure, and its limits, grants and shares are the new entry's;
//! - a supervisor whose terms changed keeps its members and takes the new
//!   terms; one added, removed, or whose members changed is stopped and
//!   started again with its members (a task moved from one supervisor to
//!   another is restarted under the new one);
//! - each web server's routes are replaced: unchanged routes keep their
//!   counters, queues and upgrades; requests in flight finish on the
//!   route they found.

mod plan;

use super::upgrade::Upgrades;
use crate::{Manifest, Runtime};
use std::path::{Path, PathBuf};

impl Upgrades {
    /// Applies the manifest at `path` (`None`: the system's own) to the
    /// running system: what was done, line by line, or every problem.
    pub(super) fn reload(&self, rt: &Runtime, path: Option<&Path>) -> Result<String, String> {
        let (path, old) = self.source(path)?;
        let shown = path.display().to_string();
        let prefixed = |all: Vec<String>| {
            (all.iter())
                .map(|p| format!("{shown}: {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let unchanged = |all| format!("{}\nthe reload changed nothing", prefixed(all));
        // The problems of the entries that parsed are found too.
        let (new, mut problems) = read(&path).map_err(unchanged)?;
        problems.extend(plan::fixed_parts(&old, &new));
        let fresh = plan::compile(rt, &new, &mut problems);
        for (who, why) in super::misfits(rt, &new.tasks, &new.http) {
            problems.push(format!("{who}: {why}"));
        }
        if !problems.is_empty() {
            return Err(unchanged(problems));
        }
        let changed: Vec<PathBuf> = fresh.iter().map(|(p, _, _)| p.clone()).collect();
        for (p, entry, m) in fresh {
            rt.install_module(&p, entry, m);
        }
        let plan = plan::Plan::of(&old, &new, &changed);
        let (done, failed) = self.apply(rt, plan, &new);
        self.set_source(path, new);
        match failed.is_empty() {
            true if done.is_empty() => Ok(format!("{shown}: nothing changed")),
            true => Ok(done.join("\n")),
            false => Err([done, failed].concat().join("\n")),
        }
    }

    /// Carries out `plan`: what was done and what failed, line by line.
    fn apply(&self, rt: &Runtime, plan: plan::Plan, new: &Manifest) -> (Vec<String>, Vec<String>) {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        for name in &plan.stop {
            for id in super::upgrade::running(rt, name) {
                super::upgrade::stop(rt, id, "removed by a manifest reload");
            }
            done.push(format!("task {name:?} stopped"));
        }
        match self.supervisor().reshape(plan.reshape) {
            Ok(lines) => done.extend(lines),
            Err(lines) => failed.extend(lines),
        }
        for spec in &plan.spawn {
            match rt.spawn(spec) {
                Ok(id) => done.push(format!("task {:?} started as task {id}", spec.name)),
                Err(e) => failed.push(format!("task {:?} did not start: {e}", spec.name)),
            }
        }
        self.forget_specs(&plan.removed);
        for spec in plan.upgrade {
            match self.reload_task(rt, spec) {
                Ok(line) => done.push(line),
                Err(line) => failed.push(line),
            }
        }
        self.note_specs(&new.tasks);
        for (listen, k, specs) in &plan.routes {
            let mut on = self.servers().iter().filter(|r| r.listen() == listen);
            if let Some(routes) = on.nth(*k) {
                routes.replace(specs);
            }
        }
        done.extend(plan.route_lines);
        (done, failed)
    }
}

/// Largest manifest a reload reads.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// The manifest at `path` (its good entries) and its problems, or the
/// problems of one that is not TOML enough to go on.
fn read(path: &Path) -> Result<(Manifest, Vec<String>), Vec<String>> {
    let meta = std::fs::metadata(path).map_err(|e| vec![format!("cannot read it: {e}")])?;
    if !meta.is_file() || meta.len() > MAX_MANIFEST_BYTES {
        return Err(vec![format!(
            "not a manifest: a manifest is a regular file of at most {} MiB",
            MAX_MANIFEST_BYTES >> 20
        )]);
    }
    let text = std::fs::read_to_string(path).map_err(|e| vec![format!("cannot read it: {e}")])?;
    let base = path.parent().unwrap_or(Path::new("."));
    Manifest::parse_all(&text, base)
}

//! Live upgrade: a running service's code replaced without a failed call
//! (JX replaces components at run time; Erlang loads code hot).
//!
//! A task is upgraded by starting a new task from its spec with the new
//! module, marked as replacing the old one. When the new task registers a
//! name the old one holds, it takes the name over, and the old service is
//! retired in favour of the new: calls queued there, and calls through
//! portals clients already hold, go to the new server (`Service::retire`).
//! The old server answers the calls it had received, then finds its
//! service gone and ends; one that has not ended after its `drain` time
//! (5 s by default) is killed (the upgrade's answer does not wait for
//! this). A task that holds no names is replaced at once: the new one
//! started, the old killed. A supervised task's supervisor watches the
//! new task from the start, and the old one's end is not a failure.
//!
//! A server whose new code exports `warden_upgrade_restore` is first
//! asked for its state (`task::handover`): the old task saves it in its
//! `recv`, between calls, and takes no call after that; the new task
//! starts with the bytes. A manifest reload's upgrades go the same way,
//! with the task's new entry in place of its old (`reload`).
//!
//! The upgrade is refused, and the old code keeps serving, if the new
//! module does not compile, the old task cannot hand its state over, or
//! the new task ends (or has not taken over every name of the old one)
//! within [`START`]. A per-request route's
//! upgrade swaps its template: requests whose task was spawned before run
//! the old module, those after it the new. Each upgrade keeps the code it
//! replaced, which `warden upgrade --rollback` puts back.

use super::supervise::Handle;
use crate::http::{RouteModule, RouteTemplate, Routes};
use crate::task::handover::Handed;
use crate::task::{TaskId, TaskSpec};
use crate::{Manifest, Runtime};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an operator's restart waits for the killed task's end.
const STOPPED: Duration = Duration::from_secs(5);

/// How long the new task may take to take over the old one's names.
pub const START: Duration = Duration::from_secs(5);

/// What a system's live upgrades work on.
pub(super) struct Upgrades {
    /// Each task's current spec, by name.
    specs: Mutex<HashMap<String, TaskSpec>>,
    /// The module each task or route ran before its last upgrade.
    previous: Mutex<HashMap<String, PathBuf>>,
    /// The web servers' routes, in the order of the servers.
    servers: Vec<Arc<Routes>>,
    /// The manifest the system last ran, and where it is (for reloads).
    source: Mutex<Option<(PathBuf, Manifest)>>,
    supervisor: Handle,
    /// Held through an upgrade: one at a time, so that two upgrades of
    /// one task cannot both take it over.
    one_at_a_time: Mutex<()>,
}

impl Upgrades {
    pub(super) fn new(
        tasks: &[TaskSpec],
        servers: Vec<Arc<Routes>>,
        source: Option<(PathBuf, Manifest)>,
        supervisor: Handle,
    ) -> Upgrades {
        let specs = tasks.iter().map(|t| (t.name.clone(), t.clone())).collect();
        Upgrades {
            specs: Mutex::new(specs),
            previous: Mutex::default(),
            servers,
            source: Mutex::new(source),
            supervisor,
            one_at_a_time: Mutex::new(()),
        }
    }

    /// Carries out an operator's `op` on `name` (one at a time).
    pub(super) fn operate(
        &self,
        rt: &Runtime,
        name: &str,
        op: crate::Operation,
    ) -> Result<String, String> {
        let _one = self.one_at_a_time.lock().unwrap_or_else(|e| e.into_inner());
        match op {
            crate::Operation::Upgrade(m) => self.upgrade(rt, name, Some(m)),
            crate::Operation::Rollback => self.upgrade(rt, name, None),
            crate::Operation::Restart => self.restart(rt, name),
            crate::Operation::Spawn(spec) => self.adopt(spec),
            crate::Operation::Reload(path) => self.reload(rt, path),
        }
    }

    /// The manifest the system last ran, with the path of the one to
    /// run now (`path`, or its own).
    pub(super) fn source(&self, path: Option<&Path>) -> Result<(PathBuf, Manifest), String> {
        let source = self.source.lock().unwrap_or_else(|e| e.into_inner());
        let Some((own, m)) = source.as_ref() else {
            return Err(
                "this system was not started from a manifest: there is none to reload".into(),
            );
        };
        Ok((path.unwrap_or(own).to_path_buf(), m.clone()))
    }

    pub(super) fn set_source(&self, path: PathBuf, m: Manifest) {
        *self.source.lock().unwrap_or_else(|e| e.into_inner()) = Some((path, m));
    }

    pub(super) fn supervisor(&self) -> &Handle {
        &self.supervisor
    }

    pub(super) fn servers(&self) -> &[Arc<Routes>] {
        &self.servers
    }

    /// Forgets the specs of tasks a reload removed.
    pub(super) fn forget_specs(&self, names: &[String]) {
        let mut specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        for n in names {
            specs.remove(n);
        }
    }

    /// Takes `tasks` as the specs of the tasks of their names.
    pub(super) fn note_specs(&self, tasks: &[TaskSpec]) {
        let mut specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        for t in tasks {
            specs.insert(t.name.clone(), t.clone());
        }
    }

    /// A reload's upgrade of the task `spec` names to `spec`; one not
    /// running just takes the new spec for its next start.
    pub(super) fn reload_task(&self, rt: &Runtime, spec: TaskSpec) -> Result<String, String> {
        let name = spec.name.clone();
        let old = self.spec(&name)?;
        if running(rt, &name).is_empty() && !self.supervisor.supervises(&name) {
            return Ok(format!(
                "task {name:?} is not running: its new entry applies when it is started again"
            ));
        }
        self.upgrade_task(rt, old, spec)
    }

    /// Starts `spec`, spawned by an operator with a restart policy, under
    /// the root supervisor; a name the system's tasks have is refused.
    fn adopt(&self, spec: &TaskSpec) -> Result<String, String> {
        let mut specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        if specs.contains_key(&spec.name) {
            return Err(format!(
                "the system has a task named {:?} already: a supervised task's name is its own",
                spec.name
            ));
        }
        let id = self.supervisor.adopt(spec.clone())?;
        specs.insert(spec.name.clone(), spec.clone());
        Ok(format!(
            "task {:?} started as task {id} under the root supervisor",
            spec.name
        ))
    }

    /// Starts the task `name` afresh from its spec (a supervised one
    /// through its supervisor), killing the one running first.
    fn restart(&self, rt: &Runtime, name: &str) -> Result<String, String> {
        if self.route(name).is_some() {
            return Err(format!(
                "{name:?} is a per-request route: each request has a fresh task already"
            ));
        }
        let spec = self.spec(name)?;
        let new = match self.supervisor.supervises(name) {
            true => self.supervisor.restart(name)?,
            false => {
                for id in running(rt, name) {
                    stop(rt, id, "restarted by the operator");
                }
                rt.spawn(&spec).map_err(|e| e.to_string())?
            }
        };
        Ok(format!("task {name:?} restarted: task {new}"))
    }

    /// Upgrades the task or per-request route `name` to `module` (`None`:
    /// back to its code before its last upgrade).
    fn upgrade(&self, rt: &Runtime, name: &str, module: Option<&Path>) -> Result<String, String> {
        if let Some(m) = module.filter(|m| !m.is_absolute() || !m.is_file()) {
            let why = format!("{} is not a file named by an absolute path", m.display());
            return Err(refused(name, &why));
        }
        // A per-request route's template, or the task's spec.
        let target = match self.route(name) {
            Some((_, component, m)) => Ok((component, m)),
            None => Err(self.spec(name)?),
        };
        let current = match &target {
            Ok((_, m)) => m.get().module.clone(),
            Err(spec) => spec.module.clone(),
        };
        let module = match module {
            Some(m) => m.to_path_buf(),
            None => (self.previous.lock().unwrap_or_else(|e| e.into_inner()))
                .get(name)
                .cloned()
                .ok_or_else(|| format!("{name:?} has no earlier code to roll back to"))?,
        };
        let done = match target {
            Ok((component, m)) => upgrade_route(rt, name, component, &m, &module)?,
            Err(spec) => {
                let mut new = spec.clone();
                new.module = module.clone();
                self.upgrade_task(rt, spec, new)?
            }
        };
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        previous.insert(name.to_string(), current);
        Ok(done)
    }

    /// The per-request route named `name`, if there is one.
    fn route(&self, name: &str) -> Option<RouteTemplate> {
        (self.servers.iter())
            .flat_map(|s| s.templates())
            .find(|(n, _, _)| n == name)
    }

    fn spec(&self, name: &str) -> Result<TaskSpec, String> {
        let specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        specs
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no task or per-request route of this system is named {name:?}"))
    }

    /// A task's upgrade from `old_spec` to `spec`: the new task started,
    /// the old one's names taken over, the old one drained.
    fn upgrade_task(
        &self,
        rt: &Runtime,
        old_spec: TaskSpec,
        spec: TaskSpec,
    ) -> Result<String, String> {
        let name = &old_spec.name.clone();
        let module = &spec.module.clone();
        compile(rt, &spec, module).map_err(|e| refused(name, &e))?;
        let running = (running(rt, name).into_iter().max())
            .ok_or_else(|| refused(name, "it is not running"))?;
        let names = rt.names_of(running);
        let mut spec = spec;
        spec.handed = hand_over(rt, running, &names, &spec).map_err(|e| refused(name, &e))?;
        let started = match self.supervisor.supervises(name) {
            true => self.supervisor.replace(spec.clone()),
            false => {
                let mut s = spec.clone();
                s.replaces = Some(running);
                rt.spawn(&s)
                    .map(|new| (running, new))
                    .map_err(|e| e.to_string())
            }
        };
        let (old, new) = started.map_err(|e| {
            rt.cancel_handover(running);
            refused(name, &e)
        })?;
        if let Err(why) = took_over(rt, &names, new) {
            let _ = rt.kill(new, "its upgrade was rolled back");
            rt.cancel_handover(old);
            if self.supervisor.supervises(name) {
                self.supervisor.revert(old_spec, old);
            }
            return Err(refused(name, &why));
        }
        spec.handed = None;
        // The old task answers what it had received on its own time.
        let (runtime, at_once) = (rt.clone(), names.is_empty());
        let limit = if at_once {
            Duration::ZERO
        } else {
            old_spec.drain
        };
        std::thread::spawn(move || drain(&runtime, old, limit));
        let path = module.display().to_string();
        let fields = serde_json::json!({ "replaced": old, "module": path });
        rt.note_upgrade(name, new, fields);
        let mut specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        specs.insert(name.to_string(), spec);
        Ok(format!(
            "task {name:?} upgraded: task {new} runs {path} in place of task {old}"
        ))
    }
}

/// The state task `old` hands to the new code of its upgrade (`spec`), if
/// both take part: the old one serves (holds `names`) and the new module
/// exports `warden_upgrade_restore`; an old one without
/// `warden_upgrade_save` hands nothing. The old task takes no call after
/// it (they wait for the new one) unless the upgrade is cancelled.
fn hand_over(
    rt: &Runtime,
    old: TaskId,
    names: &[String],
    spec: &TaskSpec,
) -> Result<Option<Handed>, String> {
    if names.is_empty() || !rt.restores(&spec.module) {
        return Ok(None);
    }
    if !rt.ask_handover(old, spec.ipc.max_message_bytes) {
        return Err("a hand-over of its state is under way already".into());
    }
    match rt.take_handover(old, START) {
        None => Err(format!(
            "the old code did not hand its state over within {START:?} \
             (a task hands it over in recv, between calls)"
        )),
        Some(Err(why)) => Err(format!("the old code could not hand its state over: {why}")),
        Some(Ok(state)) => Ok(state.map(|b| Handed(Arc::new(b)))),
    }
}

/// The live tasks of the system's task `name` (not a route's).
pub(super) fn running(rt: &Runtime, name: &str) -> Vec<TaskId> {
    (rt.live_tasks().into_iter())
        .filter(|v| v.name == name && v.route.is_none())
        .map(|v| v.id)
        .collect()
}

/// Kills task `id` for an operator (`why`) and waits (at most 5 s) for
/// its end, so that its names are free for a new one; its end is no
/// failure of the system's.
pub(super) fn stop(rt: &Runtime, id: TaskId, why: &str) {
    rt.mark_replaced(id);
    if rt.kill(id, why).is_ok() {
        let _ = rt.wait_timeout(id, Some(STOPPED));
    }
}

/// The line saying an upgrade was refused and why.
fn refused(name: &str, why: &str) -> String {
    format!("upgrade of {name:?} refused: {why}; it keeps its old code")
}

/// Loads `module` as `spec`'s task would need it.
fn compile(rt: &Runtime, spec: &TaskSpec, module: &Path) -> Result<(), String> {
    let mut next = spec.clone();
    next.module = module.to_path_buf();
    rt.load_task_module(&next)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Waits until task `new` holds every one of `names` (it has taken them
/// over), or says why it did not.
fn took_over(rt: &Runtime, names: &[String], new: TaskId) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let live = rt.live_tasks().iter().any(|v| v.id == new);
        if names.iter().all(|n| rt.owner_of(n) == Some(new)) {
            return match live || names.is_empty() {
                true => Ok(()),
                false => Err(ended(rt, new)),
            };
        }
        if !live {
            return Err(ended(rt, new));
        }
        if start.elapsed() > START {
            let names = names.join(", ");
            return Err(format!(
                "the new code did not register {names} within {START:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How task `id` ended, in words.
fn ended(rt: &Runtime, id: TaskId) -> String {
    let how = rt.wait_timeout(id, Some(Duration::ZERO)).ok().flatten();
    match how {
        Some(r) => format!(
            "the new code ended before it served ({}{})",
            r.status,
            r.reason.map(|w| format!(": {w}")).unwrap_or_default()
        ),
        None => "the new code ended before it served".into(),
    }
}

/// Lets task `old` end once it has answered what it had received (its
/// services were retired); kills it past `limit` (its spec's `drain`; 0
/// for a task that served nothing).
fn drain(rt: &Runtime, old: TaskId, limit: Duration) {
    rt.mark_replaced(old);
    if let Ok(None) = rt.wait_timeout(old, Some(limit)) {
        let why = match limit.is_zero() {
            true => "upgraded: replaced by a new task",
            false => "upgraded: it did not end within its drain time",
        };
        let _ = rt.kill(old, why);
    }
}

/// A per-request route's upgrade: its template swapped once the new
/// module compiles and fits.
fn upgrade_route(
    rt: &Runtime,
    name: &str,
    component: bool,
    route: &RouteModule,
    module: &Path,
) -> Result<String, String> {
    let mut template = TaskSpec::clone(&route.get());
    template.module = module.to_path_buf();
    let loaded = match component {
        true => rt.load_http_component(module).map(drop),
        false => rt.load_module(module).map(drop),
    };
    loaded
        .and_then(|()| rt.check_route_fits(&template, component))
        .map_err(|e| refused(name, &e.to_string()))?;
    route.set(template);
    let path = module.display().to_string();
    rt.note_upgrade(
        name,
        TaskId(0),
        serde_json::json!({ "route": name, "module": path }),
    );
    Ok(format!(
        "route {name:?} upgraded: its requests from now on run {path}"
    ))
}

//! Spawning a task: its module loaded, its shared state and place in the
//! task table, its store built, and its future handed to the executor.

use super::store::StoreSeed;
use super::{passive, run, Child, Error, Group, Runtime, Watch, CAP_WINDOW};
use crate::ipc::name_allowed;
use crate::module::LoadedModule;
use crate::report::TaskReport;
use crate::sched::{Cap, TaskSched};
use crate::task::{Inheritance, TaskId, TaskShared, TaskSpec, TaskStatus};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a spawner asks for besides the spec.
#[derive(Default)]
pub(super) struct Launch {
    /// Gets the task's report when it finishes.
    watch: Option<Watch>,
    /// Gets how it ended as soon as its code returns (see `run::run`).
    ended: Option<tokio::sync::oneshot::Sender<TaskStatus>>,
    /// Its environment, instead of the spec's.
    env: Option<crate::host::Strings>,
    /// Started on the spawning thread if a worker is idle (see
    /// [`crate::executor::Executor::spawn_here`]).
    here: bool,
    /// The request an HTTP component task is started for.
    incoming: Option<Box<crate::host::Incoming>>,
}

impl Runtime {
    /// Starts a task. Its module is loaded first if it is not yet.
    pub fn spawn(&self, spec: &TaskSpec) -> Result<TaskId, Error> {
        self.spawn_with(spec, None).map(|t| t.id)
    }

    /// Runs a task to its end and returns its report: [`Runtime::spawn`]
    /// and [`Runtime::wait`] in one, for a caller that would only wait.
    /// While some worker has no task to run, the calling thread runs the
    /// task itself, as that worker would have: its first slice, and
    /// further ones until 100 µs have passed (the rest, if any, on the
    /// workers); a short task then ends before this returns, with no
    /// thread switch at all. Slices run on the caller's thread are charged
    /// their wall time as CPU. The report is returned even if the runtime
    /// keeps none (`max_reports = 0`). Like [`Runtime::wait`], it blocks
    /// the calling thread: not for async code, nor for a host service's
    /// closure (which runs on a worker).
    pub fn run(&self, spec: &TaskSpec) -> Result<TaskReport, Error> {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let launch = Launch {
            watch: Some(tx.into()),
            here: true,
            ..Launch::default()
        };
        let id = self.spawn_inner(spec, None, launch)?.id;
        let tasks = &self.inner.tasks;
        let mut t = tasks.lock();
        loop {
            // The report is sent under the table's lock, before waiters
            // are woken: checked under it, none is missed.
            match rx.try_recv() {
                Ok(report) => return Ok(report),
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    return Err(Error::NoSuchTask(id))
                }
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => t = tasks.wait(t, None),
            }
        }
    }

    /// Starts a task and returns, with its id, a receiver of its report
    /// for when it finishes (for awaiting it from async code).
    pub fn spawn_watched(
        &self,
        spec: &TaskSpec,
    ) -> Result<(TaskId, tokio::sync::oneshot::Receiver<TaskReport>), Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let launch = Launch {
            watch: Some(tx.into()),
            ..Launch::default()
        };
        let shared = self.spawn_inner(spec, None, launch)?;
        Ok((shared.id, rx))
    }

    /// [`Runtime::spawn_watched`], and a receiver of how the task ended
    /// as soon as its code returns or traps, before its store is released
    /// (an HTTP handler's answer need not wait for that). A task killed
    /// before it ran or while blocked sends only its report. The task's
    /// environment is `env`, not the spec's.
    pub(crate) fn spawn_ending(
        &self,
        spec: &TaskSpec,
        env: crate::host::Strings,
    ) -> Result<
        (
            TaskId,
            tokio::sync::oneshot::Receiver<TaskStatus>,
            tokio::sync::oneshot::Receiver<TaskReport>,
        ),
        Error,
    > {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (end_tx, end_rx) = tokio::sync::oneshot::channel();
        let launch = Launch {
            watch: Some(tx.into()),
            ended: Some(end_tx),
            env: Some(env),
            // Not on the server's thread: its answer goes out as soon as
            // the handler's code returns, while a worker releases the
            // store (run here, the release came first).
            here: false,
            incoming: None,
        };
        let shared = self.spawn_inner(spec, None, launch)?;
        Ok((shared.id, end_rx, rx))
    }

    /// [`Runtime::spawn_ending`] for an HTTP component: the task, from
    /// the `wasi:http/proxy` component `spec` names, handles `incoming`
    /// (whose response goes where it says) with the spec's environment.
    pub(crate) fn spawn_incoming(
        &self,
        spec: &TaskSpec,
        incoming: crate::host::Incoming,
    ) -> Result<
        (
            TaskId,
            tokio::sync::oneshot::Receiver<TaskStatus>,
            tokio::sync::oneshot::Receiver<TaskReport>,
        ),
        Error,
    > {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (end_tx, end_rx) = tokio::sync::oneshot::channel();
        let launch = Launch {
            watch: Some(tx.into()),
            ended: Some(end_tx),
            incoming: Some(Box::new(incoming)),
            ..Launch::default()
        };
        let shared = self.spawn_inner(spec, None, launch)?;
        Ok((shared.id, end_rx, rx))
    }

    /// Spawns a task whose report goes to `watch`.
    pub(super) fn spawn_with_watch(
        &self,
        spec: &TaskSpec,
        watch: Watch,
    ) -> Result<Arc<TaskShared>, Error> {
        let launch = Launch {
            watch: Some(watch),
            ..Launch::default()
        };
        self.spawn_inner(spec, None, launch)
    }

    /// Spawns a task, as a child of another if `child` says so.
    pub(crate) fn spawn_with(
        &self,
        spec: &TaskSpec,
        child: Option<Child>,
    ) -> Result<Arc<TaskShared>, Error> {
        self.spawn_inner(spec, child, Launch::default())
    }

    /// The server a task is, living as long as its system, if it is one;
    /// and whether it keeps the system going: a server other nodes call
    /// (its name exported from a node in a cluster).
    fn serving_of(
        &self,
        spec: &TaskSpec,
        (passive, typed): (
            &Option<Arc<crate::host::Passive>>,
            &Option<Arc<crate::host::TypedServer>>,
        ),
    ) -> (Option<Arc<dyn crate::task::Serving>>, bool) {
        let serving: Option<Arc<dyn crate::task::Serving>> = match (passive, typed) {
            (Some(p), _) => Some(p.clone()),
            (_, Some(t)) => Some(t.clone()),
            _ => None,
        };
        let foreground = self.inner.kernel.node.get().is_some()
            && (spec.ipc.provides.first()).is_some_and(|n| name_allowed(&spec.ipc.export, n));
        (serving, foreground)
    }

    fn spawn_inner(
        &self,
        spec: &TaskSpec,
        child: Option<Child>,
        launch: Launch,
    ) -> Result<Arc<TaskShared>, Error> {
        let began = crate::clock::ticks::now();
        let module = self.entry_module(spec, child.is_none(), launch.incoming.is_some())?;
        let inner = &*self.inner;
        let group = self.group_of(spec)?;
        let shared = Arc::new(self.task_shared(spec, group, child.as_ref()));
        let sched = sched_of(spec, group, child.as_ref());
        let passive = passive_of(spec, &shared);
        let typed = typed_of(spec, &shared, (&module, launch.incoming.is_some()))?;
        let serving = self.serving_of(spec, (&passive, &typed));
        // Take a slot in the task table first, so that concurrent spawns
        // cannot together exceed `max_tasks`. A request's handler (told
        // how it ended) does not wait for surplus.
        let Launch {
            watch,
            ended,
            env,
            here,
            incoming,
        } = launch;
        self.admit(&shared, ended.is_none(), || {
            let (limit, room) = (spec.limits.memory_limit, inner.room);
            inner.tasks.enter(&shared, limit, room, watch, serving)
        })?;
        let link_parent = match &child {
            Some(c) => c.net.link_parent,
            None => group.map(|g| g.link_node),
        };
        let seed = self
            .store_seed(spec, &module, &shared, child, link_parent, env)
            .map_err(|message| {
                inner.tasks.leave(&shared);
                Error::Spawn {
                    name: spec.name.clone(),
                    message,
                }
            })?;
        shared.event(
            "spawn",
            || serde_json::json!({ "parent": shared.parent().map(|p| p.id), "module": module.path }),
        );
        let future = match typed {
            Some(server) => self.typed_future(spec, &module, seed, server),
            None => self.task_future(spec, &module, seed, &shared, passive, (ended, incoming)),
        };
        shared
            .create_ns
            .fetch_add(crate::clock::ticks::ns_since(began), Ordering::Relaxed);
        match here {
            true => inner.exec.spawn_here(shared.clone(), future, &sched),
            false => inner.exec.spawn(shared.clone(), future, &sched),
        }
        Ok(shared)
    }

    /// The module a task runs, loaded (and checked, for a passive task;
    /// as an HTTP component, for a request's); for a task the host spawns
    /// (`first`), the modules its children may come from too: compiled
    /// now, by the spawner, not later on a worker in the middle of a
    /// guest's call.
    fn entry_module(
        &self,
        spec: &TaskSpec,
        first: bool,
        request: bool,
    ) -> Result<Arc<LoadedModule>, Error> {
        if spec.passive && spec.serves.is_empty() {
            spec.check_passive().map_err(|message| Error::Spawn {
                name: spec.name.clone(),
                message,
            })?;
        }
        let module = match request {
            true => self.load_http_component(&spec.module)?,
            false => self.load_task_module(spec)?,
        };
        if first {
            for (_, m) in &spec.ipc.modules {
                self.load_module(m)?;
            }
        }
        Ok(module)
    }

    /// Whether `spec`'s task can start at all: its module (loaded first,
    /// if it is not yet) fits its memory limit. A task that does not is
    /// still spawned, and its start traps ("cannot start"): one task of a
    /// system cannot stop the others starting. `warden check` reports it,
    /// and a single program's run refuses it (see `System::start_with`).
    pub fn check_fits(&self, spec: &TaskSpec) -> Result<(), Error> {
        fits(spec, &*self.load_task_module(spec)?)
    }

    /// As [`Runtime::check_fits`], for a route's per-request template: its
    /// module, or its `wasi:http` component if `component`.
    pub fn check_route_fits(&self, template: &TaskSpec, component: bool) -> Result<(), Error> {
        let module = match component {
            true => self.load_http_component(&template.module)?,
            false => self.load_module(&template.module)?,
        };
        fits(template, &module)
    }

    /// The group a task's spec names, if any.
    fn group_of(&self, spec: &TaskSpec) -> Result<Option<&Group>, Error> {
        spec.sched
            .group
            .as_ref()
            .map(|name| {
                self.inner
                    .groups
                    .get(name)
                    .ok_or_else(|| Error::NoSuchGroup(name.clone()))
            })
            .transpose()
    }

    /// What the executor polls for a task: its module's start function,
    /// or a passive task's service loop.
    fn task_future(
        &self,
        spec: &TaskSpec,
        module: &Arc<LoadedModule>,
        seed: StoreSeed,
        shared: &Arc<TaskShared>,
        passive: Option<Arc<crate::host::Passive>>,
        (ended, incoming): (Ended, Option<Box<crate::host::Incoming>>),
    ) -> crate::executor::TaskFuture {
        let Some(p) = passive else {
            let seed = Box::new(seed);
            return Box::pin(run(module.clone(), seed, shared.clone(), ended, incoming));
        };
        let crate::module::Code::Core { pre, .. } = &module.code else {
            unreachable!("a passive task's module is a core module (module::Entry::Passive)")
        };
        let mut store = seed.grow(module.engine());
        let on_tick = p.clone();
        store.epoch_deadline_callback(move |_| crate::host::passive_on_tick(&on_tick));
        let name = spec.ipc.provides[0].clone();
        let exported = crate::ipc::name_allowed(&spec.ipc.export, &name);
        Box::pin(passive::run(
            pre.clone(),
            store,
            p,
            self.inner.kernel.clone(),
            (name, exported),
        ))
    }

    /// A typed server's future (see `host::typed::serve`).
    fn typed_future(
        &self,
        spec: &TaskSpec,
        module: &Arc<LoadedModule>,
        seed: StoreSeed,
        server: Arc<crate::host::TypedServer>,
    ) -> crate::executor::TaskFuture {
        let crate::module::Code::Component(linked) = &module.code else {
            unreachable!("a typed server's module is a component (typed_of)")
        };
        let mut store = seed.grow(module.engine());
        if server.is_passive() {
            let on_tick = server.clone();
            store.epoch_deadline_callback(move |_| on_tick.on_tick());
        }
        let name = spec.ipc.provides[0].clone();
        let exported = crate::ipc::name_allowed(&spec.ipc.export, &name);
        let pre = linked.instance_pre().clone();
        Box::pin(crate::host::typed_serve(
            pre,
            store,
            server,
            (name, exported),
        ))
    }

    /// A new task's shared state, with its parent (if a child) and groups.
    fn task_shared(
        &self,
        spec: &TaskSpec,
        group: Option<&Group>,
        child: Option<&Child>,
    ) -> TaskShared {
        let inner = &*self.inner;
        let id = TaskId(inner.next_id.fetch_add(1, Ordering::Relaxed));
        let mut task = TaskShared::new(
            id,
            spec.name.clone(),
            spec.limits.cpu_limit,
            spec.limits.memory_limit,
        );
        task.inherit = Inheritance::new(id, spec.sched.inheritance, spec.sched.params.priority);
        task.net = crate::task::NetAccount::new(spec.net.max_sockets);
        task.family.notify_memory =
            spec.limits.on_memory_limit == crate::limiter::MemoryPolicy::Notify;
        task.family.notify_cpu = spec.limits.on_cpu_limit_notify;
        task.groups = group.map(|g| g.chain.clone()).unwrap_or_default();
        task.label = spec.label.clone();
        task.trace = spec.trace;
        task.replaces = spec.replaces;
        task.handed = std::sync::Mutex::new(spec.handed.clone());
        task.event_log = inner.tasks.events.clone();
        task.root = Some(inner.tasks.root.clone());
        task.guarantee = spec.limits.memory_guarantee;
        task.memory_priority = spec.limits.memory_priority;
        task.memory_policy = spec.limits.on_memory_limit;
        if let Some(c) = child {
            task.set_parent(c.parent.clone(), c.carved_memory);
        }
        task
    }
}

/// Where a task's ending goes as soon as its code returns.
type Ended = Option<tokio::sync::oneshot::Sender<TaskStatus>>;

/// How the executor schedules a task: its parameters, group, cap and
/// parent.
fn sched_of(spec: &TaskSpec, group: Option<&Group>, child: Option<&Child>) -> TaskSched {
    TaskSched {
        params: spec.sched.params,
        group: group.map_or(0, |g| g.index),
        cap: spec
            .sched
            .cap
            .map(|c| Cap::new(c, CAP_WINDOW.as_nanos() as u64)),
        parent: child.map(|c| c.parent.id.0),
    }
}

/// Why a component servlet cannot be passive.
pub(crate) const SERVLET_ACTIVE: &str = "serves wasi:http/incoming-handler: a component servlet \
     is an active task (its handler writes its response body while the web server reads it); \
     drop `passive`";

/// A typed server's state, for a task given `serves`: its component
/// must export each interface, and it needs a name to serve them under.
///
/// A `wasi:http/proxy` component spawned as a task, not for a request
/// (`request`), is a component servlet: it serves
/// `wasi:http/incoming-handler` whether `serves` says so or not.
fn typed_of(
    spec: &TaskSpec,
    shared: &Arc<TaskShared>,
    (module, request): (&LoadedModule, bool),
) -> Result<Option<Arc<crate::host::TypedServer>>, Error> {
    use crate::module::{Code, Linked};
    let fail = |message: String| Error::Spawn {
        name: spec.name.clone(),
        message,
    };
    let serves = match &module.code {
        Code::Component(Linked::Proxy(_)) if !request && spec.serves.is_empty() => {
            if spec.ipc.provides.is_empty() {
                let path = spec.module.display();
                return Err(fail(format!("{path}: {}", crate::module::PROXY_AS_TASK)));
            }
            vec![crate::task::HTTP_HANDLER.to_string()]
        }
        _ if spec.serves.is_empty() => return Ok(None),
        _ => spec.serves.clone(),
    };
    let Code::Component(linked) = &module.code else {
        return Err(fail(
            "serves: only a component serves WIT interfaces".into(),
        ));
    };
    if spec.ipc.provides.is_empty() {
        return Err(fail(
            "serves: a typed server needs a `provides` name to serve under (the first)".into(),
        ));
    }
    if spec.passive && spec.serves_http() {
        return Err(fail(SERVLET_ACTIVE.into()));
    }
    let component = linked.component().clone();
    let exports = crate::host::served_exports(&component, &serves).map_err(fail)?;
    Ok(Some(crate::host::TypedServer::new(
        shared.clone(),
        component,
        exports,
        spec.passive
            .then(|| spec.call_cpu_limit.as_nanos().min(u64::MAX as u128) as u64),
    )))
}

/// A passive task's call state (none for an active task, or a typed
/// server).
fn passive_of(spec: &TaskSpec, shared: &Arc<TaskShared>) -> Option<Arc<crate::host::Passive>> {
    (spec.passive && spec.serves.is_empty()).then(|| {
        crate::host::Passive::new(
            shared.clone(),
            spec.call_cpu_limit.as_nanos().min(u64::MAX as u128) as u64,
        )
    })
}

/// Whether `spec`'s memory limit is at least the module's initial
/// memory (below it, the task could only trap at start).
fn fits(spec: &TaskSpec, module: &LoadedModule) -> Result<(), Error> {
    let initial = module.initial_memory_bytes();
    match spec.limits.memory_limit {
        Some(limit) if limit < initial => Err(Error::Spawn {
            name: spec.name.clone(),
            message: format!(
                "memory limit {} is below the {} of memory {} starts with",
                crate::units::format_size(limit),
                crate::units::format_size(initial),
                spec.module.display()
            ),
        }),
        _ => Ok(()),
    }
}

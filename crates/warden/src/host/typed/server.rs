//! A typed server: a component task serving WIT interfaces, and how a
//! call reaches it.
//!
//! Its functions are numbered once, from its component's type: every
//! function of every served interface, in order. A client's binding
//! maps each function it imports to that number (`Binding`).
//!
//! - **Passive** (`passive = true`): the store waits in a FIFO lock; a
//!   caller takes it and runs the function on its own thread, inside its
//!   own call (J-Kernel's LRMI). The caller's worker is busy with it, so
//!   the time is the caller's.
//! - **Active**: calls queue for the server task, which runs them one at
//!   a time on its own store and answers each (a hand-off).
//!
//! Either way a trap ends the server (its store may be half-changed):
//! the call in progress and every later one fail, naming the server and
//! what happened. A killed server's store goes with its task.
//!
//! Handles to its resources that clients let go (`held`) are released
//! on the server's own task: each runs its destructor there, before the
//! next call.

use crate::fifo::FifoLock;
use crate::host::TaskData;
use crate::ipc::service::ServiceRef;
use crate::task::{TaskShared, TaskStatus};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Func, Instance, ResourceAny, ResourceType, Val};
use wasmtime::Store;

/// One served function: its interface and name, and its counters.
pub(crate) struct Served {
    pub(crate) iface: String,
    pub(crate) name: String,
    pub(crate) stats: CallStats,
}

/// A served function's counters, as `/metrics` shows them.
#[derive(Default)]
pub(crate) struct CallStats {
    pub(crate) calls: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
}

impl CallStats {
    /// One call, which took `ns`.
    pub(crate) fn count(&self, ns: u64) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.cpu_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// One call failed.
    pub(crate) fn fail(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// One call copied `n` bytes, both ways.
    pub(crate) fn copied(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
}

/// A started server's store and its functions, by number.
pub(crate) struct Running {
    store: Store<TaskData>,
    funcs: Vec<Func>,
    /// Whether calls run on the calling thread's own stack, with no fiber
    /// of their own: a passive server whose component imports nothing
    /// (so nothing in it can wait; see [`run`]).
    sync: bool,
}

/// Makes a call's arguments in the server's own store, as the call
/// begins: what a component servlet's request is (its `wasi:http`
/// resources live in the server's table).
pub(crate) type MakeArgs =
    Box<dyn FnOnce(&mut Store<TaskData>) -> wasmtime::Result<Vec<Val>> + Send>;

/// Why a typed call failed: the kernel's error for it (`Timeout` for a
/// `call_timeout` passed, `PeerDied` for a server that trapped, was
/// killed or ended), and the reason naming the server.
pub(crate) struct Failed {
    pub(crate) errno: crate::ipc::Errno,
    pub(crate) why: String,
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed {
            errno: crate::ipc::Errno::PeerDied,
            why,
        }
    }
}

/// Where a call's answer goes: its results, or why it failed.
pub(crate) type Answer = tokio::sync::oneshot::Receiver<Result<Vec<Val>, String>>;

/// A call's arguments: lifted from a calling task, or made in the
/// server's store.
enum Args {
    Lifted(Vec<Val>),
    Made(MakeArgs),
}

/// Calls queued for an active server past which those whose callers
/// gave up are dropped as the next one queues.
const PURGE_AT: usize = 64;

/// A call for an active server, and where its answer goes.
struct Job {
    func: usize,
    args: Args,
    results: usize,
    /// The call's span, when its caller is traced.
    trace: Option<crate::telemetry::Context>,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Val>, String>>,
    /// The calling task, whose scheduling context the server runs on
    /// (none for the host's calls: the server's own context).
    client: Option<crate::task::TaskId>,
}

/// A caller's context lent to an active server for one call (CPU
/// inheritance, as for byte portal calls): withdrawn when the call ends
/// in any way, the caller's timeout and death included.
struct Lent<'a> {
    server: &'a TaskShared,
    client: crate::task::TaskId,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.server.inherit.withdraw(self.client);
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    waker: Option<Waker>,
    ending: Option<TaskStatus>,
    /// Why calls fail once the server has ended.
    gone: Option<String>,
    /// Handles to its resources that clients let go, to release.
    drops: Vec<ResourceAny>,
}

/// What the server task does next.
enum Work {
    Call(Job),
    Release(Vec<ResourceAny>),
}

/// A typed server task: what it serves and how calls reach it.
pub(crate) struct TypedServer {
    /// The server task.
    pub(crate) shared: Arc<TaskShared>,
    /// Its component, whose exports bindings are checked against.
    pub(crate) component: Component,
    /// The full names of the interfaces it serves (`example:kv/store@0.1.0`).
    pub(crate) serves: Vec<String>,
    /// Every served function, by number.
    pub(crate) funcs: Vec<Served>,
    /// The resource types its served interfaces define, once it runs:
    /// interface, name, type.
    pub(crate) resources: std::sync::OnceLock<Vec<(String, String, ResourceType)>>,
    passive: bool,
    /// For a passive server: when the call in progress began (ticks, 0
    /// between calls), and how long one call may run, ns.
    call_began: AtomicU64,
    call_limit_ns: u64,
    /// Set while an active server runs a call (so that ending it stops
    /// the call too).
    busy: std::sync::atomic::AtomicBool,
    store: FifoLock<Option<Running>>,
    queue: Mutex<Queue>,
    holder: Mutex<Option<ServiceRef>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TypedServer {
    /// The server of `shared`'s task running `component`, which serves
    /// `serves` (full export names, checked to be interfaces); passive
    /// if `passive` gives the most time one call may take, ns.
    pub(crate) fn new(
        shared: Arc<TaskShared>,
        component: Component,
        serves: Vec<String>,
        passive: Option<u64>,
    ) -> Arc<TypedServer> {
        let engine = component.engine().clone();
        let ty = component.component_type();
        let mut funcs = Vec::new();
        for iface in &serves {
            let Some(ComponentItem::ComponentInstance(inst)) =
                ty.get_export(&engine, iface).map(|e| e.ty)
            else {
                continue;
            };
            for (name, item) in inst.exports(&engine) {
                if let ComponentItem::ComponentFunc(_) = item.ty {
                    funcs.push(Served {
                        iface: iface.clone(),
                        name: name.to_string(),
                        stats: CallStats::default(),
                    });
                }
            }
        }
        Arc::new(TypedServer {
            shared,
            component,
            serves,
            funcs,
            resources: Default::default(),
            passive: passive.is_some(),
            call_began: AtomicU64::new(0),
            call_limit_ns: passive.unwrap_or(u64::MAX),
            busy: Default::default(),
            store: FifoLock::new(None),
            queue: Mutex::new(Queue::default()),
            holder: Mutex::new(None),
        })
    }

    /// The number of `iface`'s function `name`, if served.
    pub(crate) fn func_index(&self, iface: &str, name: &str) -> Option<usize> {
        self.funcs
            .iter()
            .position(|f| f.iface == iface && f.name == name)
    }

    /// Whether calls run on the caller's thread.
    pub(crate) fn is_passive(&self) -> bool {
        self.passive
    }

    /// Instantiated: finds each served function in `instance`.
    pub(crate) fn running(
        &self,
        mut store: Store<TaskData>,
        instance: &Instance,
    ) -> Result<Running, String> {
        let mut funcs = Vec::with_capacity(self.funcs.len());
        for f in &self.funcs {
            let found = instance
                .get_export_index(&mut store, None, &f.iface)
                .and_then(|i| instance.get_export_index(&mut store, Some(&i), &f.name))
                .and_then(|i| instance.get_func(&mut store, i));
            let func = found.ok_or_else(|| format!("{}: no function {}", f.iface, f.name))?;
            funcs.push(func);
        }
        let engine = self.component.engine();
        let imports = self.component.component_type().imports(engine).len();
        let sync = self.passive && imports == 0;
        let _ = self
            .resources
            .set(self.resource_types(&mut store, instance));
        Ok(Running { store, funcs, sync })
    }

    /// The resource types the served interfaces of `instance` define.
    fn resource_types(
        &self,
        store: &mut Store<TaskData>,
        instance: &Instance,
    ) -> Vec<(String, String, ResourceType)> {
        let engine = self.component.engine();
        let ty = self.component.component_type();
        let mut out = Vec::new();
        for iface in &self.serves {
            let Some(ComponentItem::ComponentInstance(inst)) =
                ty.get_export(engine, iface).map(|e| e.ty)
            else {
                continue;
            };
            for (_, name) in super::check::resources(engine, &inst) {
                let found = instance
                    .get_export_index(&mut *store, None, iface)
                    .and_then(|i| instance.get_export_index(&mut *store, Some(&i), &name))
                    .and_then(|i| instance.get_resource(&mut *store, i));
                if let Some(r) = found {
                    out.push((iface.clone(), name, r));
                }
            }
        }
        out
    }

    /// A client let go of its handle `res` to one of the server's
    /// resources: the server's task releases it (runs its destructor)
    /// before its next call. Nothing to do once the server has ended:
    /// the resource went with its store.
    pub(crate) fn release(&self, res: ResourceAny) {
        let mut q = lock(&self.queue);
        if q.gone.is_some() || q.ending.is_some() {
            return;
        }
        q.drops.push(res);
        let waker = q.waker.take();
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Makes the server callable: for a passive one, its store waits for
    /// callers; `holder` keeps its service open until it ends.
    pub(crate) fn install(&self, running: Option<Running>, holder: ServiceRef) {
        if let Some(r) = running {
            *self.store.try_lock().expect("not yet callable") = Some(r);
        }
        *lock(&self.holder) = Some(holder);
    }

    /// Calls function `func` with `params` (lifted from the caller, not
    /// copied again for a passive server) in the span `trace` (the
    /// server's own calls become its children), expecting `results` values:
    /// the results, or why the call failed (the server trapped, was
    /// killed or has ended, or `timeout` passed first: for a passive
    /// server, the wait for its store; for an active one, the whole call).
    pub(crate) async fn call(
        &self,
        caller: &Arc<TaskShared>,
        (func, trace): (usize, Option<crate::telemetry::Context>),
        params: &[Val],
        results: usize,
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Val>, Failed> {
        match self.passive {
            true => {
                self.call_passive((func, trace), params, results, timeout)
                    .await
            }
            false => (self.call_active(caller, (func, trace), params, results, timeout)).await,
        }
    }

    /// Calls function `func` for the host (a call from another node):
    /// a passive server runs it on this thread, an active one on its own
    /// task and context.
    pub(crate) async fn call_from_host(
        &self,
        func: usize,
        params: Vec<Val>,
        results: usize,
    ) -> Result<Vec<Val>, Failed> {
        if self.passive {
            return self
                .call_passive((func, None), &params, results, None)
                .await;
        }
        let answer = self.submit((func, None), Box::new(move |_| Ok(params)), results)?;
        Ok(answer.await.unwrap_or_else(|_| Err(self.gone()))?)
    }

    /// The failure of a call that waited `t` in vain.
    fn late(&self, t: std::time::Duration) -> Failed {
        Failed {
            errno: crate::ipc::Errno::Timeout,
            why: format!(
                "the server {} did not answer within {} ms (call_timeout)",
                self.shared.name,
                t.as_millis()
            ),
        }
    }

    async fn call_passive(
        &self,
        (func, trace): (usize, Option<crate::telemetry::Context>),
        params: &[Val],
        results: usize,
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Val>, Failed> {
        let mut guard = match timeout {
            None => self.store.lock().await,
            Some(t) => {
                (tokio::time::timeout(t, self.store.lock()).await).map_err(|_| self.late(t))?
            }
        };
        let Some(running) = guard.as_mut() else {
            return Err(self.gone().into());
        };
        // What clients let go is released before the call, as an
        // active server does.
        let drops = self.take_drops();
        if !drops.is_empty() && !self.release_on(running, drops).await {
            drop(guard.take());
            return Err(self.gone().into());
        }
        self.call_began
            .store(crate::clock::ticks::now().max(1), Ordering::Relaxed);
        let out = run(running, (func, trace), params, results).await;
        self.call_began.store(0, Ordering::Relaxed);
        out.map_err(|e| {
            let why = self.fail(&e);
            drop(guard.take());
            why.into()
        })
    }

    async fn call_active(
        &self,
        caller: &Arc<TaskShared>,
        (func, trace): (usize, Option<crate::telemetry::Context>),
        params: &[Val],
        results: usize,
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Val>, Failed> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // The server runs the call on the caller's context (its CPU is
        // charged to the caller) until the call ends.
        self.shared.inherit.lend(caller.id, caller.context());
        let _lent = Lent {
            server: &self.shared,
            client: caller.id,
        };
        // The server's task lowers them later: its own copy.
        self.enqueue(Job {
            func,
            args: Args::Lifted(params.to_vec()),
            results,
            trace,
            reply: tx,
            client: Some(caller.id),
        })?;
        let answer = match timeout {
            None => rx.await,
            Some(t) => tokio::time::timeout(t, rx)
                .await
                .map_err(|_| self.late(t))?,
        };
        Ok(answer.unwrap_or_else(|_| Err(self.gone()))?)
    }

    /// Queues a call of function `func` for an active server, its
    /// arguments made by `make` in the server's store as the call begins,
    /// in the span `trace`; the server runs it on its own context (its
    /// CPU, its budget). The answer arrives on the receiver; one closed
    /// without an answer means the server ended first ([`Self::gone`]).
    /// A call whose receiver is dropped before it begins is not run.
    pub(crate) fn submit(
        &self,
        (func, trace): (usize, Option<crate::telemetry::Context>),
        make: MakeArgs,
        results: usize,
    ) -> Result<Answer, String> {
        if self.passive {
            return Err(format!("the server {} is passive", self.shared.name));
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let args = Args::Made(make);
        self.enqueue(Job {
            func,
            args,
            results,
            trace,
            reply,
            client: None,
        })?;
        Ok(answer)
    }

    /// The number of its component servlet's handler
    /// (`wasi:http/incoming-handler.handle`), if it serves one.
    pub(crate) fn http_handler(&self) -> Option<usize> {
        let http = crate::task::HTTP_HANDLER;
        (self.funcs.iter()).position(|f| super::iface_matches(http, &f.iface) && f.name == "handle")
    }

    fn enqueue(&self, job: Job) -> Result<(), String> {
        let mut q = lock(&self.queue);
        if q.gone.is_some() || q.ending.is_some() {
            drop(q);
            return Err(self.gone());
        }
        // Once calls queue up (a server stuck in one call), those whose
        // callers gave up go, with what they hold (a request and its
        // body), instead of waiting for their turn to be skipped.
        let stale: VecDeque<Job> = match q.jobs.len() >= PURGE_AT {
            true => {
                let (keep, stale) = q.jobs.drain(..).partition(|j| !j.reply.is_closed());
                q.jobs = keep;
                stale
            }
            false => VecDeque::new(),
        };
        q.jobs.push_back(job);
        let waker = q.waker.take();
        drop(q);
        drop(stale);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Whether the server has ended, or is ending (killed, or trapped).
    pub(crate) fn has_ended(&self) -> bool {
        let q = lock(&self.queue);
        q.gone.is_some() || q.ending.is_some() || self.shared.kill_requested()
    }

    /// Why calls fail now that the server has ended.
    pub(crate) fn gone(&self) -> String {
        let why = lock(&self.queue).gone.clone();
        let why = why.unwrap_or_else(|| match self.shared.kill_requested() {
            true => format!("was killed ({})", self.shared.kill_reason()),
            false => "has ended".into(),
        });
        format!("the server {} {why}", self.shared.name)
    }

    /// A call trapped: the server ends with the trap's status; the reason
    /// for the caller.
    fn fail(&self, e: &wasmtime::Error) -> String {
        let status = crate::host::classify(e, &self.shared, "typed call: ");
        let why = match &status {
            TaskStatus::Killed(r) => format!("was killed ({r})"),
            TaskStatus::Trapped(r) => format!("trapped ({r})"),
            TaskStatus::Exited(c) => format!("exited with {c}"),
        };
        lock(&self.queue).gone = Some(why);
        self.end(status);
        self.gone()
    }

    /// Ends the server with `status` (unless it already ended): its
    /// service closes, queued calls fail, its task finishes.
    pub(crate) fn end(&self, status: TaskStatus) {
        drop(lock(&self.holder).take());
        let mut q = lock(&self.queue);
        if q.ending.is_none() {
            q.ending = Some(status);
        }
        q.jobs.clear();
        q.drops.clear();
        let waker = q.waker.take();
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
        if self.busy.load(Ordering::Acquire) {
            // Its call in progress stops at the next tick.
            self.shared.request_kill("it was ended while it ran a call");
        }
    }

    /// The server task's future was dropped (killed, or the system
    /// ended): close the service, fail what waits, release the store
    /// unless a call holds it (that call sees the kill and releases it).
    pub(crate) fn shut_down(&self) {
        drop(lock(&self.holder).take());
        let mut q = lock(&self.queue);
        q.gone
            .get_or_insert_with(|| match self.shared.kill_requested() {
                true => format!("was killed ({})", self.shared.kill_reason()),
                false => "has ended".into(),
            });
        q.jobs.clear();
        q.drops.clear();
        q.waker = None;
        drop(q);
        if let Some(mut s) = self.store.try_lock() {
            drop(s.take());
        }
    }

    /// For the server task: the handles to release or the next call to
    /// run, or how it ended.
    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Result<Work, TaskStatus>> {
        let mut q = lock(&self.queue);
        if let Some(status) = q.ending.take() {
            q.gone.get_or_insert_with(|| "has ended".into());
            return Poll::Ready(Err(status));
        }
        if !q.drops.is_empty() {
            return Poll::Ready(Ok(Work::Release(std::mem::take(&mut q.drops))));
        }
        match q.jobs.pop_front() {
            Some(job) => Poll::Ready(Ok(Work::Call(job))),
            None => {
                q.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// The server task's life once started: a passive one releases the
    /// handles clients let go until it is ended; an active one also runs
    /// the calls that queue, one at a time.
    pub(crate) async fn serve(&self, mut running: Option<Running>) -> TaskStatus {
        loop {
            let job = match std::future::poll_fn(|cx| self.poll_next(cx)).await {
                Ok(Work::Call(job)) => job,
                Ok(Work::Release(drops)) => {
                    self.release_now(running.as_mut(), drops).await;
                    continue;
                }
                Err(status) => return status,
            };
            let Some(r) = running.as_mut() else {
                continue;
            };
            // Its caller gave up before it began (a timeout): not run.
            if job.reply.is_closed() {
                self.withdraw(job.client);
                continue;
            }
            let params = match self.args(job.args, &mut r.store) {
                Ok(params) => params,
                Err(why) => {
                    self.withdraw(job.client);
                    drop(job.reply.send(Err(why)));
                    continue;
                }
            };
            self.busy.store(true, Ordering::Release);
            let out = run(r, (job.func, job.trace), &params, job.results).await;
            self.busy.store(false, Ordering::Release);
            drop(params);
            // Answered: the server's own context again.
            self.withdraw(job.client);
            match out {
                Ok(out) => drop(job.reply.send(Ok(out))),
                Err(e) => {
                    let why = self.fail(&e);
                    drop(job.reply.send(Err(why)));
                }
            }
        }
    }
}

impl TypedServer {
    /// Releases `drops` on the server's store (`own`, an active server's;
    /// a passive one's is taken from its lock).
    async fn release_now(&self, own: Option<&mut Running>, drops: Vec<ResourceAny>) {
        match own {
            Some(r) => {
                self.release_on(r, drops).await;
            }
            None => {
                let mut guard = self.store.lock().await;
                let Some(r) = guard.as_mut() else {
                    return;
                };
                if !self.release_on(r, drops).await {
                    drop(guard.take());
                }
            }
        }
    }

    /// Runs the destructor of each of `drops` on `r`: whether all did.
    /// One that traps ends the server; a passive server's destructors
    /// run within its call_cpu_limit, as its calls do.
    async fn release_on(&self, r: &mut Running, drops: Vec<ResourceAny>) -> bool {
        let began = crate::clock::ticks::now().max(1);
        for res in drops {
            if self.passive {
                self.call_began.store(began, Ordering::Relaxed);
            }
            let done = match r.sync {
                true => res.resource_drop(&mut r.store),
                false => res.resource_drop_async(&mut r.store).await,
            };
            self.call_began.store(0, Ordering::Relaxed);
            if let Err(e) = done {
                self.fail(&e);
                return false;
            }
        }
        true
    }

    /// The handles clients let go, taken to be released.
    fn take_drops(&self) -> Vec<ResourceAny> {
        std::mem::take(&mut lock(&self.queue).drops)
    }

    /// A call's arguments, as the server's function takes them.
    fn args(&self, args: Args, store: &mut Store<TaskData>) -> Result<Vec<Val>, String> {
        match args {
            Args::Lifted(params) => Ok(params),
            Args::Made(make) => make(store)
                .map_err(|e| format!("the server {} cannot take the call: {e}", self.shared.name)),
        }
    }

    /// Takes back the context `client` lent for its call, if it lent one.
    fn withdraw(&self, client: Option<crate::task::TaskId>) {
        if let Some(client) = client {
            self.shared.inherit.withdraw(client);
        }
    }

    /// A passive server's deadline callback (it runs on its callers'
    /// threads): ends the call once the server is killed or the call has
    /// run past `call_cpu_limit`; never yields.
    pub(crate) fn on_tick(&self) -> wasmtime::Result<wasmtime::UpdateDeadline> {
        use crate::task::KillSignal;
        if self.shared.kill_requested() {
            return Err(KillSignal(self.shared.kill_reason()).into());
        }
        let began = self.call_began.load(Ordering::Relaxed);
        if began != 0 && crate::clock::ticks::ns_since(began) > self.call_limit_ns {
            let ms = self.call_limit_ns / 1_000_000;
            let why = format!("a passive call ran past its call_cpu_limit of {ms} ms");
            return Err(KillSignal(why).into());
        }
        Ok(wasmtime::UpdateDeadline::Continue(1))
    }
}

impl crate::task::Serving for TypedServer {
    fn end(&self, status: TaskStatus) {
        TypedServer::end(self, status)
    }

    fn interfaces(&self) -> Vec<String> {
        self.serves.clone()
    }

    fn typed_calls(&self) -> Vec<crate::task::TypedCalls> {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (self.funcs.iter())
            .map(|f| crate::task::TypedCalls {
                interface: f.iface.clone(),
                function: f.name.clone(),
                calls: load(&f.stats.calls),
                failures: load(&f.stats.failures),
                bytes: load(&f.stats.bytes),
                ms: load(&f.stats.cpu_ns) as f64 / 1e6,
            })
            .collect()
    }
}

/// Runs function `func` once on the server's store, in the span `trace`
/// (see [`super::State`]): lowers `params` into
/// its memory, lifts `results` values out (and lets it free them: Wasmtime
/// calls its post-return function).
///
/// A call runs on a fiber of its own, except for a passive server that
/// imports nothing: its store needs no async support (Wasmtime requires
/// it only of stores whose instances import async functions), and its
/// deadline callback ([`TypedServer::on_tick`]) never yields, so it runs
/// synchronously on the caller's fiber. It can call no one, so it nests
/// one level deep: at most Wasmtime's `max_wasm_stack` on top of the
/// caller's, within the caller's 2 MiB stack.
async fn run(
    r: &mut Running,
    (func, trace): (usize, Option<crate::telemetry::Context>),
    params: &[Val],
    results: usize,
) -> wasmtime::Result<Vec<Val>> {
    let f = r.funcs[func];
    let mut out = vec![Val::Bool(false); results];
    r.store.data_mut().groups.typed.serving = trace;
    let done = if r.sync {
        f.call(&mut r.store, params, &mut out)
    } else {
        f.call_async(&mut r.store, params, &mut out).await
    };
    r.store.data_mut().groups.typed.serving = None;
    done?;
    Ok(out)
}

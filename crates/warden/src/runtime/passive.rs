//! Passive tasks and host services: the services whose calls run on the
//! caller's thread (see `host::direct`).
//!
//! A passive task is spawned like any other, from a reactor module linked
//! with the passive linker. Its future instantiates it (synchronously: the
//! store never needs a fiber), runs `_initialize`, installs the store in
//! its [`Passive`] and registers the service under the task's first
//! `provides` name; then it waits for the server to end. It ends when a
//! call traps or overruns (the calling thread tells it), when it is
//! killed (its future is dropped), or when the system ends
//! ([`Runtime::wait_all`]: a passive service lives as long as the tasks
//! that are not passive).

use super::{Error, Runtime};
use crate::host::{classify, HostCall, HostService, Passive, Server, TaskData};
use crate::ipc::service::{PortalRef, Service, ServiceRef};
use crate::ipc::{Errno, Kernel};
use crate::task::{TaskId, TaskShared, TaskStatus};
use std::sync::Arc;
use wasmtime::{InstancePre, Store};

/// A passive task's whole life as a future.
pub(super) async fn run(
    pre: InstancePre<TaskData>,
    mut store: Store<TaskData>,
    p: Arc<Passive>,
    kernel: Arc<Kernel>,
    (name, exported): (String, bool),
) -> TaskStatus {
    struct ShutDown(Arc<Passive>);
    impl Drop for ShutDown {
        fn drop(&mut self) {
            self.0.shut_down();
        }
    }
    let _guard = ShutDown(p.clone());
    let server = match start(&pre, &mut store, &p.shared) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let service = Service::direct(p.shared.id, p.clone());
    let holder = ServiceRef::new(&service);
    p.install(Server::new(store, server.0, server.1), holder);
    if let Err(e) = kernel
        .names
        .register(&name, PortalRef::new(&service), &p.shared, exported)
    {
        return TaskStatus::Trapped(format!("cannot register its service {name:?}: {e}"));
    }
    std::future::poll_fn(|cx| p.poll_end(cx)).await
}

type Exports = (
    wasmtime::TypedFunc<u32, u32>,
    wasmtime::TypedFunc<(u32, u32, u32, u32), i64>,
);

/// Instantiates the module and runs its `_initialize`.
fn start(
    pre: &InstancePre<TaskData>,
    store: &mut Store<TaskData>,
    shared: &TaskShared,
) -> Result<Exports, TaskStatus> {
    let fail = |e: wasmtime::Error| classify(&e, shared, "cannot start: ");
    let instance = pre.instantiate(&mut *store).map_err(fail)?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| TaskStatus::Trapped("cannot start: no memory exported".into()))?;
    let base = memory.data_ptr(&*store);
    store.data_mut().memory.set(Some(memory), base);
    let alloc = instance
        .get_typed_func(&mut *store, "warden_passive_alloc")
        .map_err(fail)?;
    let handler = instance
        .get_typed_func(&mut *store, "warden_passive_call")
        .map_err(fail)?;
    if let Ok(init) = instance.get_typed_func::<(), ()>(&mut *store, "_initialize") {
        init.call(&mut *store, ()).map_err(fail)?;
    }
    Ok((alloc, handler))
}

impl Runtime {
    /// Offers `handler` to guests as the service `name`: a task that may
    /// use the name (`uses`) looks it up and calls it like any task's
    /// service, and each call runs `handler` on the caller's worker
    /// thread, inside its `warden_call`, with the request's bytes and an
    /// empty reply buffer to fill. The reply's growth is charged to the
    /// caller's memory budget; an error is returned to the caller as its
    /// code (a panic as `PeerDied`). The handler must not block for long:
    /// it holds a worker.
    ///
    /// The service lives as long as the runtime; `name` must not be
    /// registered already.
    pub fn register_host_service<F>(&self, name: &str, handler: F) -> Result<(), Error>
    where
        F: Fn(&HostCall<'_>, &[u8], &mut Vec<u8>) -> Result<(), Errno> + Send + Sync + 'static,
    {
        let inner = &*self.inner;
        let id = TaskId(
            inner
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        );
        let owner = Arc::new(TaskShared::new(id, format!("host:{name}"), None, None));
        let service = Service::direct(id, Arc::new(HostService(Box::new(handler))));
        let holder = ServiceRef::new(&service);
        inner
            .kernel
            .names
            .register(name, PortalRef::new(&service), &owner, false)
            .map_err(|e| Error::Name(format!("cannot register host service {name:?}: {e}")))?;
        inner
            .host_services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(holder);
        Ok(())
    }
}

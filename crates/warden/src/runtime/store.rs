//! A task's store: its WASI context (with preopened directories and the
//! placeholders of its preopened listeners), output sinks, memory budget,
//! handle table, network state and deadline callback. The spawner builds
//! its parts (a [`StoreSeed`]); the worker that first runs the task makes
//! the store from them.

use super::*;
use crate::host::{Cli, Strings};

/// What a task's store is made from: everything that can fail, done by
/// the spawner (so a bad spec is the spawn call's error); the store
/// itself is made by [`StoreSeed::grow`] on the worker that first runs
/// the task, the thread that will also free it (an allocator frees
/// fastest on the thread that allocated).
pub(super) struct StoreSeed {
    data: TaskData,
    clock: Arc<crate::executor::Clock>,
    slice_ticks: u64,
}

impl StoreSeed {
    /// The store, in `engine` (its module's): its memory budget as
    /// limiter, and the deadline callback that preempts it each slice.
    pub(super) fn grow(self, engine: &wasmtime::Engine) -> Store<TaskData> {
        let sh = self.data.ipc.shared.clone();
        let mut store = Store::new(engine, self.data);
        store.limiter(|d| &mut d.budget);
        store.set_epoch_deadline(1);
        let (clock, slice_ticks) = (self.clock, self.slice_ticks);
        store.epoch_deadline_callback(move |_| on_tick(&sh, &clock, slice_ticks));
        store
    }
}

impl Runtime {
    /// What a task's store is made from: WASI context, memory budget,
    /// handle table and the deadline callback's settings.
    pub(super) fn store_seed(
        &self,
        spec: &TaskSpec,
        module: &Path,
        shared: &Arc<TaskShared>,
        child: Option<Child>,
        link_parent: Option<crate::net::fair::NodeId>,
        env: Option<Strings>,
    ) -> Result<StoreSeed, String> {
        let inner = &*self.inner;
        let net = self.task_net(spec, shared, link_parent, child.as_ref().map(|c| &c.net))?;
        let sinks = match &child {
            Some(c) => c.sinks.clone(),
            None => self.sinks(spec, &shared.log)?,
        };
        let wasi = self.wasi_ctx(spec, &sinks)?;
        let cli = cli(spec, module, env);
        let budget = MemoryBudget::new(spec.on_memory_limit, shared.clone());
        let mut handles = HandleTable::new(spec.max_handles, shared.clone());
        let (granted, names) = match child {
            Some(c) => {
                let mut granted = Vec::with_capacity(c.grants.len());
                for object in c.grants {
                    granted.push(
                        handles
                            .insert(object)
                            .map_err(|e| format!("granting handles: {e}"))?,
                    );
                }
                (granted, c.names)
            }
            None => (Vec::new(), Arc::default()),
        };
        let ipc = TaskIpc {
            shared: shared.clone(),
            handles,
            memory: None,
            memory_base: 0,
            memory_len: (0, u64::MAX),
            call_slot: Default::default(),
            in_flight: None,
            grants: Grants::of(spec),
            kernel: inner.kernel.clone(),
            // Not through a strong reference: every task's spawn would
            // then write the runtime's reference counts three times.
            spawner: Arc::downgrade(&self.inner) as std::sync::Weak<dyn crate::host::Spawner>,
            owned: Owned::default(),
            // Only a task that may spawn children needs its spec later.
            spec: (!spec.modules.is_empty()).then(|| Arc::new(spec.clone())),
            granted,
            names,
            child_names: crate::host::Bindings::new(shared.clone()),
            sinks,
        };
        Ok(StoreSeed {
            data: TaskData {
                wasi,
                cli,
                budget,
                ipc,
                files: Default::default(),
                net,
            },
            clock: inner.clock.clone(),
            slice_ticks: (inner.config.slice.as_nanos() / TICK.as_nanos()).max(1) as u64,
        })
    }

    fn sinks(
        &self,
        spec: &TaskSpec,
        log: &Arc<crate::output::LogRing>,
    ) -> Result<(Sink, Sink), String> {
        let prefix = self
            .inner
            .config
            .prefix_output
            .then(|| format!("[{}] ", spec.name));
        let open = |o, h, what: &str| {
            Sink::open(o, h, prefix.clone(), log.clone()).map_err(|e| format!("{what}: {e}"))
        };
        Ok((
            open(&spec.stdout, HostStream::Stdout, "stdout")?,
            open(&spec.stderr, HostStream::Stderr, "stderr")?,
        ))
    }

    fn wasi_ctx(
        &self,
        spec: &TaskSpec,
        sinks: &(Sink, Sink),
    ) -> Result<wasmtime_wasi::p1::WasiP1Ctx, String> {
        // Arguments and environment are the task's `Cli`, not Wasmtime's.
        let mut b = WasiCtxBuilder::new();
        for (guest, host) in &spec.dirs {
            b.preopened_dir(host, guest, FsPerms::ReadWrite)
                .map_err(|e| format!("cannot open directory {}: {e:#}", host.display()))?;
        }
        // Holds each preopened listener's number in Wasmtime's table (see
        // `host::wasi_net`).
        for i in 0..spec.net.preopen_listeners.len() {
            b.preopened_dir(
                &self.inner.empty_dir,
                format!("/.listener{i}"),
                FsPerms::ReadOnly,
            )
            .map_err(|e| format!("preopened listener: {e:#}"))?;
        }
        b.secure_random(crate::host::ThreadRandom);
        b.insecure_random(crate::host::ThreadRandom);
        b.stdout(sinks.0.clone());
        b.stderr(sinks.1.clone());
        if let Some(bytes) = &spec.stdin_bytes {
            b.stdin(wasmtime_wasi::p2::pipe::MemoryInputPipe::new(bytes.clone()));
        } else if spec.stdin_inherit {
            b.inherit_stdin();
        }
        Ok(b.build_p1())
    }
}

/// A task's arguments (argv\[0\] its module's file name) and
/// environment (`env`, or else its spec's).
fn cli(spec: &TaskSpec, module: &Path, env: Option<Strings>) -> Cli {
    let file = module.file_name().map(|n| n.to_string_lossy());
    Cli {
        args: Arc::new(Strings::args(
            file.as_deref().unwrap_or(&spec.name),
            &spec.args,
        )),
        env: Arc::new(env.unwrap_or_else(|| Strings::env(&spec.env))),
    }
}

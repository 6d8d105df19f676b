//! A task's store: its WASI context (with preopened directories and the
//! placeholders of its preopened listeners), output sinks, memory budget,
//! handle table, network state and deadline callback.

use super::*;

impl Runtime {
    /// A task's store: WASI context, memory budget, handle table and
    /// deadline callback.
    pub(super) fn store(
        &self,
        spec: &TaskSpec,
        module: &Path,
        shared: &Arc<TaskShared>,
        child: Option<Child>,
        link_parent: Option<crate::net::fair::NodeId>,
    ) -> Result<Store<TaskData>, String> {
        let inner = &*self.inner;
        let net = self.task_net(spec, shared, link_parent, child.as_ref().map(|c| &c.net))?;
        let sinks = match &child {
            Some(c) => c.sinks.clone(),
            None => self.sinks(spec, &shared.log)?,
        };
        let wasi = self.wasi_ctx(spec, module, &sinks)?;
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
            call_slot: CallSlot::new(shared.clone()),
            in_flight: None,
            grants: Grants::of(spec),
            kernel: inner.kernel.clone(),
            spawner: {
                let inner: Arc<dyn crate::host::Spawner> = self.inner.clone();
                Arc::downgrade(&inner)
            },
            owned: Owned::default(),
            // Only a task that may spawn children needs its spec later.
            spec: (!spec.modules.is_empty()).then(|| Arc::new(spec.clone())),
            granted,
            names,
            child_names: crate::host::Bindings::new(shared.clone()),
            sinks,
        };
        let mut store = Store::new(
            &inner.engine,
            TaskData {
                wasi,
                budget,
                ipc,
                files: Default::default(),
                net,
            },
        );
        store.limiter(|d| &mut d.budget);
        store.set_epoch_deadline(1);
        let (sh, clock) = (shared.clone(), inner.clock.clone());
        let slice_ticks = (inner.config.slice.as_nanos() / TICK.as_nanos()).max(1) as u64;
        store.epoch_deadline_callback(move |_| on_tick(&sh, &clock, slice_ticks));
        Ok(store)
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
        module: &Path,
        sinks: &(Sink, Sink),
    ) -> Result<wasmtime_wasi::p1::WasiP1Ctx, String> {
        let mut b = WasiCtxBuilder::new();
        let argv0 = module
            .file_name()
            .map_or_else(|| spec.name.clone(), |n| n.to_string_lossy().into_owned());
        b.arg(argv0).args(&spec.args);
        for (k, v) in &spec.env {
            b.env(k, v);
        }
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

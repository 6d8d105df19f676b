//! A task's store: its WASI context (with preopened directories and the
//! placeholders of its preopened listeners), output sinks, memory budget,
//! handle table, network state and deadline callback. The spawner makes
//! the parts whose making can fail (a [`StoreSeed`]); the worker that
//! first runs the task makes the store from them, and the WASI context
//! too when it has nothing to open.

use super::*;
use crate::host::{Cli, Core, Groups, MemoryCache, Prepare, Spawner, Strings};
use crate::output::Sink;
use wasmtime_wasi::p1::WasiP1Ctx;

/// What a task's store is made from: everything that can fail, done by
/// the spawner (so a bad spec is the spawn call's error); the store
/// itself is made by [`StoreSeed::grow`] on the worker that first runs
/// the task, the thread that will also free it (an allocator frees
/// fastest on the thread that allocated).
pub(super) struct StoreSeed {
    wasi: WasiSeed,
    shared: Arc<TaskShared>,
    budget: MemoryBudget,
    net: Box<crate::host::TaskNet>,
    sinks: (Sink, Sink),
    slice_ticks: u64,
    /// Each import group's state.
    groups: Groups,
}

/// A task's WASI context, or what it is built from when building it
/// cannot fail (no directory or listener to open): then the worker
/// builds it, so that its dozen allocations are made, and later freed,
/// by one thread, and the spawner's call is shorter.
enum WasiSeed {
    Built(Box<WasiP1Ctx>),
    Later { stdin: Stdin },
}

/// Where a task's standard input comes from.
enum Stdin {
    Empty,
    Bytes(bytes::Bytes),
    Stream(crate::pipe::StreamedInput),
    Inherit,
}

impl StoreSeed {
    /// The store, in `engine` (its module's): its memory budget as
    /// limiter, and the deadline callback that preempts it each slice.
    pub(super) fn grow(self, engine: &wasmtime::Engine) -> Store<TaskData> {
        let wasi = match self.wasi {
            WasiSeed::Built(wasi) => *wasi,
            WasiSeed::Later { stdin } => finish_wasi(WasiCtxBuilder::new(), &self.sinks, stdin),
        };
        let core = Core {
            shared: self.shared,
            wasi,
            net: self.net,
            budget: self.budget,
            memory: MemoryCache::default(),
            sinks: self.sinks,
            slice_ticks: self.slice_ticks,
        };
        let data = TaskData::new(core, self.groups);
        let mut store = Store::new(engine, data);
        store.limiter(|d| &mut d.budget);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|store| {
            let data = store.data();
            on_tick(&data.shared, data.slice_ticks)
        });
        store
    }
}

impl Runtime {
    /// What a task's store is made from: WASI context, memory budget,
    /// handle table and the deadline callback's settings.
    pub(super) fn store_seed(
        &self,
        spec: &TaskSpec,
        module: &LoadedModule,
        shared: &Arc<TaskShared>,
        child: Option<Child>,
        link_parent: Option<crate::net::fair::NodeId>,
        env: Option<Strings>,
    ) -> Result<StoreSeed, String> {
        let inner = &*self.inner;
        let (net, sockets) =
            self.task_net(spec, shared, link_parent, child.as_ref().map(|c| &c.net))?;
        let sinks = match &child {
            Some(c) => c.sinks.clone(),
            None => self.sinks(spec, &shared.log)?,
        };
        let cli = cli(spec, &module.path, env);
        let wasi = match module.is_component() {
            true => self.component_wasi(spec, &sinks, &cli)?,
            false => self.wasi_seed(spec, &sinks)?,
        };
        let budget = match module.is_component() {
            true => MemoryBudget::for_component(spec.limits.on_memory_limit, shared.clone()),
            false => MemoryBudget::new(spec.limits.on_memory_limit, shared.clone()),
        };
        let groups = Groups::prepare(Prepare {
            spec,
            shared,
            kernel: &inner.kernel,
            // Not through a strong reference: every task's spawn would
            // then write the runtime's reference counts three times.
            spawner: Arc::downgrade(&self.inner) as std::sync::Weak<dyn Spawner>,
            component: module.is_component(),
            connect: &net.connect,
            cli: Some(cli),
            sockets: Some(sockets),
            child: child.map(|c| (c.grants, c.names)),
        })?;
        Ok(StoreSeed {
            wasi,
            shared: shared.clone(),
            budget,
            net: Box::new(net),
            sinks,
            slice_ticks: (inner.config.slice.as_nanos() / TICK.as_nanos()).max(1) as u64,
            groups,
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
            open(&spec.stdio.stdout, HostStream::Stdout, "stdout")?,
            open(&spec.stdio.stderr, HostStream::Stderr, "stderr")?,
        ))
    }

    /// The task's WASI context now if opening its directories or
    /// listeners' placeholders may fail, else what to build it from.
    fn wasi_seed(&self, spec: &TaskSpec, sinks: &(Sink, Sink)) -> Result<WasiSeed, String> {
        let stdin = stdin(spec);
        if spec.dirs.is_empty()
            && spec.served_dirs.is_empty()
            && spec.net.preopen_listeners.is_empty()
        {
            return Ok(WasiSeed::Later { stdin });
        }
        let mut b = WasiCtxBuilder::new();
        b.allow_blocking_current_thread(super::disks::all_local(&spec.dirs));
        let empty = || self.empty_dir().map_err(|e| e.to_string());
        for (guest, host) in &spec.dirs {
            b.preopened_dir(host, guest, FsPerms::ReadWrite)
                .map_err(|e| format!("cannot open directory {}: {e:#}", host.display()))?;
        }
        // Holds each served directory's number in Wasmtime's table, and
        // its name for `fd_prestat_dir_name` (see `host::wasi::served`).
        for (guest, _) in &spec.served_dirs {
            b.preopened_dir(empty()?, guest, FsPerms::ReadOnly)
                .map_err(|e| format!("served directory {guest}: {e:#}"))?;
        }
        // Holds each preopened listener's number in Wasmtime's table (see
        // `host::wasi::net`).
        for i in 0..spec.net.preopen_listeners.len() {
            b.preopened_dir(empty()?, format!("/.listener{i}"), FsPerms::ReadOnly)
                .map_err(|e| format!("preopened listener: {e:#}"))?;
        }
        Ok(WasiSeed::Built(Box::new(finish_wasi(b, sinks, stdin))))
    }
}

impl Runtime {
    /// The runtime's empty directory, made on first use.
    fn empty_dir(&self) -> Result<&std::path::Path, super::Error> {
        let cell = &self.inner.empty_dir;
        if let Some(dir) = cell.get() {
            return Ok(dir);
        }
        let made = super::setup::empty_dir()?;
        if let Err(ours) = cell.set(made) {
            // Another thread made one first.
            let _ = std::fs::remove_dir(ours);
        }
        Ok(cell.get().expect("set above"))
    }
}

impl Runtime {
    /// A component task's WASI context: its directories, arguments and
    /// environment in Wasmtime's context (a component's `wasi:cli` reads
    /// them there); its sockets are Warden's (see `host::component`). A
    /// listener opened for it is refused: it has no descriptor to find it
    /// at, and listens itself under its `listen` grants.
    fn component_wasi(
        &self,
        spec: &TaskSpec,
        sinks: &(Sink, Sink),
        cli: &Cli,
    ) -> Result<WasiSeed, String> {
        if !spec.net.preopen_listeners.is_empty() {
            return Err(NO_COMPONENT_SOCKETS.into());
        }
        if let Some((guest, _)) = spec.served_dirs.first() {
            return Err(format!(
                "dirs.{guest:?}: a component's files cannot be served by a task yet \
                 (only a preview-1 module's are); give it a host directory"
            ));
        }
        let mut b = WasiCtxBuilder::new();
        b.allow_blocking_current_thread(super::disks::all_local(&spec.dirs));
        for (guest, host) in &spec.dirs {
            b.preopened_dir(host, guest, FsPerms::ReadWrite)
                .map_err(|e| format!("cannot open directory {}: {e:#}", host.display()))?;
        }
        for arg in cli.args.iter() {
            b.arg(String::from_utf8_lossy(arg));
        }
        for var in cli.env.iter() {
            let var = String::from_utf8_lossy(var);
            let (name, value) = var.split_once('=').unwrap_or((&var, ""));
            b.env(name, value);
        }
        crate::host::component_network(&mut b);
        let mut wasi = finish_wasi(b, sinks, stdin(spec));
        use wasmtime_wasi::WasiView;
        (wasi.ctx().table).set_max_capacity(RESOURCES_PER_HANDLE * spec.ipc.max_handles);
        Ok(WasiSeed::Built(Box::new(wasi)))
    }
}

/// A component task's live WASI resources (streams, pollables, fields,
/// sockets, a servlet's requests: the host's objects its handles name)
/// are at most this many times its `max_handles` (4,096 by default): a
/// component that keeps making them, or a servlet that never drops its
/// requests, finds the next refused instead of growing the host.
pub(crate) const RESOURCES_PER_HANDLE: usize = 4;

/// Why a component task may not be given a listener.
pub(crate) const NO_COMPONENT_SOCKETS: &str =
    "a component cannot be given open listeners (`preopen_listeners`, `--listen`): it \
     has no descriptor to find them at; it opens its own with wasi:sockets, under its \
     `listen` grants (`--allow-listen`)";

/// The WASI context from a builder holding its directories: the task's
/// random sources, output sinks and input. Arguments and environment are
/// the task's `Cli`, not Wasmtime's.
fn finish_wasi(mut b: WasiCtxBuilder, sinks: &(Sink, Sink), stdin: Stdin) -> WasiP1Ctx {
    b.secure_random(crate::host::ThreadRandom);
    b.insecure_random(crate::host::ThreadRandom);
    b.stdout(sinks.0.clone());
    b.stderr(sinks.1.clone());
    match stdin {
        Stdin::Bytes(bytes) => {
            b.stdin(wasmtime_wasi::p2::pipe::MemoryInputPipe::new(bytes));
        }
        Stdin::Stream(input) => {
            b.stdin(input);
        }
        Stdin::Inherit => {
            b.inherit_stdin();
        }
        Stdin::Empty => {}
    }
    b.build_p1()
}

/// Where a task's standard input comes from.
fn stdin(spec: &TaskSpec) -> Stdin {
    if let Some(input) = &spec.stdio.stdin_stream {
        return Stdin::Stream(input.clone());
    }
    match &spec.stdio.stdin_bytes {
        Some(bytes) => Stdin::Bytes(bytes.clone()),
        None if spec.stdio.stdin_inherit => Stdin::Inherit,
        None => Stdin::Empty,
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

//! In-process measurements: Warden itself, and raw Wasmtime with nothing
//! around it (the floor Warden adds to).

use crate::peers::parse_figures;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use warden::{Output, Runtime, RuntimeConfig, TaskSpec};
use warden_test_guests as guests;
use wasmtime::{
    Engine, Extern, Instance, InstancePre, Linker, Module, ModuleExport, Store, TypedFunc,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::WasiCtxBuilder;

/// The settings every benchmark runtime starts from: `workers` workers,
/// room for `max_tasks` tasks, no disk cache, defaults otherwise.
pub fn config(workers: usize, max_tasks: u32) -> RuntimeConfig {
    RuntimeConfig {
        workers,
        cache_dir: None,
        max_tasks,
        // As the `warden` command does: the network table holds 2,000
        // sockets in this process.
        raise_descriptor_limit: true,
        ..Default::default()
    }
}

/// A runtime with [`config`]'s settings.
pub fn runtime(workers: usize, max_tasks: u32) -> Runtime {
    Runtime::new(config(workers, max_tasks)).expect("start a Warden runtime")
}

/// A task whose output is discarded.
pub fn quiet(name: &str, module: &str) -> TaskSpec {
    let mut s = TaskSpec::new(name, module);
    s.stdio.stdout = Output::Null;
    s.stdio.stderr = Output::Null;
    s
}

/// Spawns a task from `spec` and waits for its report, `n` times, one at a
/// time; nanoseconds per task. Every task must end with `status`.
pub fn spawn_serial(rt: &Runtime, spec: &TaskSpec, n: usize, status: &str) -> Result<f64, String> {
    let t = Instant::now();
    for _ in 0..n {
        let id = rt.spawn(spec).map_err(|e| e.to_string())?;
        check_status(spec, &rt.wait(id).map_err(|e| e.to_string())?, status)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// Runs a task from `spec` to its end with `Runtime::run` (on the calling
/// thread while a worker is idle), `n` times; nanoseconds per task. Every
/// task must end with `status`.
pub fn run_serial(rt: &Runtime, spec: &TaskSpec, n: usize, status: &str) -> Result<f64, String> {
    let t = Instant::now();
    for _ in 0..n {
        check_status(spec, &rt.run(spec).map_err(|e| e.to_string())?, status)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// Fails unless the task ended with `status`.
pub fn check_status(spec: &TaskSpec, r: &warden::TaskReport, status: &str) -> Result<(), String> {
    if r.status != status {
        return Err(format!(
            "{} ended {} ({:?}), expected {status}",
            spec.name, r.status, r.reason
        ));
    }
    Ok(())
}

/// Spawns `n` tasks from `spec`, then waits for them all; nanoseconds per
/// task. Every task must end with `status`.
pub fn spawn_batch(rt: &Runtime, spec: &TaskSpec, n: usize, status: &str) -> Result<f64, String> {
    let t = Instant::now();
    let ids = (0..n)
        .map(|_| rt.spawn(spec).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    for id in ids {
        check_status(spec, &rt.wait(id).map_err(|e| e.to_string())?, status)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// Runs one task to its exit and returns the `<name> <number>` lines it printed.
pub fn guest_figures(rt: &Runtime, mut spec: TaskSpec) -> Result<BTreeMap<String, f64>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = dir.path().join("stdout");
    spec.stdio.stdout = Output::File(out.clone());
    let id = rt.spawn(&spec).map_err(|e| e.to_string())?;
    let r = rt
        .wait_timeout(id, Some(Duration::from_secs(300)))
        .map_err(|e| e.to_string())?
        .ok_or("task did not finish in 300 s")?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    if r.exit_code != Some(0) {
        return Err(format!(
            "{} ended {} {:?}: {text}",
            spec.name, r.status, r.reason
        ));
    }
    Ok(parse_figures(&text))
}

/// Portal round trips between a client and a server task on a fresh
/// runtime with `workers` workers: nanoseconds per call for each of
/// `kinds` (`null`, `int3`, `str100`, `copy64k`, `mem64k_rw`, `mem64k`, `mem64k_read`).
pub fn ipc(workers: usize, calls: u64, kinds: &[&str]) -> Result<BTreeMap<String, f64>, String> {
    ipc_to(Server::Active, workers, calls, kinds)
}

/// What serves the IPC benchmark's calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// A task receiving calls in its own loop (`ipc_bench server`).
    Active,
    /// A passive task: the same replies, on the caller's thread.
    Passive,
    /// A host service: a Rust closure with the same replies.
    Host,
}

/// [`ipc`], served by `server`.
pub fn ipc_to(
    server: Server,
    workers: usize,
    calls: u64,
    kinds: &[&str],
) -> Result<BTreeMap<String, f64>, String> {
    let rt = runtime(workers, 16);
    let mut client = TaskSpec::new("client", guests::IPC_BENCH);
    client.args = vec!["client".into(), calls.to_string()];
    client.args.push(kinds.join(","));
    client.ipc.uses = vec!["bench".into()];
    let spawned = match server {
        Server::Active | Server::Passive => {
            let mut s = quiet("server", guests::IPC_BENCH);
            s.args = vec!["server".into()];
            if server == Server::Passive {
                s = quiet("server", guests::PASSIVE_BENCH);
                s.passive = true;
            }
            s.ipc.provides = vec!["bench".into()];
            Some(rt.spawn(&s).map_err(|e| e.to_string())?)
        }
        Server::Host => {
            rt.register_host_service("bench", bench_reply)
                .map_err(|e| e.to_string())?;
            None
        }
    };
    let figures = guest_figures(&rt, client);
    if let Some(s) = spawned {
        rt.kill(s, "benchmark over").ok();
    }
    figures
}

/// `ipc_bench server`'s replies: three integers summed, a 100-byte
/// string's length, otherwise nothing.
fn bench_reply(
    _: &warden::HostCall<'_>,
    req: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), warden::Errno> {
    match req.len() {
        12 => {
            let sum = req
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .fold(0i32, i32::wrapping_add);
            reply.extend_from_slice(&sum.to_le_bytes());
        }
        100 => {
            let n = req.iter().position(|&b| b == 0).unwrap_or(100) as i32;
            reply.extend_from_slice(&n.to_le_bytes());
        }
        _ => {}
    }
    Ok(())
}

/// Raw Wasmtime: an engine with default settings (no epoch checks, no
/// pooling) and a WASI linker.
pub struct Raw {
    pub engine: Engine,
    linker: Linker<WasiP1Ctx>,
    /// Set when instances run async (see [`Raw::on_engine`]): the
    /// single-threaded executor that drives them.
    fibers: Option<tokio::runtime::Runtime>,
}

/// A module compiled and linked for raw Wasmtime, with its `_start`
/// export found once (as a Warden module's is, at load) rather than by
/// name and type in every instance.
pub struct RawPre {
    pre: InstancePre<WasiP1Ctx>,
    start: ModuleExport,
}

impl RawPre {
    /// `instance`'s `_start`.
    fn start(&self, instance: Instance, store: &mut Store<WasiP1Ctx>) -> TypedFunc<(), ()> {
        let f = instance
            .get_module_export(&mut *store, &self.start)
            .and_then(Extern::into_func)
            .expect("_start");
        // SAFETY: `Raw::pre` checked that this module's `_start` takes
        // and returns nothing; `instance` is an instance of it.
        unsafe { TypedFunc::new_unchecked(&*store, f) }
    }
}

impl Raw {
    pub fn new() -> Raw {
        Raw::with_config(&wasmtime::Config::new())
    }

    /// Raw Wasmtime on `engine` (a Warden runtime's, see
    /// `Runtime::engine`), run as a task is: WASI's async functions,
    /// instantiation and `_start` on a fiber from the engine's pool,
    /// polled to completion on the calling thread. What is left between
    /// this and a Warden task is Warden's own: its host state, scheduling,
    /// accounting and report.
    pub fn on_engine(engine: &Engine) -> Raw {
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |c| c).expect("WASI links");
        let fibers = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        Raw {
            engine: engine.clone(),
            linker,
            fibers: Some(fibers),
        }
    }

    /// Raw Wasmtime set up for many short-lived instances, as Wasmtime
    /// recommends and as Warden's own engine is: the pooling allocator,
    /// memories initialised copy-on-write from the module's image, and a
    /// freed slot's first 64 KiB of memory reset in place rather than
    /// handed back to the kernel. No epoch checks, no async stacks: the
    /// instance runs on the calling thread.
    pub fn pooled(slots: u32) -> Raw {
        let mut pool = wasmtime::PoolingAllocationConfig::new();
        pool.total_core_instances(slots)
            .total_memories(slots)
            .total_tables(slots)
            .total_stacks(slots)
            .linear_memory_keep_resident(64 << 10)
            .table_keep_resident(4 << 10);
        let mut config = wasmtime::Config::new();
        config
            .memory_init_cow(true)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        Raw::with_config(&config)
    }

    pub fn with_config(config: &wasmtime::Config) -> Raw {
        let engine = Engine::new(config).expect("a Wasmtime engine");
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |c| c).expect("WASI links");
        Raw {
            engine,
            linker,
            fibers: None,
        }
    }

    /// `module` compiled and linked; imports other than WASI (Warden's)
    /// trap if called.
    pub fn pre(&self, module: &str) -> RawPre {
        let m = Module::from_file(&self.engine, module).expect("guest compiles");
        let mut linker = self.linker.clone();
        linker
            .define_unknown_imports_as_traps(&m)
            .expect("stub imports");
        let is_command = matches!(
            m.get_export("_start"),
            Some(wasmtime::ExternType::Func(f)) if f.params().len() == 0 && f.results().len() == 0
        );
        assert!(
            is_command,
            "{module}: no `_start` taking and returning nothing"
        );
        RawPre {
            start: m.get_export_index("_start").expect("_start"),
            pre: linker.instantiate_pre(&m).expect("guest links"),
        }
    }

    /// Builds a WASI context and a store, instantiates and calls `_start`:
    /// what one task costs Wasmtime alone. Ok(()) if `_start` returned.
    pub fn run(
        &self,
        pre: &RawPre,
        args: &[&str],
        stdout: Option<MemoryOutputPipe>,
    ) -> wasmtime::Result<()> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.arg("guest.wasm").args(args);
        if let Some(out) = stdout {
            wasi.stdout(out);
        }
        let mut store = Store::new(&self.engine, wasi.build_p1());
        // With epoch checks compiled in, never reach the deadline.
        store.set_epoch_deadline(u64::MAX / 2);
        if let Some(fibers) = &self.fibers {
            return fibers.block_on(async {
                let instance = pre.pre.instantiate_async(&mut store).await?;
                pre.start(instance, &mut store)
                    .call_async(&mut store, ())
                    .await
            });
        }
        let instance = pre.pre.instantiate(&mut store)?;
        pre.start(instance, &mut store).call(&mut store, ())
    }

    /// Runs `n` instances; nanoseconds per instance. With `trap`, each call
    /// must fail (the time then includes creating and handling the trap).
    pub fn batch(&self, pre: &RawPre, n: usize, trap: bool) -> Result<f64, String> {
        let t = Instant::now();
        for _ in 0..n {
            match (self.run(pre, &[], None), trap) {
                (Ok(()), false) => {}
                // Only a trap counts: any other error would time
                // something else.
                (Err(e), true) if e.downcast_ref::<wasmtime::Trap>().is_some() => {}
                (Ok(()), true) => return Err("expected a trap".into()),
                (Err(e), _) => return Err(format!("{e:#}")),
            }
        }
        Ok(t.elapsed().as_nanos() as f64 / n as f64)
    }
    /// Runs one instance and returns the `<name> <number>` lines it printed.
    pub fn figures(&self, pre: &RawPre, args: &[&str]) -> Result<BTreeMap<String, f64>, String> {
        let out = MemoryOutputPipe::new(1 << 16);
        self.run(pre, args, Some(out.clone()))
            .map_err(|e| format!("{e:#}"))?;
        Ok(parse_figures(&String::from_utf8_lossy(&out.contents())))
    }
}

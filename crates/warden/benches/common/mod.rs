//! Helpers shared by the benchmark binaries.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use warden::{Output, Runtime, RuntimeConfig, TaskSpec};
use wasmtime::{Config, Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::WasiCtxBuilder;

/// Whether `WARDEN_BENCH_QUICK` asks for a short run.
pub fn quick() -> bool {
    std::env::var_os("WARDEN_BENCH_QUICK").is_some()
}

/// The median of `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Minimum and maximum of `v`.
pub fn min_max(v: &[f64]) -> (f64, f64) {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// A runtime without the disk cache.
pub fn runtime(workers: usize, max_tasks: u32) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers,
        cache_dir: None,
        max_tasks,
        ..Default::default()
    })
    .unwrap()
}

/// A task whose output is discarded.
pub fn quiet(name: &str, module: &str) -> TaskSpec {
    let mut s = TaskSpec::new(name, module);
    s.stdout = Output::Null;
    s.stderr = Output::Null;
    s
}

/// Builds a native C program from `benches/peers/<name>.c` with the host's
/// C compiler and returns the executable's path.
pub fn build_peer(name: &str, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../bench/peers/{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .status()
        .expect("cc (the host C compiler) runs");
    assert!(status.success(), "cc failed on {}", src.display());
    out
}

/// Runs a peer program and returns the number after `label` on its output.
pub fn run_peer(exe: &Path, args: &[String], label: &str) -> f64 {
    let out = Command::new(exe).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(label)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{} printed no {label:?}: {text}", exe.display()))
}

/// Raw Wasmtime: the floor Warden adds to.
pub struct Raw {
    pub engine: Engine,
    pub linker: Linker<WasiP1Ctx>,
}

impl Raw {
    pub fn new() -> Raw {
        Self::with_config(&Config::new())
    }

    pub fn with_config(config: &Config) -> Raw {
        let engine = Engine::new(config).unwrap();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |c| c).unwrap();
        Raw { engine, linker }
    }

    pub fn module(&self, path: &str) -> Module {
        Module::from_file(&self.engine, path).unwrap()
    }

    /// Instantiate and run `_start` once; the time taken.
    pub fn run(&self, pre: &wasmtime::InstancePre<WasiP1Ctx>) -> Duration {
        let t = Instant::now();
        let wasi = WasiCtxBuilder::new().arg("m.wasm").build_p1();
        let mut store = Store::new(&self.engine, wasi);
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = pre.instantiate(&mut store).unwrap();
        let start = instance
            .get_typed_func::<(), ()>(&mut store, "_start")
            .unwrap();
        start.call(&mut store, ()).unwrap();
        drop(store);
        t.elapsed()
    }
}

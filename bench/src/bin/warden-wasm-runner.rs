//! The "one OS process per program" peer: a minimal runner built from the
//! `wasmtime` crate, doing what `wasmtime run` does for a WASI command.
//!
//! ```text
//! warden-wasm-runner precompile IN.wasm OUT.cwasm
//! warden-wasm-runner MODULE.cwasm|MODULE.wasm [ARGS...]
//! ```
//!
//! A `.cwasm` (compiled ahead of time by `precompile`, the fastest start a
//! process per program can have) is mapped with `Module::deserialize_file`;
//! a `.wasm` is compiled at start. Standard streams are inherited; the
//! process exits with the guest's exit code. It allocates with mimalloc,
//! as `warden` does.

use std::process::ExitCode;
use wasmtime::{Engine, Linker, Module, Store};

/// The same allocator as `warden` and the harness, so that a process per
/// program and Warden's tasks differ in what they do, not in malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{I32Exit, WasiCtxBuilder};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("warden-wasm-runner: {e:#}");
            ExitCode::from(70)
        }
    }
}

fn run(args: &[String]) -> wasmtime::Result<u8> {
    let engine = Engine::default();
    if args.first().map(String::as_str) == Some("precompile") {
        let [_, input, output] = args else {
            wasmtime::bail!("usage: warden-wasm-runner precompile IN.wasm OUT.cwasm");
        };
        std::fs::write(output, engine.precompile_module(&std::fs::read(input)?)?)?;
        return Ok(0);
    }
    let Some(path) = args.first() else {
        wasmtime::bail!("usage: warden-wasm-runner MODULE [ARGS...]");
    };
    let module = if path.ends_with(".cwasm") {
        // SAFETY: the file was written by `precompile` above with the same
        // engine configuration; Wasmtime checks its header and version.
        unsafe { Module::deserialize_file(&engine, path)? }
    } else {
        Module::from_file(&engine, path)?
    };
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |c| c)?;
    let wasi = WasiCtxBuilder::new().inherit_stdio().args(args).build_p1();
    let mut store = Store::new(&engine, wasi);
    let instance = linker.instantiate(&mut store, &module)?;
    let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
    match start.call(&mut store, ()) {
        Ok(()) => Ok(0),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            Some(exit) => Ok(exit.0 as u8),
            None => Err(e),
        },
    }
}

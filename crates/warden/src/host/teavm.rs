//! The `teavm` import module: the clock TeaVM's WASI runtime imports
//! beside WASI itself, so Java programs compiled by TeaVM load unchanged.
//!
//! `nanoTime() -> f64` is the monotonic clock in milliseconds, with a
//! fraction (TeaVM's `System.nanoTime` multiplies it by 10^6). TeaVM's
//! other import, `teavm_interrupt`, comes with `Thread.sleep` and threads,
//! whose coroutines need a JavaScript event loop that a task does not
//! have: it is left out, so such a module is refused when it loads (see
//! [`refusal`]) rather than ending at its first sleep.

use super::TaskData;
use std::sync::OnceLock;
use std::time::Instant;
use wasmtime::Linker;

/// The import module name.
pub const MODULE: &str = "teavm";

/// The group has no per-task state.
pub(crate) struct State;

impl super::Group for State {
    fn prepare(_: &mut super::Prepare<'_>) -> Result<State, String> {
        Ok(State)
    }

    fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_to_linker(linker)
    }

    fn add_to_passive_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
        add_to_linker(linker)
    }
}

fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    static START: OnceLock<Instant> = OnceLock::new();
    linker.func_wrap(MODULE, "nanoTime", || -> f64 {
        START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
    })?;
    Ok(())
}

/// Why an import from this module is refused, if it is one Warden knows.
pub fn refusal(name: &str) -> Option<&'static str> {
    (name == "teavm_interrupt").then_some(
        "TeaVM adds it for threads and Thread.sleep, which need a JavaScript \
         event loop; sleep with warden.Task.sleep instead",
    )
}

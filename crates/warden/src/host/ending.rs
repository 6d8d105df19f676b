//! How a task's run ended, from the error Wasmtime returned.

use crate::task::{KillSignal, TaskShared, TaskStatus};
use crate::units::format_size;
use wasmtime::{Trap, WasmBacktrace};
use wasmtime_wasi::I32Exit;

/// The status an error from a task's code means: its exit, its kill, or a
/// trap (`context` prefixes the reason), named after the function it was in.
pub(crate) fn classify(e: &wasmtime::Error, shared: &TaskShared, context: &str) -> TaskStatus {
    if let Some(exit) = e.downcast_ref::<I32Exit>() {
        return TaskStatus::Exited(exit.0);
    }
    if let Some(kill) = e.downcast_ref::<KillSignal>() {
        return TaskStatus::Killed(kill.0.clone());
    }
    if shared.kill_requested() {
        return TaskStatus::Killed(shared.kill_reason());
    }
    let mut reason = match (e.downcast_ref::<Trap>(), mapping_fault(e, shared)) {
        (Some(_), Some(why)) => format!("{context}{why}"),
        (Some(trap), None) => format!("{context}{trap}"),
        (None, _) => format!("{context}{}", e.root_cause()),
    };
    if let Some(frame) = e
        .downcast_ref::<WasmBacktrace>()
        .and_then(|bt| bt.frames().first())
    {
        match frame.func_name() {
            Some(name) => reason.push_str(&format!(" (in {name})")),
            None => reason.push_str(&format!(" (in function {})", frame.func_index())),
        }
    }
    if let Some(wanted) = shared.memory.last_refused() {
        // Programs that do not check `memory.grow` (TeaVM's Java runtime,
        // AssemblyScript) trap just after a refusal: say so.
        reason.push_str(&format!(
            ", after its memory budget of {} refused to grow to {}",
            format_size(shared.memory.limit()),
            format_size(wanted)
        ));
    }
    TaskStatus::Trapped(reason)
}

/// What a memory fault hit, if a mapping made it fault (a store to a
/// read-only one, an access to a revoked one): Wasmtime adds the fault's
/// address to the trap as "memory fault at wasm address 0x…".
fn mapping_fault(e: &wasmtime::Error, shared: &TaskShared) -> Option<String> {
    let maps = shared.maps.get()?;
    let text = e.chain().find_map(|c| {
        let s = c.to_string();
        let hex = s.strip_prefix("memory fault at wasm address 0x")?;
        let end = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        usize::from_str_radix(&hex[..end], 16).ok()
    })?;
    maps.describe(text)
}

//! A live upgrade's hand-over of state (see `task::handover`): the old
//! task's `warden_upgrade_save` export, called by its `recv` between
//! calls, and the new task's `warden_upgrade_restore`, called before its
//! `main`.
//!
//! ```c
//! // The state to hand over: (uint64_t)len << 32 | (uint32_t)ptr.
//! uint64_t warden_upgrade_save(void);
//! // Where to put the `len` bytes handed over (NULL refuses them); they
//! // are there when main starts.
//! void *warden_upgrade_restore(uint32_t len);
//! ```

use crate::host::guest::{range, GuestMem};
use crate::host::TaskData;
use crate::task::handover::Saved;
use wasmtime::{AsContextMut, Caller, Extern, Instance, Store};

const SAVE: &str = "warden_upgrade_save";
const RESTORE: &str = "warden_upgrade_restore";

/// Calls the task's `warden_upgrade_save`: the bytes it returns (at most
/// `max`), `None` if it exports none, or why they could not be had.
pub(crate) async fn save(c: &mut Caller<'_, TaskData>, max: u64) -> Saved {
    let Some(f) = c.get_export(SAVE).and_then(Extern::into_func) else {
        return Ok(None);
    };
    let f = (f.typed::<(), i64>(&*c))
        .map_err(|_| format!("its {SAVE} must take nothing and return an i64"))?;
    let packed =
        (f.call_async(&mut *c, ()).await).map_err(|e| format!("its {SAVE} failed: {e:#}"))? as u64;
    let (ptr, len) = (packed as u32 as i32, packed >> 32);
    if len > max {
        return Err(format!(
            "its {SAVE} returned {len} bytes, more than the new task's max_message_bytes ({max})"
        ));
    }
    let mem = GuestMem::of(&mut *c).ok_or_else(|| format!("{SAVE}: the task has no memory"))?;
    let r =
        range(mem.len(), ptr, len).map_err(|_| format!("its {SAVE} returned a wild pointer"))?;
    let mut bytes = vec![0; r.len()];
    mem.read(r, &mut bytes);
    Ok(Some(bytes))
}

/// Whether a module of this instance's kind takes handed state.
pub(crate) fn restores(module: &wasmtime::Module) -> bool {
    module.get_export(RESTORE).is_some()
}

/// Hands `state` to the new task's `warden_upgrade_restore`, before its
/// `main`; why it could not be, if it could not.
pub(crate) async fn restore(
    instance: &Instance,
    store: &mut Store<TaskData>,
    state: &[u8],
) -> Result<(), String> {
    let f = (instance.get_typed_func::<i32, i32>(&mut *store, RESTORE))
        .map_err(|_| format!("it has no {RESTORE} taking and returning an i32"))?;
    let len = i32::try_from(state.len()).map_err(|_| "the state is over 2 GiB".to_string())?;
    let ptr = (f.call_async(&mut *store, len).await)
        .map_err(|e| format!("its {RESTORE} failed: {e:#}"))?;
    if ptr == 0 {
        return Err(format!("its {RESTORE} refused the {len} bytes"));
    }
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| "it exports no memory".to_string())?;
    (memory.write(store.as_context_mut(), ptr as u32 as usize, state))
        .map_err(|_| format!("its {RESTORE} returned a wild pointer"))
}

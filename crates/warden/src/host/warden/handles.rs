//! `close` and `dup`: handle management common to every object.

use crate::host::guest::ret32;
use crate::host::TaskData;
use crate::ipc::{Errno, Object};
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "close",
        |mut c: Caller<'_, TaskData>, h: i32| ret32(close(c.data_mut(), h)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "dup",
        |mut c: Caller<'_, TaskData>, h: i32| {
            let table = &mut c.data_mut().ipc_mut().handles;
            ret32(
                table
                    .get(h)
                    .and_then(Object::dup)
                    .and_then(|o| table.insert(o)),
            )
        },
    )?;
    Ok(())
}

pub(super) fn close(data: &mut TaskData, h: i32) -> Result<i32, Errno> {
    match data.ipc_mut().handles.remove(h)? {
        // An unanswered call closed on purpose: the client hears NoReply.
        Object::Call(call) => {
            data.shared.inherit.withdraw(call.client());
            super::traced::answered(data.ipc_mut(), h);
            call.close();
        }
        other => drop(other),
    }
    Ok(0)
}

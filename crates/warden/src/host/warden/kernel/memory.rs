//! `warden:kernel/memory`: memory objects, as the `warden` module's
//! `mem_*` functions are, copied in and out through lists. (A component
//! cannot map one: its memories are its core instances'.) One read
//! copies at most [`MAX_READ`] bytes, which the host holds on their way
//! into the component's memory.

use super::{handle, out};
use crate::host::TaskData;
use crate::ipc::memobj::{MemObject, MemView};
use crate::ipc::{Errno, Object};
use wasmtime::component::LinkerInstance;

/// Most bytes one `mem-read` copies (`quota` past it).
pub(super) const MAX_READ: u32 = 16 << 20;

pub(super) fn add_to_linker(inst: &mut LinkerInstance<'_, TaskData>) -> wasmtime::Result<()> {
    inst.func_wrap("mem-create", |mut store, (size,): (u64,)| {
        let (ipc, core) = store.data_mut().warden_parts();
        let made = MemObject::create(size, &core.shared).and_then(|(object, view)| {
            let h = ipc.handles.insert(Object::Mem(view))?;
            ipc.owned.add_mem(&object);
            Ok(h as u32)
        });
        out(made)
    })?;
    inst.func_wrap(
        "mem-view",
        |mut store, (h, off, len, readonly): (u32, u64, u64, bool)| {
            let table = &mut store.data_mut().ipc_mut().handles;
            let r = view(table.get(handle(h)))
                .and_then(|v| v.sub(off, len, readonly))
                .and_then(|v| table.insert(Object::Mem(v)));
            out(r.map(|h| h as u32))
        },
    )?;
    inst.func_wrap("mem-read", |store, (h, off, len): (u32, u64, u32)| {
        let v = view(store.data().ipc().handles.get(handle(h)));
        out(v.and_then(|v| {
            if len > MAX_READ {
                return Err(Errno::Quota);
            }
            // Checked before anything is allocated.
            match off.checked_add(len as u64) {
                Some(end) if end <= v.size()? => {}
                _ => return Err(Errno::Range),
            }
            let mut buf = vec![0; len as usize];
            v.read(off, &mut buf).map(|()| buf)
        }))
    })?;
    inst.func_wrap(
        "mem-write",
        |store, (h, off, bytes): (u32, u64, Vec<u8>)| {
            let v = view(store.data().ipc().handles.get(handle(h)));
            out(v.and_then(|v| v.write(off, &bytes)))
        },
    )?;
    inst.func_wrap("mem-size", |store, (h,): (u32,)| {
        out(view(store.data().ipc().handles.get(handle(h))).and_then(|v| v.size()))
    })?;
    inst.func_wrap("mem-revoke", |mut store, (h,): (u32,)| {
        let table = &mut store.data_mut().ipc_mut().handles;
        let r = view(table.get(handle(h)))
            .and_then(MemView::revoke)
            .and_then(|v| table.insert(Object::Mem(v)));
        out(r.map(|h| h as u32))
    })?;
    Ok(())
}

fn view(object: Result<&Object, Errno>) -> Result<&MemView, Errno> {
    super::super::mem::view(object)
}

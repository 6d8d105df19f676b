//! `warden:kernel` (`sdk/wit/kernel.wit`) for components: the `warden`
//! module's objects in WIT. A component's handles are slots of the same
//! handle table a module's are, checked by the same grants and limits;
//! what differs is only the shape of the calls: strings and lists where
//! a module passes pointers, `result<T, error>` where it gets a negative
//! code. `ipc` (handles, services, names, calls), `memory` (memory
//! objects) and `task` are one file each.

mod ipc;
mod memory;

use crate::host::TaskData;
use crate::ipc::Errno;
use wasmtime::component::{ComponentType, Lift, Linker, Lower};

/// The package's interfaces, as a component imports them.
const VERSION: &str = "0.1.0";

/// `warden:kernel/errors.error`: [`Errno`] by name, in the same order.
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq)]
#[component(enum)]
#[repr(u8)]
enum Error {
    #[component(name = "bad-handle")]
    BadHandle,
    #[component(name = "revoked")]
    Revoked,
    #[component(name = "peer-died")]
    PeerDied,
    #[component(name = "no-clients")]
    NoClients,
    #[component(name = "denied")]
    Denied,
    #[component(name = "quota")]
    Quota,
    #[component(name = "no-mem")]
    NoMem,
    #[component(name = "bad-ptr")]
    BadPtr,
    #[component(name = "timeout")]
    Timeout,
    #[component(name = "inval")]
    Inval,
    #[component(name = "exists")]
    Exists,
    #[component(name = "deadlock")]
    Deadlock,
    #[component(name = "range")]
    Range,
    #[component(name = "no-reply")]
    NoReply,
    #[component(name = "again")]
    Again,
    #[component(name = "busy")]
    Busy,
    #[component(name = "io")]
    Io,
    #[component(name = "not-sup")]
    NotSup,
}

impl From<Errno> for Error {
    fn from(e: Errno) -> Error {
        use Error::*;
        const ALL: [Error; 18] = [
            BadHandle, Revoked, PeerDied, NoClients, Denied, Quota, NoMem, BadPtr, Timeout, Inval,
            Exists, Deadlock, Range, NoReply, Again, Busy, Io, NotSup,
        ];
        // Codes run from -1 down, in this order.
        ALL[(-e.code() - 1) as usize]
    }
}

/// What a function returns: its value or the error, as WIT has it.
type Out<T> = wasmtime::Result<(Result<T, Error>,)>;

fn out<T>(r: Result<T, Errno>) -> Out<T> {
    Ok((r.map_err(Error::from),))
}

/// A handle as a component holds it (`handle = u32`), as the table has
/// it (`i32`): a value past `i32::MAX` is no handle.
fn handle(h: u32) -> i32 {
    i32::try_from(h).unwrap_or(-1)
}

/// The name of interface `iface` of the package.
fn name(iface: &str) -> String {
    format!("warden:kernel/{iface}@{VERSION}")
}

/// Every interface of the package.
pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    ipc::add_to_linker(&mut linker.instance(&name("ipc"))?)?;
    memory::add_to_linker(&mut linker.instance(&name("memory"))?)?;
    let mut task = linker.instance(&name("task"))?;
    task.func_wrap("id", |store, (): ()| Ok((store.data().shared.id.0,)))?;
    task.func_wrap("set-call-timeout", |mut store, (ns,): (i64,)| {
        let t = (ns >= 0).then(|| std::time::Duration::from_nanos(ns as u64));
        crate::host::set_call_timeout(store.data_mut(), t);
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_name() {
        assert_eq!(Error::from(Errno::BadHandle), Error::BadHandle);
        assert_eq!(Error::from(Errno::Timeout), Error::Timeout);
        assert_eq!(Error::from(Errno::NotSup), Error::NotSup);
        for e in Errno::ALL {
            assert_eq!(Error::from(e) as i32, -e.code() - 1, "{e:?}");
        }
        assert_eq!(Errno::Timeout.name(), "timeout");
    }
}

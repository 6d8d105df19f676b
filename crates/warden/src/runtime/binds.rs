//! Typed bindings checked before a system starts: each component task's
//! imported interfaces against the servers of the same system, so that
//! `warden check` and `warden run` refuse a mismatch before anything
//! runs (see `host::typed` for the check made at a task's start).

use super::{Error, Runtime};
use crate::module::Code;
use crate::task::TaskSpec;

impl Runtime {
    /// Whether `client`'s typed imports are each named by its `binds`,
    /// and match the interfaces its server exports when the server is a
    /// task of `tasks` (serving under the first name it provides).
    pub fn check_binds(&self, client: &TaskSpec, tasks: &[TaskSpec]) -> Result<(), Error> {
        if client.passive && client.serves.is_empty() {
            return Ok(());
        }
        let fail = |message: String| Error::Spawn {
            name: client.name.clone(),
            message,
        };
        let module = self.load_task_module(client)?;
        let Code::Component(linked) = &module.code else {
            return Ok(());
        };
        let component = linked.component();
        for (iface, _) in crate::host::typed_imports(component, component.engine()) {
            let bound = client
                .binds
                .iter()
                .find(|(p, _)| crate::host::iface_matches(p, &iface));
            let Some((_, service)) = bound else {
                return Err(fail(crate::host::typed_unbound(&iface)));
            };
            let server = tasks.iter().find(|t| {
                !t.serves.is_empty() && t.ipc.provides.first().is_some_and(|n| n == service)
            });
            let Some(server) = server else {
                continue;
            };
            let served = self.load_task_module(server)?;
            let Code::Component(s) = &served.code else {
                continue;
            };
            crate::host::typed_check(component, &iface, s.component(), &server.serves)
                .map_err(fail)?;
        }
        Ok(())
    }
}

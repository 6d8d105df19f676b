//! A task's network state, made when it is spawned: its grants, its flow
//! on the link, its receive budget and its preopened listeners.

use super::Runtime;
use crate::task::{TaskShared, TaskSpec};
use std::sync::{Arc, Mutex};

impl Runtime {
    /// A task's network state (grants, its flow on the link if anything
    /// can shape its sends, its receive budget) and its WASI socket
    /// descriptors (its preopened listeners).
    pub(super) fn task_net(
        &self,
        spec: &TaskSpec,
        shared: &Arc<TaskShared>,
        link_parent: Option<crate::net::fair::NodeId>,
        child: Option<&crate::host::ChildNet>,
    ) -> Result<(crate::host::TaskNet, crate::host::Sockets), String> {
        use crate::net::{fair::Bucket, link::Flow, socket::Listener, Grant};
        let grants = |list: &[String], key: &str| {
            list.iter()
                .map(|g| Grant::parse(g).map_err(|e| format!("{key}: {e}")))
                .collect::<Result<Vec<_>, _>>()
        };
        let link = &self.inner.link;
        let n = &spec.net;
        let shaped = link.rate().is_some()
            || n.bandwidth_limit.is_some()
            || link_parent.is_some_and(|p| child.is_some() || link.capped(p));
        let flow = shaped.then(|| {
            Flow::new(
                link,
                link_parent,
                n.bandwidth_share.into(),
                n.bandwidth_limit,
            )
        });
        let receive = match child {
            Some(c) => c.receive.clone(),
            None => n.receive_limit.map(|rate| {
                Arc::new(Mutex::new(Bucket::new(
                    rate,
                    crate::clock::since_start_ns(),
                )))
            }),
        };
        let _reactor = self.inner._tokio.enter();
        let mut listeners = Vec::new();
        for a in &n.preopen_listeners {
            let addr = a
                .parse()
                .map_err(|_| format!("preopen_listeners: {a:?} is not an address"))?;
            listeners.push(
                Listener::bind(&addr, n.socket_buffer)
                    .map_err(|e| format!("preopen_listeners: {a}: {e}"))?,
            );
        }
        let net = crate::host::TaskNet {
            listen: grants(&n.listen, "listen")?,
            connect: grants(&n.connect, "connect")?,
            flow,
            receive,
            buffer: n.socket_buffer,
        };
        let sockets = crate::host::Sockets::new(
            shared.clone(),
            spec.dirs.len() + spec.served_dirs.len(),
            listeners,
        )?;
        Ok((net, sockets))
    }
}

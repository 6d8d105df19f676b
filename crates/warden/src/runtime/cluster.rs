//! Joining a cluster: the runtime as one node of several (see
//! `crate::cluster`).

use super::{Error, Runtime};
use crate::cluster::{Cluster, ClusterSpec};
use std::sync::Arc;

impl Runtime {
    /// Joins the cluster `spec` describes: connects to its broker, checks
    /// the node name is free, and from then on offers the names tasks
    /// export and finds other nodes' names in lookups. Fails with a
    /// one-line reason if the broker cannot be reached or the name is
    /// taken; a runtime joins at most one cluster.
    pub fn join_cluster(&self, spec: &ClusterSpec) -> Result<(), Error> {
        let inner = &self.inner;
        if inner.cluster.get().is_some() {
            return Err(Error::Cluster("the runtime is already in a cluster".into()));
        }
        let weak = Arc::downgrade(inner);
        let task_list = Box::new(move || match weak.upgrade() {
            Some(inner) => serde_json::to_value(Runtime { inner }.task_views()).unwrap_or_default(),
            None => serde_json::Value::Array(Vec::new()),
        });
        let host = self
            .host_client(format!("cluster:{}", spec.node))
            .handing_off();
        let spans = self.spans().cloned();
        let cluster =
            Cluster::join(spec, &inner.kernel, (host, spans), task_list).map_err(Error::Cluster)?;
        inner
            .cluster
            .set(cluster)
            .map_err(|_| Error::Cluster("the runtime is already in a cluster".into()))
    }

    /// The cluster the runtime joined, if any.
    pub fn cluster(&self) -> Option<&Cluster> {
        self.inner.cluster.get()
    }
}

//! A per-request route's task template, as live upgrades change it.

use std::sync::Arc;

/// A per-request route's task template, replaced whole by a live upgrade:
/// each request's task is made from the template current when it is
/// spawned, so requests admitted before a swap run the old module and
/// those after it the new.
#[derive(Clone)]
pub(crate) struct RouteModule(Arc<std::sync::RwLock<Arc<crate::task::TaskSpec>>>);

impl RouteModule {
    pub(super) fn new(template: &crate::task::TaskSpec) -> RouteModule {
        RouteModule(Arc::new(std::sync::RwLock::new(Arc::new(template.clone()))))
    }

    /// The current template.
    pub(crate) fn get(&self) -> Arc<crate::task::TaskSpec> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `template` current.
    pub(crate) fn set(&self, template: crate::task::TaskSpec) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(template);
    }
}

//! A web server's routes as a table a manifest reload can replace while
//! requests run: a request takes the route it matched out of the table
//! (a reference count), so one admitted before a swap finishes on the
//! route it found, and the next request sees the new table.

use super::handle::{Route, RouteModule};
use super::{Handler, RouteSpec};
use crate::runtime::Runtime;
use std::sync::{Arc, RwLock};

/// The routes of one web server.
pub(crate) struct Routes {
    rt: Runtime,
    /// The address its `[[http]]` entry names (`listen`), as written.
    listen: String,
    /// The server's address, as its routes' counters name it.
    server: String,
    table: RwLock<Arc<[Arc<Route>]>>,
}

/// A per-request route as a live upgrade reaches it: its name, whether
/// its handler is a component, and its template.
pub(crate) type RouteTemplate = (String, bool, RouteModule);

impl Routes {
    pub(super) fn new(
        rt: &Runtime,
        (listen, server): (&str, String),
        specs: &[RouteSpec],
    ) -> Routes {
        let table = (specs.iter())
            .map(|r| Arc::new(Route::new(rt, r.clone(), &server)))
            .collect();
        Routes {
            rt: rt.clone(),
            listen: listen.to_string(),
            server,
            table: RwLock::new(table),
        }
    }

    /// The address its `[[http]]` entry names, as written (`127.0.0.1:0`
    /// for one bound to a port the system chose).
    pub(crate) fn listen(&self) -> &str {
        &self.listen
    }

    /// The first route whose path matches `path`.
    pub(super) fn find(&self, path: &str) -> Option<Arc<Route>> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        table.iter().find(|r| r.spec.matches(path)).cloned()
    }

    /// Every per-request route's template.
    pub(crate) fn templates(&self) -> Vec<RouteTemplate> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner()).clone();
        (table.iter())
            .filter_map(|r| {
                let component = matches!(r.spec.handler, Handler::Component(_));
                Some((r.spec.name.clone(), component, r.module()?.clone()))
            })
            .collect()
    }

    /// Makes `specs` the server's routes: a route whose spec is unchanged
    /// keeps its counters, its queue and its template (a live upgrade's
    /// module included); the others start afresh, and the counters of
    /// routes gone are no longer shown. Requests in flight finish on the
    /// route they found.
    pub(crate) fn replace(&self, specs: &[RouteSpec]) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let same = |a: &RouteSpec, b: &RouteSpec| format!("{a:?}") == format!("{b:?}");
        let next: Arc<[Arc<Route>]> = (specs.iter())
            .map(|s| match table.iter().find(|r| same(&r.spec, s)) {
                Some(kept) => kept.clone(),
                None => Arc::new(Route::new(&self.rt, s.clone(), &self.server)),
            })
            .collect();
        for gone in table
            .iter()
            .filter(|r| !next.iter().any(|n| Arc::ptr_eq(n, r)))
        {
            self.rt.unregister_route(&gone.stats);
        }
        *table = next;
    }
}

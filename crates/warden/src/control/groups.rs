//! The scheduling-group tree as operators see it (`GET /api/groups`):
//! each group with its members and, over its whole subtree, the CPU,
//! memory and bandwidth its live tasks use now.

use super::samples::{is_finished, Rates};
use crate::runtime::{Runtime, TaskView};
use crate::task::{GroupSpec, TaskId};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The group tree: `{link_rate, groups: [...], ungrouped: [ids]}`, groups
/// parents first.
pub(super) fn tree(rt: &Runtime, rates: &HashMap<TaskId, Rates>) -> Value {
    let views: Vec<TaskView> = rt
        .task_views()
        .into_iter()
        .filter(|v| !is_finished(v))
        .collect();
    let specs = &rt.config().groups;
    // Each group's ancestors, itself included, so that a member counts in
    // every enclosing group.
    let chain = |name: &str| {
        let mut out = vec![name.to_string()];
        let mut at = name.to_string();
        while let Some(p) = specs
            .iter()
            .find(|g| g.name == at)
            .and_then(|g| g.parent.clone())
        {
            out.push(p.clone());
            at = p;
        }
        out
    };
    let mut totals: HashMap<String, Totals> = HashMap::new();
    for v in &views {
        let Some(g) = &v.group else { continue };
        let r = rates.get(&v.id).copied().unwrap_or_default();
        for name in chain(g) {
            totals.entry(name).or_default().add(v, &r);
        }
    }
    let groups: Vec<Value> = specs
        .iter()
        .map(|g| group_json(g, totals.remove(&g.name).unwrap_or_default(), &views))
        .collect();
    let ungrouped: Vec<TaskId> = views
        .iter()
        .filter(|v| v.group.is_none())
        .map(|v| v.id)
        .collect();
    json!({ "link_rate": rt.config().link_rate, "groups": groups, "ungrouped": ungrouped })
}

/// One group as the API shows it: its spec, its members and its totals.
fn group_json(g: &GroupSpec, t: Totals, views: &[TaskView]) -> Value {
    let members: Vec<Value> = views
        .iter()
        .filter(|v| v.group.as_deref() == Some(g.name.as_str()))
        .map(|v| json!({ "id": v.id, "name": v.name, "parent": v.parent }))
        .collect();
    json!({
        "name": g.name,
        "parent": g.parent,
        "cpu_share": g.params.share,
        "cpu_cap": g.cap,
        "bandwidth_share": g.bandwidth_share,
        "bandwidth_limit": g.bandwidth_limit,
        "members": members,
        "tasks": t.tasks,
        "cpu_pct": super::api::rounded(t.cpu_pct, 1),
        "cpu_ms": super::api::rounded(t.cpu_ms, 3),
        "memory_bytes": t.memory_bytes,
        "sockets": t.sockets,
        "net_bytes_sent": t.sent,
        "net_bytes_received": t.received,
        "net_tx_rate": t.tx_rate.round(),
        "net_rx_rate": t.rx_rate.round(),
    })
}

/// What a group's live tasks use together.
#[derive(Default)]
struct Totals {
    tasks: u64,
    cpu_pct: f64,
    cpu_ms: f64,
    memory_bytes: u64,
    sockets: u64,
    sent: u64,
    received: u64,
    tx_rate: f64,
    rx_rate: f64,
}

impl Totals {
    fn add(&mut self, v: &TaskView, r: &Rates) {
        self.tasks += 1;
        self.cpu_pct += r.cpu_pct;
        self.cpu_ms += v.cpu_ms;
        self.memory_bytes += v.memory_bytes;
        self.sockets += u64::from(v.sockets);
        self.sent += v.net_bytes_sent;
        self.received += v.net_bytes_received;
        self.tx_rate += r.net_tx_rate;
        self.rx_rate += r.net_rx_rate;
    }
}

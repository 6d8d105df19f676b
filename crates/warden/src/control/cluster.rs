//! The cluster as operators see it: `GET /api/cluster` (every node's
//! tasks, for `warden ps --cluster`) and the remote-call counts in
//! `/metrics`.

use crate::runtime::Runtime;
use std::fmt::Write;

/// Every live node's tasks: `[{"node", "tasks": [...]}]`; `None` if the
/// runtime is in no cluster.
pub(super) fn nodes(rt: &Runtime) -> Option<serde_json::Value> {
    Some(rt.cluster()?.tasks().into())
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A counter of the calls by name.
type Field = fn(&crate::NameCounts) -> u64;

/// The per-name counters: metric, help, and its field.
const SERIES: [(&str, &str, Field); 7] = [
    (
        "warden_cluster_calls_total",
        "Calls this node's tasks made to other nodes, by name.",
        |c| c.calls,
    ),
    (
        "warden_cluster_call_failures_total",
        "Of those, calls that failed.",
        |c| c.failures,
    ),
    (
        "warden_cluster_sent_bytes_total",
        "Request bytes sent to other nodes, by name.",
        |c| c.bytes_out,
    ),
    (
        "warden_cluster_received_bytes_total",
        "Reply bytes received from other nodes, by name.",
        |c| c.bytes_in,
    ),
    (
        "warden_cluster_served_total",
        "Calls from other nodes served here, by name.",
        |c| c.served,
    ),
    (
        "warden_cluster_served_failures_total",
        "Of those, calls that ended in an error.",
        |c| c.served_failures,
    ),
    (
        "warden_cluster_busy_total",
        "Calls from other nodes refused busy (too much waiting), by name.",
        |c| c.busy,
    ),
];

/// The cluster's counters, in the Prometheus text format.
pub(super) fn metrics(rt: &Runtime, out: &mut String) {
    let Some(cluster) = rt.cluster() else { return };
    let (names, refused) = cluster.counts();
    let _ = writeln!(
        out,
        "# HELP warden_cluster_nodes Other nodes of the cluster alive now.\n\
         # TYPE warden_cluster_nodes gauge\nwarden_cluster_nodes {}",
        cluster.nodes().len()
    );
    let _ = writeln!(
        out,
        "# HELP warden_cluster_lent_portals Portals lent to other nodes and not yet released.\n\
         # TYPE warden_cluster_lent_portals gauge\nwarden_cluster_lent_portals {}",
        cluster.lent_portals()
    );
    let _ = writeln!(
        out,
        "# HELP warden_cluster_intake_bytes Bytes of frames from the broker held, not yet checked (at most 32 MiB).\n\
         # TYPE warden_cluster_intake_bytes gauge\nwarden_cluster_intake_bytes {}",
        cluster.intake_bytes()
    );
    let totals = [
        (
            "warden_cluster_dropped_frames_total",
            "Frames from the broker dropped as malformed or oversized, and questions whether a name is taken past 16 a second.",
            refused.dropped,
        ),
        (
            "warden_cluster_forged_frames_total",
            "Frames refused for their seal: unsigned, a stranger's, forged, replayed or meant for another instance.",
            refused.forged,
        ),
        (
            "warden_cluster_refused_announcements_total",
            "Announcements refused: too frequent or too large, or past the bounds on nodes and names.",
            refused.announcements,
        ),
        (
            "warden_cluster_overflowed_frames_total",
            "Frames from the broker dropped unread: the node held 32 MiB of frames not yet checked.",
            refused.overflowed,
        ),
    ];
    for (metric, help, n) in totals {
        let _ = writeln!(
            out,
            "# HELP {metric} {help}\n# TYPE {metric} counter\n{metric} {n}"
        );
    }
    for (metric, help, field) in SERIES {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for (name, c) in &names {
            let _ = writeln!(out, "{metric}{{name=\"{}\"}} {}", label(name), field(c));
        }
    }
}

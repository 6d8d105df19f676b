//! The Prometheus text exposition of every task and the runtime
//! (`GET /metrics`).

use crate::runtime::{Runtime, TaskView};
use std::fmt::Write as _;

use super::samples::is_finished;

/// A task's metric: name, Prometheus type, help text, its value.
type TaskMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&TaskView) -> Option<f64>,
);

/// One series per task for each of these.
const TASK_METRICS: &[TaskMetric] = &[
    (
        "warden_task_cpu_seconds_total",
        "counter",
        "CPU time used by the task.",
        |v| Some(v.cpu_ms / 1e3),
    ),
    (
        "warden_task_memory_bytes",
        "gauge",
        "Memory charged to the task now.",
        |v| Some(v.memory_bytes as f64),
    ),
    (
        "warden_task_memory_peak_bytes",
        "gauge",
        "Highest memory charged to the task.",
        |v| Some(v.peak_memory_bytes as f64),
    ),
    (
        "warden_task_memory_limit_bytes",
        "gauge",
        "The task's memory limit.",
        |v| v.memory_limit_bytes.map(|m| m as f64),
    ),
    (
        "warden_task_memory_guarantee_bytes",
        "gauge",
        "Bytes of the machine's memory reserved for the task.",
        |v| Some(v.memory_guarantee_bytes as f64),
    ),
    (
        "warden_task_memory_surplus_bytes",
        "gauge",
        "Memory the task holds beyond its guarantee.",
        |v| Some(v.surplus_bytes as f64),
    ),
    (
        "warden_task_ipc_calls_total",
        "counter",
        "Portal calls made and received.",
        |v| Some(v.ipc_calls as f64),
    ),
    (
        "warden_task_ipc_sent_bytes_total",
        "counter",
        "Message bytes sent.",
        |v| Some(v.bytes_sent as f64),
    ),
    (
        "warden_task_ipc_received_bytes_total",
        "counter",
        "Message bytes received.",
        |v| Some(v.bytes_received as f64),
    ),
    (
        "warden_task_net_sent_bytes_total",
        "counter",
        "Bytes the task sent on sockets.",
        |v| Some(v.net_bytes_sent as f64),
    ),
    (
        "warden_task_net_received_bytes_total",
        "counter",
        "Bytes the task received on sockets.",
        |v| Some(v.net_bytes_received as f64),
    ),
    (
        "warden_task_sockets",
        "gauge",
        "Sockets the task holds.",
        |v| Some(v.sockets as f64),
    ),
    (
        "warden_task_mapped_objects",
        "gauge",
        "Memory objects' ranges mapped into the task's memory.",
        |v| Some(v.mapped as f64),
    ),
    (
        "warden_task_mapped_bytes",
        "gauge",
        "Bytes of memory objects mapped into the task's memory (charged to their creators).",
        |v| Some(v.mapped_bytes as f64),
    ),
    (
        "warden_task_mappings_revoked_total",
        "counter",
        "Mapped ranges revoked while the task had them mapped.",
        |v| Some(v.mappings_revoked as f64),
    ),
    (
        "warden_task_connections_total",
        "counter",
        "Connections the task opened or accepted.",
        |v| Some(v.connections as f64),
    ),
    (
        "warden_task_running",
        "gauge",
        "1 while the task is alive.",
        |v| Some(if is_finished(v) { 0.0 } else { 1.0 }),
    ),
    (
        "warden_task_traps_total",
        "counter",
        "1 if the task trapped.",
        |v| Some((v.state == "trapped") as u8 as f64),
    ),
    (
        "warden_task_kills_total",
        "counter",
        "1 if the task was killed.",
        |v| Some((v.state == "killed") as u8 as f64),
    ),
];

/// The machine's budget, the root of the budget tree.
fn root_metrics(rt: &Runtime, out: &mut String) {
    let root = rt.root_memory();
    for (name, kind, help, value) in [
        (
            "warden_root_memory_limit_bytes",
            "gauge",
            "The most all tasks together may be charged (the root budget).",
            root.limit_bytes,
        ),
        (
            "warden_root_memory_bytes",
            "gauge",
            "Memory charged to the root now: guarantees, Warden's overhead per task and surplus.",
            Some(root.charged_bytes),
        ),
        (
            "warden_root_memory_guaranteed_bytes",
            "gauge",
            "Memory reserved for live tasks' guarantees.",
            Some(root.guaranteed_bytes),
        ),
        (
            "warden_root_memory_surplus_bytes",
            "gauge",
            "Memory tasks hold beyond their guarantees.",
            Some(root.surplus_bytes),
        ),
        (
            "warden_root_memory_peak_bytes",
            "gauge",
            "Highest memory charged to the root.",
            Some(root.peak_bytes),
        ),
        (
            "warden_warm_slot_bytes",
            "gauge",
            "Memory freed pool slots keep resident for their next tasks (bounded).",
            Some(root.warm_slot_bytes),
        ),
        (
            "warden_root_memory_refusals_total",
            "counter",
            "Charges the root refused.",
            Some(root.refusals),
        ),
    ] {
        if let Some(v) = value {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
    }
}

/// The Prometheus text exposition of every task and the runtime.
pub fn metrics(rt: &Runtime) -> String {
    let views = rt.task_views();
    let mut out = String::new();
    let label = |v: &TaskView| {
        let name = v.name.replace('\\', "\\\\").replace('"', "\\\"");
        format!("{{task=\"{name}\",id=\"{}\"}}", v.id)
    };
    for (name, kind, help, value) in TASK_METRICS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for v in &views {
            if let Some(x) = value(v) {
                let _ = writeln!(out, "{name}{} {x}", label(v));
            }
        }
    }
    group_metrics(rt, &views, &mut out);
    typed_metrics(&views, &mut out);
    root_metrics(rt, &mut out);
    super::routes::metrics(rt, &mut out);
    super::cluster::metrics(rt, &mut out);
    super::devices::metrics(rt, &mut out);
    super::devices::file_service_metrics(rt, &mut out);
    task_counts(&views, &mut out);
    restart_metrics(rt, &mut out);
    kernel_metrics(rt, &mut out);
    if let Some(spans) = rt.spans() {
        let name = "warden_trace_spans_dropped_total";
        let _ = writeln!(
            out,
            "# HELP {name} Spans dropped because the export queue was full.\n# TYPE {name} counter\n{name} {}",
            spans.dropped()
        );
    }
    out
}

/// Typed calls per server, interface and function: calls, failures,
/// bytes copied and the time they took.
fn typed_metrics(views: &[TaskView], out: &mut String) {
    type Field = fn(&crate::task::TypedCalls) -> f64;
    let series: [(&str, &str, Field); 4] = [
        (
            "warden_typed_calls_total",
            "Typed calls made to the function.",
            |c| c.calls as f64,
        ),
        (
            "warden_typed_call_failures_total",
            "Typed calls that failed.",
            |c| c.failures as f64,
        ),
        (
            "warden_typed_bytes_copied_total",
            "Bytes typed calls copied, both ways.",
            |c| c.bytes as f64,
        ),
        (
            "warden_typed_call_seconds_total",
            "Time typed calls took, as callers waited.",
            |c| c.ms / 1e3,
        ),
    ];
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    for (name, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for v in views {
            for c in &v.typed_calls {
                let (task, iface, func) = (esc(&v.name), esc(&c.interface), esc(&c.function));
                let labels = format!("task=\"{task}\",interface=\"{iface}\",function=\"{func}\"");
                let _ = writeln!(out, "{name}{{{labels}}} {}", value(c));
            }
        }
    }
}

/// Supervised tasks' restarts, by task and by how the run that called
/// for each ended (`reason`: exited, trapped, killed).
fn restart_metrics(rt: &Runtime, out: &mut String) {
    let name = "warden_restarts_total";
    let _ = writeln!(
        out,
        "# HELP {name} Restarts of supervised tasks, by task and by how the run before ended.\n# TYPE {name} counter"
    );
    for (task, r) in rt.all_restarts() {
        let task = task.replace('\\', "\\\\").replace('"', "\\\"");
        for (reason, n) in crate::runtime::RESTART_STATUSES.iter().zip(r.by_status) {
            if n > 0 {
                let _ = writeln!(out, "{name}{{task=\"{task}\",reason=\"{reason}\"}} {n}");
            }
        }
    }
}

/// How many tasks are alive, and how many ended, by how.
fn task_counts(views: &[TaskView], out: &mut String) {
    let count = |state: &str| views.iter().filter(|v| v.state == state).count();
    let _ = writeln!(
        out,
        "# HELP warden_tasks_live Tasks alive now.\n# TYPE warden_tasks_live gauge"
    );
    let _ = writeln!(
        out,
        "warden_tasks_live {}",
        views.iter().filter(|v| !is_finished(v)).count()
    );
    let _ = writeln!(
        out,
        "# HELP warden_tasks_ended_total Tasks that ended, by how.\n# TYPE warden_tasks_ended_total counter"
    );
    for state in ["exited", "trapped", "killed"] {
        let _ = writeln!(
            out,
            "warden_tasks_ended_total{{status=\"{state}\"}} {}",
            count(state)
        );
    }
}

/// The kernel's own time: creating and releasing tasks, slices run.
fn kernel_metrics(rt: &Runtime, out: &mut String) {
    let setup = rt.setup_stats();
    for (name, secs, what) in [
        (
            "warden_task_create_seconds",
            setup.create_seconds,
            "creating (spawn call and instantiation)",
        ),
        (
            "warden_task_teardown_seconds",
            setup.teardown_seconds,
            "releasing the stores and pool slots of",
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} Time the kernel spent {what} finished tasks.\n# TYPE {name} summary\n{name}_sum {secs}\n{name}_count {}",
            setup.tasks
        );
    }
    let stats = rt.stats();
    let _ = writeln!(
        out,
        "# HELP warden_polls_total Time slices run.\n# TYPE warden_polls_total counter\nwarden_polls_total {}",
        stats.polls
    );
    let _ = writeln!(
        out,
        "# HELP warden_host_polls_total Time slices run by a host thread that called a waiting server (the web server's).\n# TYPE warden_host_polls_total counter\nwarden_host_polls_total {}",
        stats.host_polls
    );
}

/// Per group, its subtree's network bytes (live tasks and the finished
/// ones still reported) and live sockets.
fn group_metrics(rt: &Runtime, views: &[TaskView], out: &mut String) {
    let groups = &rt.config().groups;
    if groups.is_empty() {
        return;
    }
    let inside = |task_group: &str, group: &str| {
        let mut at = Some(task_group.to_string());
        while let Some(g) = at {
            if g == group {
                return true;
            }
            at = groups
                .iter()
                .find(|x| x.name == g)
                .and_then(|x| x.parent.clone());
        }
        false
    };
    type GroupMetric = (
        &'static str,
        &'static str,
        &'static str,
        fn(&TaskView) -> f64,
    );
    const METRICS: [GroupMetric; 3] = [
        (
            "warden_group_net_sent_bytes_total",
            "counter",
            "Bytes the group's tasks sent on sockets.",
            |v| v.net_bytes_sent as f64,
        ),
        (
            "warden_group_net_received_bytes_total",
            "counter",
            "Bytes the group's tasks received on sockets.",
            |v| v.net_bytes_received as f64,
        ),
        (
            "warden_group_sockets",
            "gauge",
            "Sockets the group's tasks hold.",
            |v| v.sockets as f64,
        ),
    ];
    for (name, kind, help, value) in METRICS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for g in groups {
            let sum: f64 = views
                .iter()
                .filter(|v| v.group.as_deref().is_some_and(|t| inside(t, &g.name)))
                .map(value)
                .sum();
            let label = g.name.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "{name}{{group=\"{label}\"}} {sum}");
        }
    }
}

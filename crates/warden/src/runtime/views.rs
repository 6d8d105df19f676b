//! What operators see of the tasks: the task list, lookups by name, and
//! output.

use super::{Live, Runtime};
use crate::task::TaskId;
use std::sync::atomic::Ordering;

/// A task as operators see it, live or finished.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskView {
    /// Task id.
    pub id: TaskId,
    /// Task name.
    pub name: String,
    /// The task that spawned it.
    pub parent: Option<TaskId>,
    /// "running", "runnable", "blocked", "suspended", or how it ended:
    /// "exited", "trapped", "killed".
    pub state: String,
    /// CPU time, ms.
    pub cpu_ms: f64,
    /// Memory charged now (0 once finished), bytes.
    pub memory_bytes: u64,
    /// Its memory limit.
    pub memory_limit_bytes: Option<u64>,
    /// Bytes of the machine's memory reserved for it (0: none).
    pub memory_guarantee_bytes: u64,
    /// What it holds beyond its guarantee (0 once finished), bytes.
    pub surplus_bytes: u64,
    /// Highest memory charged.
    pub peak_memory_bytes: u64,
    /// Portal calls made and received.
    pub ipc_calls: u64,
    /// Message bytes sent.
    pub bytes_sent: u64,
    /// Message bytes received.
    pub bytes_received: u64,
    /// Bytes it sent on sockets.
    pub net_bytes_sent: u64,
    /// Bytes it received on sockets.
    pub net_bytes_received: u64,
    /// Sockets it holds now (0 once finished).
    pub sockets: u32,
    /// Connections it opened or accepted, ever.
    pub connections: u64,
    /// Memory objects' ranges mapped into its memory now (0 once
    /// finished): counted here, charged to each object's creator.
    pub mapped: u64,
    /// Their bytes.
    pub mapped_bytes: u64,
    /// Ranges revoked while it had them mapped.
    pub mappings_revoked: u64,
    /// Its scheduling group, if any (its innermost).
    pub group: Option<String>,
    /// The HTTP route whose request it handles, if it is a per-request
    /// handler.
    pub route: Option<String>,
    /// Once it has exited: its exit code.
    pub exit_code: Option<i32>,
    /// Once it has trapped or been killed: why.
    pub reason: Option<String>,
    /// How many times its supervisor restarted it before this run.
    pub restarts: u32,
    /// If it was restarted: how its run before the last restart ended.
    pub last_restart_reason: Option<String>,
    /// The WIT interfaces it serves (a typed server).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<String>,
    /// Its typed calls, per served function.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub typed_calls: Vec<crate::task::TypedCalls>,
}

impl TaskView {
    /// With its restart count, and the last restart's reason (lock
    /// order: the task table, then the restart counts).
    fn restarted(mut self, rt: &Runtime, restarts: u32) -> TaskView {
        if restarts > 0 {
            self.restarts = restarts;
            self.last_restart_reason = rt.restarts(&self.name).and_then(|r| r.last_reason);
        }
        self
    }
}

impl Runtime {
    fn live_view(&self, l: &Live) -> TaskView {
        let s = &l.shared;
        let mapped = s.maps.get().map_or((0, 0, 0), |m| m.totals());
        TaskView {
            id: s.id,
            name: s.name.clone(),
            parent: l.parent,
            state: self
                .inner
                .exec
                .task_state(s.id)
                .unwrap_or("ending")
                .to_string(),
            cpu_ms: s.cpu.charged_ns() as f64 / 1e6,
            memory_bytes: s.memory.current(),
            memory_limit_bytes: l.memory_limit,
            memory_guarantee_bytes: s.guarantee,
            surplus_bytes: s.surplus(),
            peak_memory_bytes: s.memory.peak(),
            ipc_calls: s.ipc.calls.load(Ordering::Relaxed),
            bytes_sent: s.ipc.bytes_sent.load(Ordering::Relaxed),
            bytes_received: s.ipc.bytes_received.load(Ordering::Relaxed),
            net_bytes_sent: s.net.sent.load(Ordering::Relaxed),
            net_bytes_received: s.net.received.load(Ordering::Relaxed),
            sockets: s.net.sockets(),
            connections: s.net.connections.load(Ordering::Relaxed),
            mapped: mapped.0,
            mapped_bytes: mapped.1,
            mappings_revoked: mapped.2,
            group: s.groups.first().map(|g| g.name.clone()),
            route: s.label.as_deref().map(str::to_string),
            exit_code: None,
            reason: None,
            restarts: 0,
            last_restart_reason: None,
            serves: l.passive.as_ref().map_or_else(Vec::new, |s| s.interfaces()),
            typed_calls: l
                .passive
                .as_ref()
                .map_or_else(Vec::new, |s| s.typed_calls()),
        }
        .restarted(self, l.restarts())
    }

    /// Every live task, in spawn order.
    pub fn live_tasks(&self) -> Vec<TaskView> {
        let t = self.inner.tasks.lock();
        let mut v: Vec<TaskView> = t.live.values().map(|l| self.live_view(l)).collect();
        v.sort_by_key(|t| t.id);
        v
    }

    /// Every live task and every finished one still reported, in spawn
    /// order; finished per-request HTTP handlers are left out (their
    /// route's counters sum them up).
    pub fn task_views(&self) -> Vec<TaskView> {
        let t = self.inner.tasks.lock();
        let mut v: Vec<TaskView> = t
            .live
            .values()
            .map(|l| self.live_view(l))
            .chain(t.done.values().filter(|r| r.route.is_none()).map(|r| {
                TaskView {
                    id: r.id,
                    name: r.name.clone(),
                    parent: r.parent,
                    state: r.status.to_string(),
                    cpu_ms: r.cpu_ms,
                    memory_bytes: 0,
                    memory_limit_bytes: r.memory_limit_bytes,
                    memory_guarantee_bytes: r.memory_guarantee_bytes,
                    surplus_bytes: 0,
                    peak_memory_bytes: r.peak_memory_bytes,
                    ipc_calls: r.ipc_calls,
                    bytes_sent: r.bytes_sent,
                    bytes_received: r.bytes_received,
                    net_bytes_sent: r.net_bytes_sent,
                    net_bytes_received: r.net_bytes_received,
                    sockets: 0,
                    connections: r.connections,
                    mapped: 0,
                    mapped_bytes: 0,
                    mappings_revoked: 0,
                    group: r.group.clone(),
                    route: r.route.clone(),
                    exit_code: r.exit_code,
                    reason: r.reason.clone(),
                    restarts: 0,
                    last_restart_reason: None,
                    serves: Vec::new(),
                    typed_calls: Vec::new(),
                }
                .restarted(self, r.restarts)
            }))
            .collect();
        v.sort_by_key(|t| t.id);
        v
    }

    /// A task (live, or finished recently) by id or by name.
    pub fn find(&self, id_or_name: &str) -> Option<TaskId> {
        let t = self.inner.tasks.lock();
        if let Ok(n) = id_or_name.parse::<u64>() {
            let id = TaskId(n);
            if t.live.contains_key(&id) || t.done.contains_key(&id) {
                return Some(id);
            }
        }
        let live = t.live.values().map(|l| (l.shared.id, &l.shared.name));
        let done = t.done.values().map(|r| (r.id, &r.name));
        live.chain(done)
            .filter(|(_, n)| n.as_str() == id_or_name)
            .map(|(id, _)| id)
            .max()
    }

    /// A task's output from offset `from` (counted from its first byte;
    /// the last 64 KiB are kept), and the offset after it; `None` if the
    /// task is unknown or its output is no longer kept.
    pub fn log(&self, id: TaskId, from: u64) -> Option<(Vec<u8>, u64)> {
        let t = self.inner.tasks.lock();
        let ring = match t.live.get(&id) {
            Some(l) => l.shared.log.clone(),
            None => t.done_logs.iter().find(|(i, _)| *i == id)?.1.clone(),
        };
        drop(t);
        Some(ring.read_from(from))
    }
}

/// A file service as operators see it: what the directories it serves
/// carried, counted by the tasks' WASI interposer (see
/// `crate::ipc::files`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileServiceView {
    /// The name it is reached by.
    pub name: String,
    /// Tasks whose directories it serves now.
    pub clients: usize,
    /// Requests sent to it.
    pub ops: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Bytes read from it.
    pub read_bytes: u64,
    /// Bytes written to it.
    pub written_bytes: u64,
}

/// A block device as operators see it (see `crate::dev`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceView {
    /// Its name.
    pub name: String,
    /// Its size in sectors of [`crate::DEVICE_SECTOR`] bytes.
    pub sectors: u64,
    /// Whether a task holds it now.
    pub claimed: bool,
    /// Reads done, by every task that held it.
    pub reads: u64,
    /// Writes done.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub written_bytes: u64,
    /// Flushes to the host file's storage.
    pub syncs: u64,
    /// Operations its host file failed.
    pub errors: u64,
}

impl Runtime {
    /// The file services tasks' directories are served by, by name.
    pub fn file_services(&self) -> Vec<FileServiceView> {
        let totals = self.inner.kernel.file_services.totals();
        totals
            .into_iter()
            .map(
                |(name, clients, [ops, errors, read_bytes, written_bytes])| FileServiceView {
                    name,
                    clients,
                    ops,
                    errors,
                    read_bytes,
                    written_bytes,
                },
            )
            .collect()
    }

    /// The block devices, by name.
    pub fn devices(&self) -> Vec<DeviceView> {
        let Some(devices) = self.inner.kernel.devices.get() else {
            return Vec::new();
        };
        let mut out: Vec<DeviceView> = devices
            .values()
            .map(|d| {
                let get = crate::task::DeviceCounters::get;
                let s = &d.stats;
                DeviceView {
                    name: d.name().to_string(),
                    sectors: d.sectors(),
                    claimed: d.claimed(),
                    reads: get(&s.reads),
                    writes: get(&s.writes),
                    read_bytes: get(&s.read_bytes),
                    written_bytes: get(&s.written_bytes),
                    syncs: get(&s.syncs),
                    errors: get(&s.errors),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

//! What is recorded about a finished task, as written by `--report`.

use crate::task::{TaskId, TaskShared, TaskStatus};
use serde::Serialize;
use std::sync::atomic::Ordering;

/// One finished task. Field names are the JSON report's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskReport {
    /// Task id.
    pub id: TaskId,
    /// Task name.
    pub name: String,
    /// The task that spawned it, if any.
    pub parent: Option<TaskId>,
    /// `"exited"`, `"trapped"` or `"killed"`.
    pub status: &'static str,
    /// The exit code if the task exited, else `None`.
    pub exit_code: Option<i32>,
    /// Why the task trapped or was killed.
    pub reason: Option<String>,
    /// CPU time charged to the task's account, ms: its own running, and
    /// servers' running on its behalf while it waited in calls.
    pub cpu_ms: f64,
    /// CPU time it ran on its callers' accounts as a server, ms (counted
    /// in their `cpu_ms`, and against its own CPU limit).
    pub served_cpu_ms: f64,
    /// Highest memory (linear memories + tables) charged, bytes.
    pub peak_memory_bytes: u64,
    /// The memory limit, if any.
    pub memory_limit_bytes: Option<u64>,
    /// Bytes of the machine's memory reserved for it (0: none).
    pub memory_guarantee_bytes: u64,
    /// Growth requests refused for exceeding the limit.
    pub memory_denials: u64,
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
    /// Connections it opened or accepted.
    pub connections: u64,
    /// Block-device reads it made.
    pub device_reads: u64,
    /// Block-device writes it made.
    pub device_writes: u64,
    /// Bytes it read from block devices.
    pub device_read_bytes: u64,
    /// Bytes it wrote to block devices.
    pub device_written_bytes: u64,
    /// Its scheduling group, if any.
    pub group: Option<String>,
    /// The HTTP route whose request it handled, if it was a per-request
    /// handler.
    pub route: Option<String>,
    /// Time the kernel spent creating the task, ms: its spawn call (with
    /// its module's compilation, the first time the module is used) and
    /// the instantiation (a passive service's: the spawn call only).
    pub create_ms: f64,
    /// Time the kernel spent releasing its store and pool slot once it
    /// ended, ms (0 for a passive service).
    pub teardown_ms: f64,
    /// When the task was spawned, ms since the runtime started.
    pub start_ms: f64,
    /// When it finished, ms since the runtime started.
    pub end_ms: f64,
    /// Whether a supervisor watched it: its end is its supervisor's to
    /// judge (restart it, or give up), not the system's.
    pub supervised: bool,
    /// How many times its supervisor had restarted it before this run.
    pub restarts: u32,
    /// Whether a live upgrade replaced it (its end is the upgrade's).
    pub replaced: bool,
}

impl TaskReport {
    pub(crate) fn new(
        shared: &TaskShared,
        status: TaskStatus,
        memory_limit: Option<u64>,
        start_ms: f64,
        end_ms: f64,
    ) -> Self {
        let (status, exit_code, reason) = match status {
            TaskStatus::Exited(c) => ("exited", Some(c), None),
            TaskStatus::Trapped(r) => ("trapped", None, Some(r)),
            TaskStatus::Killed(r) => ("killed", None, Some(r)),
        };
        let device =
            |counter: fn(&crate::task::DeviceCounters) -> &std::sync::atomic::AtomicU64| {
                shared
                    .device
                    .get()
                    .map_or(0, |d| counter(d).load(Ordering::Relaxed))
            };
        TaskReport {
            id: shared.id,
            name: shared.name.clone(),
            parent: None,
            status,
            exit_code,
            reason,
            cpu_ms: shared.cpu.charged_ns() as f64 / 1e6,
            served_cpu_ms: shared.cpu.served_ns() as f64 / 1e6,
            peak_memory_bytes: shared.memory.peak(),
            memory_limit_bytes: memory_limit,
            memory_guarantee_bytes: shared.guarantee,
            memory_denials: shared.memory.denials(),
            ipc_calls: shared.ipc.calls.load(Ordering::Relaxed),
            bytes_sent: shared.ipc.bytes_sent.load(Ordering::Relaxed),
            bytes_received: shared.ipc.bytes_received.load(Ordering::Relaxed),
            net_bytes_sent: shared.net.sent.load(Ordering::Relaxed),
            net_bytes_received: shared.net.received.load(Ordering::Relaxed),
            connections: shared.net.connections.load(Ordering::Relaxed),
            device_reads: device(|d| &d.reads),
            device_writes: device(|d| &d.writes),
            device_read_bytes: device(|d| &d.read_bytes),
            device_written_bytes: device(|d| &d.written_bytes),
            group: shared.groups.first().map(|g| g.name.clone()),
            route: shared.label.as_deref().map(str::to_string),
            create_ms: shared.create_ns.load(Ordering::Relaxed) as f64 / 1e6,
            teardown_ms: shared.teardown_ns.load(Ordering::Relaxed) as f64 / 1e6,
            start_ms,
            end_ms,
            supervised: false,
            restarts: 0,
            replaced: shared.replaced.load(Ordering::Relaxed),
        }
    }

    /// How the task ended, as a status.
    pub fn ending(&self) -> TaskStatus {
        let reason = || self.reason.clone().unwrap_or_default();
        match self.status {
            "exited" => TaskStatus::Exited(self.exit_code.unwrap_or(-1)),
            "trapped" => TaskStatus::Trapped(reason()),
            _ => TaskStatus::Killed(reason()),
        }
    }

    /// Whether the task exited with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }
}

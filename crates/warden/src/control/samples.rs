//! CPU use per task, sampled every second, with five minutes of history
//! for the dashboard's charts.

use crate::runtime::{Runtime, TaskView};
use crate::task::TaskId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seconds of history kept per task for the dashboard's charts.
const HISTORY_SECS: usize = 300;

/// One second of a task's life, for the charts.
#[derive(Clone, serde::Serialize)]
pub(super) struct Sample {
    /// Unix time, s.
    t: f64,
    cpu_pct: f64,
    memory_bytes: u64,
    ipc_rate: f64,
}

/// Recent CPU use per task, sampled every second, and its history.
#[derive(Default)]
pub(super) struct Samples {
    last: HashMap<TaskId, (f64, u64)>,
    pub(super) pct: HashMap<TaskId, f64>,
    pub(super) history: HashMap<TaskId, std::collections::VecDeque<Sample>>,
    at: Option<Instant>,
}

pub(super) fn sample(rt: &Runtime, samples: &Mutex<Samples>) {
    let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    if s.at
        .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
    {
        return;
    }
    let elapsed_ms =
        s.at.map_or(0.0, |at| now.duration_since(at).as_secs_f64() * 1e3);
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let views = rt.task_views();
    let mut pct = HashMap::new();
    let mut last = HashMap::new();
    for v in views.iter().filter(|v| !is_finished(v)) {
        let (cpu, rate) = match (s.last.get(&v.id), elapsed_ms > 0.0) {
            (Some(&(prev_cpu, prev_calls)), true) => (
                ((v.cpu_ms - prev_cpu) / elapsed_ms * 100.0).max(0.0),
                v.ipc_calls.saturating_sub(prev_calls) as f64 / elapsed_ms * 1e3,
            ),
            _ => (0.0, 0.0),
        };
        pct.insert(v.id, cpu);
        last.insert(v.id, (v.cpu_ms, v.ipc_calls));
        let h = s.history.entry(v.id).or_default();
        if h.len() >= HISTORY_SECS {
            h.pop_front();
        }
        h.push_back(Sample {
            t: unix,
            cpu_pct: cpu,
            memory_bytes: v.memory_bytes,
            ipc_rate: rate,
        });
    }
    s.history.retain(|id, _| last.contains_key(id));
    s.last = last;
    s.pct = pct;
    s.at = Some(now);
}

pub(super) fn is_finished(v: &TaskView) -> bool {
    matches!(v.state.as_str(), "exited" | "trapped" | "killed")
}

//! CPU use, call rate and network rates per task, sampled every second,
//! with five minutes of history for the dashboard's charts.

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
    /// Bytes per second sent and received on sockets.
    net_tx_rate: f64,
    net_rx_rate: f64,
}

/// A task's rates over the last second.
#[derive(Clone, Copy, Default, serde::Serialize)]
pub(super) struct Rates {
    pub(super) cpu_pct: f64,
    pub(super) net_tx_rate: f64,
    pub(super) net_rx_rate: f64,
}

/// The counters rates are taken from.
#[derive(Clone, Copy)]
struct Counters {
    cpu_ms: f64,
    calls: u64,
    sent: u64,
    received: u64,
}

/// Recent CPU use per task, sampled every second, and its history.
#[derive(Default)]
pub(super) struct Samples {
    last: HashMap<TaskId, Counters>,
    pub(super) rates: HashMap<TaskId, Rates>,
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
    let mut rates = HashMap::new();
    let mut last = HashMap::new();
    for v in views.iter().filter(|v| !is_finished(v)) {
        let now = Counters {
            cpu_ms: v.cpu_ms,
            calls: v.ipc_calls,
            sent: v.net_bytes_sent,
            received: v.net_bytes_received,
        };
        let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / elapsed_ms * 1e3;
        let (r, ipc_rate) = match (s.last.get(&v.id), elapsed_ms > 0.0) {
            (Some(prev), true) => (
                Rates {
                    cpu_pct: ((now.cpu_ms - prev.cpu_ms) / elapsed_ms * 100.0).max(0.0),
                    net_tx_rate: per_s(now.sent, prev.sent),
                    net_rx_rate: per_s(now.received, prev.received),
                },
                per_s(now.calls, prev.calls),
            ),
            _ => (Rates::default(), 0.0),
        };
        rates.insert(v.id, r);
        last.insert(v.id, now);
        let h = s.history.entry(v.id).or_default();
        if h.len() >= HISTORY_SECS {
            h.pop_front();
        }
        h.push_back(Sample {
            t: unix,
            cpu_pct: r.cpu_pct,
            memory_bytes: v.memory_bytes,
            ipc_rate,
            net_tx_rate: r.net_tx_rate,
            net_rx_rate: r.net_rx_rate,
        });
    }
    s.history.retain(|id, _| last.contains_key(id));
    s.last = last;
    s.rates = rates;
    s.at = Some(now);
}

pub(super) fn is_finished(v: &TaskView) -> bool {
    matches!(v.state.as_str(), "exited" | "trapped" | "killed")
}

//! The structured event log: one JSON object per line, written when asked
//! (`warden run --events FILE`): `spawn`, `exit`, `trap`, `kill` and
//! `limit` events, each with the task's id and name and the time in ms
//! since the runtime started.

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// An open event log.
#[derive(Debug)]
pub struct EventLog {
    file: Mutex<std::io::BufWriter<std::fs::File>>,
    start: Instant,
}

impl EventLog {
    /// Creates (or truncates) the log at `path`.
    pub fn create(path: &std::path::Path) -> std::io::Result<EventLog> {
        Ok(EventLog {
            file: Mutex::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
            start: Instant::now(),
        })
    }

    /// Appends one event: `fields` are added to `event`, `t_ms`, `id` and
    /// `name`. The line is flushed at once, so the log is current even if
    /// the process is killed.
    pub fn emit(&self, event: &str, id: u64, name: &str, fields: serde_json::Value) {
        let mut obj = serde_json::json!({
            "t_ms": (self.start.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            "event": event,
            "id": id,
            "name": name,
        });
        if let (Some(o), serde_json::Value::Object(extra)) = (obj.as_object_mut(), fields) {
            o.extend(extra);
        }
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(f, "{obj}");
        let _ = f.flush();
    }
}

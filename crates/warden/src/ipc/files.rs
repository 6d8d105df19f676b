//! What the tasks' served directories carried, per file service: the
//! WASI interposer (`host::wasi::served`) counts each request it sends a
//! file-system task, and the bytes read and written, under the name the
//! service is reached by; operators read the totals (`warden ps`,
//! `/api/file-services`, the `warden_file_service_*` metrics).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// One file service's counters, shared by every task that reaches it.
#[derive(Default, Debug)]
pub struct FileServiceStats {
    /// Requests sent.
    pub ops: AtomicU64,
    /// Requests that failed (the server's error, or its absence).
    pub errors: AtomicU64,
    /// File and directory bytes read.
    pub read_bytes: AtomicU64,
    /// File bytes written.
    pub written_bytes: AtomicU64,
}

impl FileServiceStats {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// The counters of every file service some task's manifest entry names.
/// Only manifest entries make one (a task's children serve no
/// directories), so the map is as long as the manifest.
#[derive(Default)]
pub struct FileServices(Mutex<BTreeMap<String, Arc<FileServiceStats>>>);

/// A file service's totals: its name, the tasks that reach it now, and
/// its counters (ops, errors, read bytes, written bytes).
pub type FileServiceTotals = (String, usize, [u64; 4]);

impl FileServices {
    /// The counters of the service named `name`, made at its first use.
    pub fn stats(&self, name: &str) -> Arc<FileServiceStats> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(name.to_string()).or_default().clone()
    }

    /// Every service's totals, by name.
    pub fn totals(&self) -> Vec<FileServiceTotals> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(name, s)| {
                let c = [&s.ops, &s.errors, &s.read_bytes, &s.written_bytes];
                (
                    name.clone(),
                    Arc::strong_count(s) - 1,
                    c.map(|a| a.load(Relaxed)),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_of_one_service_share_its_counters() {
        let f = FileServices::default();
        let (a, b) = (f.stats("fs"), f.stats("fs"));
        FileServiceStats::add(&a.ops, 2);
        FileServiceStats::add(&b.read_bytes, 10);
        assert_eq!(f.totals(), vec![("fs".to_string(), 2, [2, 0, 10, 0])]);
        drop((a, b));
        assert_eq!(f.totals()[0].1, 0, "no task reaches it now");
    }
}

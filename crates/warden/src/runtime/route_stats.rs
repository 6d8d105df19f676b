//! Per-route counters: requests by status code, a latency histogram
//! (Prometheus conventions: cumulative `le` buckets in seconds, `_sum`,
//! `_count`), the latencies of the last [`RECENT`] requests (for exact
//! percentiles: a bucket's bound is not a measurement), requests in
//! flight and waiting. Lock-free; pure data.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, seconds (`+Inf` is implicit).
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How many of the latest requests' latencies are kept, for percentiles.
pub const RECENT: usize = 1024;

/// One route's counters.
#[derive(Debug)]
pub struct RouteStats {
    /// The route's name.
    pub name: String,
    /// Its path pattern.
    pub path: String,
    /// The server's address.
    pub server: String,
    /// What answers it: `"module"` or `"service"`.
    pub kind: &'static str,
    /// Requests answered, by status code (index: code − 100).
    codes: Box<[AtomicU64]>,
    /// Requests per latency bucket (not cumulative; the last is `+Inf`).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
    /// The latest requests' latencies, µs: a ring written at
    /// `recent_next % RECENT`.
    recent: Box<[AtomicU32]>,
    recent_next: AtomicU64,
    /// Requests being handled now.
    pub in_flight: AtomicI64,
    /// Requests waiting for a free handler slot now.
    pub queued: AtomicI64,
}

impl RouteStats {
    /// Zeroed counters.
    pub fn new(name: &str, path: &str, server: &str, kind: &'static str) -> RouteStats {
        RouteStats {
            name: name.into(),
            path: path.into(),
            server: server.into(),
            kind,
            codes: (100..600).map(|_| AtomicU64::new(0)).collect(),
            buckets: Default::default(),
            recent: (0..RECENT).map(|_| AtomicU32::new(0)).collect(),
            recent_next: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            queued: AtomicI64::new(0),
        }
    }

    /// Counts one answered request.
    pub fn record(&self, status: u16, latency: Duration) {
        if let Some(c) = self.codes.get(usize::from(status).wrapping_sub(100)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let s = latency.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(latency.as_nanos() as u64, Ordering::Relaxed);
        let at = self.recent_next.fetch_add(1, Ordering::Relaxed) as usize % RECENT;
        let us = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        self.recent[at].store(us, Ordering::Relaxed);
    }

    /// Requests answered with each status code seen, ascending.
    pub fn codes(&self) -> Vec<(u16, u64)> {
        self.codes
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u16 + 100, c.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// Requests answered.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Total latency of the requests answered, seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
    }

    /// Cumulative bucket counts: for each bound of [`BUCKETS`] and then
    /// `+Inf`, the requests answered in at most that long.
    pub fn cumulative(&self) -> Vec<u64> {
        let mut total = 0;
        self.buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect()
    }

    /// The latency that `q` (0..1) of the last [`RECENT`] requests did not
    /// exceed, seconds (nearest rank, to the µs); `None` before the first
    /// request. A request whose latency is being stored while this reads
    /// may be seen with the latency its slot held before.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = (self.recent_next.load(Ordering::Relaxed) as usize).min(RECENT);
        if n == 0 {
            return None;
        }
        let mut us: Vec<u32> = self.recent[..n]
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect();
        us.sort_unstable();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        Some(f64::from(us[rank - 1]) / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_codes_and_buckets() {
        let s = RouteStats::new("r", "/r", "127.0.0.1:1", "module");
        s.record(200, Duration::from_micros(300));
        s.record(200, Duration::from_millis(3));
        s.record(503, Duration::from_secs(60));
        s.record(999, Duration::from_millis(1)); // not a status: counted as a request only
        assert_eq!(s.codes(), vec![(200, 2), (503, 1)]);
        assert_eq!(s.count(), 4);
        let cum = s.cumulative();
        assert_eq!(cum.len(), BUCKETS.len() + 1);
        assert_eq!(cum[0], 1); // <= 0.5 ms
        assert_eq!(cum[1], 2); // <= 1 ms
        assert_eq!(cum[3], 3); // <= 5 ms
        assert_eq!(cum[BUCKETS.len() - 1], 3);
        assert_eq!(*cum.last().unwrap(), 4);
        assert!((s.sum_seconds() - 60.0043).abs() < 1e-6);
        // Measured latencies, not bucket bounds: 0.3 ms, 1 ms, 3 ms, 60 s.
        assert_eq!(s.quantile(0.5), Some(0.001));
        assert_eq!(s.quantile(0.75), Some(0.003));
        assert_eq!(s.quantile(1.0), Some(60.0));
    }

    /// A 100 ms request is 100 ms at every percentile (its bucket's bound
    /// is 250 ms); past [`RECENT`] requests only the latest count.
    #[test]
    fn percentiles_are_of_the_latest_requests() {
        let s = RouteStats::new("r", "/r", "127.0.0.1:1", "module");
        assert_eq!(s.quantile(0.5), None);
        s.record(200, Duration::from_micros(100_300));
        assert_eq!(s.quantile(0.5), Some(0.1003));
        assert_eq!(s.quantile(0.99), Some(0.1003));
        for _ in 0..RECENT {
            s.record(200, Duration::from_millis(2));
        }
        assert_eq!(s.quantile(1.0), Some(0.002));
    }
}

//! CPU caps: at most a fraction of one core over a window.

/// A cap of `fraction` of one core per `window_ns`. CPU is charged as it
/// is used; once the window's allowance is spent, the capped entry is not
/// eligible until the next window starts. An entry can overrun its
/// allowance by at most one time slice (the slice it was running).
#[derive(Debug, Clone)]
pub struct Cap {
    allowance: u64,
    window: u64,
    start: u64,
    used: u64,
}

impl Cap {
    /// A cap of `fraction` (0 < fraction ≤ 1) of a core over `window_ns`.
    pub fn new(fraction: f64, window_ns: u64) -> Cap {
        let window = window_ns.max(1);
        Cap {
            allowance: (fraction.clamp(0.0, 1.0) * window as f64) as u64,
            window,
            start: 0,
            used: 0,
        }
    }

    fn roll(&mut self, now: u64) {
        if now >= self.start + self.window {
            self.start = now - (now - self.start) % self.window;
            self.used = 0;
        }
    }

    /// Records `ns` of CPU used, ending at `now`.
    pub fn charge(&mut self, now: u64, ns: u64) {
        self.roll(now);
        self.used += ns;
    }

    /// `Some(t)` if the allowance is spent: eligible again at `t`.
    pub fn throttled_until(&mut self, now: u64) -> Option<u64> {
        self.roll(now);
        (self.used >= self.allowance).then_some(self.start + self.window)
    }
}

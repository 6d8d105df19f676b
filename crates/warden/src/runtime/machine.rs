//! The machine's memory as the root of the budget tree.
//!
//! Every byte charged to a task (its linear memories and tables, memory
//! objects, message buffers, handles, names) is charged to the root too,
//! beyond what its guarantee (or its group's) reserved there already
//! (see `task::root`), and so is a fixed overhead per live task for what
//! Warden itself holds for it (its store, fiber stack and tables:
//! [`TASK_OVERHEAD`]). A charge
//! the root cannot pay is refused the way a task's own limit refuses it,
//! so that no task, limited or not, can bring the kernel's OOM killer on
//! the whole process.
//!
//! The root's default limit is what the process may use (the smallest
//! `memory.max` of its cgroup and the cgroup's ancestors, or `MemTotal`
//! when no cgroup sets one) less a reserve for the host process itself:
//! an eighth of it, at least 512 MiB. That reserve holds Warden's code,
//! Wasmtime's compiled modules, the web servers' buffers (their own
//! budgets, 256 MiB each by default) and the allocator's slack.
//!
//! The parsing here is pure; [`default_limit`] reads the files.

use crate::task::account::Refused;
use crate::units::format_size;

/// Charged to the root (not to the task's own account) for each live
/// task: its Wasmtime store, the touched part of its fiber stack and its
/// tables, as the benchmark's idle-task figure measures them (about
/// 16 KiB a task at 100,000 tasks). A task that runs deeper touches more
/// of its stack; its linear memory is charged whole while only what it
/// touches is resident, which more than makes up for that.
pub const TASK_OVERHEAD: u64 = 16 << 10;

/// The smallest reserve left to the host process.
pub const MIN_RESERVE: u64 = 512 << 20;

/// The root budget now (see [`crate::Runtime::root_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RootMemory {
    /// The most all tasks together may be charged (`None`: no limit,
    /// where the machine's memory could not be read).
    pub limit_bytes: Option<u64>,
    /// Charged now: guarantees, [`TASK_OVERHEAD`] per task, and every
    /// task's charges beyond its guarantee.
    pub charged_bytes: u64,
    /// Reserved for live tasks' guarantees.
    pub guaranteed_bytes: u64,
    /// Surplus in use: charges beyond guarantees and overheads.
    pub surplus_bytes: u64,
    /// The highest charge so far.
    pub peak_bytes: u64,
    /// Charges refused because the root was full.
    pub refusals: u64,
    /// Memory the pool's free slots keep resident for their next tasks
    /// (bounded by the runtime; not charged to any task).
    pub warm_slot_bytes: u64,
}

/// The root's default limit, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootLimit {
    /// Bytes all tasks together may be charged.
    pub bytes: u64,
    /// What the process may use before the reserve is taken off.
    pub usable: u64,
    /// Where `usable` came from ("cgroup memory.max" or "MemTotal").
    pub source: &'static str,
}

/// The reserve kept back from `usable` bytes: an eighth, at least
/// [`MIN_RESERVE`], never more than half.
pub fn reserve(usable: u64) -> u64 {
    (usable / 8).max(MIN_RESERVE).min(usable / 2)
}

/// The root's limit for a process that may use `usable` bytes.
pub fn root_of(usable: u64, source: &'static str) -> RootLimit {
    RootLimit {
        bytes: usable - reserve(usable),
        usable,
        source,
    }
}

/// `MemTotal` from the text of `/proc/meminfo`, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => kib.checked_mul(1024),
        Some(_) => None,
    }
}

/// A cgroup limit file's value (`memory.max` of cgroup v2, or v1's
/// `memory.limit_in_bytes`): `None` for no limit ("max", or v1's page
/// counter maximum).
pub fn cgroup_limit(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    // cgroup v1 says "no limit" with the largest page-aligned i64.
    (v < (1 << 62)).then_some(v)
}

/// The cgroup v2 path of the process from `/proc/self/cgroup` (`0::/a/b`).
pub fn cgroup_v2_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// The cgroup v1 path of the process's memory controller.
pub fn cgroup_v1_memory_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })
}

/// The smallest limit along a cgroup path and its ancestors up to the
/// hierarchy's mount point (in a container, the container's own cgroup),
/// each read with `read(dir)` (`dir` relative to the mount point, `""`
/// for the mount point itself).
pub fn smallest_on_path(path: &str, mut read: impl FnMut(&str) -> Option<u64>) -> Option<u64> {
    let mut smallest: Option<u64> = None;
    let mut dir = path.trim_end_matches('/');
    loop {
        if let Some(v) = read(dir) {
            smallest = Some(smallest.map_or(v, |s| s.min(v)));
        }
        match dir.rfind('/') {
            Some(i) => dir = &dir[..i],
            None => return smallest,
        }
    }
}

/// The root's default limit on this machine (see the module docs); `None`
/// where neither a cgroup limit nor `/proc/meminfo` can be read.
pub fn default_limit() -> Option<RootLimit> {
    let read = |p: String| std::fs::read_to_string(p).ok();
    let cgroup = read("/proc/self/cgroup".into()).and_then(|text| {
        if let Some(path) = cgroup_v2_path(&text) {
            let got = smallest_on_path(path, |d| {
                read(format!("/sys/fs/cgroup{d}/memory.max")).and_then(|t| cgroup_limit(&t))
            });
            if got.is_some() {
                return got;
            }
        }
        let path = cgroup_v1_memory_path(&text)?;
        smallest_on_path(path, |d| {
            read(format!("/sys/fs/cgroup/memory{d}/memory.limit_in_bytes"))
                .and_then(|t| cgroup_limit(&t))
        })
    });
    let total = read("/proc/meminfo".into()).and_then(|t| mem_total(&t));
    match (cgroup, total) {
        (Some(c), Some(t)) if c < t => Some(root_of(c, "cgroup memory.max")),
        (Some(c), None) => Some(root_of(c, "cgroup memory.max")),
        (_, Some(t)) => Some(root_of(t, "MemTotal")),
        (None, None) => None,
    }
}

/// Why a task could not be given its overhead: the root is full.
pub fn refusal(r: &Refused) -> String {
    format!(
        "the machine's memory budget is full: a new task needs {} more, {} of {} are charged",
        format_size(TASK_OVERHEAD),
        format_size(r.wanted - TASK_OVERHEAD.min(r.wanted)),
        format_size(r.limit)
    )
}

/// The root's limit: the configured one, else the machine's (unlimited
/// where the machine's cannot be read).
pub(super) fn root_limit(config: &super::RuntimeConfig) -> u64 {
    config
        .memory_limit
        .or_else(|| default_limit().map(|r| r.bytes))
        .unwrap_or(u64::MAX)
}

impl super::Runtime {
    /// The machine's budget, the root of the budget tree: its limit, what
    /// is charged now (guarantees, [`TASK_OVERHEAD`] per task and
    /// surplus) and the refusals it made.
    pub fn root_memory(&self) -> RootMemory {
        let root = &self.inner.tasks.root;
        let account = root.account();
        RootMemory {
            limit_bytes: Some(account.limit()).filter(|&l| l != u64::MAX),
            charged_bytes: account.current(),
            guaranteed_bytes: root.guaranteed(),
            surplus_bytes: root.surplus(),
            peak_bytes: account.peak(),
            refusals: account.denials(),
            warm_slot_bytes: super::setup::warm_bytes(self.engine()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(text), Some(24_576_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn cgroup_limits_and_no_limit() {
        assert_eq!(cgroup_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(cgroup_limit("max\n"), None);
        assert_eq!(cgroup_limit("9223372036854771712\n"), None);
    }

    #[test]
    fn cgroup_paths_of_both_versions() {
        let v2 = "0::/system.slice/warden.service\n";
        assert_eq!(cgroup_v2_path(v2), Some("/system.slice/warden.service"));
        let v1 = "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n";
        assert_eq!(cgroup_v1_memory_path(v1), Some("/docker/abc"));
        assert_eq!(cgroup_v2_path(v1), None);
    }

    #[test]
    fn the_smallest_limit_on_the_path_wins() {
        let limits = |d: &str| match d {
            "" => Some(16 << 30),
            "/a" => Some(4 << 30),
            "/a/b" => None,
            "/a/b/c" => Some(8 << 30),
            _ => None,
        };
        assert_eq!(smallest_on_path("/a/b/c", limits), Some(4 << 30));
        assert_eq!(smallest_on_path("/", limits), Some(16 << 30));
        assert_eq!(smallest_on_path("/z", limits), Some(16 << 30));
        assert_eq!(smallest_on_path("/z", |_| None), None);
    }

    #[test]
    fn the_reserve_is_an_eighth_at_least_512_mib_at_most_half() {
        assert_eq!(reserve(24 << 30), 3 << 30);
        assert_eq!(reserve(2 << 30), 512 << 20);
        assert_eq!(reserve(512 << 20), 256 << 20);
        let r = root_of(24 << 30, "MemTotal");
        assert_eq!(r.bytes, 21 << 30);
    }
}

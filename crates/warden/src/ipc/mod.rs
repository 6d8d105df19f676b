//! Inter-task communication: the kernel objects a task reaches through
//! handles, and their semantics.
//!
//! - [`handle`]: each task's table of handles, generational and private.
//! - [`service`]: services, portals and calls in progress. A call copies
//!   the request (bytes and handles) into a kernel buffer, queues it on the
//!   service, and blocks the client until the server replies.
//! - [`names`]: the name service, with waiting lookups.
//! - [`client`]: calls made by the host itself, not by a task.
//! - [`exchange`]: a servlet request's stream of body and answer.
//! - [`memobj`]: kernel-owned memory objects with views and revocation.
//! - [`permit`]: grants of access to a range of a task's own memory.
//! - [`files`]: what tasks' served directories carried, per file service.
//!
//! Nothing here touches Wasmtime: the host functions in `crate::host`
//! check and copy guest memory and call into these types.
//!
//! # Termination rules
//!
//! 1. A task's death drops its handle table. Dropping a service's last
//!    handle closes the service: every queued call fails with
//!    [`Errno::PeerDied`] at once, later calls fail the same way.
//! 2. Dropping a call in progress (the server died holding it) fails that
//!    call with `PeerDied`; closing it explicitly fails it with
//!    [`Errno::NoReply`].
//! 3. A client that dies while queued or served abandons its call: its
//!    request is dropped at once, and the server's `reply` reports
//!    `PeerDied`.
//! 4. Dropping the last portal to a service wakes a server blocked in
//!    `recv`, which then reports [`Errno::NoClients`] (names registered in
//!    the name service count as portals).
//! 5. Before a dead task's memory is released, every permit it granted and
//!    every memory object it created is revoked, and its names are removed.

pub mod call;
pub mod client;
pub mod exchange;
pub mod files;
pub mod handle;
pub mod memobj;
pub mod names;
pub mod permit;
pub mod service;
pub mod supervisor;

/// Locks `m`, taking over the state of a holder that panicked (a lock
/// here guards plain data, never left half-changed by a panic).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub use handle::{HandleTable, Object, MOVE};

/// Error codes of the `warden` host functions, as the guest sees them.
/// The same values are named `WARDEN_E*` in `sdk/c/warden.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[repr(i32)]
pub enum Errno {
    /// not a valid handle of this task, or a handle of the wrong kind
    #[error("bad handle")]
    BadHandle = -1,
    /// the object was revoked
    #[error("revoked")]
    Revoked = -2,
    /// the task at the other end died, or closed the service
    #[error("peer died")]
    PeerDied = -3,
    /// no portal to the service is left
    #[error("no clients")]
    NoClients = -4,
    /// not permitted (manifest grants, read-only access)
    #[error("denied")]
    Denied = -5,
    /// over a quota: message size, handles per message, handle table
    #[error("quota exceeded")]
    Quota = -6,
    /// over the task's memory budget
    #[error("out of memory")]
    NoMem = -7,
    /// a pointer or length outside the task's memory
    #[error("bad pointer")]
    BadPtr = -8,
    /// the wait timed out
    #[error("timed out")]
    Timeout = -9,
    /// an argument is not valid
    #[error("invalid argument")]
    Inval = -10,
    /// the name is already registered
    #[error("already exists")]
    Exists = -11,
    /// the call would wait for the calling task itself
    #[error("would deadlock")]
    Deadlock = -12,
    /// an offset or length outside the object
    #[error("out of range")]
    Range = -13,
    /// the server closed the call without replying
    #[error("no reply")]
    NoReply = -14,
    /// the call must wait (only `call_fast` returns it: the SDK's
    /// `warden_call` then makes the call with `call`)
    #[error("would wait")]
    Again = -15,
    /// a node of the cluster has too many calls waiting to be served
    /// (from this caller's node, or for this name): try again later
    #[error("busy")]
    Busy = -16,
    /// a device's host file failed the operation
    #[error("I/O error")]
    Io = -17,
    /// not supported here: a mapping of memory a component, a passive
    /// task, or this process cannot map (the copying calls still work)
    #[error("not supported")]
    NotSup = -18,
}

/// Runtime-wide IPC state shared by every task.
#[derive(Default)]
pub struct Kernel {
    /// The name service.
    pub names: names::Names,
    /// This runtime's node name, once it joins a cluster.
    pub node: std::sync::OnceLock<String>,
    /// The runtime's block devices, set once at its start.
    pub devices: std::sync::OnceLock<crate::dev::Devices>,
    /// The file services tasks' directories are served by, counted.
    pub file_services: files::FileServices,
    /// Where spans go, if tracing is on: traced tasks' calls record theirs.
    pub spans: std::sync::OnceLock<std::sync::Arc<crate::telemetry::Exporter>>,
}

impl Errno {
    /// The error a code stands for (`PeerDied` for unknown codes).
    pub fn from_code(code: i32) -> Errno {
        Errno::ALL
            .into_iter()
            .find(|e| e.code() == code)
            .unwrap_or(Errno::PeerDied)
    }

    /// Every code, for tables and tests.
    pub const ALL: [Errno; 18] = [
        Errno::BadHandle,
        Errno::Revoked,
        Errno::PeerDied,
        Errno::NoClients,
        Errno::Denied,
        Errno::Quota,
        Errno::NoMem,
        Errno::BadPtr,
        Errno::Timeout,
        Errno::Inval,
        Errno::Exists,
        Errno::Deadlock,
        Errno::Range,
        Errno::NoReply,
        Errno::Again,
        Errno::Busy,
        Errno::Io,
        Errno::NotSup,
    ];

    /// The code as returned to the guest.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Its case of `warden:kernel/errors.error` (`sdk/wit/kernel.wit`).
    pub fn name(self) -> &'static str {
        Errno::NAMES[(-self.code() - 1) as usize]
    }

    /// The cases of `warden:kernel/errors.error`, in the order of [`Errno::ALL`].
    pub const NAMES: [&'static str; 18] = [
        "bad-handle",
        "revoked",
        "peer-died",
        "no-clients",
        "denied",
        "quota",
        "no-mem",
        "bad-ptr",
        "timeout",
        "inval",
        "exists",
        "deadlock",
        "range",
        "no-reply",
        "again",
        "busy",
        "io",
        "not-sup",
    ];
}

/// Whether `name` matches one of `patterns`: exact, or a prefix ending in `*`.
pub fn name_allowed(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => p == name,
    })
}

/// Kernel objects a task owns and that must be revoked when it dies.
#[derive(Default, Debug)]
pub struct Owned {
    mems: Vec<std::sync::Weak<memobj::MemObject>>,
    permits: Vec<std::sync::Weak<permit::Permit>>,
}

impl Owned {
    pub(crate) fn add_mem(&mut self, m: &std::sync::Arc<memobj::MemObject>) {
        prune(&mut self.mems);
        self.mems.push(std::sync::Arc::downgrade(m));
    }

    pub(crate) fn add_permit(&mut self, p: &std::sync::Arc<permit::Permit>) {
        prune(&mut self.permits);
        self.permits.push(std::sync::Arc::downgrade(p));
    }

    /// Revokes everything (rule 5); the owner is dead or dying.
    pub fn revoke_all(&mut self) {
        for p in self.permits.drain(..).filter_map(|w| w.upgrade()) {
            p.revoke();
        }
        for m in self.mems.drain(..).filter_map(|w| w.upgrade()) {
            m.revoke_all_and_free();
        }
    }
}

/// Drops dead weak references once the list doubles, keeping pushes O(1)
/// amortised.
fn prune<T>(v: &mut Vec<std::sync::Weak<T>>) {
    if v.len() >= 16 && v.len().is_power_of_two() {
        v.retain(|w| w.strong_count() > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_patterns() {
        let p = vec!["kv".to_string(), "log.*".to_string()];
        assert!(name_allowed(&p, "kv"));
        assert!(!name_allowed(&p, "kv2"));
        assert!(name_allowed(&p, "log.errors"));
        assert!(!name_allowed(&p, "logs"));
        assert!(name_allowed(&["*".to_string()], "anything"));
        assert!(!name_allowed(&[], "kv"));
    }

    #[test]
    fn codes_are_distinct_and_negative() {
        let mut seen = std::collections::HashSet::new();
        for e in Errno::ALL {
            assert!(e.code() < 0);
            assert!(seen.insert(e.code()));
        }
    }
}

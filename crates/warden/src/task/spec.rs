//! What to start: a task's spec, its network allowances, and the
//! scheduling groups tasks belong to, with the checks a spec must pass
//! whoever made it (a manifest, an embedder, a parent task).

use super::{net, MemoryPolicy, Output};
use crate::sched::{Params, PolicyKind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything needed to start a task: what to run, and its limits, its
/// standard streams, what it may reach by IPC, how it is scheduled and
/// its network allowances, each a group of its own. Made by
/// [`TaskSpec::new`] with defaults and changed field by field; the
/// groups may gain fields without breaking anyone.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TaskSpec {
    /// Unique name (for reports and output prefixes).
    pub name: String,
    /// The module file (`.wasm`, or `.wat` text).
    pub module: PathBuf,
    /// Arguments after argv\[0\] (argv\[0\] is the module's file name).
    pub args: Vec<String>,
    /// Environment variables; the task sees these and no others.
    pub env: Vec<(String, String)>,
    /// Preopened directories: guest path, host path.
    pub dirs: Vec<(String, PathBuf)>,
    /// Preopened directories a file-system task serves: guest path, the
    /// name its service is registered under. Preopened after `dirs`.
    pub served_dirs: Vec<(String, String)>,
    /// Its memory and CPU budgets.
    pub limits: Limits,
    /// Its standard streams.
    pub stdio: Stdio,
    /// What it may reach by IPC, and its message quotas.
    pub ipc: IpcSpec,
    /// Its place and weight in the scheduler.
    pub sched: SchedSpec,
    /// Its network allowances and budget.
    pub net: NetSpec,
    /// A label naming what the task was started to serve (a web route's
    /// per-request handler is labelled with the route's name): shown to
    /// operators, and a labelled task's end does not count as the end of
    /// one of the system's own tasks.
    pub label: Option<Arc<str>>,
    /// The trace span its run is a child of (a request's), if traced
    /// (see `telemetry`).
    pub trace: Option<crate::telemetry::Context>,
    /// A passive service: a reactor module whose handler runs on its
    /// callers' threads, registered under its first `provides` name.
    pub passive: bool,
    /// CPU one call to a passive service may use; past it the service
    /// ends (callers get `PeerDied`). Also bounds how long a kill of a
    /// caller inside the call waits for it (default 1 s).
    pub call_cpu_limit: Duration,
    /// When its end calls for a restart by its supervisor (a system's
    /// task; default temporary: never).
    pub restart: Restart,
    /// How long, once a live upgrade has taken its names over, it may go
    /// on answering the calls it had received before it is killed.
    pub drain: Duration,
    /// The live task it replaces (a live upgrade): it may register the
    /// names that task holds, taking them over; the old task's services
    /// send their calls on to its.
    pub replaces: Option<super::TaskId>,
    /// The state the task it replaces handed over, for its
    /// `warden_upgrade_restore` (see `task::handover`).
    pub handed: Option<super::handover::Handed>,
    /// The WIT interfaces a component task serves (`example:kv/store`,
    /// or with a version), under its first `provides` name.
    pub serves: Vec<String>,
    /// What a component task's imported interfaces are bound to:
    /// (interface, the name of the service serving it).
    pub binds: Vec<(String, String)>,
    /// Longest a typed call waits for its server (none: no bound).
    pub call_timeout: Option<Duration>,
}

pub use warden_policy::supervise::{Intensity, Restart, Strategy};

/// A supervisor of a system's tasks (OTP's, with Alta's accounting):
/// which members it restarts when one ends, and what bounds its
/// restarts. Members are task names or other supervisors' names, in
/// order (the order `rest_for_one` follows).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SupervisorSpec {
    /// Unique among the system's supervisors and tasks.
    pub name: String,
    /// Which members a restart takes with it.
    pub strategy: Strategy,
    /// At most this many restarts in this window; past it, it gives up.
    pub intensity: Intensity,
    /// The first restart's delay in a window, doubling per restart.
    pub backoff: Duration,
    /// Its members, in order.
    pub members: Vec<String>,
    /// CPU its restarts may cost (the spawns it makes); past it, it
    /// gives up.
    pub cpu_limit: Option<Duration>,
}

/// Default for [`TaskSpec::drain`].
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// Default for [`SupervisorSpec::backoff`].
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(10);

impl SupervisorSpec {
    /// A one-for-one supervisor of `members`, allowing 5 restarts in
    /// 10 s, each after a backoff of 10 ms doubling within the window.
    pub fn new(name: impl Into<String>, members: Vec<String>) -> SupervisorSpec {
        SupervisorSpec {
            name: name.into(),
            strategy: Strategy::OneForOne,
            intensity: Intensity::default(),
            backoff: DEFAULT_BACKOFF,
            members,
            cpu_limit: None,
        }
    }
}

/// A task's memory and CPU budgets.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Limits {
    /// Bytes of linear memory plus tables; `None` for no limit.
    pub memory_limit: Option<u64>,
    /// What a growth past `memory_limit` does, and what is done to the
    /// task when its surplus is reclaimed (see `task::root`).
    pub on_memory_limit: MemoryPolicy,
    /// Bytes of the machine's memory set aside for it at spawn, which it
    /// can always have (0: none; at most `memory_limit`).
    pub memory_guarantee: u64,
    /// Whose surplus is reclaimed first: the lowest priority's.
    pub memory_priority: i32,
    /// CPU time after which the task is killed; `None` for no limit.
    pub cpu_limit: Option<Duration>,
    /// At its CPU limit, suspend and notify the parent instead of dying
    /// (only for children; a task without a parent is killed).
    pub on_cpu_limit_notify: bool,
}

/// A task's standard streams.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stdio {
    /// Where the task's stdout goes.
    pub stdout: Output,
    /// Where the task's stderr goes.
    pub stderr: Output,
    /// Whether the task reads the host's stdin (otherwise it reads nothing).
    pub stdin_inherit: bool,
    /// Bytes the task reads on stdin instead (an HTTP request's body).
    pub stdin_bytes: Option<bytes::Bytes>,
    /// A body the task reads on stdin as it arrives (a request's body
    /// too long to wait for); before `stdin_bytes`.
    pub stdin_stream: Option<crate::pipe::StreamedInput>,
}

/// What a task may reach by IPC, and its quotas.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IpcSpec {
    /// Names the task may register (exact, or a prefix ending in `*`).
    pub provides: Vec<String>,
    /// Names the task may look up.
    pub uses: Vec<String>,
    /// Of the names it registers, those other nodes of a cluster may call
    /// (exact, or a prefix ending in `*`; each within `provides`).
    pub export: Vec<String>,
    /// Modules it may spawn children from, by name.
    pub modules: Vec<(String, PathBuf)>,
    /// Block devices of the runtime it may open, by name (see `dev`).
    pub devices: Vec<String>,
    /// Most handles the task may hold at once.
    pub max_handles: usize,
    /// Largest message (request or reply) the task may send, bytes.
    pub max_message_bytes: u64,
    /// Most handles one message of the task may carry.
    pub max_message_handles: u64,
}

impl Default for IpcSpec {
    fn default() -> Self {
        IpcSpec {
            provides: vec![],
            uses: vec![],
            export: vec![],
            modules: vec![],
            devices: vec![],
            max_handles: DEFAULT_MAX_HANDLES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_message_handles: DEFAULT_MAX_MESSAGE_HANDLES,
        }
    }
}

/// A task's place and weight in the scheduler.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SchedSpec {
    /// The scheduling group it belongs to (`None`: the root).
    pub group: Option<String>,
    /// Its share, tickets and priority within its group.
    pub params: Params,
    /// At most this fraction of one core (0 < cap ≤ 1).
    pub cap: Option<f64>,
    /// As a server, run on callers' scheduling contexts (default true).
    pub inheritance: bool,
}

impl Default for SchedSpec {
    fn default() -> Self {
        SchedSpec {
            group: None,
            params: Params::default(),
            cap: None,
            inheritance: true,
        }
    }
}

/// Default for [`TaskSpec::call_cpu_limit`].
pub const DEFAULT_CALL_CPU_LIMIT: Duration = Duration::from_secs(1);

/// A task's network allowances and bandwidth budget.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetSpec {
    /// Addresses it may listen on (see `crate::net::grant`).
    pub listen: Vec<String>,
    /// Addresses it may connect to.
    pub connect: Vec<String>,
    /// Listeners opened for it before it starts, found as WASI
    /// descriptors after its preopened directories.
    pub preopen_listeners: Vec<String>,
    /// Its weight in sharing the link with its siblings.
    pub bandwidth_share: u32,
    /// Most bytes per second it may send, however idle the link.
    pub bandwidth_limit: Option<u64>,
    /// Most bytes per second it may receive.
    pub receive_limit: Option<u64>,
    /// Most sockets it may hold at once.
    pub max_sockets: u32,
    /// Bytes of host buffer each way per socket (the host kernel doubles
    /// it; each connection is charged the four together).
    pub socket_buffer: usize,
}

impl Default for NetSpec {
    fn default() -> Self {
        NetSpec {
            listen: vec![],
            connect: vec![],
            preopen_listeners: vec![],
            bandwidth_share: 1,
            bandwidth_limit: None,
            receive_limit: None,
            max_sockets: net::DEFAULT_MAX_SOCKETS,
            socket_buffer: net::DEFAULT_SOCKET_BUFFER,
        }
    }
}

/// Default for [`IpcSpec::max_handles`].
pub const DEFAULT_MAX_HANDLES: usize = 1024;
/// Default for [`IpcSpec::max_message_bytes`].
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 64 * 1024;
/// Default for [`IpcSpec::max_message_handles`].
pub const DEFAULT_MAX_MESSAGE_HANDLES: u64 = 16;

impl TaskSpec {
    /// A spec with defaults: no args, env, dirs or limits; output inherited.
    pub fn new(name: impl Into<String>, module: impl Into<PathBuf>) -> Self {
        TaskSpec {
            name: name.into(),
            module: module.into(),
            args: vec![],
            env: vec![],
            dirs: vec![],
            served_dirs: vec![],
            limits: Limits::default(),
            stdio: Stdio::default(),
            ipc: IpcSpec::default(),
            sched: SchedSpec::default(),
            net: NetSpec::default(),
            label: None,
            trace: None,
            passive: false,
            call_cpu_limit: DEFAULT_CALL_CPU_LIMIT,
            restart: Restart::Temporary,
            drain: DEFAULT_DRAIN,
            replaces: None,
            handed: None,
            serves: vec![],
            binds: vec![],
            call_timeout: None,
        }
    }
}

/// The interface a component servlet serves: a long-lived
/// `wasi:http/proxy` component task that a route's `service` names.
pub const HTTP_HANDLER: &str = "wasi:http/incoming-handler";

impl TaskSpec {
    /// Whether the task is a component servlet: it serves
    /// [`HTTP_HANDLER`] (at any version).
    pub fn serves_http(&self) -> bool {
        (self.serves.iter()).any(|s| s.split('@').next() == Some(HTTP_HANDLER))
    }

    /// What a passive spec may not ask for, as an error message.
    pub(crate) fn check_passive(&self) -> Result<(), String> {
        let spec = self;
        let Some(name) = spec.ipc.provides.first() else {
            return Err(
                "a passive task needs a `provides` name: its service is registered under the first"
                    .into(),
            );
        };
        if name.ends_with('*') {
            return Err(format!(
                "a passive task's first `provides` name is its service's name, not a pattern ({name:?})"
            ));
        }
        let refused = [
            (
                "dirs",
                !spec.dirs.is_empty() || !spec.served_dirs.is_empty(),
            ),
            ("listen", !spec.net.preopen_listeners.is_empty()),
            (
                "stdin",
                spec.stdio.stdin_inherit
                    || spec.stdio.stdin_bytes.is_some()
                    || spec.stdio.stdin_stream.is_some(),
            ),
            ("modules", !spec.ipc.modules.is_empty()),
        ];
        match refused.iter().find(|(_, asked)| *asked) {
            Some((key, _)) => Err(format!(
                "a passive task cannot have `{key}`: its handler runs inside its callers' \
                 calls and may not wait"
            )),
            None => Ok(()),
        }
    }
}

/// A scheduling group: its members share what the group gets from its
/// parent, ordered among themselves by the group's own policy.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Unique name.
    pub name: String,
    /// The enclosing group (`None`: the root).
    pub parent: Option<String>,
    /// How members are ordered.
    pub policy: PolicyKind,
    /// The group's share, tickets and priority in its parent.
    pub params: Params,
    /// At most this fraction of one core for all members together.
    pub cap: Option<f64>,
    /// Total CPU for all members; past it, all are killed.
    pub cpu_quota: Option<Duration>,
    /// The group's weight in sharing the link with its siblings.
    pub bandwidth_share: u32,
    /// Most bytes per second all members together may send.
    pub bandwidth_limit: Option<u64>,
    /// Most memory all members together may be charged.
    pub memory_limit: Option<u64>,
    /// Bytes reserved in the root when the runtime starts, from which
    /// members' surplus is taken first (see `task::root`).
    pub memory_guarantee: u64,
}

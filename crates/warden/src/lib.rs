//! Warden runs many mutually untrusting WebAssembly programs as isolated
//! **tasks** inside one process, each with exact memory and CPU budgets,
//! each killable at any moment with everything it held returned.
//!
//! ```
//! use warden::{Runtime, RuntimeConfig, TaskSpec};
//!
//! let rt = Runtime::new(RuntimeConfig { cache_dir: None, max_tasks: 16, ..Default::default() })?;
//!
//! // The host's own API, offered to its plugins as a service: each call
//! // runs this closure on the calling task's thread.
//! rt.register_host_service("double", |_call, request, reply| {
//!     reply.extend(request.iter().map(|b| b * 2));
//!     Ok(())
//! })?;
//!
//! // A plugin: any WASI command module, here WebAssembly text. It looks
//! // the service up, calls it with the byte 21 and exits with the reply.
//! rt.add_module("plugin.wat", br#"(module
//!     (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
//!     (import "warden" "name_lookup" (func $lookup (param i32 i32 i64) (result i32)))
//!     (import "warden" "call" (func $call
//!         (param i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i64)))
//!     (memory (export "memory") 1)
//!     (data (i32.const 0) "double")
//!     (data (i32.const 16) "\15")
//!     (func (export "_start")
//!         (drop (call $call (call $lookup (i32.const 0) (i32.const 6) (i64.const -1))
//!             (i32.const 16) (i32.const 1) (i32.const 0) (i32.const 0)
//!             (i32.const 32) (i32.const 1) (i32.const 0) (i32.const 40)))
//!         (call $exit (i32.load8_u (i32.const 32)))))"#)?;
//!
//! let mut spec = TaskSpec::new("plugin", "plugin.wat");
//! spec.ipc.uses = vec!["double".into()];          // the names it may look up
//! spec.limits.memory_limit = Some(16 << 20);      // its exact budgets
//! spec.limits.cpu_limit = Some(std::time::Duration::from_secs(1));
//! // Spawn and wait in one: while a worker is idle, the task runs on this
//! // thread (rt.spawn returns at once; rt.wait(id) waits for its report).
//! let report = rt.run(&spec)?;
//! assert_eq!((report.status, report.exit_code), ("exited", Some(42)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Core concepts
//!
//! - [`Runtime`]: one Wasmtime engine, the compiled modules (compiled once,
//!   shared by every task, cached on disk), the task table and the executor.
//! - **Task** ([`TaskSpec`], [`TaskId`]): one store + instance of a WASI
//!   command module with its own args, env, stdio and preopened
//!   directories. Its lifecycle is one atomic word with a numbered
//!   protocol (`warden_sync::state`), model-checked with loom.
//! - **Budget**: an exact limit on a task's linear memories and tables
//!   together ([`MemoryPolicy`] says whether growth past it is denied or
//!   kills), and a CPU-time limit measured with the thread CPU clock.
//! - **Executor**: Warden's own worker threads run tasks as async calls, a
//!   time slice at a time (epoch interruption), in the order a
//!   [`RunQueue`] policy chooses; blocked tasks hold no thread.
//! - **IPC**: handles, services and portals (served by a task's loop, by
//!   a passive task's handler on the caller's thread, or by a host closure:
//!   [`Runtime::register_host_service`]), the name service, memory
//!   objects and permits, reached by guests through the `warden` import
//!   module ([`HOST_FUNCTIONS`]; C SDK in `sdk/c/warden.h`), with errors as
//!   [`Errno`] codes.
//! - **Network** ([`NetSpec`]): TCP listeners and connections as handles (and
//!   as WASI descriptors for unmodified programs), reachable only at the
//!   addresses a task is granted; outgoing bytes shared by hierarchical
//!   WF2Q+ over the group tree, with caps, and received bytes charged to
//!   the receiver. Warden's own endpoints (control API, web servers, the
//!   broker) are reached only through grants naming them exactly
//!   (`net::own`), and tasks together hold at most half the process's
//!   descriptors ([`descriptors`]).
//! - **Clusters** ([`Cluster`], [`ClusterSpec`]): runtimes on several
//!   machines joined through a NATS broker ([`Runtime::join_cluster`]);
//!   exported names are found by other nodes' lookups and called with the
//!   semantics of local calls, a dead node being a dead peer.
//! - **Scheduling** ([`RunQueue`], [`SchedParams`], [`GroupSpec`]):
//!   policies as plain data structures (round-robin, priority, stride,
//!   lottery, groups, caps), CPU inheritance across portal calls, nested
//!   tasks with carved budgets.
//! - **Operators** ([`control`]): the control API, web dashboard and
//!   metrics a running system serves; the event log
//!   ([`RuntimeConfig::events`]).
//!
//! # Module graph
//!
//! The modules form a DAG, lowest first: `sched` and `net::fair` (pure
//! policy), `descriptors`, `task`
//! (identity, lifecycle word, accounts, family, inheritance), then `cpu`,
//! `limiter`, `net` (sockets and the link), `ipc` and `executor` on `task`,
//! the host functions (`host`) and the cluster's relays (`cluster`, on
//! `ipc`) on those, the runtime, manifest and operator tools on top, and
//! `system`, which assembles a running system from them, last. Nothing
//! low depends on anything high: a test (`src/layers.rs`) reads every
//! source file and fails on an upward edge.
//!
//! # Public API
//!
//! The modules are private; what an embedder needs is re-exported here:
//! - [`Runtime`], [`RuntimeConfig`], [`TaskSpec`] (with its groups
//!   [`Limits`], [`Stdio`], [`IpcSpec`], [`SchedSpec`], [`NetSpec`]),
//!   [`GroupSpec`], [`TaskId`], [`TaskStatus`], [`TaskReport`],
//!   [`TaskView`], [`Errno`], [`MemoryPolicy`], [`Output`]: tasks and
//!   their budgets;
//! - [`HostCall`], [`HostHandler`]: host services;
//! - [`Manifest`]: a TOML description of a system of tasks, and
//!   [`System`]: a manifest's system started and run (runtime, tasks, web
//!   servers, control API, cluster), as the `warden` command runs it;
//! - from the web server: [`HttpServer`], [`HttpSpec`], [`RouteSpec`],
//!   [`RouteHandler`];
//! - from the schedulers: [`RunQueue`], [`TaskSched`], [`SchedTree`],
//!   [`SchedParams`], [`PolicyKind`] (the policies as plain data, for a
//!   program that drives one itself);
//! - [`Cluster`], [`ClusterSpec`] and [`cluster_config`]: clusters;
//! - [`control`]: the control API's server and its access token, the one
//!   operator module left public, as a namespace of a few items;
//! - [`units`] and [`descriptors`]: sizes, durations and rates as the
//!   manifest writes them, and the process's descriptor budget.

#![warn(missing_docs)]

/// Writes one line to the process's standard error in a single write, so
/// that a line never interleaves with a task's output sharing the stream
/// (`eprintln!` writes each formatted piece on its own, since standard
/// error is unbuffered).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }};
}

mod cache;
mod cluster;
pub mod control;
mod cpu;
pub mod descriptors;
mod dev;
mod events;
mod executor;
mod host;
mod http;
mod ipc;
#[cfg(test)]
mod layers;
mod limiter;
mod manifest;
mod mapping;
mod module;
mod net;
mod output;
mod pipe;
mod report;
mod runtime;
mod serving;
mod system;
mod task;
pub mod telemetry;
#[cfg(test)]
mod test_waker;
mod timing_safe;
mod trim;

// The layers below the library (see `layers.rs`): pure policy, and the
// lock-free protocols with their loom facade.
pub use warden_policy::units;
use warden_policy::{clock, idmap, sched};
use warden_sync::fifo;

pub use cache::{CacheOutcome, CodeCache};
pub use cluster::{Cluster, ClusterSpec, NameCounts};
pub use dev::{DeviceSpec, SECTOR as DEVICE_SECTOR};
/// Writing a broker's configuration for a cluster's nodes, and its keys.
pub mod cluster_config {
    pub use crate::cluster::{
        broker_config, valid_node, BrokerAuth, BrokerTls, ClusterKeys, Member, Refusals, Secret,
    };
}
pub use executor::{ExecutorStats, IDLE_SPIN};
pub use host::FUNCTIONS as HOST_FUNCTIONS;
pub use host::{HostCall, HostHandler};
pub use host::{MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};
pub use http::{Handler as RouteHandler, HttpServer, HttpSpec, RouteSpec};
pub use ipc::Errno;
pub use limiter::{MemoryPolicy, TABLE_ELEMENT_BYTES};
pub use manifest::{Manifest, RuntimeSection};
pub use module::{LoadedModule, DEFAULT_MAX_MODULE_BYTES, PROVIDED_IMPORT_MODULES};
pub use output::{CapturedOutput, Output};
pub use report::TaskReport;
pub use runtime::machine;
pub use runtime::{
    DeviceView, Error, FileServiceView, Operation, Operator, ReportSink, Restarts, Runtime,
    RuntimeConfig, SetupStats, TaskView, RESTART_STATUSES,
};
pub use sched::{Params as SchedParams, Tree as SchedTree};
pub use sched::{PolicyKind, RunQueue, TaskSched};
pub use serving::tls::{reload_certificates, Certificate as TlsCertificate, TlsSpec};
pub use system::{
    bind_mismatches, load, misfits, modules, runtime_config, FailureSink, ModuleUse, Step, System,
    SystemModule, SystemSpec,
};
pub use task::net::DEFAULT_SOCKET_BUFFER;
pub use task::{
    GroupSpec, Intensity, IpcSpec, Limits, NetSpec, Restart, SchedSpec, Stdio, Strategy,
    SupervisorSpec, TaskId, TaskSpec, TaskStatus,
};

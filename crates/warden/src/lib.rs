//! Warden runs many mutually untrusting WebAssembly programs as isolated
//! **tasks** inside one process, each with exact memory and CPU budgets,
//! each killable at any moment with everything it held returned.
//!
//! ```
//! use warden::{Runtime, RuntimeConfig, TaskSpec};
//!
//! // A guest: any WASI command module, here written as WebAssembly text.
//! let dir = std::env::temp_dir().join(format!("warden-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let module = dir.join("answer.wat");
//! std::fs::write(&module, r#"(module
//!     (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
//!     (memory (export "memory") 1)
//!     (func (export "_start") (call $exit (i32.const 42))))"#)?;
//!
//! let rt = Runtime::new(RuntimeConfig { cache_dir: None, max_tasks: 16, ..Default::default() })?;
//! let mut spec = TaskSpec::new("answer", &module);
//! spec.memory_limit = Some(16 << 20);
//! spec.cpu_limit = Some(std::time::Duration::from_secs(1));
//! let id = rt.spawn(&spec)?;
//! let report = rt.wait(id)?;
//! assert_eq!((report.status, report.exit_code), ("exited", Some(42)));
//! # std::fs::remove_dir_all(&dir)?;
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
//!   protocol (`src/task/state.rs`), model-checked with loom.
//! - **Budget**: an exact limit on a task's linear memories and tables
//!   together ([`MemoryPolicy`] says whether growth past it is denied or
//!   kills), and a CPU-time limit measured with the thread CPU clock.
//! - **Executor**: Warden's own worker threads run tasks as async calls, a
//!   time slice at a time (epoch interruption), in the order a
//!   [`RunQueue`] policy chooses; blocked tasks hold no thread.
//! - **IPC**: handles, services and portals, the name service, memory
//!   objects and permits, reached by guests through the `warden` import
//!   module ([`HOST_FUNCTIONS`]; C SDK in `sdk/c/warden.h`), with errors as
//!   [`Errno`] codes.
//! - **Network** ([`net`]): TCP listeners and connections as handles (and
//!   as WASI descriptors for unmodified programs), reachable only at the
//!   addresses a task is granted; outgoing bytes shared by hierarchical
//!   WF2Q+ over the group tree, with caps, and received bytes charged to
//!   the receiver.
//! - **Scheduling** ([`sched`]): policies as plain data structures
//!   (round-robin, priority, stride, lottery, groups, caps), CPU
//!   inheritance across portal calls, nested tasks with carved budgets.
//! - **Operators** ([`control`]): the control API, web dashboard and
//!   metrics a running system serves; the event log
//!   ([`RuntimeConfig::events`]).
//!
//! # Module graph
//!
//! The modules form a DAG, lowest first: `sched` and `net::fair` (pure
//! policy), `task`
//! (identity, lifecycle word, accounts, family, inheritance), then `cpu`,
//! `limiter`, `net` (sockets and the link), `ipc` and `executor` on `task`,
//! the host functions (`host`)
//! on those, and the runtime, manifest and operator tools on top. Nothing
//! low depends on anything high.
//! - [`Manifest`]: a TOML description of a system of tasks.
//! - [`TaskReport`]: how a task ended and what it used.

#![warn(missing_docs)]

mod cache;
pub mod control;
mod cpu;
mod events;
mod executor;
mod host;
pub mod http;
mod ipc;
mod limiter;
mod manifest;
mod module;
pub mod net;
mod output;
mod report;
mod runtime;
pub mod sched;
mod task;
pub mod units;

pub use cache::{CacheOutcome, CodeCache};
pub use executor::ExecutorStats;
pub use host::FUNCTIONS as HOST_FUNCTIONS;
pub use host::{HostCall, HostHandler};
pub use host::{MAX_OPEN_FILES, MAX_POLL_SUBSCRIPTIONS};
pub use ipc::Errno;
pub use limiter::{MemoryPolicy, TABLE_ELEMENT_BYTES};
pub use manifest::{Manifest, RuntimeSection};
pub use module::{LoadedModule, PROVIDED_IMPORT_MODULES};
pub use output::{Capture, Output};
pub use report::TaskReport;
pub use runtime::{
    raise_descriptor_limit, Error, GroupSpec, ReportSink, Runtime, RuntimeConfig, TaskView,
};
pub use sched::{Params, PolicyKind, RunQueue, TaskSched, Tree};
pub use task::{TaskId, TaskSpec, TaskStatus};

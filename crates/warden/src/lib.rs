//! Warden runs many mutually untrusting WebAssembly programs as isolated
//! **tasks** inside one process, each with exact memory and CPU budgets,
//! each killable at any moment with everything it held returned.
//!
//! ```no_run
//! use warden::{Runtime, RuntimeConfig, TaskSpec};
//!
//! let rt = Runtime::new(RuntimeConfig::default())?;
//! let mut spec = TaskSpec::new("hello", "hello.wasm");
//! spec.memory_limit = Some(16 << 20);
//! spec.cpu_limit = Some(std::time::Duration::from_secs(1));
//! let id = rt.spawn(&spec)?;
//! let report = rt.wait(id)?;
//! println!("{} {}: {:?}", report.name, report.status, report.exit_code);
//! # Ok::<(), warden::Error>(())
//! ```
//!
//! # Core concepts
//!
//! - [`Runtime`]: one Wasmtime engine, the compiled modules (compiled once,
//!   shared by every task, cached on disk), the task table and the executor.
//! - **Task** ([`TaskSpec`], [`TaskId`]): one store + instance of a WASI
//!   command module with its own args, env, stdio and preopened
//!   directories. Its lifecycle is written down in the `task` module.
//! - **Budget**: an exact limit on a task's linear memories and tables
//!   together ([`MemoryPolicy`] says whether growth past it is denied or
//!   kills), and a CPU-time limit measured with the thread CPU clock.
//! - **Executor**: Warden's own worker threads run tasks as async calls, a
//!   time slice at a time (epoch interruption), in the order a
//!   [`RunQueue`] policy chooses; blocked tasks hold no thread.
//! - **IPC** ([`ipc`]): handles, services and portals, the name service,
//!   memory objects and permits, reached by guests through the `warden`
//!   import module ([`HOST_FUNCTIONS`]; C SDK in `sdk/c/warden.h`), with
//!   errors as [`Errno`] codes.
//! - **Scheduling** ([`sched`]): policies as plain data structures
//!   (round-robin, priority, stride, lottery, groups, caps), CPU
//!   inheritance across portal calls, nested tasks with carved budgets.
//! - **Operators** ([`control`], [`events`]): the control API, web
//!   dashboard and metrics a running system serves, and the event log.
//! - [`Manifest`]: a TOML description of a system of tasks.
//! - [`TaskReport`]: how a task ended and what it used.

mod cache;
pub mod control;
mod cpu;
pub mod events;
pub mod executor;
mod host;
pub mod ipc;
mod limiter;
mod manifest;
mod module;
pub mod output;
mod report;
mod runtime;
pub mod sched;
mod task;
pub mod units;

pub use cache::{CacheOutcome, CodeCache};
pub use host::FUNCTIONS as HOST_FUNCTIONS;
pub use ipc::Errno;
pub use limiter::{MemoryPolicy, TABLE_ELEMENT_BYTES};
pub use manifest::{Manifest, RuntimeSection};
pub use module::{LoadedModule, PROVIDED_IMPORT_MODULES};
pub use output::Output;
pub use report::TaskReport;
pub use runtime::{Error, GroupSpec, Runtime, RuntimeConfig, TaskView};
pub use sched::{Params, PolicyKind, RunQueue, TaskSched, Tree};
pub use task::{TaskId, TaskSpec, TaskStatus};

//! The command line, defined once: parsing, `--help`, the shell
//! completions and the man pages all come from these types.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use warden::units::{parse_duration, parse_limit_duration, parse_rate, parse_size};

#[derive(Parser)]
#[command(
    name = "warden",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("WARDEN_COMMIT"), ")"),
    about = "Run many WebAssembly programs as isolated tasks in one process",
    long_about = "Run many WebAssembly programs as isolated tasks in one process: each \
                  with its own memory, CPU and bandwidth budget, talking through \
                  capability-based IPC, and killable at any moment with every resource \
                  returned."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a system of tasks from a manifest (.toml), or one program
    /// (.wasm, .wat, or .cwasm from `warden compile`).
    ///
    /// Flags may come before or after the target. After the target, the
    /// first word that is not one of the flags below (a plain word, or a
    /// flag Warden does not have) starts the program's arguments: it and
    /// every word after it go to the program (so do words after `--`).
    ///
    /// A single program's exit status is its own: its exit code, 134 if it
    /// trapped, 137 if it was killed (at a limit, by an operator, by
    /// Ctrl-C). A manifest's system exits 0 when every task it started
    /// exited 0, else 1. Warden's own errors exit 2.
    Run(Box<RunArgs>),
    /// Serve HTTP with a wasi:http/proxy component, a fresh instance for
    /// every request (as `wasmtime serve` does), within limits.
    ///
    /// Every path is routed to the component. Faults are answers: a trap
    /// or a handler that sets no response is 500, one killed at its CPU
    /// limit 503, one over its timeout 504. Runs until Ctrl-C or --for.
    Serve(Box<ServeArgs>),
    /// Compile modules into the compiled-code cache ahead of time, or into
    /// a precompiled file.
    Compile(CompileArgs),
    /// Check a manifest and compile every module it names, without
    /// running anything; or compile one program's module.
    ///
    /// Every problem is reported at once, each on a line naming the file
    /// and the line it is on; the status is 1 if there was any.
    Check(CheckArgs),
    /// Write a working starting point into a new directory NAME: sources,
    /// a `build` script, a README and (for systems) a manifest.
    ///
    /// Then `cd NAME && ./build` and run it as its README says. C kinds
    /// need clang with wasi-libc; `java` needs a JDK.
    New {
        /// What to write: `c` (a C program), `service` (a C service and
        /// client with a manifest), `wagi` (an HTTP handler, a fresh task
        /// per request), `servlet` (an HTTP servlet task), `java` (a Java
        /// program).
        kind: NewKind,
        /// The directory to create; its last component names the
        /// project (module, service and route).
        name: PathBuf,
    },
    /// List the tasks of a running system (a tree: children under parents).
    Ps {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Include tasks that have ended.
        #[arg(long)]
        all: bool,
        /// Every node of the system's cluster, each with its tasks.
        #[arg(long)]
        cluster: bool,
        /// Every column (by default, those that fit 100 columns).
        #[arg(long, short)]
        wide: bool,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Show the live tasks, refreshed every second; on a terminal, q
    /// quits.
    Top {
        /// Every column (by default, those that fit 100 columns).
        #[arg(long, short)]
        wide: bool,
        /// Sort by "cpu" or "memory".
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "memory"])]
        sort: String,
        /// Stop after this many refreshes.
        #[arg(long)]
        iterations: Option<u32>,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Kill a task (by id or name) and its children.
    Kill {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Replace a running task's or per-request route's code without a
    /// failed call (see doc/operators.md, "Live upgrade").
    Upgrade {
        /// The task's or route's name.
        task: String,
        /// The new module (a path on this machine, which the system reads).
        #[arg(required_unless_present = "rollback", conflicts_with = "rollback")]
        module: Option<std::path::PathBuf>,
        /// Put back the code it ran before its last upgrade.
        #[arg(long)]
        rollback: bool,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Apply a changed manifest to the running system: tasks, supervisors
    /// and routes added, removed or changed, changed modules upgraded (see
    /// doc/operators.md, "Manifest reload"). A bad manifest changes
    /// nothing. SIGHUP to `warden run` does the same with its manifest.
    Reload {
        /// The manifest (default: the one the system was started with,
        /// read again).
        manifest: Option<std::path::PathBuf>,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Start a system's task afresh from its manifest entry, killing the
    /// one running first (a supervised task through its supervisor).
    Restart {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Suspend a task.
    Suspend {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Resume a suspended task.
    Resume {
        task: String,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Print a task's recent output.
    Logs {
        task: String,
        /// Keep printing new output.
        #[arg(long, short)]
        follow: bool,
        #[command(flatten)]
        control: ControlArg,
    },
    /// Print the web dashboard's address, with the control token that lets
    /// it kill tasks.
    Dashboard {
        #[command(flatten)]
        control: ControlArg,
    },
    /// Start a task in a running system, with the flags `warden run` takes
    /// for a program, and the services it provides and uses.
    ///
    /// Paths (the module, --dir, --module) are made absolute here; the
    /// task's keys are checked here and again by the running system, as
    /// a manifest's `[[task]]` is. Its standard input is null unless
    /// --stdin says otherwise.
    Spawn(Box<SpawnArgs>),
    /// Work with a cluster's broker.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Print shell completions for bash, zsh or fish.
    Completions {
        #[arg(value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
    /// Write the man pages (warden.1 and one per command).
    Man {
        /// The directory to write them to.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

/// The kinds of project `warden new` writes.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum NewKind {
    /// A C program.
    C,
    /// A C service and its client, with a manifest.
    Service,
    /// An HTTP handler in C, a fresh task per request (WAGI).
    Wagi,
    /// An HTTP servlet in C: one long-lived task.
    Servlet,
    /// A Java program (TeaVM).
    Java,
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Print a nats-server `authorization` block that gives each node of
    /// the manifests exactly its own subjects (nkey nodes by their public
    /// key; user nodes with the password from the broker's environment).
    Config {
        /// One manifest per node, each with a [cluster] section.
        #[arg(required = true)]
        manifests: Vec<PathBuf>,
    },
    /// Make a key for each node: write its seed to DIR/NODE.nk (readable
    /// by its owner only; an existing file is never overwritten) and
    /// print the `node = "public key"` lines of a cluster.members file.
    Key {
        /// The nodes' names.
        #[arg(required = true)]
        nodes: Vec<String>,
        /// Where to write the seed files (made if missing, readable by
        /// its owner only).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Args)]
pub struct ControlArg {
    /// The control API of the running system.
    #[arg(long = "control", value_name = "HOST:PORT", env = "WARDEN_CONTROL", default_value = warden::control::DEFAULT_ADDR, value_parser = host_port)]
    pub addr: String,
}

/// `warden run`: flags may come before or after the target; the first
/// word after the target that is not a flag, and every word after it (or
/// everything after `--`), is an argument for the program.
#[derive(Args)]
pub struct RunArgs {
    /// A manifest (.toml) or a module (.wasm, .wat, .cwasm).
    pub target: PathBuf,
    /// Arguments for a single program.
    #[arg(trailing_var_arg = true, value_name = "ARGS")]
    pub args: Vec<String>,
    #[command(flatten)]
    pub program: ProgramArgs,
    #[command(flatten)]
    pub system: SystemArgs,
}

/// `warden serve`: one wasi:http/proxy component behind a web server.
#[derive(Args)]
pub struct ServeArgs {
    /// The component (.wasm, or .cwasm from `warden compile`).
    pub component: PathBuf,
    /// Arguments for the component (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// The address to listen on.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Preopen host directory HOST for every request's instance, as
    /// GUEST (default: the same path). Repeatable.
    #[arg(long, value_name = "HOST[::GUEST]")]
    pub dir: Vec<String>,
    /// Set an environment variable, or pass the host's NAME on (skipped if
    /// unset). Repeatable.
    #[arg(long, value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Memory limit of each request's instance, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory_limit: Option<String>,
    /// What a growth past the memory limit does.
    #[arg(long, value_name = "deny|kill", value_parser = ["deny", "kill"])]
    pub on_memory_limit: Option<String>,
    /// CPU-time limit of each request, e.g. 100ms.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub cpu_limit: Option<String>,
    /// Wall-clock limit of each request, queueing included (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub timeout: Option<String>,
    /// Requests handled at once (default 64); the rest wait.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,
    /// Requests waiting at most (default 1024); past it, 503.
    #[arg(long, value_name = "N")]
    pub max_queue: Option<usize>,
    /// Largest request body (default 1MiB); larger ones get 413.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub max_body: Option<String>,
    /// Largest response body (default 16MiB); larger ones are 502.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub max_response: Option<String>,
    /// Addresses the component's outgoing HTTP requests may reach, e.g.
    /// 127.0.0.1:5000-5099. Repeatable.
    #[arg(long, value_name = "GRANT")]
    pub allow_connect: Vec<String>,
    #[command(flatten)]
    pub system: SystemArgs,
}

/// `warden spawn`: a task for a running system.
#[derive(Args)]
pub struct SpawnArgs {
    /// The module (.wasm, .wat, .cwasm) the task runs.
    pub module: PathBuf,
    /// Arguments for the program (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// A service the task may register, by name. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub provides: Vec<String>,
    /// A service the task may look up, by name. Repeatable.
    #[arg(long, value_name = "NAME")]
    pub uses: Vec<String>,
    /// Of the names it provides, one other nodes of the cluster may call.
    /// Repeatable.
    #[arg(long, value_name = "NAME")]
    pub export: Vec<String>,
    /// A block device of the system the task may open, by name.
    /// Repeatable.
    #[arg(long, value_name = "NAME")]
    pub devices: Vec<String>,
    #[command(flatten)]
    pub program: ProgramArgs,
    #[command(flatten)]
    pub control: ControlArg,
}

/// The task a single program runs as: the keys of a manifest's `[[task]]`.
#[derive(Args, Default)]
#[command(next_help_heading = "Program (a single module)")]
pub struct ProgramArgs {
    /// Preopen host directory HOST for the program, as GUEST (default: the
    /// same path). Repeatable.
    #[arg(long, value_name = "HOST[::GUEST]")]
    pub dir: Vec<String>,
    /// Set an environment variable, or pass the host's NAME on (skipped if
    /// unset). Repeatable.
    #[arg(long, value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Open a TCP listener on ADDR before the program starts; it finds it
    /// as a WASI descriptor after its directories. Repeatable.
    #[arg(long, value_name = "ADDR")]
    pub listen: Vec<String>,
    /// The program's standard input.
    #[arg(long, value_name = "inherit|null", value_parser = ["inherit", "null"])]
    pub stdin: Option<String>,
    /// The task's name (default: the module's file name without extension).
    #[arg(long)]
    pub name: Option<String>,
    /// Memory limit, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub memory_limit: Option<String>,
    /// What a growth past the memory limit does.
    #[arg(long, value_name = "deny|kill|notify", value_parser = ["deny", "kill", "notify"])]
    pub on_memory_limit: Option<String>,
    /// Kill (instead of deny growth) at the memory limit; the same as
    /// --on-memory-limit kill.
    #[arg(long, conflicts_with = "on_memory_limit")]
    pub kill_on_memory_limit: bool,
    /// CPU-time limit, e.g. 500ms, 2s.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub cpu_limit: Option<String>,
    /// What reaching the CPU limit does.
    #[arg(long, value_name = "kill|notify", value_parser = ["kill", "notify"])]
    pub on_cpu_limit: Option<String>,
    /// Outgoing bandwidth cap, e.g. 10MB/s.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub bandwidth_limit: Option<String>,
    /// Incoming bandwidth cap, e.g. 10MB/s.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub receive_limit: Option<String>,
    /// Sockets open at once (listeners and connections).
    #[arg(long, value_name = "N")]
    pub max_sockets: Option<u32>,
    /// Buffer per socket, each way, from 4KiB to 16MiB.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub socket_buffer: Option<String>,
    /// Addresses the program may connect to, e.g. 127.0.0.1:5000-5099
    /// (a manifest's `connect`). Repeatable.
    #[arg(long, value_name = "GRANT", visible_alias = "connect")]
    pub allow_connect: Vec<String>,
    /// Addresses the program may listen on, e.g. 127.0.0.1:*. Repeatable.
    #[arg(long, value_name = "GRANT")]
    pub allow_listen: Vec<String>,
    /// Handles the task may hold at once.
    #[arg(long, value_name = "N")]
    pub max_handles: Option<u64>,
    /// Largest IPC message the task may send, e.g. 1MiB.
    #[arg(long, value_name = "SIZE", value_parser = size)]
    pub max_message_bytes: Option<String>,
    /// A module the program may spawn children from, by NAME. Repeatable.
    #[arg(long, value_name = "NAME=PATH")]
    pub module: Vec<String>,
    /// Restart it when it ends (permanent), when it fails (transient), or
    /// never (temporary, the default), as the root supervisor does:
    /// at most 5 restarts in 10 s.
    #[arg(long, value_name = "POLICY", value_parser = ["permanent", "transient", "temporary"])]
    pub restart: Option<String>,
    /// A WIT interface the component serves, e.g. example:kv/store, under
    /// its first provided name (the manifest's `serves`). Repeatable.
    #[arg(long, value_name = "IFACE")]
    pub serves: Vec<String>,
    /// Binds an interface the component imports to the service NAME (the
    /// manifest's `binds`). Repeatable.
    #[arg(long, value_name = "IFACE=NAME")]
    pub binds: Vec<String>,
    /// Longest a typed call waits for its server, e.g. 2s.
    #[arg(long, value_name = "DURATION")]
    pub call_timeout: Option<String>,
}

/// Settings of the runtime, for a manifest or a single program.
#[derive(Args)]
#[command(next_help_heading = "Runtime")]
pub struct SystemArgs {
    /// Worker threads (default: manifest, else number of cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Time slice in ms (default: manifest, else 4).
    #[arg(long)]
    pub slice_ms: Option<u64>,
    /// Do not use the on-disk compiled-code cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Run precompiled modules this machine's `warden compile` did not
    /// write: their native code runs unchecked.
    #[arg(long)]
    pub allow_precompiled: bool,
    /// Largest module file read (default: the manifest's
    /// `max_module_size`, else 256MiB); larger ones are refused unread.
    #[arg(long, value_parser = size)]
    pub max_module_size: Option<String>,
    /// Most tasks alive at once (default: the manifest's `[runtime]
    /// max_tasks`, else 10,000; for a single program 64). The runtime
    /// sets up a slot (memory, table, stack) per task when it starts,
    /// which costs about 3 µs each.
    #[arg(long, value_name = "N")]
    pub max_tasks: Option<u32>,
    /// The most all tasks together may use, Warden's overhead per task
    /// included (default: the manifest's `[runtime] memory_limit`, else
    /// the machine's or cgroup's memory less a reserve of an eighth, at
    /// least 512MiB). A charge past it is refused like a task's own limit.
    #[arg(long, value_parser = size)]
    pub runtime_memory_limit: Option<String>,
    /// Write a JSON report of every task to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print a one-line summary per task on stderr when it ends.
    #[arg(long, short)]
    pub verbose: bool,
    /// Write the event log (JSON lines: spawn, exit, trap, kill, limit) here.
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Serve the control API (`warden ps`, `top`, the dashboard) on this
    /// address, or "off". Default for a manifest: its `control`, else
    /// 127.0.0.1:7474; for a single program: off. Off loopback, every
    /// request needs the control token.
    #[arg(long, value_name = "IP:PORT|off", value_parser = control_or_off)]
    pub control: Option<String>,
    /// Serve the control API without TLS on an address other than
    /// loopback: its token then crosses the network in the clear.
    #[arg(long)]
    pub insecure_control: bool,
    /// Stop after this long (e.g. 10s): every task is killed, servers
    /// stop. Without it, a system with [[http]] servers runs until Ctrl-C.
    #[arg(long = "for", value_parser = parse_duration)]
    pub run_for: Option<Duration>,
}

#[derive(Args)]
pub struct CompileArgs {
    /// Modules (.wasm, .wat) to compile.
    #[arg(required = true)]
    pub modules: Vec<PathBuf>,
    /// Also write the compiled code of the (one) module to this file,
    /// which `warden run` accepts in place of the module.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// The manifest to check (or a module or component: it is compiled).
    pub manifest: PathBuf,
    /// Accept precompiled modules this machine did not write.
    #[arg(long)]
    pub allow_precompiled: bool,
}

/// A size flag, kept as written once it parses (`4MiB`).
fn size(s: &str) -> Result<String, String> {
    parse_size(s).map(|_| s.to_string())
}

/// Where a running system's control API is: `HOST:PORT`.
fn host_port(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(s.to_string())
        }
        _ => Err("expected HOST:PORT, with a port from 1 to 65535".into()),
    }
}

/// Where to serve the control API: `IP:PORT` (port 0 for any free one),
/// or "off".
fn control_or_off(s: &str) -> Result<String, String> {
    match s == "off" || s.parse::<std::net::SocketAddr>().is_ok() {
        true => Ok(s.to_string()),
        false => Err("expected IP:PORT (e.g. 127.0.0.1:7474), or \"off\"".into()),
    }
}

/// A duration that limits something: zero is refused, not "unlimited".
fn duration(s: &str) -> Result<String, String> {
    parse_limit_duration(s).map(|_| s.to_string())
}

fn rate(s: &str) -> Result<String, String> {
    parse_rate(s).map(|_| s.to_string())
}

//! `warden`: the command-line front end. The commands are defined in
//! `cli`; each is a function of one of the modules below.

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

mod args;
mod check;
mod cli;
mod client;
mod compile;
mod docs;
mod new;
mod outcome;
mod program;
mod run;
mod serve;
mod tables;
mod top;

use clap::Parser;
use cli::{Cli, ClusterCommand, Command};
use std::process::ExitCode;

/// A task's spawn and end allocate and free on different threads (the
/// HTTP server's, a worker's): glibc's arenas took a fifth of a
/// per-request web route's time in this process, mimalloc's thread-local
/// heaps a small part of it. It needs huge pages off (see `HUGE_PAGES_OFF`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's collection of the calling thread's heap; `force`
    /// returns its free pages to the system at once.
    fn mi_collect(force: bool);
}

/// How a worker of the command's runtimes hands its free heap back to
/// the system after a mass death (see `warden::RuntimeConfig::heap_trim`).
pub(crate) fn heap_trim() {
    // SAFETY: mi_collect only frees what the calling thread's heap holds
    // unused.
    unsafe { mi_collect(true) }
}

/// Transparent huge pages off for the whole process: with them, mimalloc
/// holds whole 2 MiB pages per thread of which it uses a few KiB
/// (compiling two modules peaked at 100 MiB of RSS with them and 38
/// without), and its first page, zeroed whole, was a tenth of a short
/// program's run. mimalloc is built without its own request for them
/// (its `no_thp` feature: it no longer advises its arenas to use huge
/// pages), since it sets up its first arena before any initialiser of
/// this program runs; this initialiser, of the first priority, turns
/// them off for every other mapping (on a system whose setting is
/// `always`) before `main`.
#[used]
#[link_section = ".init_array.00101"]
static HUGE_PAGES_OFF: extern "C" fn() = huge_pages_off;

extern "C" fn huge_pages_off() {
    // SAFETY: prctl with integer arguments only sets this process's
    // memory policy.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

fn main() -> ExitCode {
    let words = args::program_words(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&words) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, &words),
    };
    let result = dispatch(cli.command);
    match result {
        Ok(code) => code,
        Err(e) => {
            say!("warden: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs one command; its exit status, or an error for stderr (status 2).
fn dispatch(command: Command) -> Result<ExitCode, String> {
    let done = |r: Result<(), String>| r.map(|()| ExitCode::SUCCESS);
    match command {
        Command::Run(args) => run::run(*args),
        Command::Serve(args) => serve::serve(*args),
        Command::Compile(args) => done(compile::compile(&args)),
        Command::Check(args) => check::check(&args),
        Command::New { kind, name } => done(new::new(kind, &name)),
        Command::Ps {
            json,
            all,
            cluster: false,
            wide,
            control,
        } => done(client::ps(&control.addr, json, all, wide)),
        Command::Ps {
            json,
            all,
            cluster: true,
            wide,
            control,
        } => done(client::ps_cluster(&control.addr, json, all, wide)),
        Command::Top {
            sort,
            iterations,
            wide,
            control,
        } => done(top::top(&control.addr, &sort, iterations, wide)),
        Command::Kill { task, control } => done(client::act(&control.addr, "kill", &task)),
        Command::Upgrade {
            task,
            module,
            rollback: _,
            control,
        } => done(client::upgrade(&control.addr, &task, module.as_deref())),
        Command::Restart { task, control } => done(client::restart(&control.addr, &task)),
        Command::Reload { manifest, control } => {
            done(client::reload(&control.addr, manifest.as_deref()))
        }
        Command::Suspend { task, control } => done(client::act(&control.addr, "suspend", &task)),
        Command::Resume { task, control } => done(client::act(&control.addr, "resume", &task)),
        Command::Logs {
            task,
            follow,
            control,
        } => done(client::logs(&control.addr, &task, follow)),
        Command::Dashboard { control } => done(client::dashboard(&control.addr)),
        Command::Spawn(args) => done(client::spawn(&args)),
        Command::Cluster {
            command: ClusterCommand::Config { manifests },
        } => done(check::cluster_config(&manifests)),
        Command::Cluster {
            command: ClusterCommand::Key { nodes, dir },
        } => done(check::cluster_keys(&nodes, &dir)),
        Command::Completions { shell } => done(docs::completions(&shell)),
        Command::Man { dir } => done(docs::man(&dir)),
    }
}

/// `--help` and `--version` as clap prints them; a bad command line as one
/// line (with clap's suggestion, or Warden's way to do what a `wasmtime`
/// flag does), exit status 2.
fn usage_error(e: clap::Error, words: &[std::ffi::OsString]) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("bad command line");
    let mut first = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // "the following required arguments were not provided:" names them
    // on the lines that follow, up to the usage line.
    if first.ends_with(':') {
        let named: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("Usage:"))
            .collect();
        first = format!("{first} {}", named.join(", "));
    }
    let habit = unknown_flag(&e).and_then(|flag| {
        let at = words
            .iter()
            .position(|w| w.to_str().is_some_and(|w| w.starts_with(flag.as_str())))?;
        let written = words[at].to_str()?;
        let next = words.get(at + 1).and_then(|w| w.to_str());
        args::wasmtime_habit(written, next)
    });
    let tip = habit.or_else(|| lines.find_map(|l| l.strip_prefix("tip: ").map(str::to_string)));
    match tip {
        Some(tip) => say!("warden: {first} ({tip}); see --help"),
        None => say!("warden: {first}; see --help"),
    }
    ExitCode::from(2)
}

/// The flag clap did not know, as written.
fn unknown_flag(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => Some(flag.clone()),
        _ => None,
    }
}

//! Seed 003 (MVM), Figures 3 and 4: what N copies of one program cost in
//! memory and start-up when they are N tasks in one Warden process, N
//! wasmtime processes, or N JVM processes; and, as in MVM itself, N copies
//! of one Java program as N Warden tasks (compiled by TeaVM) against N JVMs.
//!
//! The program prints "ready" and sleeps. Footprint is the proportional set
//! size (PSS: shared pages divided among their sharers) summed over every
//! process involved, read when all N copies are ready; time runs from the
//! first start to the last "ready". Warden runs in a child process of this
//! binary (`child-copies`), so its figure includes the whole runtime.
//! Every contestant starts its copies the same way: one after another, each
//! once the one before has printed "ready" (a process's on a pipe, a
//! task's on the pipe its stdout is connected to). All start from machine
//! code compiled ahead of time: the wasmtime processes map a `.cwasm`,
//! Warden reads its code cache (filled by the warm-up round).

use super::contestant::{self, Contestant};
use super::finish;
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::machine::{mem_available, pss_bytes};
use crate::model::{Plot, Samples, Table};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use warden_test_guests as guests;

const WARDEN: &str = "Warden: N tasks in one process";
const WARDEN_JAVA: &str = "Warden: N Java tasks (TeaVM) in one process";
const WASMTIME: &str = "wasmtime: N processes";
const JVM: &str = "JVM: N java processes";
const ERLANG: &str = "Erlang: N processes in one BEAM";

/// What one copy of a peer was seen to cost at `n` copies, for judging
/// whether a larger N fits on the machine.
#[derive(Clone, Copy)]
struct Each {
    n: usize,
    bytes: f64,
    threads: f64,
}

/// Why a system's N was not run, by system and N.
type Skipped = RefCell<BTreeMap<(&'static str, usize), String>>;

/// What the copies' contestants share.
struct Copies<'a> {
    ctx: &'a Ctx,
    /// This binary, which runs Warden's copies as `child-copies`.
    exe: PathBuf,
    skipped: Skipped,
    /// The cost of one copy seen so far, of wasmtime's and of the JVM's.
    each: [Cell<Option<Each>>; 2],
}

pub fn run(ctx: &Ctx) -> Vec<Table> {
    let ns: Vec<usize> = ctx.pick(
        vec![1, 10, 100, 1000, 10_000, 100_000],
        vec![1, 10, 100, 1000],
    );
    let (mut foot, mut time) = tables(&ns);
    let c = Copies {
        ctx,
        exe: std::env::current_exe().expect("own path"),
        skipped: Default::default(),
        each: [Cell::new(None), Cell::new(None)],
    };
    let mut list = contestants(&c, &ns);
    let m = contestant::run(ctx.rounds, &mut list);
    let skipped = c.skipped.take();
    per_task_notes(&mut foot, &m.samples, &ns);
    for (table, metric) in [(&mut foot, "MiB/"), (&mut time, "ms/")] {
        contestant::rows(table, &list, &m.samples, metric);
        not_run(table, &skipped);
        table.method = METHOD.into();
    }
    // Every N's contestant fails under its system's row.
    let errors = m
        .errors
        .into_iter()
        .map(|(k, v)| {
            (
                k.rsplit_once(' ').map_or(k.clone(), |(s, _)| s.to_string()),
                v,
            )
        })
        .collect();
    vec![finish(foot, &errors), finish(time, &errors)]
}

/// The footprint and start-up tables, one column per N.
fn tables(ns: &[usize]) -> (Table, Table) {
    let cols: Vec<String> = ns.iter().map(|n| n.to_string()).collect();
    let columns = |unit: &'static str| -> Vec<(&str, &str)> {
        cols.iter().map(|n| (n.as_str(), unit)).collect()
    };
    let mut foot = Table::new(
        "copies_footprint",
        "Footprint of N copies of a program (MiB, PSS summed)",
        "seed 003 (MVM), Figure 3",
        &columns("MiB"),
    );
    let mut time = Table::new(
        "copies_startup",
        "Time until N copies of a program are all running (ms)",
        "seed 003 (MVM), Figure 4",
        &columns("ms"),
    );
    foot.plot = Plot::Lines;
    time.plot = Plot::Lines;
    (foot, time)
}

/// Each system's row, followed by a contestant per N filling it (in
/// quick mode, the process peers only up to 10 copies).
fn contestants<'a>(c: &'a Copies, ns: &[usize]) -> Vec<Contestant<'a>> {
    let quick_cap = c.ctx.pick(usize::MAX, 10);
    let mut list = vec![];
    for (system, module) in [(WARDEN, guests::READY), (WARDEN_JAVA, guests::JAVA_READY)] {
        list.push(Contestant::warden(system));
        list.extend(ns.iter().map(|&n| {
            Contestant::rowless(&format!("{system} {n}"))
                .runs(move |s| c.warden(s, system, module, n))
        }));
    }
    list.push(Contestant::peer(ERLANG));
    list.extend(ns.iter().map(|&n| {
        Contestant::rowless(&format!("{ERLANG} {n}")).runs(move |s| {
            let (bytes, ms, _) = measure(vec![c.ctx.peers.erlang_copies(n)?])?;
            push(s, ERLANG, n, bytes, ms);
            Ok(())
        })
    }));
    for (i, system) in [WASMTIME, JVM].into_iter().enumerate() {
        list.push(Contestant::peer(system));
        for &n in ns {
            if n > quick_cap {
                c.skipped
                    .borrow_mut()
                    .insert((system, n), "quick mode".into());
                continue;
            }
            list.push(
                Contestant::rowless(&format!("{system} {n}"))
                    .runs(move |s| c.processes(s, &c.each[i], system, n)),
            );
        }
    }
    list
}

impl Copies<'_> {
    /// N Warden tasks of `module` in a child process of this binary.
    fn warden(
        &self,
        s: &mut Samples,
        system: &'static str,
        module: &str,
        n: usize,
    ) -> Result<(), String> {
        if module.is_empty() {
            return Err(format!("Java guest not built: {:?}", guests::UNBUILT));
        }
        let mut c = Command::new(&self.exe);
        c.args(["child-copies", &n.to_string(), module, "--cache"]);
        c.arg(self.ctx.peers.dir().join("warden-cache"));
        match measure(vec![c]) {
            Ok((bytes, ms, _)) => push(s, system, n, bytes, ms),
            // The machine's limit on mappings, not Warden, stops
            // it: say so instead of failing the row.
            Err(e) if e.contains("vm.max_map_count") => {
                self.skipped
                    .borrow_mut()
                    .insert((system, n), mapping_limit());
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// N processes of wasmtime or the JVM, if the cost per copy seen so
    /// far (`each`) says they fit.
    fn processes(
        &self,
        s: &mut Samples,
        each: &Cell<Option<Each>>,
        system: &'static str,
        n: usize,
    ) -> Result<(), String> {
        // Round 0 runs N in increasing order, so a smaller N's
        // cost is known before a larger N is tried.
        if let Some(e) = each.get() {
            if let Err(why) = fits(n, e) {
                self.skipped.borrow_mut().insert((system, n), why);
                return Ok(());
            }
        }
        let cmds = (0..n)
            .map(|_| self.process(system))
            .collect::<Result<Vec<_>, _>>()?;
        let (bytes, ms, threads) = measure(cmds)?;
        // The cost per copy at the largest N so far: sharing
        // makes it fall as N grows.
        if each.get().is_none_or(|e| n >= e.n) {
            each.set(Some(Each {
                n,
                bytes: bytes / n as f64,
                threads: threads as f64,
            }));
        }
        push(s, system, n, bytes, ms);
        Ok(())
    }

    /// One copy's command: the wasmtime runner, or `java Hello ready`.
    fn process(&self, system: &str) -> Result<Command, String> {
        let peers = &self.ctx.peers;
        if system == WASMTIME {
            let mut c = Command::new(peers.runner()?);
            c.arg(peers.cwasm(guests::READY)?);
            Ok(c)
        } else {
            let mut c = peers.java()?;
            c.args(["Hello", "ready"]);
            Ok(c)
        }
    }
}

/// What each Warden task beyond the first adds to the footprint.
fn per_task_notes(foot: &mut Table, samples: &Samples, ns: &[usize]) {
    let (first, last) = (ns[0], ns[ns.len() - 1]);
    for (system, what) in [
        (WARDEN, "Warden task"),
        (WARDEN_JAVA, "Java task in Warden"),
    ] {
        if let (Some(a), Some(b)) = (
            samples.cell(&format!("{system}/MiB/{first}")),
            samples.cell(&format!("{system}/MiB/{last}")),
        ) {
            foot.notes.push(format!(
                "Each {what} beyond the first adds {:.1} KiB ((PSS at N = {last} less PSS at N = {first}) / {}).",
                (b.median - a.median) * 1024.0 / (last - first) as f64,
                last - first
            ));
        }
    }
}

/// Marks each row's N that was not run, and why, in its note.
fn not_run(table: &mut Table, skipped: &BTreeMap<(&'static str, usize), String>) {
    for row in &mut table.rows {
        let system = row.system.as_str();
        let why: Vec<String> = skipped
            .iter()
            .filter(|((s, _), _)| *s == system)
            .map(|((_, n), why)| format!("N = {n}: {why}"))
            .collect();
        if !why.is_empty() {
            row.note = Some(format!("not run for {}", why.join("; ")));
            row.absent = skipped
                .keys()
                .filter(|(s, _)| *s == system)
                .map(|(_, n)| n.to_string())
                .collect();
        }
    }
}

const METHOD: &str = "Each copy prints \"ready\" and sleeps: a WebAssembly text module for Warden and \
                        wasmtime, a Java class for the JVM (Thread.sleep) and the same program for \
                        Warden's Java row, compiled by TeaVM 0.13.1 (warden.Task.sleep); for Erlang, N \
                        processes spawned in one BEAM (erl +P 1048576), each sending the spawner a \
                        message and waiting for one that never comes, then \"ready\" once all are. Footprint: PSS from /proc/PID/smaps_rollup \
                        summed over the processes once all N are ready. Time: from starting the first to \
                        reading the last \"ready\"; every contestant starts a copy only once the one \
                        before has printed \"ready\" (processes on a pipe each; Warden's tasks, in one \
                        process started for the purpose, on a pipe their stdout goes to). The wasmtime processes run the module compiled ahead \
                        of time; the JVM runs with default settings. A peer's N is run only if the \
                        per-copy PSS and thread count seen at the largest smaller N say that N copies \
                        fit in half the memory available and half of the kernel's limit on threads.";

/// Whether `n` copies costing `e` each fit in half the memory available and
/// half the kernel's limit on processes and threads; if not, why.
fn fits(n: usize, e: Each) -> Result<(), String> {
    let memory = mem_available() as f64 / 2.0;
    let need = e.bytes * n as f64;
    if need > memory {
        return Err(format!(
            "about {:.1} GiB of PSS needed, half the memory available is {:.1} GiB",
            need / GIB,
            memory / GIB
        ));
    }
    let pids = task_limit() as f64 / 2.0;
    let threads = e.threads * n as f64;
    if threads > pids {
        return Err(format!(
            "about {threads:.0} threads needed, half the kernel's limit is {pids:.0}"
        ));
    }
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;

/// Why Warden's N did not run: its runtime refused the spawn past what the
/// kernel's limit on memory mappings holds.
fn mapping_limit() -> String {
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default();
    format!(
        "vm.max_map_count is {}, too few mappings (about five a task; \
         scripts/bench raises it to 524288 where it may)",
        limit.trim()
    )
}

/// The kernel's limit on processes and threads: the smaller of `pid_max`
/// and `threads-max`.
fn task_limit() -> u64 {
    ["/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
        .min()
        .unwrap_or(32_768)
}

fn push(s: &mut Samples, system: &str, n: usize, bytes: f64, ms: f64) {
    s.push(&format!("{system}/MiB/{n}"), bytes / (1 << 20) as f64);
    s.push(&format!("{system}/ms/{n}"), ms);
}

/// Starts `cmds` one after another, each until it prints its first line;
/// then the summed PSS of all of them, the milliseconds taken and the
/// threads of the first. Every process is killed before returning.
fn measure(cmds: Vec<Command>) -> Result<(f64, f64, u64), String> {
    let mut children: Vec<Child> = vec![];
    let result = (|| {
        let t = Instant::now();
        for mut c in cmds {
            // What a copy says on stderr goes to a file, read if it fails.
            let err = tempfile::tempfile().map_err(|e| e.to_string())?;
            let mut child = c
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(err.try_clone().map_err(|e| e.to_string())?)
                .spawn()
                .map_err(|e| format!("start {}: {e}", c.get_program().to_string_lossy()))?;
            let mut line = String::new();
            let out = child.stdout.take().unwrap();
            children.push(child);
            BufReader::new(out)
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            if !line.starts_with("ready") {
                let mut said = String::new();
                let mut err = err;
                let _ = err.seek(std::io::SeekFrom::Start(0));
                let _ = err.take(4096).read_to_string(&mut said);
                return Err(format!(
                    "{} printed {line:?}, not ready: {}",
                    c.get_program().to_string_lossy(),
                    said.trim()
                ));
            }
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let mut bytes = 0.0;
        for c in &children {
            bytes += pss_bytes(c.id()).ok_or("cannot read smaps_rollup")? as f64;
        }
        Ok((bytes, ms, threads(children[0].id())))
    })();
    for mut c in children {
        c.kill().ok();
        c.wait().ok();
    }
    result
}

/// Threads of process `pid`, from `/proc/PID/status`.
fn threads(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Threads:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(1)
}

/// The child side of the Warden measurement: `n` tasks from `module`,
/// started one after another, each once the one before has printed
/// "ready"; then "ready" itself, and sleep until killed.
pub fn child_copies(n: usize, module: &str, cache: Option<PathBuf>) -> Result<(), String> {
    // No root budget: the table measures what the copies hold resident,
    // and the root charges each linear memory whole (a Java copy's heap
    // mostly untouched), so it would stop the Java row well before the
    // machine is full. `fits` keeps the run within half the memory.
    let rt = warden::Runtime::new(warden::RuntimeConfig {
        cache_dir: cache,
        memory_limit: Some(u64::MAX),
        ..inproc::config(2, n as u32 + 16)
    })
    .map_err(|e| e.to_string())?;
    let mut spec = quiet("copy", module);
    rt.load_module(module.as_ref()).map_err(|e| e.to_string())?;
    let (reader, ready_out) = stdout_to_pipe()?;
    spec.stdio.stdout = warden::Output::Inherit;
    let mut lines = BufReader::new(reader);
    let mut line = String::new();
    for _ in 0..n {
        rt.spawn(&spec).map_err(|e| e.to_string())?;
        line.clear();
        lines.read_line(&mut line).map_err(|e| e.to_string())?;
        if !line.starts_with("ready") {
            return Err(format!("a copy printed {line:?}, not ready"));
        }
    }
    // A copy that ended after "ready" would make the footprint a lie.
    let live = rt.stats().live;
    if live != n {
        let ended: Vec<_> = rt.reports().into_iter().take(1).collect();
        return Err(format!(
            "only {live} of {n} copies are still running; the first to end: {ended:?}"
        ));
    }
    (&ready_out)
        .write_all(b"ready\n")
        .map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}

/// Points this process's stdout at a pipe: the tasks write to it, and
/// this reads their lines from the pipe's other end — one descriptor for
/// all of them, however many (a file each would run into the limit on
/// open descriptors). Returns that reading end, and the real stdout,
/// where "ready" goes.
fn stdout_to_pipe() -> Result<(std::fs::File, std::fs::File), String> {
    use std::os::fd::FromRawFd;
    let mut ends = [0; 2];
    // SAFETY: pipe fills the two descriptors it makes; dup and dup2 act on
    // descriptors this process holds open, and each File takes one it owns.
    unsafe {
        if libc::pipe(ends.as_mut_ptr()) != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        let saved = libc::dup(1);
        if saved < 0 || libc::dup2(ends[1], 1) < 0 {
            return Err(format!("dup: {}", std::io::Error::last_os_error()));
        }
        libc::close(ends[1]);
        Ok((
            std::fs::File::from_raw_fd(ends[0]),
            std::fs::File::from_raw_fd(saved),
        ))
    }
}

//! Seed 000, Table 2: the two costs a process model adds — creating a
//! process, and talking between processes (null IPC, a 3-integer request,
//! a 100-byte string request) — for Warden and for the ways programs are
//! isolated and connected today.

use super::contestant::{measure, Contestant};
use crate::harness::{without_idle_spin, Ctx};
use crate::inproc::{self, quiet, Server};
use crate::model::{key, Samples, Table};
use crate::peers::{figure, figures};
use std::path::Path;
use std::process::Command;
use warden::{Runtime, TaskSpec};
use warden_test_guests as guests;

pub const WARDEN_1: &str = "Warden task, 1 worker";
pub const WARDEN_2: &str = "Warden task, 2 workers";
/// The same with no idle spin: every waiting thread blocks at once, as
/// the peers' do.
pub const WARDEN_2_BLOCKING: &str = "Warden task, 2 workers, no idle spin";
pub const PROCESSES: &str = "Linux processes (fork+exec; pipes)";
pub const THREADS: &str = "Linux threads (condition variable)";
pub const WASMTIME: &str = "wasmtime process per program";
pub const JVM: &str = "JVM (java process; threads via SynchronousQueue)";
pub const ERLANG: &str = "Erlang/BEAM processes";
const PASSIVE: &str = "Warden passive service, 1 worker";
const HOST: &str = "Warden host service (Rust closure), 1 worker";

pub const PROCESSES_PINNED: &str = "Linux processes (pipes), both on one core";
pub const THREADS_PINNED: &str = "Linux threads (condition variable), both on one core";
const CREATE: &str = "process creation";
/// All started, then all waited for.
const BATCHED: &str = "process creation, batched";
const IPC: [&str; 3] = ["null IPC", "3-integer request", "100-byte string request"];

/// Each sample's sizes, and what Warden's rows share.
struct Shared {
    /// Tasks created per Warden sample.
    tasks: usize,
    /// Round trips per Warden (and Erlang) sample.
    calls: u64,
    /// Round trips per sample of the pipes, threads and Java.
    peer_calls: u64,
    /// Processes created per sample: native, wasmtime runner, JVM.
    native_n: usize,
    runner_n: usize,
    jvm_n: usize,
    rt1: Runtime,
    rt2: Runtime,
    hello: TaskSpec,
}

pub fn run(ctx: &Ctx) -> (Table, Samples) {
    let tasks = ctx.pick(1000, 200);
    let w = Shared {
        tasks,
        calls: ctx.pick(200_000, 20_000),
        peer_calls: ctx.pick(20_000, 2_000),
        native_n: ctx.pick(400, 40),
        runner_n: ctx.pick(100, 10),
        jvm_n: ctx.pick(10, 3),
        rt1: inproc::runtime(1, tasks as u32 + 16),
        rt2: inproc::runtime(2, tasks as u32 + 16),
        hello: quiet("hello", guests::HELLO),
    };
    let mut t = Table::new(
        "process",
        "Process creation and inter-process communication",
        "seed 000 (Back et al.), Table 2",
        &[
            (CREATE, "ms"),
            (BATCHED, "ms"),
            (IPC[0], "µs"),
            (IPC[1], "µs"),
            (IPC[2], "µs"),
        ],
    );
    t.method = method(&w);
    let m = measure(ctx.rounds, &mut t, contestants(ctx, &w));
    papers_and_notes(&mut t, &m.samples);
    let t = m.finish(t);
    (t, m.samples)
}

/// The table's contestants, in the order of its rows.
fn contestants<'a>(ctx: &'a Ctx, w: &'a Shared) -> Vec<Contestant<'a>> {
    let creation = [CREATE, BATCHED];
    let direct = "the server is a task spawned as above (passive) or no task at all (host)";
    let pinned = "only IPC is timed pinned";
    vec![
        Contestant::warden(WARDEN_1).runs(move |s| warden(s, WARDEN_1, &w.rt1, 1, w)),
        Contestant::warden(WARDEN_2).runs(move |s| warden(s, WARDEN_2, &w.rt2, 2, w)),
        Contestant::warden(WARDEN_2_BLOCKING).runs(move |s| {
            without_idle_spin(&[&w.rt2], || warden(s, WARDEN_2_BLOCKING, &w.rt2, 2, w))
        }),
        // The passive service's run takes the host service's figures too.
        Contestant::warden(PASSIVE)
            .runs(move |s| passive_and_host(s, w.calls))
            .absent(&creation, direct),
        Contestant::warden(HOST).absent(&creation, direct),
        // Each pair's run takes the pinned pair's figures too.
        Contestant::peer(PROCESSES).runs(move |s| processes(ctx, w, s)),
        Contestant::peer(PROCESSES_PINNED).absent(&creation, pinned),
        Contestant::peer(THREADS)
            .runs(move |s| threads(ctx, w.peer_calls, s))
            .absent(
                &creation,
                "a thread is not a process (table 1 times its start)",
            ),
        Contestant::peer(THREADS_PINNED).absent(&creation, pinned),
        Contestant::peer(WASMTIME)
            .runs(move |s| wasmtime(ctx, w.runner_n, s))
            .absent(&IPC, "wasmtime processes have no IPC of their own"),
        Contestant::peer(JVM).runs(move |s| jvm(ctx, w, s)),
        Contestant::peer(ERLANG).runs(move |s| erlang(ctx, w.calls, s)),
    ]
}

fn method(w: &Shared) -> String {
    let Shared {
        tasks,
        calls,
        peer_calls,
        native_n,
        runner_n,
        jvm_n,
        ..
    } = w;
    format!(
        "Process creation: a program that prints a line and exits, from spawn to exit, one at a time \
         (and, batched, all started before any is waited for): {tasks} Warden \
         tasks per sample (the C guest built for wasm32-wasi), {native_n} fork+exec+wait of the native \
         C program, {runner_n} of the wasmtime-crate runner with the same module compiled ahead of \
         time, {jvm_n} of `java Hello`, and an Erlang spawn until the new process runs. IPC: \
         round trips, {calls} per Warden sample (portal calls between two tasks; the 3 integers are \
         summed and the string's length returned by the server; made twice, the second run \
         timed, as Erlang's are), {peer_calls} per sample over a pair of \
         pipes between two processes and through a mutex and condition variable between two threads \
         (the request's bytes copied in and out), each once left to the kernel's placement and once \
         with both sides pinned to one core (no cross-core wake-ups, as in Warden's one-worker \
         hand-off), {} through a pair of SynchronousQueues between two \
         Java threads, and {calls} Erlang messages to a server process. Waiting: Warden's \
         idle workers and the thread waiting for a task's end look for work awake for up to 50 µs \
         before they sleep (halved after each look that finds nothing), while the peers block at once (pipes, condition variables, \
         waitpid); the row \"{WARDEN_2_BLOCKING}\" is Warden with that spin off, every waiting \
         thread blocking at once as the peers' do. A task still queued (the only one) when its \
         waiter arrives, a worker idle, runs on the waiting thread (Runtime::wait), as the \
         worker would have run it.",
        peer_calls
    )
}

/// The papers' rows and the table's notes (the direct services beside
/// Erlang's message round trip).
fn papers_and_notes(t: &mut Table, samples: &Samples) {
    t.paper(
        "Alta (paper, PII 300 MHz)",
        &[Some(120.0), None, Some(10.0), Some(12.0), Some(22.0)],
    );
    t.paper(
        "GVM (paper)",
        &[Some(89.0), None, Some(57.0), Some(57.0), Some(183.0)],
    );
    t.paper(
        "J-Kernel (paper)",
        &[Some(235.0), None, Some(2.7), Some(2.7), Some(27.0)],
    );
    t.paper(
        "Kaffe, fork+exec (paper)",
        &[Some(300.0), None, None, None, None],
    );
    t.notes.push(
        "Threads share an address space and so have no process creation; a wasmtime process per \
         program has no IPC of its own (it would use pipes, as the Linux processes do)."
            .into(),
    );
    for direct in [PASSIVE, HOST] {
        let ratios: Vec<String> = IPC
            .iter()
            .filter_map(|col| {
                let w = samples.cell(&key(direct, col))?.median;
                let e = samples.cell(&key(ERLANG, col))?.median;
                Some(format!("{col} {:.2}× ({:.3} µs)", w / e, w))
            })
            .collect();
        t.notes.push(format!(
            "{direct} over Erlang's message round trip: {} (targets: null ≤ 0.10 µs, \
             100-byte ≤ 0.15 µs).",
            ratios.join(", ")
        ));
    }
    t.notes.push(
        "A passive service's handler and a host service run on the caller's thread, inside its \
         call: no run queue, no thread switch. The request and reply are still copied between the \
         two tasks' memories (into the caller's kernel buffer, for a host service)."
            .into(),
    );
    t.notes.push(
        "Java passes its requests by reference (no copy); Erlang copies the 100-character list into \
         the server's heap; Warden copies every request and reply between the tasks' memories."
            .into(),
    );
}

/// A Warden row: `w.tasks` tasks created one at a time and batched on
/// `rt`, then portal round trips on a runtime of `workers` workers.
fn warden(
    s: &mut Samples,
    system: &str,
    rt: &Runtime,
    workers: usize,
    w: &Shared,
) -> Result<(), String> {
    s.push(
        &key(system, CREATE),
        inproc::spawn_serial(rt, &w.hello, w.tasks, "exited")? / 1e6,
    );
    s.push(
        &key(system, BATCHED),
        inproc::spawn_batch(rt, &w.hello, w.tasks, "exited")? / 1e6,
    );
    let f = inproc::ipc(workers, w.calls, &["null", "int3", "str100"])?;
    for (col, name) in IPC.iter().zip(["null", "int3", "str100"]) {
        s.push(&key(system, col), figure(&f, name)? / 1e3);
    }
    Ok(())
}

/// The passive service's round trips, then the host service's.
fn passive_and_host(s: &mut Samples, calls: u64) -> Result<(), String> {
    for (system, server) in [(PASSIVE, Server::Passive), (HOST, Server::Host)] {
        let f = inproc::ipc_to(server, 1, calls, &["null", "int3", "str100"])?;
        for (col, name) in IPC.iter().zip(["null", "int3", "str100"]) {
            s.push(&key(system, col), figure(&f, name)? / 1e3);
        }
    }
    Ok(())
}

/// Linux processes: fork+exec of the native program, then pipes between
/// two processes, unpinned and pinned to one core.
fn processes(ctx: &Ctx, w: &Shared, s: &mut Samples) -> Result<(), String> {
    let hello = ctx.peers.native("hello")?;
    push_spawn(s, PROCESSES, spawn(ctx, w.native_n, hello, &[])?);
    let pipe = ctx.peers.native("pipe_pingpong")?;
    let calls = w.peer_calls.to_string();
    for (col, bytes) in IPC.iter().zip(["1", "12", "100"]) {
        let f = figures(Command::new(pipe).args([&calls, bytes]))?;
        s.push(&key(PROCESSES, col), figure(&f, "pipe")? / 1e3);
        let f = figures(Command::new(pipe).args([&calls, bytes, "pin"]))?;
        s.push(&key(PROCESSES_PINNED, col), figure(&f, "pipe")? / 1e3);
    }
    Ok(())
}

/// Linux threads: a condition variable between two threads, unpinned and
/// pinned to one core.
fn threads(ctx: &Ctx, peer_calls: u64, s: &mut Samples) -> Result<(), String> {
    let cv = ctx.peers.native("condvar_pingpong")?;
    let calls = peer_calls.to_string();
    for (col, bytes) in IPC.iter().zip(["0", "12", "100"]) {
        let f = figures(Command::new(cv).args([&calls, bytes]))?;
        s.push(&key(THREADS, col), figure(&f, "condvar")? / 1e3);
        let f = figures(Command::new(cv).args([&calls, bytes, "pin"]))?;
        s.push(&key(THREADS_PINNED, col), figure(&f, "condvar")? / 1e3);
    }
    Ok(())
}

/// A wasmtime-crate runner process per program.
fn wasmtime(ctx: &Ctx, runner_n: usize, s: &mut Samples) -> Result<(), String> {
    let cwasm = ctx.peers.cwasm(guests::HELLO)?;
    let runner = ctx.peers.runner()?;
    let cwasm = cwasm.to_str().unwrap();
    push_spawn(s, WASMTIME, spawn(ctx, runner_n, runner, &[cwasm])?);
    Ok(())
}

/// `java Hello` per program; SynchronousQueues between two threads.
fn jvm(ctx: &Ctx, w: &Shared, s: &mut Samples) -> Result<(), String> {
    let java = ctx.peers.java_path()?;
    let cp = ctx.peers.java_classes()?.to_str().unwrap().to_string();
    push_spawn(s, JVM, spawn(ctx, w.jvm_n, &java, &["-cp", &cp, "Hello"])?);
    let jcalls = (w.peer_calls * 50).to_string();
    let f = figures(ctx.peers.java()?.args(["Prims", &jcalls, "ipc"]))?;
    for (col, name) in IPC.iter().zip(["sq_null", "sq_int3", "sq_str100"]) {
        s.push(&key(JVM, col), figure(&f, name)? / 1e3);
    }
    Ok(())
}

/// Erlang processes: spawn, and messages to a server process.
fn erlang(ctx: &Ctx, calls: u64, s: &mut Samples) -> Result<(), String> {
    let f = figures(&mut ctx.peers.erlang(&[calls.to_string()])?)?;
    s.push(&key(ERLANG, CREATE), figure(&f, "spawn")? / 1e6);
    s.push(&key(ERLANG, BATCHED), figure(&f, "spawn_batch")? / 1e6);
    for (col, name) in IPC.iter().zip(["msg_null", "msg_int3", "msg_str100"]) {
        s.push(&key(ERLANG, col), figure(&f, name)? / 1e3);
    }
    Ok(())
}

/// A process peer's creation figures: one at a time, and batched.
fn push_spawn(s: &mut Samples, system: &str, (serial, batched): (f64, f64)) {
    s.push(&key(system, CREATE), serial);
    s.push(&key(system, BATCHED), batched);
}

/// Milliseconds per fork+exec+wait of `program` over `n` runs, one at a
/// time and then all started before any is waited for, timed by the
/// native spawn driver.
fn spawn(ctx: &Ctx, n: usize, program: &Path, args: &[&str]) -> Result<(f64, f64), String> {
    let f = figures(
        Command::new(ctx.peers.native("spawn")?)
            .arg(n.to_string())
            .arg(program)
            .args(args),
    )?;
    Ok((figure(&f, "spawn")? / 1e6, figure(&f, "spawn_batch")? / 1e6))
}

//! Seed 000, Table 1: the basic costs a process model must not disturb —
//! a null method call, an allocation, a null thread, an exception — as
//! Warden, raw Wasmtime, the JVM and native code pay them; and one Java
//! program's call, allocation and exception compiled by TeaVM into a task
//! against the same program on HotSpot.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, check_status, quiet, Raw, RawPre};
use crate::model::{key, Samples, Table};
use crate::peers::{figure, figures};
use std::time::{Duration, Instant};
use warden::{Runtime, TaskSpec};
use warden_test_guests as guests;

const WARDEN: &str = "Warden task";
const WARDEN_RUN: &str = "Warden task, run by its caller (Runtime::run)";
const RAW: &str = "raw Wasmtime (in-process)";
const RAW_POOLED: &str = "raw Wasmtime, pooling allocator (in-process)";
const RAW_WARDEN: &str = "raw Wasmtime on Warden's engine, async (in-process)";
const JVM: &str = "JVM (HotSpot)";
const NATIVE: &str = "native C (Linux)";
const WARDEN_JAVA: &str = "Java in a Warden task (TeaVM)";
const HOTSPOT_JAVA: &str = "the same Java program on HotSpot";

/// Null threads started all at once, then waited for.
const BATCHED: &str = "null thread, batched";

/// What Warden's rows share: one runtime, the smallest program and one
/// whose first instruction traps, and each sample's sizes.
struct Shared {
    rt: Runtime,
    noop: TaskSpec,
    trap: TaskSpec,
    /// Operations per sample of call and allocation, as an argument.
    n: String,
    /// Null threads (and traps) per sample.
    tasks: usize,
}

pub fn run(ctx: &Ctx) -> Table {
    let ops: u64 = ctx.pick(2_000_000, 200_000);
    let tasks = ctx.pick(2000, 300);
    let mut t = Table::new(
        "primitives",
        "Primitive costs: call, allocation, null thread, trap",
        "seed 000 (Back et al.), Table 1",
        &[
            ("call", "ns"),
            ("allocation", "ns"),
            ("null thread", "µs"),
            ("trap", "µs"),
            (BATCHED, "µs"),
        ],
    );
    t.method = method(ops, tasks);
    let shared = Shared {
        rt: inproc::runtime(1, tasks as u32 + 16),
        noop: quiet("noop", guests::NOOP),
        trap: quiet("trap", guests::UNREACHABLE),
        n: ops.to_string(),
        tasks,
    };
    let m = measure(ctx.rounds, &mut t, contestants(ctx, &shared));
    run_ratios(&mut t, &m.samples);
    papers_and_notes(&mut t);
    m.finish(t)
}

/// The table's contestants, in the order of its rows.
fn contestants<'a>(ctx: &'a Ctx, w: &'a Shared) -> Vec<Contestant<'a>> {
    let (n, tasks) = (w.n.as_str(), w.tasks);
    let same_code =
        |row: &str| format!("the same compiled code as {row}; only instantiation differs");
    vec![
        Contestant::warden(WARDEN).runs(move |s| warden(s, w)),
        Contestant::warden(WARDEN_RUN).runs(move |s| warden_run(s, w)).absent(
            &["call", "allocation", BATCHED],
            "the row above's program and tasks; only the null thread and trap are started differently",
        ),
        Contestant::peer(RAW)
            .prepared(
                || Ok(RawSet::new(Raw::new(), true)),
                move |r, s| r.ops(s, RAW, n)?.starts(s, RAW, tasks),
            )
            .absent(
                &[BATCHED],
                "instantiate + _start runs on the calling thread, with nothing to overlap",
            ),
        Contestant::peer(RAW_POOLED)
            .prepared(
                || Ok(RawSet::new(Raw::pooled(64), false)),
                move |r, s| r.starts(s, RAW_POOLED, tasks),
            )
            .absent(&["call", "allocation", BATCHED], &same_code("the row above")),
        Contestant::peer(RAW_WARDEN)
            .prepared(on_engine, move |(r, _), s| r.starts(s, RAW_WARDEN, tasks))
            .absent(&["call", "allocation", BATCHED], &same_code("Warden's row")),
        Contestant::peer(JVM).runs(move |s| jvm(ctx, n, s)),
        Contestant::peer(NATIVE).runs(move |s| native(ctx, n, s)),
        Contestant::warden(WARDEN_JAVA)
            .runs(move |s| warden_java(s, w))
            .absent(&["null thread", BATCHED], JAVA_ONLY),
        Contestant::peer(HOTSPOT_JAVA)
            .runs(move |s| hotspot_java(ctx, n, s))
            .absent(&["null thread", BATCHED], JAVA_ONLY),
    ]
}

/// Why the Java rows have no null thread.
const JAVA_ONLY: &str = "the Java rows time call, allocation and exception only";

fn method(ops: u64, tasks: usize) -> String {
    let mut method = format!(
        "call and allocation are timed inside the program ({ops} operations per sample): an indirect \
         call to an empty function, and malloc(16)+free in batches of 1,000 (new Object() on the JVM, \
         which frees by collection). Null thread: spawn to exit of the smallest program, one at a \
         time, {tasks} per sample: a Warden task (1 worker; spawn, then wait for its report; and \
         Runtime::run, spawn and wait in one call, which runs the task on the calling thread \
         while the worker is idle), a raw \
         Wasmtime instantiate + _start on the calling thread (its default settings; again with \
         the pooling allocator and copy-on-write memory images, as Warden's engine has them; and \
         a third time on a Warden runtime's own engine, with every one of its settings, \
         instantiated and run async on a fiber from its pool, as a task is), \
         Thread start + join, pthread_create + join. Batched: all \
         {tasks} started, then all waited for (Warden tasks; Threads; pthreads). Trap, one at a \
         time: a program whose first instruction traps, spawn to report in \
         Warden and instantiate + call + error in Wasmtime; new Throwable() on the JVM; a SIGSEGV \
         caught and siglongjmp'd natively. The two Java rows run one program (JavaPrims.java), \
         compiled by TeaVM 0.13.1 into a Warden task and by javac for HotSpot: an interface call to \
         an empty method with two implementations in use (HotSpot told not to inline it), new \
         Object() kept in a field, and in the trap column a new Exception thrown and caught \
         ({ops} operations, the exception {}; each timed twice in one run, the second \
         reported).",
        (ops / 100).max(1000)
    );
    method.push_str(
        " Waiting differs: the thread waiting for a Warden task's report, and an idle worker, \
         look for it awake for up to 50 µs (warden::IDLE_SPIN) before they sleep, while Thread.join \
         and pthread_join block at once; the process table has a Warden row with that spin off. \
         A task still queued (the only one) when its waiter arrives, the worker idle, runs on \
         the waiting thread (Runtime::wait), as the worker would have run it.",
    );
    method
}

/// The papers' rows and the table's closing notes.
fn papers_and_notes(t: &mut Table) {
    // The paper's figures (µs in the paper), PII 300 MHz, FreeBSD.
    t.paper(
        "Kaffe 1.0beta1 (paper, PII 300 MHz)",
        &[Some(160.0), Some(1900.0), Some(480.0), Some(12.0), None],
    );
    t.paper(
        "GVM (paper)",
        &[Some(160.0), Some(3100.0), Some(725.0), Some(18.0), None],
    );
    t.paper(
        "Alta (paper)",
        &[Some(160.0), Some(2500.0), Some(1030.0), Some(15.0), None],
    );
    t.paper(
        "J-Kernel (paper)",
        &[Some(170.0), Some(1800.0), Some(480.0), Some(29.0), None],
    );
    t.notes.push(
        "Warden and raw Wasmtime run the same compiled guest for call and allocation; the difference \
         between them is Warden's epoch checks (Wasmtime compiles one into every loop header and \
         function entry for preemption)."
            .into(),
    );
    t.notes.push(
        "A Warden trap ends the task: the figure is a whole task that traps, spawn to report, \
         the equivalent of the JVM's exception only in that both build an error with a stack trace."
            .into(),
    );
}

/// Warden's row: call and allocation inside one task, then null threads
/// (one at a time and batched) and traps as whole tasks.
fn warden(s: &mut Samples, w: &Shared) -> Result<(), String> {
    let mut spec = quiet("prims", guests::PRIMS);
    spec.args = vec![w.n.clone(), "local".into()];
    let f = inproc::guest_figures(&w.rt, spec)?;
    push_ops(s, WARDEN, &f)?;
    let (rt, tasks) = (&w.rt, w.tasks);
    s.push(
        &key(WARDEN, "null thread"),
        inproc::spawn_serial(rt, &w.noop, tasks, "exited")? / 1e3,
    );
    s.push(
        &key(WARDEN, BATCHED),
        inproc::spawn_batch(rt, &w.noop, tasks, "exited")? / 1e3,
    );
    s.push(
        &key(WARDEN, "trap"),
        inproc::spawn_serial(rt, &w.trap, tasks, "trapped")? / 1e3,
    );
    Ok(())
}

/// The same tasks started by `Runtime::run`.
fn warden_run(s: &mut Samples, w: &Shared) -> Result<(), String> {
    s.push(
        &key(WARDEN_RUN, "null thread"),
        inproc::run_serial(&w.rt, &w.noop, w.tasks, "exited")? / 1e3,
    );
    s.push(
        &key(WARDEN_RUN, "trap"),
        inproc::run_serial(&w.rt, &w.trap, w.tasks, "trapped")? / 1e3,
    );
    Ok(())
}

/// The Java program compiled by TeaVM, as a task.
fn warden_java(s: &mut Samples, w: &Shared) -> Result<(), String> {
    if guests::JAVA_PRIMS.is_empty() {
        return Err(format!("Java guest not built: {:?}", guests::UNBUILT));
    }
    let mut spec = quiet("java-prims", guests::JAVA_PRIMS);
    spec.args = vec![w.n.clone()];
    push_java(s, WARDEN_JAVA, &inproc::guest_figures(&w.rt, spec)?)
}

/// The same Java program on HotSpot.
fn hotspot_java(ctx: &Ctx, n: &str, s: &mut Samples) -> Result<(), String> {
    let f = figures(
        ctx.peers
            .java()?
            .args([
                "-XX:CompileCommand=quiet",
                "-XX:CompileCommand=dontinline,*::nop",
                "JavaPrims",
            ])
            .arg(n),
    )?;
    push_java(s, HOTSPOT_JAVA, &f)
}

/// The JVM's primitives (Prims.java): every column.
fn jvm(ctx: &Ctx, n: &str, s: &mut Samples) -> Result<(), String> {
    let f = figures(
        ctx.peers
            .java()?
            .args([
                "-XX:CompileCommand=quiet",
                "-XX:CompileCommand=dontinline,Prims::nop",
                "Prims",
            ])
            .args([n, "prims"]),
    )?;
    push_ops(s, JVM, &f)?;
    s.push(&key(JVM, "null thread"), figure(&f, "thread")? / 1e3);
    s.push(&key(JVM, BATCHED), figure(&f, "thread_batch")? / 1e3);
    s.push(&key(JVM, "trap"), figure(&f, "exception")? / 1e3);
    Ok(())
}

/// Native C's primitives (peers/prims.c): every column.
fn native(ctx: &Ctx, n: &str, s: &mut Samples) -> Result<(), String> {
    let f = figures(std::process::Command::new(ctx.peers.native("prims")?).arg(n))?;
    push_ops(s, NATIVE, &f)?;
    s.push(&key(NATIVE, "null thread"), figure(&f, "thread")? / 1e3);
    s.push(&key(NATIVE, BATCHED), figure(&f, "thread_batch")? / 1e3);
    s.push(&key(NATIVE, "trap"), figure(&f, "trap")? / 1e3);
    Ok(())
}

/// A raw Wasmtime set-up and the modules it starts: the no-op and the
/// trapping one (and, for the first raw row, the primitives' program).
struct RawSet {
    raw: Raw,
    prims: Option<RawPre>,
    noop: RawPre,
    trap: RawPre,
}

impl RawSet {
    fn new(raw: Raw, prims: bool) -> RawSet {
        let prims = prims.then(|| raw.pre(guests::PRIMS));
        let (noop, trap) = (raw.pre(guests::NOOP), raw.pre(guests::UNREACHABLE));
        RawSet {
            raw,
            prims,
            noop,
            trap,
        }
    }

    /// The call and allocation columns, from the primitives' program.
    fn ops(&self, s: &mut Samples, system: &str, n: &str) -> Result<&Self, String> {
        let prims = self.prims.as_ref().ok_or("no primitives' program")?;
        push_ops(s, system, &self.raw.figures(prims, &[n, "local"])?)?;
        Ok(self)
    }

    /// The null thread and trap columns: `tasks` instances of the no-op
    /// and of the trapping module, one at a time (µs).
    fn starts(&self, s: &mut Samples, system: &str, tasks: usize) -> Result<(), String> {
        s.push(
            &key(system, "null thread"),
            self.raw.batch(&self.noop, tasks, false)? / 1e3,
        );
        s.push(
            &key(system, "trap"),
            self.raw.batch(&self.trap, tasks, true)? / 1e3,
        );
        Ok(())
    }
}

/// Raw Wasmtime on a Warden runtime's own engine, with every one of its
/// settings: its own runtime, so that its instances take none of the
/// table's runtime's slots.
fn on_engine() -> Result<(RawSet, Runtime), String> {
    let rt = inproc::runtime(1, 64);
    let set = RawSet::new(Raw::on_engine(rt.engine()), false);
    Ok((set, rt))
}

/// Notes giving `Runtime::run`'s null thread and trap as ratios to each
/// raw Wasmtime row's (the table's ratios are the first Warden row's).
fn run_ratios(t: &mut Table, samples: &Samples) {
    for column in ["null thread", "trap"] {
        let Some(run) = samples.cell(&key(WARDEN_RUN, column)) else {
            continue;
        };
        let ratios: Vec<String> = [RAW, RAW_POOLED, RAW_WARDEN]
            .iter()
            .filter_map(|peer| {
                let p = samples.cell(&key(peer, column))?;
                Some(format!("{:.2}× {peer}", run.median / p.median))
            })
            .collect();
        if !ratios.is_empty() {
            t.notes.push(format!(
                "{WARDEN_RUN}, {column}: {:.3} µs, {}.",
                run.median,
                ratios.join(", ")
            ));
        }
    }
}

fn push_ops(
    s: &mut Samples,
    system: &str,
    f: &std::collections::BTreeMap<String, f64>,
) -> Result<(), String> {
    s.push(&key(system, "call"), figure(f, "call")?);
    s.push(&key(system, "allocation"), figure(f, "alloc")?);
    Ok(())
}

/// The Java program's figures: call, allocation, and its exception in the
/// trap column (µs).
fn push_java(
    s: &mut Samples,
    system: &str,
    f: &std::collections::BTreeMap<String, f64>,
) -> Result<(), String> {
    push_ops(s, system, f)?;
    s.push(&key(system, "trap"), figure(f, "exception")? / 1e3);
    Ok(())
}

/// A profiling role (`warden-bench child-spawn N`): the null thread
/// column's Warden loop alone, `n` tasks; prints the time per task, the
/// spawn call's share of it, and the kernel's own creation (spawn call and
/// instantiation) and teardown times; then the time per task of the same
/// loop made with `Runtime::run`. `module` (a module or a component)
/// runs instead of the smallest module if given.
pub fn child_spawn(n: usize, module: Option<&str>) -> Result<(), String> {
    let rt = inproc::runtime(1, 64);
    let noop = quiet("noop", module.unwrap_or(guests::NOOP));
    let t = Instant::now();
    let mut spawning = Duration::ZERO;
    for _ in 0..n {
        let s = Instant::now();
        let id = rt.spawn(&noop).map_err(|e| e.to_string())?;
        spawning += s.elapsed();
        check_status(&noop, &rt.wait(id).map_err(|e| e.to_string())?, "exited")?;
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let st = rt.setup_stats();
    let per = |secs: f64| secs * 1e6 / st.tasks.max(1) as f64;
    println!(
        "{:.2} µs per task; spawn call {:.2} µs; created in {:.2} µs, released in {:.2} µs",
        us(t.elapsed()),
        us(spawning),
        per(st.create_seconds),
        per(st.teardown_seconds)
    );
    let run = inproc::run_serial(&rt, &noop, n, "exited")?;
    println!("{:.2} µs per task with Runtime::run", run / 1e3);
    Ok(())
}

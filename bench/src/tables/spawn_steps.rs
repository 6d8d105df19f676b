//! Where a task's spawn goes, step by step: the spawn call as its caller
//! times it, the creation and release the kernel times, and what is left
//! of spawn-to-report, beside `Runtime::run` and raw Wasmtime doing the
//! same start on a Warden runtime's engine.

use super::contestant::{self, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet, Raw};
use crate::model::{key, Samples, Table};
use std::time::{Duration, Instant};
use warden::{Runtime, TaskSpec};
use warden_test_guests as guests;

const SPAWN: &str = "Warden task, spawned and waited for";
const RUN: &str = "Warden task, run by its caller (Runtime::run)";
const RAW: &str = "raw Wasmtime on Warden's engine, async (in-process)";

const CALL: &str = "spawn call";
const CREATE: &str = "creation";
const RELEASE: &str = "release";
const REST: &str = "the rest";
const TOTAL: &str = "total";

pub fn run(ctx: &Ctx) -> Table {
    let columns = [CALL, CREATE, RELEASE, REST, TOTAL].map(|c| (c, "µs"));
    let mut t = Table::new(
        "spawn_steps",
        "Spawn, step by step (µs per task, lower is better)",
        "issue: where a task's spawn goes, beside raw Wasmtime on the same engine",
        &columns,
    );
    let n: usize = ctx.pick(4000, 500);
    t.method = format!(
        "{n} tasks of a module that does nothing (crates/test-guests/guests/noop.wat), one at \
         a time, on a runtime of one worker. Spawn call: Runtime::spawn as its caller times it \
         (the task's module looked up, its table entry, handles and output made, the task \
         queued). Creation: what the kernel times as making the task, the spawn call's \
         preparation and, on the thread that runs it, the store with its WASI context and the \
         instance. Release: what it times as ending it, the store dropped and the pool slot \
         reset. The rest: spawn-to-report minus creation and release (queueing, `_start`, the \
         report, and where the task ran on the worker, the hand-off to it and the waiter's \
         wake: Runtime::wait runs a task still queued, the only one, on the waiting thread \
         while the worker idles, as the worker would have run it). Runtime::run makes and \
         runs the task in one call, on the calling thread while the worker idles, so it has no \
         separate spawn call. Raw Wasmtime instantiates the same module from an InstancePre \
         on a Warden runtime's own engine (pooling allocator, async, fibers) and calls \
         `_start`, on the harness's thread: what Wasmtime alone costs for the same start."
    );
    let rt = inproc::runtime(1, 64);
    let noop = quiet("noop", guests::NOOP);
    let raw = Raw::on_engine(rt.engine());
    let pre = raw.pre(guests::NOOP);
    let mut list = vec![
        Contestant::warden(SPAWN).runs(|s| spawned(&rt, &noop, n, s)),
        Contestant::warden(RUN)
            .runs(|s| by_run(&rt, &noop, n, s))
            .absent(&[CALL], "Runtime::run has no separate spawn call"),
        Contestant::peer(RAW)
            .runs(|s| {
                s.push(&key(RAW, TOTAL), raw.batch(&pre, n, false)? / 1e3);
                Ok(())
            })
            .absent(
                &[CALL, CREATE, RELEASE, REST],
                "raw Wasmtime's start is one step",
            ),
    ];
    let m = contestant::run(ctx.rounds, &mut list);
    contestant::rows(&mut t, &list, &m.samples, "");
    let total = |name: &str| {
        let row = t.rows.iter().find(|r| r.system == name)?;
        Some(row.cells.last()?.as_ref()?.median)
    };
    if let (Some(run), Some(raw)) = (total(RUN), total(RAW)) {
        t.notes
            .push(format!("{RUN} / {RAW}, total: {:.2}×.", run / raw));
    }
    t.notes.push(
        "Targets: spawned and waited for at most 2× raw Wasmtime on Warden's engine; \
         Runtime::run at most 1.3×."
            .into(),
    );
    m.finish(t)
}

/// Tasks spawned and waited for, one at a time: the caller's time in
/// the spawn calls, the kernel's creation and release, and spawn to
/// report.
fn spawned(rt: &Runtime, spec: &TaskSpec, n: usize, s: &mut Samples) -> Result<(), String> {
    let before = rt.setup_stats();
    let mut calls = Duration::ZERO;
    let t = Instant::now();
    for _ in 0..n {
        let c = Instant::now();
        let id = rt.spawn(spec).map_err(|e| e.to_string())?;
        calls += c.elapsed();
        inproc::check_status(spec, &rt.wait(id).map_err(|e| e.to_string())?, "exited")?;
    }
    let total = t.elapsed();
    s.push(&key(SPAWN, CALL), calls.as_secs_f64() * 1e6 / n as f64);
    push_steps(rt, before, total, n, SPAWN, s);
    Ok(())
}

/// Tasks run by `Runtime::run`, one at a time.
fn by_run(rt: &Runtime, spec: &TaskSpec, n: usize, s: &mut Samples) -> Result<(), String> {
    let before = rt.setup_stats();
    let t = Instant::now();
    for _ in 0..n {
        inproc::check_status(spec, &rt.run(spec).map_err(|e| e.to_string())?, "exited")?;
    }
    push_steps(rt, before, t.elapsed(), n, RUN, s);
    Ok(())
}

/// Creation, release, the rest and the total per task, from the kernel's
/// counts since `before` and the wall time `total` of `n` tasks.
fn push_steps(
    rt: &Runtime,
    before: warden::SetupStats,
    total: Duration,
    n: usize,
    system: &str,
    s: &mut Samples,
) {
    let after = rt.setup_stats();
    let per = |secs: f64| secs * 1e6 / n as f64;
    let create = per(after.create_seconds - before.create_seconds);
    let release = per(after.teardown_seconds - before.teardown_seconds);
    let total = per(total.as_secs_f64());
    s.push(&key(system, CREATE), create);
    s.push(&key(system, RELEASE), release);
    s.push(&key(system, REST), (total - create - release).max(0.0));
    s.push(&key(system, TOTAL), total);
}

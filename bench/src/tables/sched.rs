//! Scheduling: how closely Warden's proportional-share policies give four
//! spinning tasks the CPU they were promised, and what a decision and a
//! slice switch cost, beside a Linux thread switch.

use super::contestant::{measure, Contestant};
use crate::harness::Ctx;
use crate::inproc::{self, quiet};
use crate::model::{Kind, Samples, Table};
use crate::peers::{figure, figures};
use std::process::Command;
use std::time::{Duration, Instant};
use warden::{PolicyKind, RunQueue, SchedParams as Params, SchedTree as Tree, TaskSched};
use warden::{Runtime, RuntimeConfig, TaskId};
use warden_test_guests as guests;

const STRIDE: &str = "Warden stride scheduler";
const LOTTERY: &str = "Warden lottery scheduler";
const SHARES: [&str; 4] = ["share 1", "share 2", "share 3", "share 4"];
const POLICIES: [(PolicyKind, &str); 4] = [
    (PolicyKind::RoundRobin, "decision, round-robin"),
    (PolicyKind::Priority, "decision, priority"),
    (PolicyKind::Stride, "decision, stride"),
    (PolicyKind::Lottery, "decision, lottery"),
];
const SWITCH: &str = "slice switch";
const WARDEN: &str = "Warden";
const LINUX: &str = "Linux threads on one core (sched_yield)";

pub fn run(ctx: &Ctx) -> Vec<Table> {
    vec![accuracy(ctx), overhead(ctx)]
}

fn runtime(scheduler: PolicyKind, slice_ms: u64) -> Runtime {
    Runtime::new(RuntimeConfig {
        slice: Duration::from_millis(slice_ms),
        scheduler,
        ..inproc::config(1, 16)
    })
    .expect("start a Warden runtime")
}

/// Four spinners weighted 1:2:3:4 on one worker for `secs`; each one's
/// percentage of the CPU they used together.
fn shares(kind: PolicyKind, secs: f64) -> Result<Vec<f64>, String> {
    let rt = runtime(kind, 4);
    let ids: Vec<TaskId> = (1..=4u32)
        .map(|w| {
            let mut s = quiet(&format!("spin{w}"), guests::SPIN);
            s.sched.params = Params {
                share: w,
                tickets: 100 * w,
                priority: 0,
            };
            rt.spawn(&s).map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let cpu = || {
        let live = rt.live_tasks();
        ids.iter()
            .map(|id| live.iter().find(|t| t.id == *id).map_or(0.0, |t| t.cpu_ms))
            .collect::<Vec<f64>>()
    };
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let used: Vec<f64> = cpu().iter().zip(before).map(|(a, b)| a - b).collect();
    rt.kill_all("benchmark over");
    let total: f64 = used.iter().sum();
    if total <= 0.0 {
        return Err("the spinners used no CPU".into());
    }
    Ok(used.iter().map(|u| 100.0 * u / total).collect())
}

fn accuracy(ctx: &Ctx) -> Table {
    let secs = ctx.pick(2.0, 0.5);
    let mut t = Table::new(
        "sched_accuracy",
        "Proportional share: CPU of four spinning tasks weighted 1:2:3:4 (%)",
        "scheduling issue (stride and lottery scheduling, as in GVM's CPU inheritance)",
        &SHARES.map(|c| (c, "%")),
    );
    t.method = format!(
        "Four tasks spin on one worker with 4 ms slices for {secs} s after 100 ms of warm-up; each \
         task's CPU time (thread CPU clock) over their total."
    );
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(STRIDE)
                .runs(|s| push_shares(s, STRIDE, shares(PolicyKind::Stride, secs)?)),
            Contestant::warden(LOTTERY)
                .runs(|s| push_shares(s, LOTTERY, shares(PolicyKind::Lottery, secs)?)),
        ],
    );
    t.paper(
        "the shares asked for",
        &[Some(10.0), Some(20.0), Some(30.0), Some(40.0)],
    );
    for row in t.rows.iter().filter(|r| r.kind == Kind::Warden) {
        let worst = row
            .cells
            .iter()
            .zip([10.0, 20.0, 30.0, 40.0])
            .filter_map(|(c, want)| c.as_ref().map(|c| (c.median - want).abs()))
            .fold(0.0f64, f64::max);
        t.notes.push(format!(
            "{}: worst deviation {worst:.2} percentage points (medians).",
            row.system
        ));
    }
    t.notes.push(format!(
        "A lottery over {secs} s of 4 ms slices draws about {:.0} times, so its figures carry sampling noise of a few percent.",
        secs * 250.0
    ));
    m.finish(t)
}

fn push_shares(s: &mut Samples, system: &str, shares: Vec<f64>) -> Result<(), String> {
    for (c, v) in SHARES.iter().zip(shares) {
        s.push(&format!("{system}/{c}"), v);
    }
    Ok(())
}

/// Nanoseconds per pop + charge + push with 1,000 runnable tasks in ten
/// groups under the root.
fn decision(kind: PolicyKind, n: usize) -> f64 {
    let mut q = Tree::new(kind);
    let groups: Vec<usize> = (0..10)
        .map(|_| q.add_group(0, kind, &Params::default(), None))
        .collect();
    for t in 0..1000u64 {
        let sched = TaskSched {
            params: Params {
                share: 1 + (t % 4) as u32,
                tickets: 100,
                priority: (t % 3) as i32,
            },
            group: groups[(t % 10) as usize],
            cap: None,
            parent: None,
        };
        q.add(t, &sched);
        q.push(t);
    }
    let t0 = Instant::now();
    let mut now = 0;
    for _ in 0..n {
        let t = q.pop(now).expect("a runnable task");
        now += 1_000;
        q.charge(t, 1_000, now);
        q.push(t);
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

/// The executor's own time per slice switch between two spinning tasks
/// with 1 ms slices on one worker.
fn switch(secs: f64) -> Result<f64, String> {
    let rt = runtime(PolicyKind::RoundRobin, 1);
    for name in ["a", "b"] {
        rt.spawn(&quiet(name, guests::SPIN))
            .map_err(|e| e.to_string())?;
    }
    std::thread::sleep(Duration::from_millis(50));
    let s0 = rt.stats();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let s1 = rt.stats();
    rt.kill_all("benchmark over");
    let n = s1.switches - s0.switches;
    if n == 0 {
        return Err("no switches".into());
    }
    Ok((s1.switch_ns - s0.switch_ns) as f64 / n as f64)
}

fn overhead(ctx: &Ctx) -> Table {
    let decisions = ctx.pick(2_000_000, 200_000);
    let secs = ctx.pick(1.0, 0.3);
    let yields: u64 = ctx.pick(200_000, 20_000);
    let mut cols: Vec<(&str, &str)> = POLICIES.iter().map(|(_, c)| (*c, "ns")).collect();
    cols.push((SWITCH, "ns"));
    let mut t = Table::new(
        "sched_overhead",
        "Scheduling overhead (ns)",
        "scheduling issue; seed 000 (GVM's scheduler costs)",
        &cols,
    );
    t.method = format!(
        "Decision: {decisions} pop + charge + push cycles of the policy tree with 1,000 runnable tasks \
         in ten groups. Slice switch: the executor's time between one task's slice and the next's, \
         two spinning tasks with 1 ms slices for {secs} s. Linux: two threads pinned to one core \
         calling sched_yield, {yields} times each."
    );
    let decision_columns: Vec<&str> = POLICIES.iter().map(|(_, c)| *c).collect();
    let m = measure(
        ctx.rounds,
        &mut t,
        vec![
            Contestant::warden(WARDEN).runs(|s| {
                for (kind, col) in POLICIES {
                    s.push(&format!("{WARDEN}/{col}"), decision(kind, decisions));
                }
                s.push(&format!("{WARDEN}/{SWITCH}"), switch(secs)?);
                Ok(())
            }),
            Contestant::peer(LINUX)
                .runs(|s| {
                    let f = figures(
                        Command::new(ctx.peers.native("yield_switch")?).arg(yields.to_string()),
                    )?;
                    s.push(&format!("{LINUX}/{SWITCH}"), figure(&f, "switch")?);
                    Ok(())
                })
                .absent(
                    &decision_columns,
                    "the kernel's decision is not timed apart from its switch",
                ),
        ],
    );
    t.no_ratio.push(SWITCH.into());
    t.notes.push(
        "No ratio for the slice switch: the two figures time different work. A Warden slice \
         switch here is the executor's bookkeeping only (run-queue push and pop, CPU metering); \
         the epoch callback and the fiber switch that save and restore the guest's state are not \
         in it. A Linux switch is a whole kernel thread switch."
            .into(),
    );
    m.finish(t)
}

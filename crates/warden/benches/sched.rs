//! Scheduling benchmarks.
//!
//! `cargo bench --bench sched` prints:
//! - stride accuracy: four spinning tasks with shares 1:2:3:4 on one
//!   worker for 2 s; each task's share of the CPU and its deviation from
//!   the target (target ±2% absolute); the same with lottery tickets;
//! - the cost of a scheduling decision (push, pop, charge) in the policy
//!   tree, per policy, with 1,000 runnable tasks in two levels of groups;
//! - the executor's cost of a slice switch between two spinning tasks
//!   (and, for a switch through a portal call, see the IPC benchmark);
//! - compute inside a task placed three groups deep vs raw Wasmtime.
//!
//! `WARDEN_BENCH_QUICK=1` shortens every run.

mod common;

use common::{median, quick, quiet, Raw};
use std::time::{Duration, Instant};
use warden::sched::{Params, PolicyKind, RunQueue, TaskSched, Tree};
use warden::{GroupSpec, Runtime, RuntimeConfig, TaskId};
use warden_test_guests as guests;

fn runtime(scheduler: PolicyKind, slice_ms: u64, groups: Vec<GroupSpec>) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 64,
        slice: Duration::from_millis(slice_ms),
        scheduler,
        groups,
        ..Default::default()
    })
    .unwrap()
}

fn cpu(rt: &Runtime, ids: &[TaskId]) -> Vec<f64> {
    let live = rt.live_tasks();
    ids.iter()
        .map(|id| live.iter().find(|t| t.id == *id).map_or(0.0, |t| t.cpu_ms))
        .collect()
}

/// Four spinners weighted 1:2:3:4 for `secs`; their CPU fractions.
fn shares(kind: PolicyKind, secs: f64) -> Vec<f64> {
    let rt = runtime(kind, 4, vec![]);
    let ids: Vec<_> = (1..=4u32)
        .map(|w| {
            let mut s = quiet(&format!("spin{w}"), guests::SPIN);
            s.sched = Params {
                share: w,
                tickets: 100 * w,
                priority: 0,
            };
            rt.spawn(&s).unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu(&rt, &ids);
    std::thread::sleep(Duration::from_secs_f64(secs));
    let used: Vec<f64> = cpu(&rt, &ids)
        .iter()
        .zip(before)
        .map(|(a, b)| a - b)
        .collect();
    rt.kill_all("bench over");
    let total: f64 = used.iter().sum();
    used.iter().map(|u| u / total).collect()
}

fn bench_accuracy() {
    let secs = if quick() { 0.5 } else { 2.0 };
    for (kind, name) in [
        (PolicyKind::Stride, "stride"),
        (PolicyKind::Lottery, "lottery"),
    ] {
        let f = shares(kind, secs);
        let dev: Vec<f64> = f
            .iter()
            .enumerate()
            .map(|(i, x)| x - (i + 1) as f64 / 10.0)
            .collect();
        let worst = dev.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        println!(
            "{name} 1:2:3:4 over {secs} s: shares {:.3} {:.3} {:.3} {:.3} (target .1 .2 .3 .4), \
             worst deviation {:.2}% absolute{}",
            f[0],
            f[1],
            f[2],
            f[3],
            worst * 100.0,
            if name == "stride" {
                " (target <= 2%)"
            } else {
                ""
            }
        );
    }
}

fn bench_decision() {
    let n = if quick() { 200_000 } else { 2_000_000 };
    for (kind, name) in [
        (PolicyKind::RoundRobin, "round-robin"),
        (PolicyKind::Priority, "priority"),
        (PolicyKind::Stride, "stride"),
        (PolicyKind::Lottery, "lottery"),
    ] {
        // 1,000 tasks in 10 groups of 100 under the root, all runnable.
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
            };
            q.add(t, &sched);
            q.push(t);
        }
        let t0 = Instant::now();
        let mut now = 0;
        for _ in 0..n {
            let t = q.pop(now).unwrap();
            now += 1_000;
            q.charge(t, 1_000, now);
            q.push(t);
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("decision ({name}, 1,000 tasks, two levels): {ns:.0} ns per pop + charge + push");
    }
}

/// Two spinning tasks with 1 ms slices on one worker: the executor's time
/// from the end of one task's slice to the start of the next's (run-queue
/// push and pop, CPU metering), per switch.
fn bench_switch() {
    let secs = if quick() { 0.3 } else { 1.0 };
    let rt = runtime(PolicyKind::RoundRobin, 1, vec![]);
    let a = rt.spawn(&quiet("a", guests::SPIN)).unwrap();
    let b = rt.spawn(&quiet("b", guests::SPIN)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let s0 = rt.stats();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let s1 = rt.stats();
    rt.kill(a, "bench over").unwrap();
    rt.kill(b, "bench over").unwrap();
    let n = (s1.switches - s0.switches).max(1);
    println!(
        "slice switch: {:.2} us of executor time per switch ({n} switches in {secs} s of 1 ms slices; \
         the guest's own yield and resume are inside the slices)",
        (s1.switch_ns - s0.switch_ns) as f64 / n as f64 / 1e3
    );
}

fn bench_hierarchy_compute() {
    let rounds = if quick() { 3 } else { 7 };
    let group = |name: &str, parent: Option<&str>, policy| GroupSpec {
        name: name.into(),
        parent: parent.map(Into::into),
        policy,
        params: Params::default(),
        cap: None,
        cpu_quota: None,
    };
    let rt = runtime(
        PolicyKind::Stride,
        4,
        vec![
            group("org", None, PolicyKind::Stride),
            group("tenant", Some("org"), PolicyKind::Priority),
            group("app", Some("tenant"), PolicyKind::Lottery),
        ],
    );
    let raw = Raw::new();
    let pre = raw
        .linker
        .instantiate_pre(&raw.module(guests::SIEVE_C))
        .unwrap();
    let mut s = quiet("sieve", guests::SIEVE_C);
    s.group = Some("app".into());
    rt.load_module(guests::SIEVE_C.as_ref()).unwrap();
    let (mut w, mut r) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let id = rt.spawn(&s).unwrap();
        assert_eq!(rt.wait(id).unwrap().exit_code, Some(0));
        w.push(t.elapsed().as_secs_f64());
        r.push(raw.run(&pre).as_secs_f64());
    }
    let (w, r) = (median(w), median(r));
    println!(
        "compute three groups deep (C sieve): warden {:.1} ms, raw {:.1} ms, {:.1}% of raw",
        w * 1e3,
        r * 1e3,
        100.0 * r / w
    );
}

fn main() {
    println!(
        "warden scheduling benchmarks{}",
        if quick() { " (quick)" } else { "" }
    );
    bench_accuracy();
    bench_decision();
    bench_switch();
    bench_hierarchy_compute();
}

//! Kernel benchmarks: Warden against raw Wasmtime, measured in the same run.
//!
//! `cargo bench --bench kernel` prints, for each figure, the median of
//! several rounds that alternate Warden and the baseline (A B A B …) so
//! that machine drift hits both alike:
//!
//! - spawn: tasks per second from a compiled module, vs raw Wasmtime
//!   building a WASI context, a store, instantiating and calling `_start`;
//! - compute: a CPU-bound guest under Warden's preemption vs the same
//!   module run directly by Wasmtime with no interruption at all;
//! - footprint: resident memory per idle task with 10,000 tasks asleep.
//!
//! `WARDEN_BENCH_QUICK=1` runs fewer rounds and tasks.

mod common;

use common::{median, quick, quiet, Raw};
use std::time::{Duration, Instant};
use warden::Runtime;
use warden_test_guests as guests;
use wasmtime::Config;

fn runtime(workers: usize) -> Runtime {
    common::runtime(workers, 10_100)
}

fn bench_spawn(raw: &Raw) {
    let n = if quick() { 500 } else { 5000 };
    let rounds = if quick() { 3 } else { 7 };
    let rt = runtime(1);
    rt.load_module(guests::NOOP.as_ref()).unwrap();
    let pre = raw
        .linker
        .instantiate_pre(&raw.module(guests::NOOP))
        .unwrap();
    let spec = quiet("noop", guests::NOOP);
    let (mut warden_rate, mut raw_rate) = (vec![], vec![]);
    // Round 0 warms up (first use of pool slots, allocator growth) and is
    // not counted.
    for round in 0..=rounds {
        if round == 1 {
            warden_rate.clear();
            raw_rate.clear();
        }
        let t = Instant::now();
        let ids: Vec<_> = (0..n).map(|_| rt.spawn(&spec).unwrap()).collect();
        for id in ids {
            assert_eq!(rt.wait(id).unwrap().exit_code, Some(0));
        }
        warden_rate.push(n as f64 / t.elapsed().as_secs_f64());

        let t = Instant::now();
        for _ in 0..n {
            raw.run(&pre);
        }
        raw_rate.push(n as f64 / t.elapsed().as_secs_f64());
    }
    let (w, r) = (median(warden_rate), median(raw_rate));
    println!("spawn (1 worker, {n} tasks x {rounds} rounds, median):");
    println!(
        "  warden:  {w:>10.0} tasks/s  ({:.2} us per task, spawn to exit)",
        1e6 / w
    );
    println!(
        "  raw:     {r:>10.0} tasks/s  ({:.2} us per instantiate+_start)",
        1e6 / r
    );
    println!(
        "  ratio warden/raw time per task: {:.2}x  (target <= 2x)",
        r / w
    );
}

fn bench_compute(raw: &Raw, name: &str, module: &str) {
    let rounds = if quick() { 3 } else { 7 };
    let rt = runtime(1);
    rt.load_module(module.as_ref()).unwrap();
    let pre = raw.linker.instantiate_pre(&raw.module(module)).unwrap();
    let spec = quiet(name, module);
    let (mut w, mut r) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let id = rt.spawn(&spec).unwrap();
        assert_eq!(rt.wait(id).unwrap().exit_code, Some(0));
        w.push(t.elapsed().as_secs_f64());
        r.push(raw.run(&pre).as_secs_f64());
    }
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    let raw_epoch = Raw::with_config(&cfg);
    let pre_e = raw_epoch
        .linker
        .instantiate_pre(&raw_epoch.module(module))
        .unwrap();
    let re = median(
        (0..rounds)
            .map(|_| raw_epoch.run(&pre_e).as_secs_f64())
            .collect(),
    );
    println!(
        "  (raw with epoch checks compiled in, never interrupted: {:.1} ms)",
        re * 1e3
    );
    let (w, r) = (median(w), median(r));
    println!(
        "compute {name}: warden {:.1} ms, raw {:.1} ms, warden throughput {:.1}% of raw (target >= 98%)",
        w * 1e3,
        r * 1e3,
        100.0 * r / w
    );
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn bench_footprint() {
    let n: usize = if quick() { 1000 } else { 10_000 };
    let rt = runtime(2);
    rt.load_module(guests::SLEEP.as_ref()).unwrap();
    let spec = quiet("sleep", guests::SLEEP);
    // Warm up allocator and thread pools with a few tasks first.
    let warm: Vec<_> = (0..16).map(|_| rt.spawn(&spec).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    for id in warm {
        rt.kill(id, "warm-up").unwrap();
    }
    let before = rss_kib();
    let t = Instant::now();
    let ids: Vec<_> = (0..n).map(|_| rt.spawn(&spec).unwrap()).collect();
    // Wait until every task has run into its sleep.
    while rt.stats().queued > 0 || rt.stats().polls < n as u64 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let spawned = t.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_kib();
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    let per_task = (after - before) as f64 / n as f64;
    let t = Instant::now();
    for id in &ids {
        if rt.kill(*id, "bench over").is_err() {
            let r = rt.wait(*id).unwrap();
            panic!("task ended before it was killed: {r:?}");
        }
    }
    let killed = t.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let reclaimed = rss_kib();
    println!(
        "footprint: {n} sleeping tasks: {per_task:.1} KiB RSS per task (target <= 64 KiB); \
         all asleep in {:.0} ms; killed in {:.0} ms; RSS {} MiB -> {} MiB -> {} MiB after kill; \
         {maps} memory mappings while asleep",
        spawned.as_secs_f64() * 1e3,
        killed.as_secs_f64() * 1e3,
        before / 1024,
        after / 1024,
        reclaimed / 1024
    );
}

fn main() {
    // `cargo bench` passes `--bench`; ignore all arguments.
    let raw = Raw::new();
    println!(
        "warden kernel benchmarks{}",
        if quick() { " (quick)" } else { "" }
    );
    bench_spawn(&raw);
    bench_compute(&raw, "sieve (WAT, tightest loop)", guests::SIEVE);
    bench_compute(&raw, "sieve (C, clang -O2)", guests::SIEVE_C);
    bench_compute(&raw, "fib(30)", guests::FIB);
    bench_footprint();
}

//! IPC benchmarks: a portal round trip between two tasks, beside the same
//! ping-pong between two Linux processes over pipes and between two
//! threads handing off through a condition variable, all in one run.
//!
//! `cargo bench --bench ipc` prints nanoseconds per round trip (median of
//! several rounds that alternate Warden and the peers) for: a null call,
//! a 3-integer request, a 100-byte string request (the seeds' Table 2 of
//! paper 000), and a 64 KiB transfer by copy and by memory object.
//! `WARDEN_BENCH_QUICK=1` runs fewer iterations.

mod common;

use common::{median, min_max, quick};
use std::collections::BTreeMap;
use std::time::Duration;
use warden_test_guests as guests;

const KINDS: [&str; 6] = ["null", "int3", "str100", "copy64k", "mem64k", "mem64k_read"];

/// One Warden round: server and client tasks; the client's figures.
fn warden_round(workers: usize, n: u64) -> BTreeMap<String, f64> {
    let dir = tempfile::tempdir().unwrap();
    let rt = common::runtime(workers, 16);
    let mut server = warden::TaskSpec::new("server", guests::IPC_BENCH);
    server.args = vec!["server".into()];
    server.provides = vec!["bench".into()];
    server.stdout = warden::Output::Null;
    let mut client = warden::TaskSpec::new("client", guests::IPC_BENCH);
    client.args = vec!["client".into(), n.to_string()];
    client.uses = vec!["bench".into()];
    let out = dir.path().join("client.out");
    client.stdout = warden::Output::File(out.clone());
    let s = rt.spawn(&server).unwrap();
    let c = rt.spawn(&client).unwrap();
    let r = rt
        .wait_timeout(c, Some(Duration::from_secs(300)))
        .unwrap()
        .expect("client finished");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}: {text}");
    rt.kill(s, "bench over").unwrap();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn line(label: &str, v: &[f64]) -> f64 {
    let m = median(v.to_vec());
    let (lo, hi) = min_max(v);
    println!("  {label:<34} {m:>10.0} ns   (min {lo:.0}, max {hi:.0})");
    m
}

fn main() {
    let rounds = if quick() { 3 } else { 7 };
    let n: u64 = if quick() { 20_000 } else { 200_000 };
    let peer_n: u64 = if quick() { 2_000 } else { 20_000 };
    let pipe = common::build_peer("pipe_pingpong", &[]);
    let condvar = common::build_peer("condvar_pingpong", &["-pthread"]);

    let mut w1: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut w2: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut pipe1, mut pipe100, mut cv) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        for (k, v) in warden_round(1, n) {
            w1.entry(k).or_default().push(v);
        }
        pipe1.push(common::run_peer(
            &pipe,
            &[peer_n.to_string(), "1".into()],
            "pipe",
        ));
        for (k, v) in warden_round(2, n) {
            w2.entry(k).or_default().push(v);
        }
        pipe100.push(common::run_peer(
            &pipe,
            &[peer_n.to_string(), "100".into()],
            "pipe",
        ));
        cv.push(common::run_peer(&condvar, &[peer_n.to_string()], "condvar"));
    }
    println!("ipc round trips ({rounds} rounds, alternating; Warden {n} calls per kind per round)");
    println!("warden, 1 worker:");
    let mut null1 = 0.0;
    let mut str1 = 0.0;
    for k in KINDS {
        let m = line(k, &w1[k]);
        if k == "null" {
            null1 = m;
        }
        if k == "str100" {
            str1 = m;
        }
    }
    println!("warden, 2 workers:");
    let mut null2 = 0.0;
    for k in KINDS {
        let m = line(k, &w2[k]);
        if k == "null" {
            null2 = m;
        }
    }
    println!("peers:");
    let p1 = line("pipe ping-pong, 1 byte", &pipe1);
    line("pipe ping-pong, 100 bytes", &pipe100);
    let c = line("condvar hand-off, two threads", &cv);
    println!("ratios:");
    println!("  null round trip, 1 worker: {null1:.0} ns (target <= 1000 ns)");
    println!(
        "  pipe / warden null (1 worker):  {:.1}x faster (target >= 5x)",
        p1 / null1
    );
    println!(
        "  pipe / warden null (2 workers): {:.1}x faster",
        p1 / null2
    );
    println!("  condvar / warden null (1 worker): {:.1}x", c / null1);
    println!(
        "  100-byte request / null: {:.2}x (target <= 1.2x)",
        str1 / null1
    );
    let copy = median(w1["copy64k"].clone());
    let mem = median(w1["mem64k"].clone());
    println!(
        "  64 KiB by copy / by memory object handle: {:.1}x",
        copy / mem
    );
}

//! Bandwidth: shares of a saturated link, caps on an idle one, receive
//! limits — measured from what the tasks actually sent and received,
//! against real sockets.

use crate::util::*;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::{Runtime, RuntimeConfig};

const LIMIT: Duration = Duration::from_secs(30);

fn runtime_with_link(rate: Option<u64>) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 2,
        cache_dir: None,
        max_tasks: 64,
        link_rate: rate,
        raise_descriptor_limit: true,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// What arrived at each sink during `window`, after a warm-up: bytes
/// counted by the receiver, not by Warden's own ledgers.
fn measure_sinks(sinks: &[Arc<AtomicU64>], window: Duration) -> (Vec<u64>, f64) {
    let counts = || -> Vec<u64> { sinks.iter().map(|c| c.load(Ordering::Relaxed)).collect() };
    std::thread::sleep(Duration::from_millis(300)); // warm-up, not ordering
    let a = counts();
    let t = Instant::now();
    std::thread::sleep(window);
    let b = counts();
    let secs = t.elapsed().as_secs_f64();
    (a.iter().zip(&b).map(|(x, y)| y - x).collect(), secs)
}

fn blaster(dir: &std::path::Path, name: &str, addr: &str, share: u32) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::NET);
    s.args = vec!["blast".into(), addr.into()];
    s.net.connect = vec!["127.0.0.1:*".into()];
    s.net.bandwidth_share = share;
    s
}

/// What arrived at each sink from the end of a warm-up until at least
/// `window` has passed and `bytes` have arrived in all (or [`LIMIT`]
/// has): bytes counted by the receivers, and the seconds they took.
fn measure_bytes(sinks: &[Arc<AtomicU64>], window: Duration, bytes: u64) -> (Vec<u64>, f64) {
    let counts = || -> Vec<u64> { sinks.iter().map(|c| c.load(Ordering::Relaxed)).collect() };
    std::thread::sleep(Duration::from_millis(300)); // warm-up, not ordering
    let (a, t) = (counts(), Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let got: Vec<u64> = a.iter().zip(counts()).map(|(x, y)| y - x).collect();
        let enough = got.iter().sum::<u64>() >= bytes && t.elapsed() >= window;
        if enough || t.elapsed() > LIMIT {
            return (got, t.elapsed().as_secs_f64());
        }
    }
}

/// Four senders with shares 1:2:3:4 on a 40 MB/s link get 10/20/30/40%
/// of what it carried, and together no more than the link. Shares are
/// judged among what arrived, over at least 40 MB (some 600 packets of
/// 64 KiB: one packet more or less moves a share by 0.002), and the
/// link's rate only as a ceiling: a machine whose cores are all busy may
/// leave the senders or the link's pacing short of CPU, which slows the
/// link but must not bend the shares.
#[test]
fn a_saturated_link_is_shared_by_weight() {
    let dir = tempfile::tempdir().unwrap();
    let rate = 40_000_000u64;
    let rt = runtime_with_link(Some(rate));
    // A sink per sender, so each one's bytes are counted where they
    // arrive.
    let sinks: Vec<_> = (1..=4)
        .map(|w| {
            let name = format!("s{w}");
            let (addr, count) = counting_sink();
            rt.spawn(&blaster(dir.path(), &name, &addr, w)).unwrap();
            wait_for_output(dir.path(), &name, "connected");
            count
        })
        .collect();
    let (sent, secs) = measure_bytes(&sinks, Duration::from_secs(2), rate);
    let total: u64 = sent.iter().sum();
    assert!(total >= rate, "only {total} bytes in {secs:.1} s: {sent:?}");
    for (i, s) in sent.iter().enumerate() {
        let frac = *s as f64 / total as f64;
        let want = (i + 1) as f64 / 10.0;
        assert!(
            (frac - want).abs() < 0.03,
            "task {i}: {frac:.3} of the link, want {want}; {sent:?}"
        );
    }
    let got = total as f64 / secs;
    assert!(got < rate as f64 * 1.05, "the link's rate holds: {got}");
    rt.kill_all("done");
}

/// A capped task stays at its cap on an otherwise idle, unlimited link,
/// and an uncapped one beside it is not held back.
#[test]
fn a_cap_holds_on_an_idle_link() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_link(None);
    let ((to_capped, capped_got), (to_free, free_got)) = (counting_sink(), counting_sink());
    let cap = 8_000_000u64;
    let mut capped = blaster(dir.path(), "capped", &to_capped, 1);
    capped.net.bandwidth_limit = Some(cap);
    rt.spawn(&capped).unwrap();
    rt.spawn(&blaster(dir.path(), "free", &to_free, 1)).unwrap();
    wait_for_output(dir.path(), "capped", "connected");
    wait_for_output(dir.path(), "free", "connected");
    let (sent, secs) = measure_sinks(&[capped_got, free_got], Duration::from_secs(2));
    // The cap is a ceiling: what arrived stays under it. A machine whose
    // cores are all busy may leave the sender short of CPU to reach it, so
    // below the cap only "most of it" is asked for.
    let rate = sent[0] as f64 / secs;
    assert!(rate < cap as f64 * 1.05, "capped at {rate}, cap {cap}");
    assert!(
        rate > cap as f64 * 0.6,
        "the cap is reached: {rate}, cap {cap}"
    );
    assert!(
        sent[1] > 2 * sent[0],
        "the free one is not held back: {sent:?}"
    );
    rt.kill_all("done");
}

/// A task's receive limit bounds what it reads, however fast the sender.
#[test]
fn a_receive_limit_bounds_what_a_task_reads() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_link(None);
    let mut s = spec(dir.path(), "reader", guests::NET);
    s.args = vec!["sink".into(), "127.0.0.1:0".into()];
    s.net.listen = vec!["127.0.0.1:*".into()];
    let limit = 4_000_000u64;
    s.net.receive_limit = Some(limit);
    let id = rt.spawn(&s).unwrap();
    wait_for_output(dir.path(), "reader", "listening ");
    let out = stdout_of(dir.path(), "reader");
    let addr = out.trim().strip_prefix("listening ").unwrap().to_string();
    std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        let b = vec![7u8; 1 << 16];
        while c.write_all(&b).is_ok() {}
    });
    // What the reader counted itself (its last "received N" line), not
    // Warden's ledger.
    let counted = || -> u64 {
        let out = stdout_of(dir.path(), "reader");
        // Whole lines only: the last may be half written.
        out[..out.rfind('\n').map_or(0, |i| i + 1)]
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("received "))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    std::thread::sleep(Duration::from_millis(300)); // warm-up, not ordering
    let (a, t) = (counted(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let (b, secs) = (counted(), t.elapsed().as_secs_f64());
    // A ceiling, as a cap is (a_cap_holds_on_an_idle_link).
    let rate = (b - a) as f64 / secs;
    assert!(
        rate < limit as f64 * 1.06,
        "received {rate}/s, limit {limit}"
    );
    assert!(
        rate > limit as f64 * 0.6,
        "the limit is reached: {rate}/s, limit {limit}"
    );
    rt.kill(id, "done").unwrap();
    assert_eq!(wait(&rt, id, LIMIT).status, "killed");
}

//! Clusters safe by default: an open cluster (no node keys) on a broker
//! that is not on this machine is refused unless the manifest says so,
//! and what a node holds of frames it has not yet checked is bounded in
//! bytes, whatever a flood on the broker sends.

use crate::cluster::{server, Broker, Node, Rogue};
use crate::util::*;
use std::time::{Duration, Instant};

/// A forgotten key on a shared broker: `warden check` and `warden run`
/// refuse it, status 2 for the run, before any task starts; `open = true`
/// is accepted by check.
#[test]
fn an_open_cluster_on_a_remote_broker_needs_open_true() {
    let d = tempfile::tempdir().unwrap();
    let task = format!("[[task]]\nname = 'hello'\nmodule = '{}'\n", guests::HELLO);
    let cluster = "[cluster]\nnats = 'nats://192.0.2.1:4222'\nnode = 'a'\n";
    let m = manifest(d.path(), &format!("{cluster}{task}"));
    let out = warden().arg("run").arg(&m).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not on this machine") && err.contains("warden cluster key"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hello"));
    let out = warden().arg("check").arg(&m).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let open = d.path().join("open.toml");
    std::fs::write(&open, format!("{cluster}open = true\n{task}")).unwrap();
    let out = warden().arg("check").arg(&open).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// 600 frames of nearly 1 MiB on the subject of `warden ps --cluster`
/// questions, sent as fast as the broker takes them to a node of 2,000
/// tasks (each answer a listing of them all, so the flood outruns it):
/// the node's unchecked frames never pass 32 MiB (its gauge, read
/// throughout), it grows by far less than the flood, and it answers
/// questions again once the flood has passed.
#[test]
fn a_flood_of_large_frames_is_held_within_the_intake_bound() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    // 2,000 idle tasks make each answer a long listing: the questions
    // come far faster than the node answers them.
    let idle = format!(
        "[[task]]\nname = \"idle\"\nmodule = \"{}\"\ncount = 2000\n",
        guests::SLEEP
    );
    let a = Node::start(d.path(), "a", &broker.url(), &(server("kv", "a") + &idle));
    a.wait_for("server: ready");
    let pid = a.pid();
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB rogue.> 1\r\n");
    let before = proc_status_bytes(&pid, "VmRSS").unwrap();
    const FLOOD: usize = 600;
    let frame = vec![b'q'; 1000 << 10];
    let mut most = 0f64;
    for i in 0..FLOOD {
        rogue.publish("warden.default.ps", &format!("rogue.{i}"), &frame);
        if i % 25 == 0 {
            most = most.max(a.metric("warden_cluster_intake_bytes"));
        }
    }
    let overflowed = a.metric("warden_cluster_overflowed_frames_total");
    // A question after the flood is answered (asked again while the
    // node's feeds are still full, which may drop it).
    let t = Instant::now();
    let answered = 'asked: loop {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no answer after the flood"
        );
        rogue.publish("warden.default.ps", "rogue.last", b"");
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(1) {
            match rogue.next(Duration::from_secs(1)) {
                Some((subject, _, _)) if subject == "rogue.last" => break 'asked t.elapsed(),
                Some(_) => {}
                None => break,
            }
        }
    };
    let grew = proc_status_bytes(&pid, "VmHWM")
        .unwrap()
        .saturating_sub(before);
    assert!(most <= (32 << 20) as f64, "held {most} bytes unchecked");
    assert!(overflowed <= FLOOD as f64, "{overflowed} of {FLOOD}");
    assert!(answered < Duration::from_secs(60), "{answered:?}");
    // The 32 MiB held, the answers' listings and what the broker's
    // client reads ahead: 138 MiB here. Without the bound it held 521 MB
    // of questions unchecked and grew by 597 MiB (and answered the last
    // after 5 s, not 0.4 s).
    assert!(grew < 256 << 20, "the node grew {} MiB", grew >> 20);
}

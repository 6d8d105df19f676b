//! A keyed cluster on a broker without permissions, against a stranger
//! who reads every frame: what the broker says for it (a "no responders"
//! status), what it replays (progress notes) and what it claims
//! (announcements in a member's name) must not change a call's fate or a
//! member's standing. The stranger is a raw NATS client written here.

use crate::cluster::{client, server, Broker, Node, Rogue};
use crate::cluster_security::{members, FORGED};
use std::time::{Duration, Instant};

/// A keyed cluster on a broker without permissions, where a stranger
/// reads every call and every answer. The broker's "no responders"
/// status carries no seal, so the stranger's forged one must neither
/// fail the call nor send it to another node (where it would run twice);
/// and a progress note it captured and replays must not keep a call
/// alive once its server is dead.
#[test]
fn forged_no_responders_and_replayed_progress_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let keyed = members(d.path(), &["a", "b"]);
    let broker = Broker::start();
    let url = broker.url();
    // It sends headers, and does not hear what it sends itself.
    let mut rogue = Rogue::open(broker.port, ",\"headers\":true,\"echo\":false");
    rogue.send(b"SUB warden.default.call.> 1\r\nSUB warden.default.inbox.> 2\r\nPING\r\n");
    rogue.pong();
    let a = Node::start_with(d.path(), "a", &url, keyed, &server("kv", "a"), &[]);
    a.wait_for("server: ready");
    let hang = client("caller", &["call", "kv", "1", "hang"], &["kv"]);
    let mut b = Node::start_with(d.path(), "b", &url, keyed, &hang, &[]);
    let reply = loop {
        let m = rogue.next(Duration::from_secs(30)).expect("b's call");
        if m.0 == "warden.default.call.b.a.kv" {
            break m.1;
        }
    };
    a.wait_for("server: got hang");
    // "No responders", as the broker words it, then a frame b counts as
    // forged: once b has counted it, it has taken the status too.
    let status = b"NATS/1.0 503\r\n\r\n";
    let head = format!("HPUB {reply} {} {}\r\n", status.len(), status.len());
    rogue.send(&[head.as_bytes(), status, b"\r\n"].concat());
    rogue.publish(&reply, "", b"x");
    b.wait_metric(FORGED, 1.0);
    let failures = "warden_cluster_call_failures_total{name=\"kv\"}";
    assert_eq!(b.metric(failures), 0.0, "{}", b.out());
    assert!(!b.out().contains("client: call:"), "{}", b.out());
    // A progress note of a's for the call, then a's death: the replayed
    // note is refused, and the call fails on silence.
    let note = loop {
        let m = rogue.next(Duration::from_secs(30)).expect("a's progress");
        if m.0 == reply && !m.2.is_empty() {
            break m.2;
        }
    };
    rogue.publish(&reply, "", &note);
    b.wait_metric(FORGED, 2.0);
    let pid: i32 = a.pid().parse().unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t = Instant::now();
    while !b.out().contains("client: call:") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the call lives on replays"
        );
        rogue.publish(&reply, "", &note);
        // The pace of the replays, well within the call's silence.
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(b.out().contains("client: call: peer died"), "{}", b.out());
    assert_eq!(b.finish(), 1);
}

/// In a keyed cluster, a stranger announcing as a member, far past a
/// node's rate, spends nothing of that member's allowance: its
/// announcements fail their seals, the member's own still pass, and it
/// stays in the others' directories.
#[test]
fn a_stranger_announcing_as_a_member_does_not_silence_it() {
    let d = tempfile::tempdir().unwrap();
    let keyed = members(d.path(), &["a", "b"]);
    let broker = Broker::start();
    let url = broker.url();
    let a = Node::start_with(d.path(), "a", &url, keyed, &server("kv", "a"), &[]);
    let b = Node::start_with(d.path(), "b", &url, keyed, &server("log", "b"), &[]);
    a.wait_for("server: ready");
    b.wait_metric("warden_cluster_nodes", 1.0);
    assert_eq!(b.metric(FORGED), 0.0);
    let mut rogue = Rogue::connect(broker.port);
    let forged = serde_json::json!({ "node": "a", "instance": 1, "exports": [] });
    let body = serde_json::to_vec(&forged).unwrap();
    // 20 a burst, 400 a second, for three times the silence after which
    // a node leaves the directory.
    let t = Instant::now();
    let mut sent = 0;
    while t.elapsed() < Duration::from_millis(4500) {
        for _ in 0..20 {
            rogue.publish("warden.default.node.a", "", &body);
        }
        sent += 20;
        rogue.send(b"PING\r\n");
        rogue.pong();
        assert_eq!(
            b.metric("warden_cluster_nodes"),
            1.0,
            "a left b's directory"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // b checked the stranger's announcements and refused them as forged.
    b.wait_metric(FORGED, sent as f64);
    assert_eq!(b.metric("warden_cluster_nodes"), 1.0);
}

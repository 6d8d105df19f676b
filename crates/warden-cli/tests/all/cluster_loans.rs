//! A portal lent to another node is that node's alone: in a keyed
//! cluster, a member that learns the portal's subject (it travels in
//! frames the broker forwards) and calls through it with a frame sealed
//! by its own, listed key is refused, as the borrower's own call is not.
//! The caller here is a raw NATS client holding the member's key.

use crate::cluster::{client, server, Broker, Node, Rogue};
use crate::cluster_security::{call_frame, lent_in, members, FORGED};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;

/// `frame` sealed as node `node` would seal a frame for any node (kind 1:
/// signed with its key, read from `dir/node/node.nk`), sent on `subject`
/// with `reply`, as instance `instance`'s frame number `seq` (see
/// `cluster::seal`).
fn signed(
    dir: &Path,
    node: &str,
    (subject, reply): (&str, &str),
    frame: &[u8],
    seq: u64,
) -> Vec<u8> {
    let seed = std::fs::read_to_string(dir.join(node).join("node.nk")).unwrap();
    let key = nkeys::KeyPair::from_seed(seed.trim()).unwrap();
    // Newer than the node's own process: its frames are not replays.
    let instance = u64::MAX / 2;
    let mut sealed = frame.to_vec();
    sealed.extend_from_slice(node.as_bytes());
    sealed.push(node.len() as u8);
    sealed.extend_from_slice(&instance.to_le_bytes());
    sealed.extend_from_slice(&seq.to_le_bytes());
    sealed.extend_from_slice(&0u64.to_le_bytes());
    let mut h = Sha256::new();
    for part in [
        b"warden-seal-2",
        subject.as_bytes(),
        &[0],
        reply.as_bytes(),
        &[0],
    ] {
        h.update(part);
    }
    h.update(&sealed);
    h.update([1u8]);
    let digest: [u8; 32] = h.finalize().into();
    sealed.extend_from_slice(&key.sign(&digest).unwrap());
    sealed.push(1);
    sealed
}

#[test]
fn a_lent_portal_answers_only_the_node_it_was_lent_to() {
    let d = tempfile::tempdir().unwrap();
    let keyed = members(d.path(), &["a", "b", "c"]);
    let broker = Broker::start();
    let url = broker.url();
    let a = Node::start_with(d.path(), "a", &url, keyed, &server("kv", "a"), &[]);
    a.wait_for("server: ready");
    // The broker has no permissions: a raw client hears a's answers to b
    // (and the portal each lends) and whatever is sent to it.
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB warden.default.inbox.b.> 1\r\nSUB rogue.> 2\r\nPING\r\n");
    rogue.pong();
    // b is given a portal to a's service, calls through it, and holds it.
    let holder = client("holder", &["give", "kv", "hold"], &["kv"]);
    let b = Node::start_with(d.path(), "b", &url, keyed, &holder, &[]);
    b.wait_for("given: a:hello");
    let subject = loop {
        let (_, _, frame) = rogue
            .next(Duration::from_secs(30))
            .expect("a's answer to b");
        if let Some(p) = lent_in(&frame).filter(|p| !p.is_empty()) {
            break p[0].clone();
        }
    };
    // c, a member, calls through it with a frame sealed by its own key:
    // refused, unanswered.
    let forged = a.metric(FORGED);
    let as_c = signed(
        d.path(),
        "c",
        (&subject, "rogue.c"),
        &call_frame("c", b"x"),
        1,
    );
    rogue.publish(&subject, "rogue.c", &as_c);
    a.wait_metric(FORGED, forged + 1.0);
    // The same call sealed by b, the borrower: answered.
    let as_b = signed(
        d.path(),
        "b",
        (&subject, "rogue.b"),
        &call_frame("b", b"y"),
        1,
    );
    rogue.publish(&subject, "rogue.b", &as_b);
    let to = loop {
        let (to, _, _) = rogue
            .next(Duration::from_secs(30))
            .expect("b's call answered");
        if to.starts_with("rogue.") {
            break to;
        }
    };
    assert_eq!(to, "rogue.b");
    let heard = rogue.heard_until_pong();
    assert!(!heard.iter().any(|s| s == "rogue.c"), "{heard:?}");
    assert_eq!(a.metric(FORGED), forged + 1.0);
}

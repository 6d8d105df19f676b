//! A cluster strangers cannot disturb: clusters sharing a broker that
//! never hear each other; answers nobody can forge without seeing the
//! call; a keyed cluster that refuses impostors, replays and strangers; a
//! flood of calls answered `busy` within a byte budget, one of
//! announcements refused past its budget and one of questions whether a
//! name is taken answered only so often; and portals in answers to calls
//! given up on, given back. The attacker is a raw NATS client written
//! here. (Authenticating to the broker: `cluster_auth`.)

use crate::cluster::{client, server, Broker, Node, Rogue};
use crate::cluster_auth::{no_secret_in, put, refused, warden_ok};
use crate::util::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The metric counting frames a node refused as forged.
pub(crate) const FORGED: &str = "warden_cluster_forged_frames_total";

#[test]
fn clusters_sharing_a_broker_never_hear_each_other() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let x = "name = 'x'";
    let a = Node::start_with(d.path(), "a", &broker.url(), x, &server("kv", "a"), &[]);
    a.wait_for("server: ready");
    // Node "a" of cluster y is not node "a" of cluster x.
    let y = d.path().join("y");
    let lookup = client("calls", &["call", "kv", "1", "hi", "1500"], &["kv"]);
    let mut other = Node::start_with(&y, "a", &broker.url(), "name = 'y'", &lookup, &[]);
    assert_eq!(other.finish(), 1, "{}{}", other.out(), other.err());
    assert!(
        other.out().contains("client: lookup: timed out"),
        "{}",
        other.out()
    );
    let calls = client("calls", &["call", "kv", "5", "hi"], &["kv"]);
    let mut b = Node::start_with(d.path(), "b", &broker.url(), x, &calls, &[]);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 5"), "{}", b.out());
}

/// A call frame from node `node` carrying `request`.
pub(crate) fn call_frame(node: &str, request: &[u8]) -> Vec<u8> {
    let mut f = vec![1, 1, node.len() as u8];
    f.extend_from_slice(node.as_bytes());
    f.extend_from_slice(&7u64.to_le_bytes());
    f.push(0);
    f.extend_from_slice(request);
    f
}

/// The inbox, number and secret of a call's reply subject
/// (`warden.<cluster>.inbox.<node>.<inbox secret>.<number>_<secret>`).
fn reply_parts(reply: &str) -> (&str, u64, u64) {
    let (call, secret) = reply.rsplit_once('_').expect("a call's reply subject");
    let (inbox, id) = call.rsplit_once('.').unwrap();
    let secret = u64::from_str_radix(secret, 16).unwrap();
    (inbox, id.parse().unwrap(), secret)
}

/// An answer is taken only on its call's own subject, which carries a
/// secret of the call: a rogue who knows the calling node's inbox and
/// the call's number (from a call it heard) answers in vain with any
/// other secret, and an inbox named by what the node announces is no
/// inbox at all.
#[test]
fn answers_cannot_be_forged_without_the_calls_secret() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    a.wait_for("server: ready");
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB warden.default.node.b 1\r\nSUB warden.default.call.b.a.kv 2\r\nPING\r\n");
    rogue.pong();
    // b's one call is held by the server for ever: an answer it ever
    // gets is a forged one.
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("calls", &["call", "kv", "1", "hang"], &["kv"]),
    );
    a.wait_for("server: got hang");
    let (mut instance, mut reply) = (None, None);
    while instance.is_none() || reply.is_none() {
        let (subject, r, p) = rogue.next(Duration::from_secs(30)).expect("b's call");
        if subject == "warden.default.node.b" {
            let announced: serde_json::Value = serde_json::from_slice(&p).unwrap();
            instance = announced["instance"].as_u64();
        } else {
            reply = Some(r);
        }
    }
    let (instance, reply) = (instance.unwrap(), reply.unwrap());
    let (inbox, id, secret) = reply_parts(&reply);
    let mut forged = vec![1u8, 2, 0, 0, 0, 0, 0];
    forged.extend_from_slice(b"evil:hang");
    // Inboxes named by b's instance number, with the call's number and
    // secret: nobody listens there.
    for guess in [format!("{instance:x}"), format!("{instance:016x}")] {
        let guessed = format!("warden.default.inbox.b.{guess}.{id}_{secret:016x}");
        rogue.publish(&guessed, "", &forged);
    }
    // b's own inbox and the call's number, with other secrets: each one
    // reaches b, which refuses it and counts it forged.
    const GUESSES: u64 = 300;
    for k in 1..=GUESSES {
        let wrong = secret ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        rogue.publish(&format!("{inbox}.{id}_{wrong:016x}"), "", &forged);
    }
    let t = Instant::now();
    loop {
        // A forged answer taken ends b's call, and b with it.
        assert!(b.running(), "b ended: {}{}", b.out(), b.err());
        if b.try_metric(FORGED).is_some_and(|n| n >= GUESSES as f64) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "b counted too few");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!b.out().contains("evil"), "{}", b.out());
}

#[test]
fn a_flood_of_calls_is_answered_busy_within_the_byte_budget() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let echo = "[[task]]\nname = \"other\"\nmodule = \"cluster.wasm\"\n\
                args = [\"serve\", \"other\", \"a\"]\nprovides = [\"other\"]\nexport = [\"other\"]\n";
    let a = Node::start(d.path(), "a", &broker.url(), &(server("kv", "a") + echo));
    a.wait_for("[other] server: ready");
    let pid = a.pid();
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB rogue.> 1\r\nSUB warden.default.node.a 2\r\n");
    // Once a announces both names it has subscribed to their calls.
    let t = Instant::now();
    loop {
        assert!(t.elapsed() < Duration::from_secs(30), "a never offered kv");
        let (_, _, p) = rogue.next(Duration::from_secs(30)).expect("announcements");
        let text = String::from_utf8_lossy(&p);
        if text.contains("\"kv\"") && text.contains("\"other\"") {
            break;
        }
    }
    rogue.send(b"UNSUB 2\r\n");
    // kv's server holds this call for ever: everything after it waits.
    rogue.publish(
        "warden.default.call.x.a.kv",
        "rogue.hang",
        &call_frame("x", b"hang"),
    );
    a.wait_for("server: got hang");
    let before = proc_status_bytes(&pid, "VmRSS").unwrap();
    let big = call_frame("x", &vec![b'f'; 256 << 10]);
    const FLOOD: usize = 400; // 100 MiB, from one calling node
    for i in 0..FLOOD {
        rogue.publish("warden.default.call.x.a.kv", &format!("rogue.{i}"), &big);
    }
    // One more from the same node, certainly refused: calls are taken in
    // the order sent, so its answer comes after every other's.
    rogue.publish("warden.default.call.x.a.kv", "rogue.last", &big);
    // Every call past the calling node's 16 MiB is answered busy at once.
    let mut busy = 0;
    loop {
        let (subject, _, p) = rogue.next(Duration::from_secs(60)).expect("answers");
        let refused = p == [1, 2, 0xf0, 0xff, 0xff, 0xff, 0];
        if subject == "rogue.last" {
            assert!(refused, "the last call was answered busy");
            break;
        }
        busy += usize::from(refused);
    }
    let counted = a.metric("warden_cluster_busy_total{name=\"kv\"}") as usize;
    assert_eq!(busy + 1, counted, "answered busy and counted");
    assert!(
        (FLOOD - 64..=FLOOD - 60).contains(&busy),
        "{busy} of {FLOOD}: 16 MiB admitted"
    );
    let grew = proc_status_bytes(&pid, "VmHWM")
        .unwrap()
        .saturating_sub(before);
    // What the node may hold: the 16 MiB admitted, and the calls the
    // broker's client has read and the node not yet answered busy (on a
    // busy machine, up to the flood itself); a task spawned per call, each
    // holding its request, took 585 MiB.
    assert!(grew < 160 << 20, "the node grew {} MiB", grew >> 20);
    // Others' calls to the node's other name go on.
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("calls", &["call", "other", "50", "hi"], &["other"]),
    );
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 50"), "{}", b.out());
}

/// Keys for `nodes` made by `warden cluster key` in `dir` (each seed
/// readable by its owner only), the members' list in `members.toml`,
/// each node's seed in its directory; the `[cluster]` lines that use them.
pub(crate) fn members(dir: &Path, nodes: &[&str]) -> &'static str {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let mut args: Vec<std::ffi::OsString> = vec!["cluster".into(), "key".into()];
    args.extend(nodes.iter().map(Into::into));
    args.extend(["--dir".into(), keys.clone().into_os_string()]);
    let listed = warden_ok(&args);
    std::fs::write(dir.join("members.toml"), &listed).unwrap();
    for node in nodes {
        let seed = keys.join(format!("{node}.nk"));
        let mode = std::fs::metadata(&seed).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        put(
            dir,
            node,
            "node.nk",
            &std::fs::read_to_string(&seed).unwrap(),
        );
    }
    "key = 'node.nk'\nmembers = '../members.toml'"
}

#[test]
fn a_keyed_cluster_refuses_impostors_replays_and_strangers() {
    let d = tempfile::tempdir().unwrap();
    let keyed = members(d.path(), &["a", "b", "c"]);
    let broker = Broker::start();
    let url = broker.url();
    let a = Node::start_with(d.path(), "a", &url, keyed, &server("kv", "a"), &[]);
    let c = Node::start_with(d.path(), "c", &url, keyed, &server("log", "c"), &[]);
    a.wait_for("server: ready");
    // The broker has no permissions: a raw client hears every call.
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB warden.default.call.> 1\r\nSUB rogue.> 2\r\nPING\r\n");
    rogue.pong();
    // An impostor: a Warden node named a, with a key of its own and a
    // members list saying it is a's. It starts (the real a's answer to
    // its hello is not signed by the key it expects), announces, serves.
    let fake = nkeys::KeyPair::new_server();
    let impostor_dir = d.path().join("impostor");
    put(&impostor_dir, "a", "node.nk", &fake.seed().unwrap());
    let b_key = std::fs::read_to_string(d.path().join("members.toml")).unwrap();
    let b_line = b_key.lines().find(|l| l.starts_with("b =")).unwrap();
    let theirs = format!(
        "key = 'node.nk'\nmembers = {{ a = \"{}\", {} }}",
        fake.public_key(),
        b_line
    );
    let impostor = Node::start_with(
        &impostor_dir,
        "a",
        &url,
        &theirs,
        &server("kv", "evil"),
        &[],
    );
    impostor.wait_for("server: ready");
    // c refused the impostor's announcements before b starts.
    c.wait_metric(FORGED, 2.0);
    let calls = client("calls", &["call", "kv", "50", "hi"], &["kv"]);
    let mut b = Node::start_with(d.path(), "b", &url, keyed, &calls, &[]);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 50"), "{}", b.out());
    assert!(!b.out().contains("evil"), "{}", b.out());
    // What the rogue captured: b's 50 calls.
    let mut captured = vec![];
    while captured.len() < 50 {
        let m = rogue.next(Duration::from_secs(30)).expect("b's calls");
        if m.0 == "warden.default.call.b.a.kv" {
            captured.push(m);
        }
    }
    // Each replayed twice, one moved to c's name, one unsigned, and a
    // stranger's question to every node's ps.
    for (subject, reply, payload) in &captured[..5] {
        for _ in 0..2 {
            rogue.publish(subject, reply, payload);
        }
    }
    let (_, reply, payload) = &captured[5];
    rogue.publish("warden.default.call.b.c.log", reply, payload);
    rogue.publish(
        "warden.default.call.b.a.kv",
        "rogue.1",
        &call_frame("b", b"x"),
    );
    rogue.publish("warden.default.ps", "rogue.ps", b"");
    a.wait_metric(FORGED, 12.0);
    assert_eq!(a.metric("warden_cluster_served_total{name=\"kv\"}"), 50.0);
    // Members still see each other's tasks (c answered a's question, so
    // it had refused the rogue's before); nobody answered the rogue.
    let api = a.get("/api/cluster");
    assert!(api.contains("\"node\":\"c\""), "{api}");
    let heard = rogue.heard_until_pong();
    assert!(!heard.iter().any(|s| s.starts_with("rogue.")), "{heard:?}");
    drop(impostor);
    // A node whose key is not the listed one, or that is not listed, is
    // refused with one line, without printing a seed.
    put(d.path(), "x", "node.nk", &fake.seed().unwrap());
    let mut wrong = Node::start_with(d.path(), "x", &url, keyed, &server("kv", "x"), &[]);
    refused(&mut wrong, "this node, x, is not listed");
    put(d.path(), "c2", "node.nk", &fake.seed().unwrap());
    let c_as = "key = 'node.nk'\nmembers = { c2 = \"NBADKEY\" }";
    let mut bad = Node::start_with(d.path(), "c2", &url, c_as, &server("kv", "c2"), &[]);
    refused(&mut bad, "not an nkey public key");
    let keyed_c = "key = '../a/node.nk'\nmembers = '../members.toml'";
    let mut stolen = Node::start_with(d.path(), "c", &url, keyed_c, &server("log", "c"), &[]);
    refused(
        &mut stolen,
        "is not the key cluster.members lists for node c",
    );
    no_secret_in(&stolen, &fake.seed().unwrap());
}

#[test]
fn a_flood_of_announcements_is_refused_past_its_budget() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    a.wait_for("server: ready");
    let mut rogue = Rogue::connect(broker.port);
    // 1,000 announcements of 32 KiB (32 MiB) from one node, each well
    // formed but naming another node than its subject's, so that every
    // one a decodes is dropped and counted: decoded and refused add up to
    // all. (Fewer than a subscription holds, so the broker's client drops
    // none of them however slowly the node reads.)
    const FLOOD: usize = 1000;
    let exports: Vec<String> = (0..2900).map(|i| format!("n{i:05}")).collect();
    let forged = serde_json::json!({ "node": "y", "instance": 1, "exports": exports });
    let body = serde_json::to_vec(&forged).unwrap();
    for _ in 0..FLOOD {
        rogue.publish("warden.default.node.x", "", &body);
    }
    rogue.send(b"PING\r\n");
    rogue.pong();
    let refused = "warden_cluster_refused_announcements_total";
    let t = Instant::now();
    loop {
        let (r, dropped) = (
            a.metric(refused),
            a.metric("warden_cluster_dropped_frames_total"),
        );
        if r + dropped >= FLOOD as f64 {
            // Past its burst of 8, a node may announce 10 times a
            // second: however slowly they arrive, most are refused.
            assert!(r >= FLOOD as f64 / 2.0, "{r} refused, {dropped} decoded");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{r} refused, {dropped} decoded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The node still serves.
    let calls = client("calls", &["call", "kv", "20", "hi"], &["kv"]);
    let mut b = Node::start(d.path(), "b", &broker.url(), &calls);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 20"), "{}", b.out());
}

#[test]
fn nodes_on_two_routed_servers_call_across_and_fail_over() {
    let d = tempfile::tempdir().unwrap();
    let mut one = Broker::routed(None);
    let two = Broker::routed(one.route);
    let (p1, p2) = (one.port, two.port);
    // The route is up once what is published on one is heard on two.
    let mut hears = Rogue::connect(p2);
    hears.send(b"SUB probe 1\r\nPING\r\n");
    hears.pong();
    let mut says = Rogue::connect(p1);
    let t = Instant::now();
    loop {
        says.publish("probe", "", b"x");
        if hears.next(Duration::from_millis(100)).is_some() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no route");
    }
    // a names only server one, and learns of two from it when it
    // connects (the route is up); b is on two.
    let a = Node::start(
        d.path(),
        "a",
        &format!("nats://127.0.0.1:{p1}"),
        &server("kv", "a"),
    );
    let _b = Node::start(
        d.path(),
        "b",
        &format!("[\"nats://127.0.0.1:{p2}\"]"),
        &client("calls", &["call", "kv", "1000000000", "x"], &["kv"]),
    );
    // Calls cross the route.
    a.wait_metric("warden_cluster_served_total{name=\"kv\"}", 10.0);
    // Server one dies: to a, a broker loss (a call of b's in flight then
    // fails, if one was); a reconnects to two and offers its name again,
    // and calls made there reach it.
    one.kill();
    let mut c = Node::start(
        d.path(),
        "c",
        &format!("nats://127.0.0.1:{p2}"),
        &client("calls", &["call", "kv", "3", "x"], &["kv"]),
    );
    assert_eq!(c.finish(), 0, "{}{}", c.out(), c.err());
    assert!(c.out().contains("client: from a 3"), "{}", c.out());
}

/// Each answer to "is this name taken?" costs a node a signature in a
/// keyed cluster: a flood of questions gets at most 16 a second, the rest
/// are dropped and counted, and the name is still found taken.
#[test]
fn a_flood_of_name_questions_gets_few_answers() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    a.wait_for("server: ready");
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB flood.* 1\r\n");
    let t = Instant::now();
    let mut questions = Vec::new();
    for i in 0..2000 {
        let q = format!("PUB warden.default.hello.a flood.{i} 0\r\n\r\n");
        questions.extend_from_slice(q.as_bytes());
    }
    rogue.send(&questions);
    // Questions past the subscription's capacity may be lost before they
    // are counted, but at least its 1,024 reach the node.
    a.wait_metric("warden_cluster_dropped_frames_total", 900.0);
    let mut answers = 0;
    while rogue.next(Duration::from_millis(500)).is_some() {
        answers += 1;
    }
    let most = 16.0 * (2.0 + t.elapsed().as_secs_f64());
    assert!(
        answers >= 1 && answers as f64 <= most,
        "{answers} answers in {:?}",
        t.elapsed()
    );
    let mut again = Node::start(&d.path().join("2"), "a", &broker.url(), &server("kv", "a"));
    assert_eq!(again.finish(), 2, "{}", again.err());
}

/// The portals a reply frame lends (`[1][2][code][count][len][subject]…`),
/// or `None` for any other frame.
pub(crate) fn lent_in(frame: &[u8]) -> Option<Vec<String>> {
    let [1, 2, 0, 0, 0, 0, count, rest @ ..] = frame else {
        return None;
    };
    let mut rest = rest;
    let mut portals = Vec::new();
    for _ in 0..*count {
        let (&len, tail) = rest.split_first()?;
        let (subject, tail) = tail.split_at_checked(len as usize)?;
        portals.push(String::from_utf8(subject.to_vec()).ok()?);
        rest = tail;
    }
    Some(portals)
}

/// A guest giving up on calls whose late answers carry portals must not
/// leave them lent at the serving node (one that did could fill the
/// node's 4,096 loans and deny portal passing to all its tasks). A raw
/// client on the broker sees each answer lend one, and the calling node
/// give each back.
#[test]
fn portals_in_answers_to_abandoned_calls_are_given_back() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let a = Node::start(d.path(), "a", &broker.url(), &server("kv", "a"));
    let mut rogue = Rogue::connect(broker.port);
    rogue.send(b"SUB warden.default.inbox.b.> 1\r\nSUB warden.default.portal.a.> 2\r\nPING\r\n");
    rogue.pong();
    let b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        // b's server keeps it running after the caller ends.
        &(server("log", "b") + &client("late", &["late", "kv", "3"], &["kv"])),
    );
    b.wait_for("[late] late: 3 timed out");
    // a lends a portal in each of its three answers, the last about
    // 900 ms after the first call; b, whose calls are gone, releases
    // each one on its subject.
    let (mut lent, mut released) = (Vec::new(), Vec::new());
    while lent.len() < 3 || lent.iter().any(|p| !released.contains(p)) {
        let heard = rogue.next(Duration::from_secs(30));
        let (subject, _, frame) =
            heard.unwrap_or_else(|| panic!("lent {lent:?}, released {released:?}"));
        match lent_in(&frame) {
            _ if subject.starts_with("warden.default.portal.") => {
                assert_eq!(frame, [1, 4], "on {subject}: a release");
                released.push(subject);
            }
            Some(portals) => lent.extend(portals),
            None => {}
        }
    }
    assert_eq!(lent.len(), 3, "one portal an answer: {lent:?}");
    // And a, told so, lends none any more.
    let t = Instant::now();
    loop {
        let lent = a.metric("warden_cluster_lent_portals");
        if lent == 0.0 && a.metric("warden_cluster_served_total{name=\"kv\"}") == 3.0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "a still lends {lent} portals"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.metric("warden_cluster_forged_frames_total"), 0.0);
}

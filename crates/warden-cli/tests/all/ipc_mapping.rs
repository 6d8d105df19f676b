//! Memory objects mapped into tasks' memories: zero copy, read-only
//! enforced by the hardware, revocation immediate, nothing left behind.

use crate::util::*;
use std::time::Duration;

fn mapped(dir: &std::path::Path, name: &str, args: &[&str]) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::MAPPED);
    s.args = args.iter().map(|a| a.to_string()).collect();
    s.limits.memory_limit = Some(256 << 20);
    s
}

fn producer(dir: &std::path::Path, mib: u32) -> warden::TaskSpec {
    let mut s = mapped(dir, "producer", &["producer", &mib.to_string()]);
    s.ipc.provides = vec!["producer".into()];
    s
}

fn consumer(dir: &std::path::Path, name: &str, mode: &str) -> warden::TaskSpec {
    let mut s = mapped(dir, name, &["consumer", mode]);
    s.ipc.uses = vec!["producer".into()];
    s
}

/// One task maps, shares both ways with the copying calls, and gets
/// every refusal's code.
#[test]
fn map_unmap_and_every_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let r = run_one(
        &rt,
        &mapped(dir.path(), "m", &["self"]),
        Duration::from_secs(30),
    );
    assert_eq!(stdout_of(dir.path(), "m"), "mapped: ok\n", "{r:?}");
    assert_eq!(r.exit_code, Some(0));
}

/// A store into a read-only mapping traps the storing task only, with the
/// object named; so does a host call made to write there. A bystander
/// runs on.
#[test]
fn a_store_to_a_read_only_mapping_traps_only_the_storer() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let bystander = rt.spawn(&mapped(dir.path(), "by", &["self"])).unwrap();
    for mode in ["store-ro", "host-store"] {
        let r = run_one(
            &rt,
            &mapped(dir.path(), mode, &[mode]),
            Duration::from_secs(30),
        );
        assert_eq!(r.status, "trapped", "{mode}: {r:?}");
        let reason = r.reason.unwrap();
        assert!(
            reason.contains("store to read-only memory object"),
            "{mode}: {reason}"
        );
        assert!(!stdout_of(dir.path(), mode).contains("went through"));
    }
    let b = wait(&rt, bystander, Duration::from_secs(30));
    assert_eq!((b.status, b.exit_code), ("exited", Some(0)), "{b:?}");
}

/// A consumer maps a 16 MiB object read-only and sums it with loads; the
/// producer's data is intact and it serves on.
#[test]
fn a_consumer_reads_a_16_mib_object_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let p = rt.spawn(&producer(dir.path(), 16)).unwrap();
    let r = run_one(
        &rt,
        &consumer(dir.path(), "c", "once"),
        Duration::from_secs(60),
    );
    assert_eq!(stdout_of(dir.path(), "c"), "consumer: sum ok\n", "{r:?}");
    assert_eq!(r.exit_code, Some(0));
    assert!(running(&rt, p), "the producer serves on");
    rt.kill(p, "done").unwrap();
}

/// A revoke while the consumer loops reading: the revoke returns only
/// once the mapping is gone (the producer then maps its fresh view and
/// finds its data), the consumer's next access traps naming the object,
/// and the producer serves on.
#[test]
fn revoke_while_reading_traps_the_reader_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let p = rt.spawn(&producer(dir.path(), 4)).unwrap();
    let c = rt.spawn(&consumer(dir.path(), "c", "loop")).unwrap();
    let r = wait(&rt, c, Duration::from_secs(60));
    assert_eq!(r.status, "trapped", "{r:?}");
    let reason = r.reason.unwrap();
    assert!(
        reason.contains("access to revoked memory object"),
        "{reason}"
    );
    wait_for_output(dir.path(), "producer", "producer: own data intact\n");
    assert!(running(&rt, p), "the producer serves on");
    rt.kill(p, "done").unwrap();
}

/// Whether task `id` has not ended (reports are of ended tasks).
fn running(rt: &warden::Runtime, id: warden::TaskId) -> bool {
    !rt.reports().iter().any(|r| r.id == id)
}

/// The owner killed while a consumer reads: the consumer's mapping goes
/// with the object and its next access traps. The consumer killed while
/// mapping: the producer is untouched and serves the next consumer.
#[test]
fn owner_death_and_mapper_death() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let p = rt.spawn(&producer(dir.path(), 4)).unwrap();
    let c0 = rt.spawn(&consumer(dir.path(), "c0", "hold")).unwrap();
    wait_for_output(dir.path(), "c0", "consumer: sum ok\n");
    rt.kill(c0, "test").unwrap();
    assert_eq!(wait(&rt, c0, Duration::from_secs(30)).status, "killed");
    let r = run_one(
        &rt,
        &consumer(dir.path(), "c1", "once"),
        Duration::from_secs(60),
    );
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(running(&rt, p), "the producer serves on");

    let c2 = rt.spawn(&consumer(dir.path(), "c2", "hold")).unwrap();
    wait_for_output(dir.path(), "c2", "consumer: sum ok\n");
    // Operators see the mapping, charged to the producer only.
    let views = rt.live_tasks();
    let view = |id| views.iter().find(|v| v.id == id).unwrap();
    assert_eq!((view(c2).mapped, view(c2).mapped_bytes), (1, 4 << 20));
    // The consumer grew 4 MiB to map into: while mapped, those bytes are
    // the object's, not counted again against the consumer.
    assert!(view(c2).memory_bytes < 1 << 20, "{:?}", view(c2));
    let owner = view(p).memory_bytes;
    assert!(
        (4 << 20..6 << 20).contains(&owner),
        "the object once: {owner}"
    );
    rt.kill(p, "owner dies").unwrap();
    wait(&rt, p, Duration::from_secs(30));
    let r = wait(&rt, c2, Duration::from_secs(30));
    assert_eq!(r.status, "trapped", "{r:?}");
    assert!(r
        .reason
        .unwrap()
        .contains("access to revoked memory object"));
}

/// What `warden run`'s process holds: resident bytes, descriptors and
/// mappings.
fn held(pid: u32) -> (u64, usize, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    (rss_of(&pid.to_string()), fds, maps.lines().count())
}

/// 10,000 map/unmap cycles of a 1 MiB object and 100 map/revoke cycles
/// leave the process's resident memory, descriptors and mappings where
/// they were.
#[test]
fn ten_thousand_map_cycles_leave_nothing_behind() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = 'cycles'\nmodule = '{}'\nargs = ['cycles', '10000']\n\
             stdin = 'inherit'\nstdout = 'cycles.out'\n",
            guests::MAPPED
        ),
    );
    let mut child = run_with_stdin(dir.path(), &m);
    wait_for_output(dir.path(), "cycles", "cycles: warm");
    let before = held(child.id());
    writeln!(child.0.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for_output(dir.path(), "cycles", "cycles: done");
    let after = held(child.id());
    writeln!(child.0.stdin.as_mut().unwrap(), "go").unwrap();
    let status = wait_child(&mut child, Duration::from_secs(30), "cycles still running");
    assert!(status.success(), "{}", stdout_of(dir.path(), "cycles"));
    assert!(
        after.0 < before.0 + (8 << 20),
        "resident {before:?} -> {after:?}"
    );
    // A leak would be one per cycle (10,100 objects, 10,000 mappings);
    // the runtime itself may start a thread meanwhile (a stack and its
    // guard page, an eventfd).
    assert!(
        after.1 <= before.1 + 8,
        "descriptors {before:?} -> {after:?}"
    );
    assert!(after.2 <= before.2 + 64, "mappings {before:?} -> {after:?}");
}

/// A task that ends with an object mapped leaves nothing of it in its
/// memory slot: the next task there, growing to the same place, finds
/// zero pages. The object is its own (gone with it) or another's (which
/// lives on).
#[test]
fn a_mapping_does_not_outlive_its_task_in_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    // Room for two tasks (the producer and one more): the pool has few
    // slots, so the peeks after each leaver land in the slot it left.
    let rt = runtime_with(1, warden::PolicyKind::RoundRobin, 2);
    let p = rt.spawn(&producer(dir.path(), 1)).unwrap();
    for i in 0..6 {
        let (leaver, kib) = match i % 2 {
            0 => (mapped(dir.path(), &format!("leave{i}"), &["leave"]), "64"),
            _ => (consumer(dir.path(), &format!("leave{i}"), "exit"), "1024"),
        };
        let left = run_one(&rt, &leaver, Duration::from_secs(30));
        assert_eq!(left.exit_code, Some(0), "{left:?}");
        for j in 0..3 {
            let name = format!("peek{i}.{j}");
            let r = run_one(
                &rt,
                &mapped(dir.path(), &name, &["peek", kib]),
                Duration::from_secs(30),
            );
            let out = stdout_of(dir.path(), &name);
            assert!(
                out.ends_with("clean\n"),
                "after {}: {out}",
                stdout_of(dir.path(), &format!("leave{i}"))
            );
            assert_eq!(r.exit_code, Some(0));
        }
    }
    rt.kill(p, "done").unwrap();
}

/// A service revokes one client's portal without closing: the client's
/// waiting call and next calls fail with `WARDEN_EREVOKED`, through any
/// copy of the portal; another client's portal and the service's name
/// are untouched; only the serving task may revoke.
#[test]
fn revoking_one_clients_portal() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut server = spec(dir.path(), "server", guests::PORTAL_REVOKE);
    server.args = vec!["server".into()];
    server.ipc.provides = vec!["gate".into()];
    let server = rt.spawn(&server).unwrap();
    let client = |name: &str| {
        let mut s = spec(dir.path(), name, guests::PORTAL_REVOKE);
        s.args = vec![name.into()];
        s.ipc.uses = vec!["gate".into()];
        rt.spawn(&s).unwrap()
    };
    let (a, b) = (client("a"), client("b"));
    for id in [a, b, server] {
        let r = wait(&rt, id, Duration::from_secs(30));
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    assert_eq!(
        stdout_of(dir.path(), "a"),
        "a: held call: revoked\na: next call: revoked\na: duplicate: revoked\na: the gate: pong\n"
    );
    assert_eq!(stdout_of(dir.path(), "b"), "b: own portal after: pong\n");
    assert_eq!(
        stdout_of(dir.path(), "server"),
        "server: revoke success; late reply: peer died\n"
    );
}

/// A permit to memory that is a mapped memory object maps the same pages
/// into its holder (Luna's permits on shared data); a permit to plain
/// memory is refused with the reason; revoking the permit takes the
/// holder's mapping away at once (its next read traps naming the object)
/// while the owner's own mapping stays.
#[test]
fn a_permit_to_a_mapped_object_maps_and_revokes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut owner = mapped(dir.path(), "powner", &["powner"]);
    owner.ipc.provides = vec!["powner".into()];
    let owner = rt.spawn(&owner).unwrap();
    let mut reader = mapped(dir.path(), "preader", &["preader"]);
    reader.ipc.uses = vec!["powner".into()];
    let r = run_one(&rt, &reader, Duration::from_secs(60));
    assert_eq!(
        stdout_of(dir.path(), "preader"),
        "preader: sum ok\n",
        "{r:?}"
    );
    assert_eq!(r.status, "trapped", "{r:?}");
    assert!(r
        .reason
        .unwrap()
        .contains("access to revoked memory object"));
    wait_for_output(dir.path(), "powner", "powner: own mapping intact\n");
    assert!(stdout_of(dir.path(), "powner").contains("powner: revoke success\n"));
    assert!(running(&rt, owner));
    rt.kill(owner, "done").unwrap();
}

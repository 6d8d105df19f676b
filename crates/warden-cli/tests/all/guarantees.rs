//! Memory guarantees and surplus (MVM's reserved and surplus memory):
//! a guarantee is reserved at spawn and always there; guarantees never
//! add up to more than the root; surplus is taken back for a new
//! guarantee, lowest `memory_priority` first, by each holder's policy.

use crate::util::*;
use std::io::Write;
use std::time::Duration;
use warden::{MemoryPolicy, Runtime, RuntimeConfig, TaskSpec};

const MIB: u64 = 1 << 20;

/// A runtime whose root budget is `root` bytes.
fn runtime_with_root(root: u64) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 2,
        cache_dir: None,
        max_tasks: 64,
        memory_limit: Some(root),
        ..RuntimeConfig::default()
    })
    .expect("runtime starts")
}

/// A hostile guest in mode `args`, stdout to `dir/<name>.out`.
fn hostile(dir: &std::path::Path, name: &str, args: &[&str]) -> TaskSpec {
    let mut s = spec(dir, name, guests::HOSTILE);
    s.args = args.iter().map(|a| a.to_string()).collect();
    s
}

/// The pages a `hold` task printed it holds.
fn held_pages(dir: &std::path::Path, name: &str) -> u64 {
    let out = stdout_of(dir, name);
    let n = out.split("hold: ").nth(1).and_then(|r| r.split(' ').next());
    n.and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name}: {out}"))
}

/// A task with a 128 MiB guarantee, spawned first, grows to it after
/// three tasks without limits took every byte of surplus the 512 MiB
/// root had.
#[test]
fn a_guarantee_is_there_while_others_hold_all_the_surplus() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\nmemory_limit = '512MiB'\n\
             [[task]]\nname = 'guaranteed'\nmodule = '{h}'\nargs = ['wait-grow', '120']\n\
             memory_limit = '128MiB'\nmemory_guarantee = '128MiB'\nstdin = 'inherit'\n\
             stdout = 'guaranteed.out'\n\
             {holders}",
            h = guests::HOSTILE,
            holders = (0..3)
                .map(|i| format!(
                    "[[task]]\nname = 'holder.{i}'\nmodule = '{}'\nargs = ['hold', '4096']\n\
                     stdout = 'holder.{i}.out'\n",
                    guests::HOSTILE
                ))
                .collect::<String>()
        ),
    );
    let mut child = run_with_stdin(dir.path(), &m);
    wait_for_output(dir.path(), "guaranteed", "wait-grow: ready");
    let mut held = 0;
    for i in 0..3 {
        let name = format!("holder.{i}");
        wait_for_output(dir.path(), &name, "hold: ");
        held += held_pages(dir.path(), &name) * 64 * 1024;
    }
    assert!(
        held >= (512 - 128 - 16) * MIB,
        "the holders took only {} MiB of surplus",
        held / MIB
    );
    writeln!(child.0.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for_output(dir.path(), "guaranteed", "grow-touch: ");
    assert!(
        stdout_of(dir.path(), "guaranteed").contains("grow-touch: 1920 pages, all"),
        "{}",
        stdout_of(dir.path(), "guaranteed")
    );
    let _ = child.0.kill();
}

/// Guarantees add up to at most the root: the spawn past it is refused at
/// once with the reason, and a guarantee above the task's own limit too.
#[test]
fn guarantees_never_add_up_to_more_than_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_root(256 * MIB);
    let mut first = hostile(dir.path(), "first", &["sleep"]);
    first.limits.memory_guarantee = 200 * MIB;
    let first = rt.spawn(&first).expect("200 MiB of 256 MiB");
    let mut second = hostile(dir.path(), "second", &["sleep"]);
    second.limits.memory_guarantee = 100 * MIB;
    let err = rt.spawn(&second).unwrap_err().to_string();
    assert!(
        err.contains("memory guarantee of 100.0 MiB cannot be reserved: 56.0 MiB unreserved"),
        "{err}"
    );
    assert_eq!(rt.root_memory().guaranteed_bytes, 200 * MIB);
    let mut over = hostile(dir.path(), "over", &["sleep"]);
    (over.limits.memory_guarantee, over.limits.memory_limit) = (8 * MIB, Some(4 * MIB));
    let err = rt.spawn(&over).unwrap_err().to_string();
    assert!(err.contains("more than the task's memory limit"), "{err}");
    rt.kill(first, "done").unwrap();
    wait(&rt, first, Duration::from_secs(20));
    assert_eq!(rt.root_memory().guaranteed_bytes, 0, "given back");
    second.limits.memory_guarantee = 250 * MIB;
    let id = rt.spawn(&second).expect("room again");
    rt.kill(id, "done").unwrap();
}

/// Three holders of 150 MiB in a 512 MiB root; a 250 MiB guarantee takes surplus
/// back from the lowest priority (killed) and the next (its parent told,
/// which ends it), never from the highest.
#[test]
fn surplus_is_reclaimed_lowest_priority_first_by_kill_and_notify() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_root(512 * MIB);
    let mut low = hostile(dir.path(), "low", &["hold", "150"]);
    (low.limits.memory_priority, low.limits.on_memory_limit) = (-1, MemoryPolicy::Kill);
    let mut parent = hostile(dir.path(), "parent", &["parent-of-hold", "150"]);
    parent.ipc.modules = vec![("self".into(), guests::HOSTILE.into())];
    parent.limits.memory_limit = Some(160 * MIB);
    parent.limits.on_memory_limit = MemoryPolicy::Notify;
    let mut high = hostile(dir.path(), "high", &["hold", "150"]);
    (high.limits.memory_priority, high.limits.on_memory_limit) = (5, MemoryPolicy::Kill);
    let low = rt.spawn(&low).unwrap();
    wait_for_output(dir.path(), "low", "hold: 2400 pages");
    let parent = rt.spawn(&parent).unwrap();
    let child = (0..2000)
        .find_map(|_| {
            let kids: Vec<_> = rt
                .live_tasks()
                .into_iter()
                .filter(|t| t.parent == Some(parent))
                .collect();
            if kids.first().is_some_and(|k| k.memory_bytes >= 150 * MIB) {
                return Some(kids[0].id);
            }
            std::thread::sleep(Duration::from_millis(10));
            None
        })
        .expect("the parent's child holds 150 MiB");
    let high = rt.spawn(&high).unwrap();
    wait_for_output(dir.path(), "high", "hold: ");
    let root = rt.root_memory();
    assert!(root.surplus_bytes >= 450 * MIB, "{root:?}");

    let mut g = hostile(dir.path(), "guaranteed", &["grow-touch", "240"]);
    (g.limits.memory_guarantee, g.limits.memory_limit) = (250 * MIB, Some(250 * MIB));
    let id = rt.spawn(&g).unwrap_or_else(|e| {
        let tasks = rt.live_tasks();
        let held: Vec<_> = tasks.iter().map(|t| (&t.name, t.surplus_bytes)).collect();
        panic!("{e}; surplus held: {held:?}")
    });
    let report = wait(&rt, id, Duration::from_secs(60));
    assert_eq!(report.status, "exited", "{report:?}");
    assert!(stdout_of(dir.path(), "guaranteed").contains("3840 pages, all"));
    assert_eq!(report.memory_guarantee_bytes, 250 * MIB);

    let low = wait(&rt, low, Duration::from_secs(20));
    assert_eq!(low.status, "killed");
    let reason = low.reason.unwrap_or_default();
    assert!(
        reason.contains("reclaimed for the guarantee of task"),
        "{reason}"
    );
    wait_for_output(dir.path(), "parent", "parent: memory event");
    let child = wait(&rt, child, Duration::from_secs(20));
    assert_eq!(child.status, "killed", "its parent ended it");
    let alive: Vec<_> = rt.live_tasks().into_iter().map(|t| t.id).collect();
    assert!(
        alive.contains(&high),
        "the highest priority keeps its surplus"
    );
    rt.kill_all("done");
}

/// Holders whose policy is `deny` keep what they hold: the guarantee is
/// refused with the reason, and they may grow no further.
#[test]
fn holders_that_deny_keep_their_surplus_and_the_spawn_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_root(256 * MIB);
    let holder = rt
        .spawn(&hostile(dir.path(), "holder", &["hold", "4096"]))
        .unwrap();
    wait_for_output(dir.path(), "holder", "hold: ");
    let mut g = hostile(dir.path(), "guaranteed", &["sleep"]);
    g.limits.memory_guarantee = 64 * MIB;
    let err = rt.spawn(&g).unwrap_err().to_string();
    assert!(
        err.contains(
            "memory guarantee of 64.0 MiB cannot be reserved: the machine's budget is full"
        ),
        "{err}"
    );
    let view = rt
        .live_tasks()
        .into_iter()
        .find(|t| t.id == holder)
        .unwrap();
    assert!(view.surplus_bytes >= 200 * MIB, "{view:?}");
    assert_eq!(rt.root_memory().guaranteed_bytes, 0);
    rt.kill_all("done");
}

/// A group as the tests below use it: a memory limit and guarantee.
fn group(name: &str, limit: Option<u64>, guarantee: u64) -> warden::GroupSpec {
    warden::GroupSpec {
        name: name.into(),
        parent: None,
        policy: warden::PolicyKind::RoundRobin,
        params: warden::SchedParams::default(),
        cap: None,
        cpu_quota: None,
        bandwidth_share: 1,
        bandwidth_limit: None,
        memory_limit: limit,
        memory_guarantee: guarantee,
    }
}

fn runtime_with_groups(root: u64, groups: Vec<warden::GroupSpec>) -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 2,
        cache_dir: None,
        max_tasks: 64,
        memory_limit: Some(root),
        groups,
        ..RuntimeConfig::default()
    })
    .expect("runtime starts")
}

/// A group's `memory_limit` bounds its members together; its
/// `memory_guarantee` is there for their surplus while an outsider took
/// all the root's.
#[test]
fn a_group_covers_its_members_with_a_limit_and_a_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_groups(
        512 * MIB,
        vec![
            group("capped", Some(64 * MIB), 0),
            group("kept", None, 128 * MIB),
        ],
    );
    for i in 0..2 {
        let mut m = hostile(dir.path(), &format!("capped{i}"), &["hold", "40"]);
        m.sched.group = Some("capped".into());
        rt.spawn(&m).unwrap();
        wait_for_output(dir.path(), &format!("capped{i}"), "hold: ");
    }
    let capped: u64 = (0..2)
        .map(|i| held_pages(dir.path(), &format!("capped{i}")))
        .sum();
    assert!(
        (900..=1024).contains(&capped),
        "the capped group's members grew {capped} pages together, not up to 64 MiB"
    );
    assert!(
        held_pages(dir.path(), "capped1") < 600,
        "the second was refused"
    );
    // The member is spawned first and grows once the outsider, which
    // has no group, holds all the root's surplus (and says so by name).
    let mut member = hostile(dir.path(), "member", &["wait-grow", "120", "full"]);
    (member.sched.group, member.ipc.uses) = (Some("kept".into()), vec!["full".into()]);
    rt.spawn(&member).unwrap();
    wait_for_output(dir.path(), "member", "wait-grow: ready");
    let mut outsider = hostile(dir.path(), "outsider", &["hold", "4096", "full"]);
    outsider.ipc.provides = vec!["full".into()];
    rt.spawn(&outsider).unwrap();
    wait_for_output(dir.path(), "outsider", "hold: ");
    let root = rt.root_memory();
    assert!(root.guaranteed_bytes >= 128 * MIB, "{root:?}");
    wait_for_output(dir.path(), "member", "grow-touch: ");
    assert!(
        stdout_of(dir.path(), "member").contains("grow-touch: 1920 pages, all"),
        "{}",
        stdout_of(dir.path(), "member")
    );
    rt.kill_all("done");
}

/// Group guarantees are reserved when the runtime starts: one past the
/// root is a start error.
#[test]
fn a_group_guarantee_past_the_root_is_refused_at_start() {
    let err = Runtime::new(RuntimeConfig {
        cache_dir: None,
        memory_limit: Some(64 * MIB),
        groups: vec![group("big", None, 128 * MIB)],
        ..RuntimeConfig::default()
    })
    .err()
    .expect("refused")
    .to_string();
    assert!(
        err.contains("group big: memory guarantee of 128.0 MiB cannot be reserved"),
        "{err}"
    );
}

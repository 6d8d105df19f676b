//! Nested tasks: budgets carved from the parent's, subtree kill,
//! interposition through the child's namespace, suspend and resume.

use crate::util::*;
use std::time::{Duration, Instant};

fn nest(dir: &std::path::Path, name: &str, mode: &str) -> warden::TaskSpec {
    let mut s = spec(dir, name, guests::NEST);
    s.args = vec![mode.into()];
    s.ipc.modules = vec![("self".into(), guests::NEST.into())];
    // Every other setting is the default: nesting must work with it.
    s.limits.memory_limit = Some(8 << 20);
    s
}

/// A child cannot get more than its parent has left, nor a grandchild
/// more than the child got; children appear in the reports with their
/// parent.
#[test]
fn budgets_are_carved_from_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let r = run_one(
        &rt,
        &nest(dir.path(), "parent", "budgets"),
        Duration::from_secs(30),
    );
    let out = stdout_of(dir.path(), "parent");
    assert_eq!(r.exit_code, Some(0), "{out}");
    assert!(
        out.contains("grandchild checks: ok") && out.contains("budgets: ok"),
        "{out}"
    );
    let reports = rt.reports();
    let children: Vec<_> = reports.iter().filter(|c| c.parent == Some(r.id)).collect();
    assert_eq!(children.len(), 4, "{reports:?}");
    assert!(children
        .iter()
        .all(|c| c.exit_code == Some(7) && c.name.starts_with("parent/self.")));
    let grandchildren = reports
        .iter()
        .filter(|g| children.iter().any(|c| g.parent == Some(c.id)));
    assert_eq!(grandchildren.count(), 1);
    assert_eq!(children[0].memory_limit_bytes, Some(2 << 20));
}

/// Killing a task kills its whole subtree.
#[test]
fn killing_a_task_kills_its_subtree() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let root = rt.spawn(&nest(dir.path(), "root", "tree")).unwrap();
    let t = Instant::now();
    while rt.live_tasks().len() < 3 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "tree never grew: {:?}",
            rt.live_tasks()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    rt.kill(root, "operator").unwrap();
    let r = wait(&rt, root, Duration::from_secs(5));
    assert_eq!(r.status, "killed");
    let t = Instant::now();
    while !rt.live_tasks().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{:?}",
            rt.live_tasks()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let reports = rt.reports();
    assert_eq!(reports.len(), 3);
    for r in reports.iter().filter(|r| r.id != root) {
        assert_eq!(
            (r.status, r.reason.as_deref()),
            ("killed", Some("its parent ended"))
        );
    }
}

/// A parent's CPU limit bounds its children's CPU too.
#[test]
fn parent_cpu_limit_bounds_children() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = nest(dir.path(), "root", "tree");
    s.limits.cpu_limit = Some(Duration::from_millis(400));
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(r.status, "killed");
    assert!(
        r.reason.as_deref().unwrap().contains("cpu limit exceeded"),
        "{r:?}"
    );
    assert!(
        r.cpu_ms < 400.0,
        "its children used part of its budget: {r:?}"
    );
}

/// A parent interposes on its child by binding its own portal under the
/// name the child looks up, and hides another name from it.
#[test]
fn parent_interposes_on_child() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    // "secret" is registered and the parent (so its child) may look it
    // up: only the parent's hiding keeps the child from it.
    let mut other = spec(dir.path(), "other", guests::ECHO);
    other.args = vec!["server".into(), "secret".into()];
    other.ipc.provides = vec!["secret".into()];
    let other = rt.spawn(&other).unwrap();
    wait_for_output(dir.path(), "other", "server: ready");
    let mut parent = nest(dir.path(), "parent", "interpose");
    parent.ipc.uses = vec!["kv".into(), "secret".into()];
    let r = run_one(&rt, &parent, Duration::from_secs(20));
    rt.kill(other, "test over").unwrap();
    let out = stdout_of(dir.path(), "parent");
    assert_eq!(r.exit_code, Some(0), "{out}");
    assert!(out.contains("parent intercepted: get x"), "{out}");
    assert!(
        out.contains("child got: from the parent"),
        "child output goes where the parent's does: {out}"
    );
}

#[test]
fn parent_suspends_resumes_and_kills_child() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let r = run_one(
        &rt,
        &nest(dir.path(), "parent", "suspend"),
        Duration::from_secs(20),
    );
    assert_eq!(stdout_of(dir.path(), "parent"), "suspend: ok\n");
    assert_eq!(r.exit_code, Some(0));
}

/// Overuse policy "notify" (MVM): a child at its memory limit is refused
/// and its parent told, which raises the limit from its own budget; a child
/// at its CPU limit is suspended and its parent told, which raises it once
/// and then kills it.
#[test]
fn overuse_notifies_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut s = nest(dir.path(), "parent", "overuse");
    s.limits.on_memory_limit = warden::MemoryPolicy::Notify;
    s.limits.on_cpu_limit_notify = true;
    let r = run_one(&rt, &s, Duration::from_secs(30));
    let out = stdout_of(dir.path(), "parent");
    assert_eq!(r.exit_code, Some(0), "{out}");
    assert!(out.contains("overuse: ok"), "{out}");
    // 1 MiB less what the child's handles take, then 2 MiB likewise.
    assert!(
        out.contains("grow: 15 pages") && out.contains("grow: 31 pages"),
        "{out}"
    );
}

/// A parent's share covers its whole subtree: a parent and its spinning
/// child together get what one unrelated spinner of the same share gets.
#[test]
fn a_parent_share_covers_its_subtree() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with(1, warden::PolicyKind::Stride, 16);
    let family = rt.spawn(&nest(dir.path(), "family", "family")).unwrap();
    let other = rt.spawn(&spec(dir.path(), "other", guests::SPIN)).unwrap();
    let cpu = |rt: &warden::Runtime| {
        let live = rt.live_tasks();
        let of = |pred: &dyn Fn(&warden::TaskView) -> bool| -> f64 {
            live.iter().filter(|t| pred(t)).map(|t| t.cpu_ms).sum()
        };
        let family_cpu = of(&|t| t.id == family || t.parent == Some(family));
        let members = live.iter().filter(|t| t.parent == Some(family)).count();
        (family_cpu, of(&|t| t.id == other), members)
    };
    let t = Instant::now();
    loop {
        let (f, o, members) = cpu(&rt);
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "too slow: {f} / {o} ms"
        );
        if members == 1 && f + o > 1500.0 {
            let ratio = f / o;
            // Flat scheduling would give the family 2/3 (ratio 2).
            assert!((0.7..1.4).contains(&ratio), "family {f} ms, other {o} ms");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.kill_all("test over");
}

/// Ending a task ends its subtree without a host stack level per
/// generation: a chain of 3,000 nested tasks is killed from its root, and
/// the host (this test process) survives it.
#[test]
fn a_deep_chain_ends_without_deep_host_recursion() {
    const DEPTH: u64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with(2, warden::PolicyKind::RoundRobin, DEPTH as u32 + 100);
    let mut root = nest(dir.path(), "root", "chain");
    root.args.push(DEPTH.to_string());
    root.limits.memory_limit = Some((DEPTH + 1) * (192 << 10));
    let root = rt.spawn(&root).unwrap();
    let t = Instant::now();
    while rt.live_tasks().len() < DEPTH as usize + 1 {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "chain stopped growing at {} tasks: {}",
            rt.live_tasks().len(),
            stdout_of(dir.path(), "root")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let deepest = rt.live_tasks().into_iter().map(|t| t.name.len()).max();
    assert!(deepest < Some(40), "names grow with depth: {deepest:?}");
    rt.kill(root, "operator").unwrap();
    assert_eq!(wait(&rt, root, Duration::from_secs(10)).status, "killed");
    let t = Instant::now();
    while !rt.live_tasks().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "subtree outlived its root"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child's budget is back in its parent's before the parent learns of
/// its end: spawning the same big child right after each wait never fails.
#[test]
fn a_budget_returns_before_the_parent_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let r = run_one(
        &rt,
        &nest(dir.path(), "parent", "respawn"),
        Duration::from_secs(120),
    );
    let out = stdout_of(dir.path(), "parent");
    assert_eq!(r.exit_code, Some(0), "{out}");
    assert_eq!(out, "respawn: ok\n");
}

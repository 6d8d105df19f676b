//! Policy tests with a simulated clock: every pick runs for a quantum,
//! charged back, and the task is requeued if it is still runnable.

use super::*;
use std::collections::HashMap;

const MS: u64 = 1_000_000;

fn task(share: u32, tickets: u32, priority: i32, group: usize) -> TaskSched {
    TaskSched {
        params: Params {
            share,
            tickets,
            priority,
        },
        group,
        cap: None,
        parent: None,
    }
}

/// Runs `steps` quanta of `quantum(step)` ns on always-runnable tasks;
/// returns each task's CPU.
fn simulate(
    q: &mut Tree,
    tasks: &[u64],
    steps: usize,
    mut quantum: impl FnMut(usize) -> u64,
) -> HashMap<u64, u64> {
    for &t in tasks {
        q.push(t);
    }
    let mut used: HashMap<u64, u64> = HashMap::new();
    let mut now = 0;
    for step in 0..steps {
        let Some(t) = q.pop(now) else {
            now = q.next_release().expect("throttled tasks come back");
            continue;
        };
        let ns = quantum(step);
        now += ns;
        q.charge(t, ns, now);
        *used.entry(t).or_default() += ns;
        q.push(t);
    }
    used
}

fn fractions(used: &HashMap<u64, u64>, tasks: &[u64]) -> Vec<f64> {
    let total: u64 = used.values().sum();
    tasks
        .iter()
        .map(|t| used.get(t).copied().unwrap_or(0) as f64 / total as f64)
        .collect()
}

#[test]
fn round_robin_is_fifo_and_rotates() {
    let mut q = Tree::new(PolicyKind::RoundRobin);
    for t in 1..=3 {
        q.add(t, &TaskSched::default());
        q.push(t);
    }
    let mut order = vec![];
    for _ in 0..6 {
        let t = q.pop(0).unwrap();
        order.push(t);
        q.push(t);
    }
    assert_eq!(order, [1, 2, 3, 1, 2, 3]);
    assert!(q.remove(2));
    assert!(!q.remove(2));
    assert_eq!(q.len(), 2);
}

/// Stride: shares 1:2:3:4 are met within 0.5% over 10,000 quanta, even
/// with quanta of random length, and the error never exceeds a couple of
/// quanta at any point.
#[test]
fn stride_tracks_shares() {
    let tasks = [1, 2, 3, 4];
    for random_quanta in [false, true] {
        let mut q = Tree::new(PolicyKind::Stride);
        for &t in &tasks {
            q.add(t, &task(t as u32, 0, 0, 0));
        }
        let mut seed = 7u64;
        let used = simulate(&mut q, &tasks, 10_000, |_| {
            if random_quanta {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                (seed >> 40) % (4 * MS) + MS / 10
            } else {
                MS
            }
        });
        for (i, f) in fractions(&used, &tasks).into_iter().enumerate() {
            let want = (i + 1) as f64 / 10.0;
            assert!(
                (f - want).abs() < 0.005,
                "task {} got {f:.4}, want {want}",
                i + 1
            );
        }
    }
}

#[test]
fn stride_bounds_error_at_every_step() {
    let tasks = [1, 2, 3];
    let mut q = Tree::new(PolicyKind::Stride);
    for &t in &tasks {
        q.add(t, &task([1, 3, 6][t as usize - 1], 0, 0, 0));
        q.push(t);
    }
    let mut used = [0u64; 3];
    for step in 1..=3000u64 {
        let t = q.pop(0).unwrap();
        q.charge(t, MS, 0);
        used[t as usize - 1] += MS;
        q.push(t);
        for (i, share) in [1.0, 3.0, 6.0].iter().enumerate() {
            let ideal = step as f64 * MS as f64 * share / 10.0;
            assert!(
                (used[i] as f64 - ideal).abs() <= 2.0 * MS as f64,
                "step {step}"
            );
        }
    }
}

/// A task that sleeps does not bank credit: on waking it shares from then
/// on, instead of monopolising the CPU to catch up.
#[test]
fn stride_sleepers_bank_no_credit() {
    let mut q = Tree::new(PolicyKind::Stride);
    q.add(1, &task(1, 0, 0, 0));
    q.add(2, &task(1, 0, 0, 0));
    q.push(1);
    for _ in 0..100 {
        let t = q.pop(0).unwrap();
        q.charge(t, MS, 0);
        q.push(t);
    }
    q.push(2);
    let mut runs = [0; 2];
    for _ in 0..20 {
        let t = q.pop(0).unwrap();
        runs[t as usize - 1] += 1;
        q.charge(t, MS, 0);
        q.push(t);
    }
    assert!(runs[1] <= 11, "sleeper ran {} of 20", runs[1]);
}

/// Lottery: 1:2:3:4 tickets converge to their shares.
#[test]
fn lottery_converges() {
    let tasks = [1, 2, 3, 4];
    let mut q = Tree::new(PolicyKind::Lottery);
    for &t in &tasks {
        q.add(t, &task(0, t as u32 * 100, 0, 0));
    }
    let used = simulate(&mut q, &tasks, 40_000, |_| MS);
    for (i, f) in fractions(&used, &tasks).into_iter().enumerate() {
        let want = (i + 1) as f64 / 10.0;
        assert!(
            (f - want).abs() < 0.02,
            "task {} got {f:.4}, want {want}",
            i + 1
        );
    }
}

/// Fixed priority: across random pushes and pops, the task popped always
/// has the highest priority among those queued.
#[test]
fn priority_never_runs_lower_while_higher_is_runnable() {
    let mut q = Tree::new(PolicyKind::Priority);
    let prio = |t: u64| (t % 5) as i32;
    for t in 0..50 {
        q.add(t, &task(0, 0, prio(t), 0));
    }
    let mut queued = std::collections::BTreeSet::new();
    let mut seed = 99u64;
    for _ in 0..5000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let t = (seed >> 33) % 50;
        if seed >> 63 == 0 {
            if queued.insert(t) {
                q.push(t);
            }
        } else if let Some(got) = q.pop(0) {
            let best = queued.iter().map(|&k| prio(k)).max().unwrap();
            assert_eq!(prio(got), best);
            queued.remove(&got);
        } else {
            assert!(queued.is_empty());
        }
    }
}

/// A tree: stride 1:1 between two groups at the root; one group holds one
/// task, the other three. The lone task gets half the CPU.
#[test]
fn groups_share_among_themselves_first() {
    let mut q = Tree::new(PolicyKind::Stride);
    let a = q.add_group(0, PolicyKind::RoundRobin, &Params::default(), None);
    let b = q.add_group(0, PolicyKind::Stride, &Params::default(), None);
    q.add(1, &task(1, 0, 0, a));
    for t in 2..=4 {
        q.add(t, &task(1, 0, 0, b));
    }
    let tasks = [1, 2, 3, 4];
    let f = fractions(&simulate(&mut q, &tasks, 6000, |_| MS), &tasks);
    assert!((f[0] - 0.5).abs() < 0.01, "{f:?}");
    for x in &f[1..] {
        assert!((x - 1.0 / 6.0).abs() < 0.01, "{f:?}");
    }
}

/// Priority inside a group: its high-priority task takes all of the
/// group's share while runnable.
#[test]
fn priority_inside_a_stride_group() {
    let mut q = Tree::new(PolicyKind::Stride);
    let tenant = q.add_group(
        0,
        PolicyKind::Priority,
        &Params {
            share: 1,
            ..Default::default()
        },
        None,
    );
    q.add(1, &task(1, 0, 0, 0)); // a task of its own at the root
    q.add(2, &task(0, 0, 9, tenant));
    q.add(3, &task(0, 0, 1, tenant));
    let tasks = [1, 2, 3];
    let f = fractions(&simulate(&mut q, &tasks, 2000, |_| MS), &tasks);
    assert!(
        (f[0] - 0.5).abs() < 0.01 && (f[1] - 0.5).abs() < 0.01 && f[2] == 0.0,
        "{f:?}"
    );
}

/// A task capped at a quarter of a core gets a quarter, and the rest goes
/// to the others; a capped group likewise.
#[test]
fn caps_limit_tasks_and_groups() {
    let mut q = Tree::new(PolicyKind::RoundRobin);
    q.add(
        1,
        &TaskSched {
            cap: Some(Cap::new(0.25, 100 * MS)),
            ..Default::default()
        },
    );
    q.add(2, &TaskSched::default());
    let f = fractions(&simulate(&mut q, &[1, 2], 4000, |_| MS), &[1, 2]);
    assert!((f[0] - 0.25).abs() < 0.02, "{f:?}");

    let mut q = Tree::new(PolicyKind::RoundRobin);
    let g = q.add_group(
        0,
        PolicyKind::RoundRobin,
        &Params::default(),
        Some(Cap::new(0.1, 100 * MS)),
    );
    q.add(1, &task(1, 0, 0, g));
    q.add(2, &task(1, 0, 0, g));
    q.add(3, &TaskSched::default());
    let f = fractions(&simulate(&mut q, &[1, 2, 3], 4000, |_| MS), &[1, 2, 3]);
    assert!((f[0] + f[1] - 0.1).abs() < 0.02, "{f:?}");

    // Alone and capped: the queue reports when the task may run again.
    let mut q = Tree::new(PolicyKind::RoundRobin);
    q.add(
        1,
        &TaskSched {
            cap: Some(Cap::new(0.5, 10 * MS)),
            ..Default::default()
        },
    );
    q.push(1);
    let t = q.pop(0).unwrap();
    q.charge(t, 5 * MS, 5 * MS);
    q.push(t);
    assert_eq!(q.pop(5 * MS), None);
    assert_eq!(q.next_release(), Some(10 * MS));
    assert_eq!(q.len(), 1);
    assert_eq!(q.pop(10 * MS), Some(1));
}

#[test]
fn remove_and_forget_keep_counts_right() {
    let mut q = Tree::new(PolicyKind::Stride);
    let g = q.add_group(0, PolicyKind::Lottery, &Params::default(), None);
    for t in 1..=4 {
        q.add(t, &task(1, 10, 0, if t % 2 == 0 { g } else { 0 }));
        q.push(t);
    }
    assert_eq!(q.len(), 4);
    assert!(q.remove(2));
    q.forget(4);
    assert_eq!(q.len(), 2);
    let mut seen = vec![q.pop(0).unwrap(), q.pop(0).unwrap()];
    seen.sort();
    assert_eq!(seen, [1, 3]);
    assert_eq!(q.pop(0), None);
    assert!(q.is_empty());
}

/// Shares are weights: a parent's share covers its subtree, its children
/// split it with it by their own shares, and other tasks keep theirs.
#[test]
fn nested_shares_divide_the_parent_subtree() {
    let mut q = Tree::new(PolicyKind::Stride);
    q.add(1, &task(1, 100, 0, 0)); // parent
    q.add(2, &task(1, 100, 0, 0)); // an unrelated task
    for (child, share) in [(3, 1), (4, 2)] {
        let mut s = task(share, 100, 0, 0);
        s.parent = Some(1);
        q.add(child, &s);
    }
    assert_eq!(q.groups(), 2, "the root and the parent's subtree");
    let used = simulate(&mut q, &[1, 2, 3, 4], 4000, |_| MS);
    let f = fractions(&used, &[1, 2, 3, 4]);
    // The unrelated task keeps half; the family splits the other half
    // 1 : 1 : 2 (parent, child 3, child 4).
    for (got, want) in f.iter().zip([0.125, 0.5, 0.125, 0.25]) {
        assert!((got - want).abs() < 0.02, "{f:?}");
    }
}

/// A subtree group goes with its last member, whoever leaves last, and
/// its slot is reused.
#[test]
fn subtree_groups_go_with_their_last_member() {
    let mut q = Tree::new(PolicyKind::RoundRobin);
    q.add(1, &TaskSched::default());
    let child = |parent| TaskSched {
        parent: Some(parent),
        ..TaskSched::default()
    };
    q.add(2, &child(1));
    q.add(3, &child(2)); // a grandchild: a subtree inside a subtree
    assert_eq!(q.groups(), 3);
    q.push(3);
    q.forget(1); // the parent ends first; its children linger
    assert_eq!(q.groups(), 3);
    assert_eq!(q.pop(0), Some(3), "a lingering child still runs");
    q.forget(2);
    q.forget(3);
    assert_eq!(q.groups(), 1);
    assert!(q.is_empty() && q.pop(0).is_none());
    q.add(4, &TaskSched::default());
    q.add(5, &child(4));
    assert_eq!(q.groups(), 2, "a freed group slot is reused");
}

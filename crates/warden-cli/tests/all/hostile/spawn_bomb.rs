//! A spawn bomb: every task spawns copies of itself until refused. Budgets
//! are carved from the parent's, so the tree is bounded by the root's 64
//! MiB (and by `max_tasks`); the root's end ends the whole tree.

use super::*;

#[test]
fn copies_of_copies_until_refused() {
    let bomb = task(
        "bomb",
        guests::HOSTILE,
        &["spawn-bomb", "root"],
        &format!(
            "memory_limit = '64MiB'\nmodules = {{ self = '{}' }}",
            guests::HOSTILE
        ),
    );
    let run = attack("max_tasks = 500", &bomb);
    run.exited_saying("bomb", "spawn-bomb: ");
    // "spawn-bomb: N, then WHY": the root spawned some children of 1 MiB
    // each, fewer than its 64 MiB holds, and was refused for its budget.
    let out = run.out("bomb");
    let (n, why) = out
        .lines()
        .find_map(|l| l.strip_prefix("spawn-bomb: "))
        .and_then(|l| l.split_once(", then "))
        .unwrap_or_else(|| panic!("{out}"));
    let n: u64 = n.parse().unwrap();
    assert!((1..64).contains(&n), "{out}");
    assert!(
        why.contains("quota") || why.contains("memory") || why.contains("limit"),
        "refused for {why:?}"
    );
    // The whole tree ended with the root, and never passed max_tasks.
    let tree: Vec<_> = run
        .reports
        .iter()
        .filter(|r| r["name"] != "bystander")
        .collect();
    assert!(
        tree.len() > n as usize && tree.len() <= 500,
        "{} tasks",
        tree.len()
    );
    for r in &tree {
        assert_ne!(r["status"], "running", "{r}");
    }
}

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
}

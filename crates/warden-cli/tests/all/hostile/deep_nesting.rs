//! A root that builds a chain of 3,000 nested tasks, each the only child
//! of the one before, and returns: ending them all must not recurse on
//! the host's stack (it used to overflow it and abort the process).

use super::*;

#[test]
fn a_returning_root_over_a_3000_deep_chain() {
    let root = task(
        "root",
        guests::NEST,
        &["chain-return", "3000"],
        &format!(
            "memory_limit = '600MiB'\nmodules = {{ self = '{}' }}",
            guests::NEST
        ),
    );
    let run = attack("max_tasks = 3100", &root);
    run.exited_saying("root", "chain-return: bottom reached (called)");
}

//! A table grown a million entries at a time: growth is charged to the
//! task's memory budget and refused at it (`table.grow` returns -1).

use super::*;

#[test]
fn table_growth_is_refused_at_the_budget() {
    let bomb = task("bomb", guests::TABLE_BOMB, &[], "memory_limit = '16MiB'");
    let run = attack("", &bomb);
    let r = run.report("bomb");
    assert_eq!(
        (&r["status"], &r["exit_code"]),
        (&"exited".into(), &0.into()),
        "{r}"
    );
}

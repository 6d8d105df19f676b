//! Portals created until the handle table is full: refused with an error
//! code at `max_handles`, and every one returned when the task ends.

use super::*;

#[test]
fn portals_until_the_table_is_full() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["portal-flood"],
        "memory_limit = '4MiB'",
    );
    let run = attack("", &flood);
    run.exited_saying("flood", "portal-flood: 1023, then quota exceeded");
    let out = run.out("flood");
    assert!(!out.contains("no error"), "{out}");
}

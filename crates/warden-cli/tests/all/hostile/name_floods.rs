//! Name floods: two million namespace bindings with 256-byte names (no
//! grant needed), and a million registered names under `flood.*`. Every
//! entry is charged to the task's budget, so the flood ends at its limit
//! with an error code (it used to cost the host 700 MiB).

use super::*;

#[test]
fn two_million_bindings() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["bind-flood", "2000000"],
        "memory_limit = '4MiB'",
    );
    let run = attack("", &flood);
    run.exited_saying("flood", "then out of memory");
}

#[test]
fn a_million_registered_names() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["register-flood", "1000000"],
        "memory_limit = '4MiB'\nprovides = ['flood.*']",
    );
    let run = attack("", &flood);
    run.exited_saying("flood", "then out of memory");
}

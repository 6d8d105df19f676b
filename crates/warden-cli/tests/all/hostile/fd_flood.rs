//! Files opened and never closed, a hundred thousand times: each task has
//! a bounded number of open descriptors, so the host's own descriptors
//! (and every other task's) are never exhausted.

use super::*;

#[test]
fn opens_without_closes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "data").unwrap();
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["fd-flood", "100000"],
        &format!(
            "memory_limit = '8MiB'\ndirs = {{ '/data' = '{}' }}",
            dir.path().display()
        ),
    );
    let run = attack("", &flood);
    run.exited_saying("flood", "fd-flood: ");
    let opened: u32 = run
        .out("flood")
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        opened <= warden::MAX_OPEN_FILES,
        "{opened} files open at once"
    );
}

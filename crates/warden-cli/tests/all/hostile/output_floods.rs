//! Output floods: 256 MiB on one line to a shared terminal (where lines
//! are prefixed with the task's name, so partial lines are buffered), and
//! 100,000 short lines to stderr. The host's line buffer is bounded; the
//! guest's budget is 4 MiB.

use super::*;

#[test]
fn a_quarter_gigabyte_without_a_newline() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["stdout-flood", "256"],
        "memory_limit = '4MiB'\nstdout = 'inherit'",
    );
    let run = attack("", &flood);
    assert_eq!(
        run.report("flood")["status"],
        "exited",
        "{}",
        run.report("flood")
    );
}

#[test]
fn a_hundred_thousand_lines_to_stderr() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["stderr-lines", "100000"],
        "memory_limit = '4MiB'",
    );
    attack("", &flood).exited_saying("flood", "stderr-lines: done");
}

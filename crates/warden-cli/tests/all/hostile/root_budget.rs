//! Tasks with no memory limit against the machine's budget (the root):
//! huge memory objects and linear memories grown page by page and touched,
//! eight at once. Every request past the root is refused as a task's own
//! limit refuses it, and the host stays within the root, so the kernel's
//! OOM killer never has a reason to end the process.

use super::*;

/// Eight unlimited tasks each grow to 4 GiB, touching every page, under
/// a 1 GiB root; another asks for 1 TiB and 64 GiB objects.
#[test]
fn unlimited_tasks_stop_at_the_root() {
    const ROOT: u64 = 1 << 30;
    let mut tasks = task("huge", guests::HOSTILE, &["memobj-huge"], "");
    for i in 0..8 {
        tasks += &task(
            &format!("grow{i}"),
            guests::HOSTILE,
            &["grow-touch", "4096"],
            "",
        );
    }
    let run = survive(&format!("memory_limit = '{ROOT}'"), &tasks);
    run.exited_saying("huge", "1 TiB: out of memory, 64 GiB: out of memory");
    let mut grown = 0;
    for i in 0..8 {
        let name = format!("grow{i}");
        run.exited_saying(&name, "then refused");
        grown += run.report(&name)["peak_memory_bytes"].as_u64().unwrap();
    }
    // They were refused at the root, not before it: together they filled
    // it but for the others' charges and the overheads. (A task refused
    // early exits and its memory goes to the others, so their peaks may
    // add up to more than the root; what the process held may not.)
    assert!(
        grown >= ROOT - (64 << 20),
        "the tasks stopped at {} MiB in all, well below the root",
        grown >> 20
    );
    run.rss_within(ROOT, "root budget");
}

/// With the default root (the machine's memory less a reserve), huge
/// requests of a task with no limit are refused at once (64 GiB only on
/// a machine whose root is smaller than that).
#[test]
fn the_default_root_refuses_what_the_machine_cannot_hold() {
    let root = warden::machine::default_limit().expect("the machine's memory is known");
    assert!(root.bytes < root.usable, "{root:?}");
    let tasks = task("huge", guests::HOSTILE, &["memobj-huge"], "");
    let run = survive("", &tasks);
    let big = if root.bytes < 64 << 30 {
        "out of memory"
    } else {
        "created"
    };
    run.exited_saying("huge", &format!("1 TiB: out of memory, 64 GiB: {big}"));
    run.rss_within(0, "nothing");
}

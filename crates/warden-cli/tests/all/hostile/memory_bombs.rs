//! Memory bombs: malloc until refused, and memory objects of absurd and
//! then ordinary sizes until refused. Each stops at the task's budget with
//! an error the guest sees (NULL, `out of memory`), never a host failure.

use super::*;

#[test]
fn malloc_until_null() {
    let bomb = task(
        "bomb",
        guests::HOSTILE,
        &["malloc-bomb"],
        "memory_limit = '16MiB'",
    );
    let run = attack("", &bomb);
    run.exited_saying("bomb", "then NULL");
    let peak = run.report("bomb")["peak_memory_bytes"].as_u64().unwrap();
    assert!(peak <= 16 << 20, "peak {peak} over the limit");
}

#[test]
fn memory_objects_until_refused() {
    let bomb = task(
        "bomb",
        guests::HOSTILE,
        &["memobj-bomb"],
        "memory_limit = '16MiB'",
    );
    let run = attack("", &bomb);
    run.exited_saying(
        "bomb",
        "2^64-1: invalid argument, 2^40: out of memory; 1 MiB objects",
    );
}

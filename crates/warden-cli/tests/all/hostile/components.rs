//! Hostile components: a start function that never returns, memories
//! grown in two places at once, a minimum size over the budget, a libc
//! program (adapted) allocating until refused, and host objects made
//! and never dropped, each beside the bystander.

use super::*;

#[test]
fn a_looping_start_function_is_killed_at_its_cpu_limit() {
    let looping = task(
        "loop",
        guests::built(guests::LOOP_START),
        &[],
        "memory_limit = '1MiB'\ncpu_limit = '200ms'",
    );
    let run = attack("", &looping);
    let r = run.report("loop");
    assert_eq!(r["status"], "killed", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("cpu limit"), "{r}");
}

#[test]
fn two_memories_growing_at_once_share_one_budget() {
    let grow = task(
        "grow",
        guests::built(guests::GROW_COMPOSED),
        &["100000", "100000"],
        "memory_limit = '4MiB'",
    );
    let run = attack("", &grow);
    run.exited_saying("grow", "of 100000 pages, library 0 of 100000 pages");
    // Pages until the next would pass the limit (tables are charged too).
    let peak = run.report("grow")["peak_memory_bytes"].as_u64().unwrap();
    assert!(peak <= 4 << 20 && peak > (4 << 20) - (64 << 10), "{peak}");
}

#[test]
fn a_component_over_its_budget_at_instantiation_cannot_start() {
    let big = task(
        "big",
        guests::built(guests::GROW_COMPOSED),
        &["0", "0"],
        "memory_limit = '64KiB'",
    );
    let run = attack("", &big);
    let r = run.report("big");
    assert_eq!(r["status"], "trapped", "{r}");
    assert!(
        r["reason"].as_str().unwrap().starts_with("cannot start"),
        "{r}"
    );
}

#[test]
fn allocation_until_refused_ends_at_the_limit() {
    let bomb = task(
        "bomb",
        guests::built(guests::MALLOC_LIMIT_COMPONENT),
        &[],
        "memory_limit = '8MiB'",
    );
    let run = attack("", &bomb);
    // The preview-1 adapter makes its own state at the program's first
    // WASI call (its printf, after the loop) by growing memory, and traps
    // when that is refused, as it does under `wasmtime run`: a contained
    // end that says why.
    let r = run.report("bomb");
    assert_eq!(r["status"], "trapped", "{r}");
    assert!(
        r["reason"].as_str().unwrap().contains("refused to grow"),
        "{r}"
    );
    assert!(r["peak_memory_bytes"].as_u64().unwrap() <= 8 << 20, "{r}");
}

#[test]
fn host_objects_never_dropped_stop_at_the_resource_cap() {
    // 4 × max_handles live WASI resources at most: 64 here.
    let bomb = task(
        "bomb",
        guests::built(guests::HANDLE_BOMB),
        &[],
        "memory_limit = '1MiB'\nmax_handles = 16",
    );
    let run = attack("", &bomb);
    let r = run.report("bomb");
    assert_eq!(r["status"], "trapped", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("resource table has no free keys"),
        "{r}"
    );
}

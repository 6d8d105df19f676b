//! Unbounded recursion (the guest's stack) and an endless loop (CPU):
//! the first traps, the second is killed at its CPU limit; neither slows
//! the bystander past its answer.

use super::*;

#[test]
fn recursion_without_end() {
    let bomb = task("bomb", guests::RECURSE, &[], "memory_limit = '4MiB'");
    let run = attack("", &bomb);
    let r = run.report("bomb");
    assert_eq!(r["status"], "trapped", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("stack"), "{r}");
}

#[test]
fn a_loop_without_end() {
    let hog = task(
        "hog",
        guests::SPIN,
        &[],
        "memory_limit = '4MiB'\ncpu_limit = '300ms'",
    );
    let run = attack("", &hog);
    let r = run.report("hog");
    assert_eq!(r["status"], "killed", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("cpu limit"), "{r}");
}

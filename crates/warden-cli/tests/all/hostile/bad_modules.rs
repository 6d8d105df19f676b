//! Bad modules offered to a running system: garbage bytes and a module
//! that asks for 4 GiB at start. The first is refused with an error, the
//! second fails to start; the system and the bystander go on.

use super::*;

#[test]
fn a_module_asking_for_four_gibibytes() {
    let bomb = task("bomb", guests::HUGE_MEMORY, &[], "memory_limit = '64MiB'");
    let run = attack("", &bomb);
    let r = run.report("bomb");
    assert_ne!(r["status"], "exited", "{r}");
    assert!(r["reason"].as_str().unwrap_or("").contains("memory"), "{r}");
}

#[test]
fn garbage_spawned_from_a_guest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = module_file(
        dir.path(),
        "garbage.wasm",
        b"\0asm\x01\0\0\0\xff\xff\xff garbage",
    );
    // A manifest naming it is refused whole, before anything runs.
    let m = manifest(
        dir.path(),
        &task("g", &garbage, &[], "memory_limit = '4MiB'"),
    );
    let out = warden()
        .args(["run", "--control", "off"])
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("garbage.wasm"), "{err}");
}

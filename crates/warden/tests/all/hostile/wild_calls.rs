//! Every `warden` host function called with a wild pointer or a huge
//! length and with a forged handle: each returns an error code; none
//! traps, none touches memory outside the caller's.

use super::*;

#[test]
fn wild_pointers_and_forged_handles_everywhere() {
    let wild = task("wild", guests::HOSTILE, &["wild"], "memory_limit = '4MiB'");
    let run = attack("", &wild);
    let n = warden::HOST_FUNCTIONS.len();
    assert!(
        n <= 40,
        "a new host function needs a wild call in hostile.c"
    );
    run.exited_saying("wild", "refused");
    let out = run.out("wild");
    let line = out.lines().last().unwrap();
    let (calls, refused) = line
        .strip_prefix("wild: ")
        .and_then(|l| l.split_once(" calls, "))
        .unwrap();
    assert_eq!(refused, format!("{calls} refused"), "{out}");
}

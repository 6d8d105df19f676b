//! `random_get` asked for 60 MiB into a 2 MiB memory, by four tasks: each
//! is trapped (the range is out of bounds) before any byte is made, so
//! the host allocates nothing for it. Wasmtime's own `random_get` made
//! the bytes in a host buffer first, 60 MiB a call outside any budget.

use super::*;

#[test]
fn random_bytes_past_the_memory() {
    let attackers: String = (0..4)
        .map(|i| {
            task(
                &format!("flood{i}"),
                guests::HOSTILE,
                &["random-flood", "60"],
                "memory_limit = '2MiB'",
            )
        })
        .collect();
    let run = attack("", &attackers);
    for i in 0..4 {
        let r = run.report(&format!("flood{i}"));
        assert_eq!(r["status"], "trapped", "{r}");
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("out of bounds"), "{reason}");
    }
}

use crate::util::*;
use std::time::Duration;

/// Each kind of trap ends only its own task, with the reason recorded,
/// while healthy tasks beside it finish normally.
#[test]
fn traps_end_only_the_faulting_task() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let cases = [
        ("unreachable", guests::UNREACHABLE, "unreachable"),
        ("oob", guests::OOB, "out of bounds memory access"),
        ("div0", guests::DIV0, "integer divide by zero"),
        ("recurse", guests::RECURSE, "call stack exhausted"),
        ("wild-args", guests::WASI_WILD_ARGS, "pointer out of bounds"),
        (
            "misaligned-env",
            guests::WASI_MISALIGNED_ENVIRON,
            "misaligned",
        ),
    ];
    let mut healthy = vec![];
    for i in 0..4 {
        healthy.push(
            rt.spawn(&spec(dir.path(), &format!("ok{i}"), guests::HELLO))
                .unwrap(),
        );
    }
    let faulty: Vec<_> = cases
        .iter()
        .map(|(name, m, _)| rt.spawn(&spec(dir.path(), name, m)).unwrap())
        .collect();
    for i in 4..8 {
        healthy.push(
            rt.spawn(&spec(dir.path(), &format!("ok{i}"), guests::HELLO))
                .unwrap(),
        );
    }
    for ((name, _, want), id) in cases.iter().zip(faulty) {
        let r = wait(&rt, id, Duration::from_secs(20));
        assert_eq!(r.status, "trapped", "{name}: {r:?}");
        let reason = r.reason.unwrap();
        assert!(reason.contains(want), "{name}: {reason}");
    }
    for id in healthy {
        let r = wait(&rt, id, Duration::from_secs(20));
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)));
    }
}

use crate::util::*;
use std::time::Duration;

#[test]
fn hello_args_env_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "hello", guests::HELLO);
    s.args = vec!["one".into(), "two words".into()];
    s.env = vec![("GREETING".into(), "hi".into())];
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(
        (r.status, r.exit_code, r.reason.clone()),
        ("exited", Some(0), None)
    );
    let out = stdout_of(dir.path(), "hello");
    assert!(out.contains("hello from hello.wasm"), "{out}");
    assert!(out.contains("arg 1: one\narg 2: two words\n"), "{out}");
    assert!(out.contains("env: GREETING=hi"), "{out}");
    assert_eq!(
        out.matches("env:").count(),
        1,
        "sees only its own env: {out}"
    );
    assert!(r.peak_memory_bytes > 0);
    assert!(r.end_ms >= r.start_ms);
    // The kernel times its own work on the task, and sums it.
    assert!(r.create_ms > 0.0 && r.teardown_ms > 0.0, "{r:?}");
    let setup = rt.setup_stats();
    assert_eq!(setup.tasks, 1);
    assert!((setup.create_seconds * 1e3 - r.create_ms).abs() < 1e-6);
    assert!((setup.teardown_seconds * 1e3 - r.teardown_ms).abs() < 1e-6);

    let mut s = spec(dir.path(), "hello3", guests::HELLO);
    s.args = vec!["exit=3".into()];
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!((r.status, r.exit_code), ("exited", Some(3)));
    assert!(!r.succeeded());
}

#[test]
fn module_is_compiled_once_and_shared() {
    let rt = runtime(1);
    let a = rt.load_module(guests::HELLO.as_ref()).unwrap();
    let b = rt.load_module(guests::HELLO.as_ref()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

#[test]
fn compiled_code_cache_persists_between_runtimes() {
    let cache = tempfile::tempdir().unwrap();
    let cfg = warden::RuntimeConfig {
        workers: 1,
        cache_dir: Some(cache.path().to_path_buf()),
        max_tasks: 16,
        ..Default::default()
    };
    let first = warden::Runtime::new(cfg.clone()).unwrap();
    let m = first.load_module(guests::FIB.as_ref()).unwrap();
    assert_eq!(m.cache, Some(warden::CacheOutcome::Miss));
    drop(first);
    let second = warden::Runtime::new(cfg).unwrap();
    let m = second.load_module(guests::FIB.as_ref()).unwrap();
    assert_eq!(m.cache, Some(warden::CacheOutcome::Hit));
    let dir = tempfile::tempdir().unwrap();
    let r = run_one(
        &second,
        &spec(dir.path(), "fib", guests::FIB),
        Duration::from_secs(30),
    );
    assert_eq!(r.exit_code, Some(0));
}

/// Output written through a renumbered descriptor goes where the
/// descriptor now points: stdout moved onto 2 is still stdout, and 1 is
/// closed.
#[test]
fn stdout_follows_its_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "moved", guests::STDOUT_RENUMBERED);
    s.stdio.stderr = warden::Output::File(dir.path().join("moved.err"));
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!((r.status, r.exit_code), ("exited", Some(8)), "EBADF on 1");
    assert_eq!(stdout_of(dir.path(), "moved"), "moved\n");
    let err = std::fs::read_to_string(dir.path().join("moved.err")).unwrap();
    assert_eq!(err, "", "stderr was closed by the move");
}

/// `fd_fdstat_get` on stdout and stderr, answered by Warden while they
/// are in place, says byte for byte what Wasmtime's table says for the
/// same descriptors once one is moved (see the guest).
#[test]
fn stdio_fdstat_is_wasmtimes_answer() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let mut s = spec(dir.path(), "fdstat", guests::STDIO_FDSTAT);
    s.stdio.stderr = warden::Output::File(dir.path().join("fdstat.err"));
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}");
}

use crate::util::*;
use std::time::Duration;
use warden::Output;

/// A thousand tasks from one module in one runtime, all exiting 0.
#[test]
fn thousand_tasks_from_one_module() {
    let rt = runtime(2);
    let mut s = warden::TaskSpec::new("hello", guests::HELLO);
    s.stdout = Output::Null;
    let ids: Vec<_> = (0..1000)
        .map(|i| {
            s.name = format!("hello.{i}");
            s.args = vec![format!("{i}")];
            rt.spawn(&s).unwrap()
        })
        .collect();
    for id in ids {
        let r = wait(&rt, id, Duration::from_secs(120));
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}");
    }
    assert_eq!(rt.stats().live, 0);
}

/// Past `max_tasks` live tasks, spawn fails with a clear error, and works
/// again once a task has ended.
#[test]
fn max_tasks_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let rt = warden::Runtime::new(warden::RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 2,
        ..Default::default()
    })
    .unwrap();
    let a = rt.spawn(&spec(dir.path(), "a", guests::SLEEP)).unwrap();
    let _b = rt.spawn(&spec(dir.path(), "b", guests::SLEEP)).unwrap();
    let err = rt.spawn(&spec(dir.path(), "c", guests::SLEEP)).unwrap_err();
    assert!(matches!(err, warden::Error::Full(2)), "{err}");
    assert!(err.to_string().contains("max_tasks"), "{err}");
    rt.kill(a, "make room").unwrap();
    let c = rt.spawn(&spec(dir.path(), "c", guests::HELLO)).unwrap();
    assert_eq!(wait(&rt, c, Duration::from_secs(10)).exit_code, Some(0));
    rt.kill_all("done");
}

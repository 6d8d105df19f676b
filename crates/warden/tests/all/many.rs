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

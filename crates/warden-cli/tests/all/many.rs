use crate::util::*;
use std::time::Duration;
use warden::Output;

/// A thousand tasks from one module in one runtime, all exiting 0.
#[test]
fn thousand_tasks_from_one_module() {
    let rt = runtime(2);
    let mut s = warden::TaskSpec::new("hello", guests::HELLO);
    s.stdio.stdout = Output::Null;
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

/// Where the kernel's limit on memory mappings holds fewer tasks than
/// `max_tasks`, the runtime still starts, and the spawn past the last that
/// fits is refused with the limit named and how to raise it; the live
/// tasks are untouched, and a spawn works again once one has ended.
#[test]
fn the_mapping_limit_refuses_the_next_spawn_with_how_to_raise_it() {
    let dir = tempfile::tempdir().unwrap();
    // 2,000 for the process, 256 for the pools' decommit batch (128
    // slots of two mappings), then five a task: room for 40.
    let limit = 2_000 + 256 + 5 * 40;
    let rt = warden::Runtime::new(warden::RuntimeConfig {
        workers: 1,
        cache_dir: None,
        max_tasks: 100_000,
        max_map_count: Some(limit),
        ..Default::default()
    })
    .unwrap();
    let mut ids = vec![];
    let err = loop {
        match rt.spawn(&spec(dir.path(), "s", guests::SLEEP)) {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
        assert!(ids.len() <= 40, "more tasks than the mappings hold");
    };
    assert_eq!(ids.len(), 40);
    assert!(matches!(err, warden::Error::Mappings(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("vm.max_map_count = {limit}")),
        "{text}"
    );
    assert!(text.contains("sysctl -w vm.max_map_count="), "{text}");
    assert_eq!(rt.stats().live, 40, "the live tasks are untouched");
    rt.kill(ids[0], "make room").unwrap();
    let h = rt.spawn(&spec(dir.path(), "h", guests::HELLO)).unwrap();
    assert_eq!(wait(&rt, h, Duration::from_secs(10)).exit_code, Some(0));
    rt.kill_all("done");
}

/// A module that sleeps `us` microseconds in `poll_oneoff`.
fn napper(us: u64) -> String {
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const {}))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))))"#,
        us * 1000
    )
}

/// Idle workers and waiting host threads look for work awake before they
/// sleep (`executor::IDLE_SPIN`, 50 µs). Stress that hand-over: four
/// threads each spawn and wait for tasks one at a time, tasks that end at
/// once or sleep 30 or 120 µs, waited for at once or after a pause, so
/// that workers and waiters keep going idle, spinning or asleep just as
/// work comes; a wake-up lost on either side would leave a wait to time
/// out.
#[test]
fn spawns_and_waits_from_many_threads_lose_no_wake_up() {
    // One worker and one thread: nothing else comes along to cover for a
    // lost wake-up. Two and four: the hand-over races between threads.
    for (workers, threads, tasks) in [(1, 1, 4000), (2, 4, 900)] {
        stress_spawn_and_wait(workers, threads, tasks);
    }
}

/// Waits `d` awake (a sleep would take a timer slack longer).
fn pause(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn stress_spawn_and_wait(workers: usize, threads: usize, tasks: usize) {
    let rt = runtime(workers);
    for us in [30, 120] {
        rt.add_module(&format!("nap{us}.wat"), napper(us).as_bytes())
            .unwrap();
    }
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                let modules = [guests::NOOP, "nap30.wat", "nap120.wat"];
                for i in 0..tasks {
                    let mut s = warden::TaskSpec::new(format!("t{t}.{i}"), modules[(i + t) % 3]);
                    s.stdio.stdout = Output::Null;
                    // Spawn after a pause spread over 0-100 µs, so that
                    // the spawn lands anywhere in an idle worker's spin
                    // and just after it.
                    pause(Duration::from_nanos((i as u64 * 7_919) % 100_000));
                    let id = rt.spawn(&s).unwrap();
                    if i % 4 == 1 {
                        pause(Duration::from_micros(80));
                    }
                    let r = rt
                        .wait_timeout(id, Some(Duration::from_secs(30)))
                        .unwrap()
                        .unwrap_or_else(|| panic!("thread {t}: task {i} never reported"));
                    assert_eq!(r.status, "exited", "{r:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(rt.stats().live, 0);
}

//! Supervision: restart policies and `[[supervisor]]` strategies, judged
//! by which tasks actually run (their ids) after a member is killed; a
//! supervisor past its intensity or its CPU limit ends the system with
//! the reason; a supervised servlet's route answers again after a kill
//! under load, and operators see the restart.

use crate::control::{cli, ps};
use crate::http::{counter_site, get, metrics};
use crate::util::{guests, manifest, warden, Launch};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use warden::{Manifest, Runtime, System, SystemSpec, TaskId};

/// `proc_exit(CODE)` at once.
fn exits(dir: &Path, name: &str, code: i32) -> String {
    let wat = format!(
        r#"(module
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") 1)
            (func (export "_start") (call $exit (i32.const {code}))))"#
    );
    let file = format!("{name}.wat");
    std::fs::write(dir.join(&file), wat).unwrap();
    file
}

/// A system from manifest `text` (control off, no cache) in this process.
fn system(dir: &Path, text: &str) -> System {
    let text = format!("[runtime]\ncontrol = \"off\"\ncache = false\n{text}");
    let m = Manifest::parse(&text, dir).unwrap_or_else(|e| panic!("{e}"));
    System::start(SystemSpec::from_manifest(m)).unwrap()
}

/// Live tasks by name.
pub fn live(rt: &Runtime) -> BTreeMap<String, TaskId> {
    rt.live_tasks()
        .into_iter()
        .map(|v| (v.name, v.id))
        .collect()
}

/// Waits until the live tasks satisfy `ready`; they, then.
pub fn wait_live(
    rt: &Runtime,
    what: &str,
    ready: impl Fn(&BTreeMap<String, TaskId>) -> bool,
) -> BTreeMap<String, TaskId> {
    let t = Instant::now();
    loop {
        let now = live(rt);
        if ready(&now) {
            return now;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never {what}: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Three sleeping members `a`, `b`, `c` of one supervisor of `strategy`.
fn three(strategy: &str) -> String {
    let mut text = String::new();
    for name in ["a", "b", "c"] {
        text += &format!(
            "[[task]]\nname = \"{name}\"\nmodule = \"{}\"\nrestart = \"permanent\"\n",
            guests::SLEEP
        );
    }
    text + &format!(
        "[[supervisor]]\nname = \"s\"\nstrategy = \"{strategy}\"\nbackoff = \"0s\"\nmembers = [\"a\", \"b\", \"c\"]\n"
    )
}

/// Kills `victim` of the three under `strategy`; which of them run anew
/// once the restart is done, and whether they started in member order.
fn restarted_by(strategy: &str, victim: &str) -> (Vec<String>, bool) {
    let dir = tempfile::tempdir().unwrap();
    let sys = system(dir.path(), &three(strategy));
    let rt = sys.runtime().clone();
    let before = wait_live(&rt, "all three ran", |l| l.len() == 3);
    rt.kill(before[victim], "a test kills it").unwrap();
    let after = wait_live(&rt, "the victim came back", |l| {
        l.len() == 3 && l[victim] != before[victim]
    });
    // A member the strategy did not take keeps its task.
    let anew: Vec<String> = (after.iter())
        .filter(|(n, id)| before[*n] != **id)
        .map(|(n, _)| n.clone())
        .collect();
    let ids: Vec<TaskId> = anew.iter().map(|n| after[n]).collect();
    let ordered = ids.windows(2).all(|w| w[0] < w[1]);
    sys.shutdown(Some("the test is over"));
    (anew, ordered)
}

#[test]
fn one_for_one_restarts_only_the_member_that_died() {
    assert_eq!(restarted_by("one_for_one", "b"), (vec!["b".into()], true));
}

#[test]
fn one_for_all_restarts_every_member_in_order() {
    let (anew, ordered) = restarted_by("one_for_all", "b");
    assert_eq!(anew, ["a", "b", "c"]);
    assert!(ordered, "members started out of order");
}

#[test]
fn rest_for_one_restarts_the_member_and_those_after_it_in_order() {
    let (anew, ordered) = restarted_by("rest_for_one", "b");
    assert_eq!(anew, ["b", "c"]);
    assert!(ordered, "members started out of order");
    assert_eq!(restarted_by("rest_for_one", "c").0, ["c"]);
}

/// A transient task that exits 0 stays ended; one that exits 3 is
/// restarted (each run exits, so the restarts go on up to the
/// intensity); a temporary one, the default, is never restarted.
#[test]
fn restart_policies_are_otps() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, bad) = (exits(dir.path(), "ok", 0), exits(dir.path(), "bad", 3));
    let text = format!(
        "[[task]]\nname = \"ok\"\nmodule = \"{ok}\"\nrestart = \"transient\"\n\
         [[task]]\nname = \"bad\"\nmodule = \"{bad}\"\nrestart = \"transient\"\n\
         [[task]]\nname = \"once\"\nmodule = \"{bad}\"\n\
         [[supervisor]]\nname = \"s\"\nmax_restarts = 2\nbackoff = \"0s\"\nmembers = [\"ok\", \"bad\"]\n"
    );
    let sys = system(dir.path(), &text);
    let reports = sys.runtime().wait_all();
    let runs = |name: &str| reports.iter().filter(|r| r.name == name).count();
    assert_eq!(
        (runs("ok"), runs("bad"), runs("once")),
        (1, 3, 1),
        "{reports:#?}"
    );
    let last = reports.iter().rfind(|r| r.name == "bad").unwrap();
    assert!(last.supervised && last.restarts == 2, "{last:?}");
    assert!(
        sys.failure()
            .is_some_and(|f| f.contains("supervisor \"s\" gave up")),
        "{:?}",
        sys.failure()
    );
    sys.shutdown(None);
}

/// An inner supervisor past its intensity gives up; its parent, allowed
/// no restart, gives up too; the run ends with status 1 and the reason
/// at the top naming both, and every member (a sleeping one too) is
/// stopped.
#[test]
fn intensity_exceeded_escalates_to_the_top_and_ends_the_system() {
    let dir = tempfile::tempdir().unwrap();
    let crash = guests::UNREACHABLE;
    let text = format!(
        "[runtime]\ncontrol = \"off\"\n\
         [[task]]\nname = \"crash\"\nmodule = \"{crash}\"\nrestart = \"permanent\"\n\
         [[task]]\nname = \"sleeper\"\nmodule = \"{}\"\nrestart = \"permanent\"\n\
         [[supervisor]]\nname = \"inner\"\nmax_restarts = 2\nwithin = \"1m\"\nbackoff = \"1ms\"\nmembers = [\"crash\"]\n\
         [[supervisor]]\nname = \"outer\"\nmax_restarts = 0\nmembers = [\"sleeper\", \"inner\"]\n",
        guests::SLEEP
    );
    let path = manifest(dir.path(), &text);
    let events = dir.path().join("events.jsonl");
    let out = warden()
        .args(["run", "--events"])
        .arg(&events)
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let top = stderr
        .lines()
        .find(|l| l.contains("the system ends"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        top.contains("supervisor \"outer\" gave up")
            && top.contains("supervisor \"inner\" gave up"),
        "{top}"
    );
    let log = std::fs::read_to_string(&events).unwrap();
    let restarts = log
        .lines()
        .filter(|l| l.contains("\"event\":\"restart\""))
        .count();
    assert_eq!(restarts, 2, "{log}");
}

/// A supervisor's `cpu_limit` bounds what its restarts cost: a member
/// failing at once on every start, with no backoff and an intensity it
/// never reaches, is given up on once the spawns used the limit.
#[test]
fn a_crash_loop_is_bounded_by_its_supervisors_cpu_limit() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"crash\"\nmodule = \"{}\"\nrestart = \"permanent\"\n\
         [[supervisor]]\nname = \"s\"\nmax_restarts = 1000000\nwithin = \"1s\"\nbackoff = \"0s\"\n\
         cpu_limit = \"20ms\"\nmembers = [\"crash\"]\n",
        guests::UNREACHABLE
    );
    let sys = system(dir.path(), &text);
    let reports = sys.runtime().wait_all();
    let failure = sys.failure().unwrap_or_default();
    assert!(failure.contains("cpu_limit"), "{failure}");
    // At least one restart was made, and far fewer than the intensity.
    assert!((2..100_000).contains(&reports.len()), "{}", reports.len());
    sys.shutdown(None);
}

/// A member failing at once on every start, beside a bystander servlet:
/// the backoff (doubling from 10 ms, at most 5 s) keeps the restarts
/// few however long the loop runs, and the bystander answers every
/// request meanwhile.
#[test]
fn a_crash_loop_is_bounded_beside_a_bystander_that_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[[task]]\nname = \"crash\"\nmodule = \"{}\"\nrestart = \"permanent\"\n\
         [[supervisor]]\nname = \"loop\"\nmax_restarts = 1000000\nwithin = \"1m\"\n\
         backoff = \"10ms\"\nmembers = [\"crash\"]\n",
        counter_site(guests::SERVLET, "", "10s"),
        guests::UNREACHABLE
    );
    let web = Launch::new(&manifest(dir.path(), &text)).start();
    let restarts = |web: &crate::util::Served| -> u64 {
        let all = ps(web.control());
        (all.as_array().unwrap().iter())
            .filter(|t| t["name"] == "crash")
            .filter_map(|t| t["restarts"].as_u64())
            .max()
            .unwrap_or(0)
    };
    // The loop is under way before the requests, and goes on through them.
    let t = Instant::now();
    while restarts(&web) < 3 {
        assert!(t.elapsed() < Duration::from_secs(30), "no crash loop");
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 1..=300 {
        let r = get(&web, "/count/x");
        assert_eq!((r.status, r.body.trim_end()), (200, &*format!("count {i}")));
    }
    let n = restarts(&web);
    // 10 ms doubling to 5 s: about 12 restarts in the first minute, then
    // one per 5 s; without the backoff, thousands.
    assert!(n < 40, "{n} restarts");
}

/// When the system is stopped, its permanent tasks are killed and not
/// started again: the run ends.
#[test]
fn a_stopped_system_restarts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[runtime]\ncontrol = \"off\"\n[[task]]\nname = \"p\"\nmodule = \"{}\"\nrestart = \"permanent\"\n",
        guests::SLEEP
    );
    let path = manifest(dir.path(), &text);
    let events = dir.path().join("events.jsonl");
    let out = warden()
        .args(["run", "--for", "300ms", "--events"])
        .arg(&events)
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    let log = std::fs::read_to_string(&events).unwrap();
    assert_eq!(log.matches("\"event\":\"spawn\"").count(), 1, "{log}");
}

/// A servlet with `restart = "permanent"` killed while a client keeps
/// requesting: its route answers 200 again, the requests that failed
/// meanwhile are few, and `ps`, `/api/tasks` and `/metrics` show the
/// restart and why.
#[test]
fn a_killed_servlet_is_restarted_and_its_route_answers_again() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[[task]]
name = "counter"
module = "{}"
provides = ["counter"]
restart = "permanent"

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/count/*"
service = "counter"
timeout = "5s"
"#,
        guests::SERVLET
    );
    let web = Launch::new(&manifest(dir.path(), &text))
        .args(["--no-cache"])
        .start();
    let t = Instant::now();
    while get(&web, "/count/x").status != 200 {
        assert!(t.elapsed() < Duration::from_secs(30), "no servlet");
    }
    let victim = first_id(&ps(web.control()), "counter");
    let load = Load::start(web.base());
    assert!(cli(web.control(), &["kill", &victim.to_string()])
        .status
        .success());
    let killed = Instant::now();
    // The route answers again from a new servlet (its count starts over).
    let back = loop {
        let r = get(&web, "/count/x");
        if r.status == 200 && first_id(&ps(web.control()), "counter") != victim {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the servlet never came back"
        );
    };
    let (ok, failed) = load.stop();
    assert!(ok > 0, "no request was answered");
    assert!(failed < 1000, "{failed} requests failed ({ok} answered)");
    eprintln!(
        "route back {back:?} after the kill; {failed} of {} failed",
        ok + failed
    );
    let tasks = ps(web.control());
    let now = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "counter" && t["restarts"] == 1)
        .unwrap_or_else(|| panic!("{tasks:#}"));
    assert!(
        now["last_restart_reason"]
            .as_str()
            .unwrap()
            .contains("killed"),
        "{now}"
    );
    let m = metrics(&web);
    assert!(
        m.contains("warden_restarts_total{task=\"counter\",reason=\"killed\"} 1"),
        "{m}"
    );
}

/// The id of the live task named `name` in `ps --json --all` output.
fn first_id(tasks: &serde_json::Value, name: &str) -> u64 {
    let ended = ["exited", "trapped", "killed"];
    (tasks.as_array().unwrap().iter())
        .filter(|t| t["name"] == name && !ended.contains(&t["state"].as_str().unwrap_or("")))
        .filter_map(|t| t["id"].as_u64())
        .max()
        .unwrap_or(0)
}

/// A client requesting `/count/x` over and over on one connection at a
/// time, counting answers 200 and everything else.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl Load {
    fn start(base: &str) -> Load {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, addr) = (stop.clone(), base.trim_start_matches("http://").to_string());
        let thread = std::thread::spawn(move || {
            let (mut ok, mut failed) = (0, 0);
            while !flag.load(Ordering::Relaxed) {
                match request(&addr) {
                    Some(200) => ok += 1,
                    _ => failed += 1,
                }
            }
            (ok, failed)
        });
        Load { stop, thread }
    }

    fn stop(self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// One `GET /count/x` on a connection of its own; its status.
fn request(addr: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /count/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split(' ').nth(1)?.parse().ok()
}

/// `warden check` says every supervisor problem, one line each, and
/// exits non-zero.
#[test]
fn bad_supervisors_are_refused_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"a\"\nmodule = \"{m}\"\nrestart = \"sometimes\"\n\
         [[task]]\nname = \"b\"\nmodule = \"{m}\"\n\
         [[supervisor]]\nname = \"x\"\nstrategy = \"one_for_some\"\nmembers = [\"a\"]\n\
         [[supervisor]]\nname = \"y\"\nmembers = [\"b\", \"nobody\"]\n\
         [[supervisor]]\nname = \"p\"\nmembers = [\"q\"]\n\
         [[supervisor]]\nname = \"q\"\nmembers = [\"p\"]\n\
         [[supervisor]]\nname = \"z\"\nmembers = [\"b\"]\nwithin = \"soon\"\n",
        m = guests::SLEEP
    );
    let path = manifest(dir.path(), &text);
    let out = warden().arg("check").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for want in [
        "restart: \"sometimes\" is not one of",
        "strategy: \"one_for_some\" is not one of",
        "no [[task]] or [[supervisor]] named \"nobody\"",
        "is its own member",
        "within:",
    ] {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
}

/// `warden restart` brings a system's task back by hand: one that ended
/// (unsupervised) starts again from its entry; a supervised one running
/// is killed and started afresh through its supervisor, which counts the
/// restart and says why; a name the system has no entry for is refused.
#[test]
fn an_operator_restarts_tasks_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = \"idle\"\nmodule = \"{m}\"\n\
         [[task]]\nname = \"worker\"\nmodule = \"{m}\"\nrestart = \"permanent\"\n",
        m = guests::SLEEP
    );
    let web = Launch::new(&manifest(dir.path(), &text)).start();
    let addr = web.control();
    let idle = first_id(&ps(addr), "idle");
    assert!(cli(addr, &["kill", "idle"]).status.success());
    let t = Instant::now();
    while first_id(&ps(addr), "idle") != 0 {
        assert!(t.elapsed() < Duration::from_secs(30), "idle never ended");
    }
    let out = cli(addr, &["restart", "idle"]);
    assert!(out.status.success(), "{out:?}");
    let again = first_id(&ps(addr), "idle");
    assert!(again > idle, "{again} after {idle}");
    let worker = first_id(&ps(addr), "worker");
    let out = cli(addr, &["restart", "worker"]);
    assert!(out.status.success(), "{out:?}");
    let tasks = ps(addr);
    let now = (tasks.as_array().unwrap().iter())
        .find(|t| t["name"] == "worker" && t["id"].as_u64() > Some(worker))
        .unwrap_or_else(|| panic!("{tasks:#}"));
    assert_eq!(now["restarts"], 1, "{now}");
    assert!(
        now["last_restart_reason"]
            .as_str()
            .unwrap()
            .contains("operator"),
        "{now}"
    );
    // Only the new worker runs: the old one was stopped first.
    assert_eq!(first_id(&ps(addr), "worker"), now["id"].as_u64().unwrap());
    let out = cli(addr, &["restart", "nobody"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("no task or per-request route"),
        "{said}"
    );
}

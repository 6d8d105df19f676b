//! Operator tools against a real running system: the control API through
//! the `warden` subcommands, and `/metrics` through a Prometheus parser.

use crate::util::*;
use std::io::{Read, Write};
use std::process::Output;
use std::time::{Duration, Instant};

/// Runs `warden <args>` against `addr` (`--control` right after the
/// subcommand: later words may be module arguments).
pub fn cli(addr: &str, args: &[&str]) -> Output {
    warden()
        .arg(args[0])
        .args(["--control", addr])
        .args(&args[1..])
        .output()
        .unwrap()
}

/// `warden ps --json --all`: live and ended tasks.
pub fn ps(addr: &str) -> serde_json::Value {
    let out = cli(addr, &["ps", "--json", "--all"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn task<'a>(tasks: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    tasks
        .as_array()
        .unwrap()
        .iter()
        .rfind(|t| t["name"] == name)
}

pub fn start(dir: &std::path::Path) -> Served {
    let m = manifest(
        dir,
        &format!(
            "[[task]]\nname = 'sleeper'\nmodule = '{}'\n\
             [[task]]\nname = 'hello'\nmodule = '{}'\nargs = ['operator']\n",
            guests::SLEEP,
            guests::HELLO
        ),
    );
    let sys = Launch::new(&m).args(["--no-cache"]).start();
    // The control API comes up before the sleeper reaches its poll: wait
    // for that, so tests that check it stays blocked see it blocked first.
    let t = Instant::now();
    while task(&ps(sys.control()), "sleeper").is_none_or(|s| s["state"] != "blocked") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "sleeper never blocked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    sys
}

#[test]
fn ps_spawn_logs_suspend_kill() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let tasks = ps(addr);
    assert_eq!(task(&tasks, "sleeper").unwrap()["state"], "blocked");
    for key in [
        "id",
        "parent",
        "cpu_ms",
        "cpu_pct",
        "memory_bytes",
        "peak_memory_bytes",
        "ipc_calls",
        "bytes_sent",
        "bytes_received",
    ] {
        let t = task(&tasks, "sleeper").unwrap();
        // Present, and a number (the parent of a root task: null).
        match key {
            "parent" => assert!(t.get(key).is_some_and(|v| v.is_null()), "{key}: {t}"),
            _ => assert!(t[key].is_number(), "{key}: {t}"),
        }
    }

    // spawn: it appears, runs, and its output can be read.
    let out = cli(
        addr,
        &[
            "spawn",
            guests::BUSY_PRINT,
            "--cpu-limit",
            "20s",
            "--memory-limit",
            "2MiB",
            "--",
            "1000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = Instant::now();
    loop {
        let logs = cli(addr, &["logs", "busy_print"]);
        if String::from_utf8_lossy(&logs.stdout).contains("round 0") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no output from the spawned task"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs = cli(addr, &["logs", "hello"]);
    assert!(String::from_utf8_lossy(&logs.stdout).contains("arg 1: operator"));
    let spawned = task(&ps(addr), "busy_print").unwrap().clone();
    assert_eq!(spawned["memory_limit_bytes"], 2 << 20, "{spawned}");

    // logs --follow: lines printed after it started arrive too.
    let mut follow = warden()
        .args(["logs", "--control", addr, "--follow", "busy_print"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(out)) {
            if tx.send(l.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("logs --follow printed")
    };
    let round = |l: &str| {
        l.strip_prefix("round ")?
            .split(' ')
            .next()?
            .parse::<u64>()
            .ok()
    };
    next();
    // Every round past those printed by now was printed after --follow
    // started, and must reach it.
    let now = cli(addr, &["logs", "busy_print"]).stdout;
    let printed = String::from_utf8_lossy(&now)
        .lines()
        .filter_map(round)
        .max()
        .unwrap();
    while round(&next()).is_none_or(|r| r <= printed) {}
    let _ = follow.kill();
    let _ = follow.wait();

    // suspend / resume / kill by name; ps follows.
    assert!(cli(addr, &["suspend", "busy_print"]).status.success());
    assert_eq!(task(&ps(addr), "busy_print").unwrap()["state"], "suspended");
    assert!(cli(addr, &["resume", "busy_print"]).status.success());
    assert_ne!(task(&ps(addr), "busy_print").unwrap()["state"], "suspended");
    // Tasks by id as well as by name.
    let id = spawned["id"].to_string();
    assert!(cli(addr, &["kill", &id]).status.success());
    let t = Instant::now();
    while task(&ps(addr), "busy_print").unwrap()["state"] != "killed" {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }

    // Plain `ps` lists live tasks only: the killed one is gone.
    let live = cli(addr, &["ps", "--json"]);
    let live: serde_json::Value = serde_json::from_slice(&live.stdout).unwrap();
    assert!(task(&live, "busy_print").is_none() && task(&live, "sleeper").is_some());

    // The table view shows the tree with its columns.
    let table = String::from_utf8(cli(addr, &["ps"]).stdout).unwrap();
    assert!(
        table.contains("NAME") && table.contains("sleeper") && table.contains("CPU%"),
        "{table}"
    );
    // Headed by the root budget, whose charges cover the live tasks.
    assert!(
        table.starts_with("memory: ") && table.contains("of the root budget's"),
        "{table}"
    );
    let root: serde_json::Value = serde_json::from_str(&get_body(addr, "/api/memory")).unwrap();
    let charged = root["charged_bytes"].as_u64().unwrap();
    let sleeper = task(&live, "sleeper").unwrap()["memory_bytes"]
        .as_u64()
        .unwrap();
    assert!(charged > sleeper, "{root}");
    assert!(root["limit_bytes"].as_u64().unwrap() >= charged, "{root}");
    let top = cli(addr, &["top", "--iterations", "1", "--sort", "memory"]);
    assert!(String::from_utf8_lossy(&top.stdout).contains("sleeper"));

    // Errors are one clear line.
    let out = cli(addr, &["kill", "no-such-task"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim(), "warden: no task \"no-such-task\"");
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let body = get_body(sys.control(), "/metrics");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let find = |metric: &str, task: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get("task") == Some(task))
            .unwrap_or_else(|| panic!("{metric} for {task} missing"))
    };
    assert!(
        matches!(find("warden_task_memory_bytes", "sleeper").value, prometheus_parse::Value::Gauge(v) if v > 0.0)
    );
    find("warden_task_cpu_seconds_total", "hello");
    find("warden_task_ipc_calls_total", "sleeper");
    find("warden_task_traps_total", "hello");
    find("warden_task_kills_total", "hello");
    let root = |metric: &str| match scrape.samples.iter().find(|s| s.metric == metric) {
        Some(s) => match s.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Counter(v) => v,
            _ => panic!("{metric} is not a number"),
        },
        None => panic!("{metric} missing"),
    };
    assert!(root("warden_root_memory_bytes") > 0.0);
    assert!(root("warden_root_memory_limit_bytes") >= root("warden_root_memory_peak_bytes"));
    assert_eq!(root("warden_root_memory_refusals_total"), 0.0);
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "warden_tasks_live"));
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "warden_tasks_ended_total"));
}

#[test]
fn no_running_system_is_one_clear_line() {
    let (_held, addr) = refusing_addr();
    let out = cli(&addr, &["ps"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no warden running at"), "{err}");
}

/// One raw HTTP/1.1 request with the given extra header lines; the status
/// code of the answer.
pub fn status_of(addr: &str, request_line: &str, headers: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{request_line} HTTP/1.1\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A page in the operator's browser cannot act on the system: a kill
/// from a foreign origin (a "simple" request no preflight stops) and any
/// request naming a non-loopback host (DNS rebinding) get 403 and change
/// nothing; the same requests from the API's own origin are served.
#[test]
fn foreign_origins_and_hosts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sys = start(dir.path());
    let addr = sys.control();
    let host = format!("Host: {addr}\r\n");
    let kill = "POST /api/tasks/sleeper/kill";
    let evil = format!("{host}Origin: http://evil.example\r\nContent-Type: text/plain\r\n");
    assert_eq!(status_of(addr, kill, &evil), 403);
    let other_port = format!("{host}Origin: http://127.0.0.1:1\r\n");
    assert_eq!(status_of(addr, kill, &other_port), 403);
    let rebound = "Host: evil.example:7474\r\n";
    assert_eq!(status_of(addr, "GET /api/tasks", rebound), 403);
    assert_eq!(status_of(addr, kill, rebound), 403);
    assert_eq!(
        task(&ps(addr), "sleeper").unwrap()["state"],
        "blocked",
        "still alive"
    );
    assert_eq!(status_of(addr, "GET /api/tasks", &host), 200);
    // (Suspend, not kill: killing the last live task would end the run.)
    let own = format!(
        "{host}Origin: http://{addr}\r\nAuthorization: Bearer {}\r\n",
        token_of(addr)
    );
    let suspend = "POST /api/tasks/sleeper/suspend";
    assert_eq!(status_of(addr, suspend, &own), 200);
    assert_eq!(task(&ps(addr), "sleeper").unwrap()["state"], "suspended");
}

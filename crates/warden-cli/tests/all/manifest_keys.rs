//! Manifest keys driven end to end: a manifest run by `warden run`, and
//! each key's effect seen from outside (the control API, the report, the
//! files), not only its parsing. CPU shares are judged as fractions of
//! what the tasks actually received, so they hold on a busy machine.

use crate::util::*;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The live tasks' CPU time, ms, by name (`warden ps --json`).
fn cpu_by_name(addr: &str) -> HashMap<String, f64> {
    let out = warden()
        .args(["ps", "--json", "--control", addr])
        .output()
        .unwrap();
    let tasks: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    tasks
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["cpu_ms"].as_f64().unwrap_or(0.0),
            )
        })
        .collect()
}

/// Runs the counters of `text` (a manifest) until they have done
/// `total` rounds of work between them since the last of them was
/// spawned; each one's fraction of those. The fractions are what the
/// guests counted, not what Warden charged them, so an accounting error
/// cannot hide a scheduling one; and they start once every counter is
/// there to be scheduled, so that the first one's head start on a busy
/// machine (while `warden run` spawns the next) is not counted as the
/// policy's.
fn shares(text: &str, names: &[&str], total: u64) -> HashMap<String, f64> {
    let dir = tempfile::tempdir().unwrap();
    let _sys = Launch::new(&manifest(dir.path(), text))
        .args(["--no-cache"])
        .start();
    let out = |n: &str| dir.path().join(format!("{n}.out"));
    let rounds = |n: &str| {
        let text = std::fs::read_to_string(out(n)).unwrap_or_default();
        text.lines().filter(|l| l.starts_with("round ")).count() as u64
    };
    // A task's output file is made when it is spawned.
    let t = Instant::now();
    while !names.iter().all(|n| out(n).exists()) {
        assert!(t.elapsed() < Duration::from_secs(30), "not all spawned");
        std::thread::sleep(Duration::from_millis(5));
    }
    let base: Vec<u64> = names.iter().map(|n| rounds(n)).collect();
    loop {
        let done: Vec<u64> = names
            .iter()
            .zip(&base)
            .map(|(n, b)| rounds(n) - b)
            .collect();
        let sum: u64 = done.iter().sum();
        if sum >= total {
            return names
                .iter()
                .zip(done)
                .map(|(n, d)| (n.to_string(), d as f64 / sum as f64))
                .collect();
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "too little work done: {done:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `warden run` on the manifest `text`, written into `dir`, to its end.
fn run_system(dir: &std::path::Path, text: &str) -> std::process::Output {
    warden()
        .args(["run", "--no-cache", "--control", "off"])
        .arg(manifest(dir, text))
        .output()
        .unwrap()
}

fn spinner(name: &str, keys: &str) -> String {
    format!(
        "[[task]]\nname = '{name}'\nmodule = '{}'\n{keys}\n",
        guests::SPIN
    )
}

/// A task that counts its work: a round (a million steps of a random
/// number generator, about a millisecond) per line of `NAME.out`.
fn counter(name: &str, keys: &str) -> String {
    format!(
        "[[task]]\nname = '{name}'\nmodule = '{}'\nargs = ['1000000000', '1000000']\n\
         stdout = '{name}.out'\n{keys}\n",
        guests::BUSY_PRINT
    )
}

fn near(got: &HashMap<String, f64>, name: &str, want: f64, within: f64) {
    let g = got[name];
    assert!(
        (g - want).abs() <= within,
        "{name}: {g:.3}, want {want} ± {within}: {got:?}"
    );
}

/// `scheduler`, `[[group]]` (`policy`, `share`) and a task's `share`:
/// groups split the one worker 3:1, and the gold group's tasks split its
/// part 1:2.
#[test]
fn stride_groups_and_shares() {
    let text = format!(
        "[runtime]\nworkers = 1\nscheduler = 'stride'\n\
         [[group]]\nname = 'gold'\npolicy = 'stride'\nshare = 3\n\
         [[group]]\nname = 'bronze'\nshare = 1\n{}{}{}",
        counter("g1", "group = 'gold'\nshare = 1"),
        counter("g2", "group = 'gold'\nshare = 2"),
        counter("b", "group = 'bronze'"),
    );
    let got = shares(&text, &["g1", "g2", "b"], 1200);
    near(&got, "g1", 0.25, 0.07);
    near(&got, "g2", 0.50, 0.07);
    near(&got, "b", 0.25, 0.07);
}

/// `tickets` under the lottery policy: 3:1 on average. A draw gives a
/// slice (4 ms, some four rounds); the many's share of `n` draws has a
/// standard deviation of sqrt(0.75 * 0.25 / n), so 2,400 rounds (600
/// draws on an idle machine, more on a busy one, whose slices are cut
/// short) put the tolerance of 0.1 past five of them.
#[test]
fn lottery_tickets() {
    let text = format!(
        "[runtime]\nworkers = 1\nscheduler = 'lottery'\n{}{}",
        counter("many", "tickets = 300"),
        counter("few", "tickets = 100"),
    );
    let got = shares(&text, &["many", "few"], 2400);
    near(&got, "many", 0.75, 0.1);
}

/// `priority` under the priority policy: the higher one runs.
#[test]
fn priorities() {
    let text = format!(
        "[runtime]\nworkers = 1\nscheduler = 'priority'\n{}{}",
        counter("high", "priority = 10"),
        counter("low", "priority = 1"),
    );
    let got = shares(&text, &["high", "low"], 600);
    assert!(got["high"] > 0.9, "{got:?}");
}

/// `cap`: a task capped at a fifth of a core gets no more than that of the
/// time that passes, however idle the worker. Judged by the host kernel's
/// account of the process's CPU time (the capped task is all it runs), not
/// by Warden's own ledger, so a task the ledger under-charges fails it.
#[test]
fn cap_bounds_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("[runtime]\nworkers = 1\n{}", spinner("capped", "cap = 0.2"));
    let sys = Launch::new(&manifest(dir.path(), &text))
        .args(["--no-cache"])
        .start();
    // Running: the ledger has charged it something.
    let t = Instant::now();
    while !cpu_by_name(sys.control())
        .get("capped")
        .is_some_and(|c| *c > 0.0)
    {
        assert!(t.elapsed() < Duration::from_secs(20), "the task never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (t0, c0) = (Instant::now(), process_cpu_ms(sys.pid()));
    // The cap is a fraction of the time that passes: let some pass.
    std::thread::sleep(Duration::from_millis(2000));
    let used = process_cpu_ms(sys.pid()) - c0;
    let wall = t0.elapsed().as_secs_f64() * 1000.0;
    // At most its cap, a slice's rounding and the process's upkeep (the
    // epoch ticker runs while the task does: about 0.03 of a core);
    // at least a twentieth, which holds while other processes keep the
    // cores busy, and fails if a cap stops a task instead of pacing it.
    assert!(
        used >= 0.05 * wall && used <= 0.3 * wall,
        "{used:.1} ms of {wall:.0} ms"
    );
}

/// CPU time, ms, the host kernel has charged process `pid` (user and
/// system, from `/proc/PID/stat`, in clock ticks of 10 ms).
fn process_cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses: utime is
    // the 12th of them and stime the 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<f64> = rest.split(' ').map(|x| x.parse().unwrap_or(0.0)).collect();
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11] + f[12]) * 1000.0 / ticks
}

/// `on_memory_limit` and `on_cpu_limit = 'notify'`, which a task's
/// children inherit, and `modules`: a child at its memory limit is refused
/// and its parent raises the limit; at its CPU limit it is suspended and
/// its parent raises that once, then kills it.
#[test]
fn overuse_notifies_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = 'parent'\nmodule = '{nest}'\nargs = ['overuse']\nmemory_limit = '8MiB'\n\
         on_memory_limit = 'notify'\non_cpu_limit = 'notify'\nmodules = {{ self = '{nest}' }}\n",
        nest = guests::NEST
    );
    let out = run_system(dir.path(), &text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("overuse: ok"), "{stdout}");
    assert!(
        stdout.contains("grow: 15 pages") && stdout.contains("grow: 31 pages"),
        "{stdout}"
    );
}

/// `--workers 1`: two tasks of 150 ms CPU each take at least 300 ms.
#[test]
fn one_worker_runs_one_task_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}{}",
        spinner("a", "cpu_limit = '150ms'"),
        spinner("b", "cpu_limit = '150ms'")
    );
    let m = manifest(dir.path(), &text);
    let report = dir.path().join("r.json");
    let out = warden()
        .args([
            "run",
            "--no-cache",
            "--control",
            "off",
            "--workers",
            "1",
            "--slice-ms",
            "2",
        ])
        .arg("--report")
        .arg(&report)
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "both killed at their limits");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let last_end = r
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["end_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(last_end >= 295.0, "both ran at once on one worker: {r}");
}

/// `max_tasks`: more tasks than slots stops the system before it runs.
#[test]
fn max_tasks_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[runtime]\nmax_tasks = 2\n[[task]]\nname = 'h'\nmodule = '{}'\ncount = 3\n",
        guests::SLEEP
    );
    let out = run_system(dir.path(), &text);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("2 tasks are alive, the runtime's max_tasks"),
        "{err}"
    );
}

/// `cache = false`: nothing is written to the compiled-code cache.
#[test]
fn cache_key_turns_the_cache_off() {
    let dir = tempfile::tempdir().unwrap();
    let entries = |d: &std::path::Path| std::fs::read_dir(d).map_or(0, |d| d.count());
    for (cache, want) in [("false", 0), ("true", 1)] {
        let cache_dir = dir.path().join(format!("cache-{cache}"));
        let text = format!(
            "[runtime]\ncache = {cache}\n[[task]]\nname = 'h'\nmodule = '{}'\n",
            guests::HELLO
        );
        let out = warden()
            .env("WARDEN_CACHE_DIR", &cache_dir)
            .args(["run", "--control", "off"])
            .arg(manifest(dir.path(), &text))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(entries(&cache_dir), want, "cache = {cache}");
    }
}

/// `control`: the API is served where the manifest says (127.0.0.2, not
/// the default 127.0.0.1:7474; port 0, read back from `warden run`).
#[test]
fn control_key_sets_the_address() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[runtime]\ncontrol = '127.0.0.2:0'\n[[task]]\nname = 'napper'\nmodule = '{}'\n",
        guests::SLEEP
    );
    let sys = Launch::new(&manifest(dir.path(), &text))
        .args(["--no-cache"])
        .control_from_manifest()
        .start();
    let addr = sys.control();
    assert!(addr.starts_with("127.0.0.2:"), "{addr}");
    let t = Instant::now();
    while !cpu_by_name(addr).contains_key("napper") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no control API at {addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `max_message_bytes` and `max_message_handles`: a longer request, or
/// one with more handles, is refused with "quota exceeded"; within the
/// quota it goes through.
#[test]
fn message_quotas() {
    for (msg, quota, want) in [
        (
            "longer than eight",
            "max_message_bytes = '8B'",
            "client: call: quota exceeded",
        ),
        (
            "handles",
            "max_message_handles = 1",
            "client: call: quota exceeded",
        ),
        ("handles", "max_message_handles = 2", "client: ok 1"),
    ] {
        message_quota(msg, quota, want);
    }
}

fn message_quota(msg: &str, quota: &str, want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = 'srv'\nmodule = '{echo}'\nargs = ['server', 'e']\nprovides = ['e']\nstdout = 'srv.out'\n\
         [[task]]\nname = 'c'\nmodule = '{echo}'\nargs = ['client', 'e', '1', '{msg}']\n\
         uses = ['e']\n{quota}\nstdout = 'c.out'\n",
        echo = guests::ECHO
    );
    let m = manifest(dir.path(), &text);
    let mut child = warden()
        .args(["run", "--no-cache", "--control", "off"])
        .arg(&m)
        .spawn()
        .unwrap();
    wait_for_output(dir.path(), "c", want);
    let _ = child.kill();
    let _ = child.wait();
}

/// `stdout = 'null'` and `stderr` to a file.
#[test]
fn output_to_null_and_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[task]]\nname = 'p'\nmodule = '{}'\nargs = ['read', '/nothing/here', 'X']\n\
         stdout = 'null'\nstderr = 'err.txt'\n\
         [[task]]\nname = 'q'\nmodule = '{}'\nargs = ['read', '/nothing/here', 'X']\nstderr = 'null'\n",
        guests::PROGRAM,
        guests::PROGRAM
    );
    let out = run_system(dir.path(), &text);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "stdout went nowhere"
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("[q] /nothing"),
        "stderr went nowhere"
    );
    let err = std::fs::read_to_string(dir.path().join("err.txt")).unwrap();
    assert!(err.contains("/nothing/here"), "{err}");
}

/// `inheritance`: a server runs on its callers' accounts by default, and
/// on its own with `inheritance = false`.
#[test]
fn inheritance_key() {
    for (key, inherits) in [("", true), ("inheritance = false", false)] {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[[task]]\nname = 'srv'\nmodule = '{echo}'\nargs = ['server', 'e']\nprovides = ['e']\n{key}\n\
             [[task]]\nname = 'c'\nmodule = '{echo}'\nargs = ['client', 'e', '2000', 'x']\nuses = ['e']\n",
            echo = guests::ECHO
        );
        let report = dir.path().join("r.json");
        // The server serves until the run's time is over.
        let out = warden()
            .args([
                "run",
                "--no-cache",
                "--control",
                "off",
                "--for",
                "4s",
                "--report",
            ])
            .arg(&report)
            .arg(manifest(dir.path(), &text))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "the server was killed at the end"
        );
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let srv = r
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "srv")
            .unwrap();
        let served = srv["served_cpu_ms"].as_f64().unwrap();
        assert_eq!(served > 0.0, inherits, "{key:?}: {srv}");
    }
}

/// Where the compiled-code cache is: `$WARDEN_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/warden`, else `$HOME/.cache/warden`.
#[test]
fn cache_location_order() {
    let dir = tempfile::tempdir().unwrap();
    let (explicit, xdg, home) = (
        dir.path().join("w"),
        dir.path().join("x"),
        dir.path().join("h"),
    );
    let compile = |vars: &[(&str, &std::path::Path)]| {
        let mut c = warden();
        c.env_remove("WARDEN_CACHE_DIR")
            .env_remove("XDG_CACHE_HOME")
            .env("HOME", &home);
        for (k, v) in vars {
            c.env(k, v);
        }
        assert!(c
            .args(["compile", guests::HELLO])
            .output()
            .unwrap()
            .status
            .success());
    };
    let entries = |d: &std::path::Path| std::fs::read_dir(d).map_or(0, |d| d.count());
    compile(&[("WARDEN_CACHE_DIR", &explicit), ("XDG_CACHE_HOME", &xdg)]);
    assert_eq!((entries(&explicit), entries(&xdg.join("warden"))), (1, 0));
    compile(&[("XDG_CACHE_HOME", &xdg)]);
    assert_eq!(entries(&xdg.join("warden")), 1);
    compile(&[]);
    assert_eq!(entries(&home.join(".cache/warden")), 1);
}

/// `--slice-ms`: two spinners on one worker switch about once per slice,
/// so 1 ms slices give many times the slices that 100 ms slices give for
/// the same CPU time (`warden_polls_total` in `/metrics`).
#[test]
fn slice_length_flag() {
    let polls = |slice_ms: &str| {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{}{}", spinner("a", ""), spinner("b", ""));
        let sys = Launch::new(&manifest(dir.path(), &text))
            .args(["--no-cache", "--workers", "1", "--slice-ms", slice_ms])
            .start();
        let addr = sys.control();
        let t = Instant::now();
        loop {
            let cpu = cpu_by_name(addr);
            if cpu.len() == 2 && cpu.values().all(|&c| c >= 300.0) {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "too little CPU: {cpu:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", &format!("http://{addr}/metrics")])
            .output()
            .expect("curl is installed");
        drop(sys);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.starts_with("warden_polls_total"))
            .unwrap();
        line.split_whitespace()
            .last()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let (short, long) = (polls("1"), polls("100"));
    assert!(
        short > 5.0 * long,
        "1 ms slices: {short} polls; 100 ms: {long}"
    );
}

/// `max_module_size` (and `--max-module-size`): a module over it is
/// refused, naming the key, before any of it is read.
#[test]
fn max_module_size_refuses_larger_modules() {
    let dir = tempfile::tempdir().unwrap();
    let size = std::fs::metadata(guests::HELLO).unwrap().len();
    let text = |limit: u64| {
        format!(
            "[runtime]\nmax_module_size = \"{limit}\"\n[[task]]\nname = 'h'\nmodule = '{}'\n",
            guests::HELLO
        )
    };
    let out = run_system(dir.path(), &text(size - 1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("max_module_size"),
        "{err}"
    );
    let out = run_system(dir.path(), &text(size));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = warden()
        .args([
            "run",
            "--no-cache",
            "--control",
            "off",
            "--max-module-size",
            "1KiB",
        ])
        .arg(manifest(dir.path(), &text(size)))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("1024 bytes"), "{err}");
}

/// `max_buffered` and `max_buffered_per_connection` below what one
/// request of the largest route may hold are refused, saying why.
#[test]
fn http_buffer_budgets_must_hold_one_request() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[[http]]\nlisten = '127.0.0.1:0'\nmax_buffered_per_connection = '1MiB'\n\
         [[http.route]]\npath = '/'\nmodule = '{}'\nmax_response = '4MiB'\n",
        guests::WAGI
    );
    let out = run_system(dir.path(), &text);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_buffered_per_connection") && err.contains("largest route"),
        "{err}"
    );
}

/// `[runtime] memory_limit` (and `--runtime-memory-limit`, which
/// overrides it): a task with no limit of its own is refused past the
/// root, as its own limit would refuse it; a bad value is an error
/// before anything runs.
#[test]
fn runtime_memory_limit_bounds_tasks_without_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    // The task grows its memory by 64 MiB, a page at a time.
    let text = |root: &str| {
        format!(
            "[runtime]\nmemory_limit = \"{root}\"\n[[task]]\nname = 'm'\nmodule = '{}'\nargs = ['grow-touch', '64']\n",
            guests::HOSTILE
        )
    };
    let said = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let out = run_system(dir.path(), &text("1GiB"));
    assert!(said(&out).contains("1024 pages, all"), "{}", said(&out));
    let out = run_system(dir.path(), &text("32MiB"));
    assert!(said(&out).contains("then refused"), "{}", said(&out));
    let flag = |value: &str| {
        warden()
            .args(["run", "--control", "off", "--runtime-memory-limit", value])
            .arg(manifest(dir.path(), &text("1GiB")))
            .output()
            .unwrap()
    };
    let out = flag("32MiB");
    assert!(said(&out).contains("then refused"), "{}", said(&out));
    let out = flag("lots");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = run_system(dir.path(), &text("0"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("runtime.memory_limit"),
        "{err}"
    );
}

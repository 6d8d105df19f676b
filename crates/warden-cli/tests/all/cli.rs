use crate::util::*;
use serde_json::Value;

fn report_of(args: &[&str], dir: &std::path::Path) -> (i32, Vec<Value>, String) {
    let report = dir.join("report.json");
    // `--report` goes right after the subcommand: later words may be
    // arguments for the module.
    let out = warden()
        .arg(args[0])
        .arg("--report")
        .arg(&report)
        .args(&args[1..])
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    (
        out.status.code().unwrap(),
        json.as_array().unwrap().clone(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn single_module_with_limits_and_args() {
    let dir = tempfile::tempdir().unwrap();
    let (code, tasks, stdout) = report_of(
        &[
            "run",
            "--no-cache",
            guests::HELLO,
            "--memory-limit",
            "4MiB",
            "--",
            "a",
            "b",
        ],
        dir.path(),
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("arg 1: a\narg 2: b"), "{stdout}");
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(t["name"], "hello");
    assert_eq!(t["status"], "exited");
    assert_eq!(t["exit_code"], 0);
    assert!(t["reason"].is_null());
    for key in ["cpu_ms", "peak_memory_bytes", "start_ms", "end_ms"] {
        assert!(t[key].is_number(), "{key}: {t}");
    }
    assert_eq!(
        t["memory_limit_bytes"],
        4 << 20,
        "--memory-limit applies: {t}"
    );

    let (code, tasks, _) = report_of(
        &["run", "--no-cache", guests::SPIN, "--cpu-limit", "100ms"],
        dir.path(),
    );
    assert_eq!(code, 137, "killed at its limit");
    assert_eq!(tasks[0]["status"], "killed");
    assert!(tasks[0]["exit_code"].is_null());
}

/// A manifest system: several copies, limits, and the report and exit code.
#[test]
fn manifest_system_report() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\nworkers = 2\nslice_ms = 2\n\
             [[task]]\nname = 'hello'\nmodule = '{}'\ncount = 3\nenv = {{ K = 'v' }}\n\
             [[task]]\nname = 'grow'\nmodule = '{}'\nmemory_limit = '1MiB'\n\
             [[task]]\nname = 'spin'\nmodule = '{}'\ncpu_limit = '50ms'\n",
            guests::HELLO,
            guests::GROW,
            guests::SPIN
        ),
    );
    let (code, tasks, stdout) = report_of(&["run", "--no-cache", m.to_str().unwrap()], dir.path());
    assert_eq!(code, 1, "the spinner was killed");
    let names: Vec<&str> = tasks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["hello.0", "hello.1", "hello.2", "grow", "spin"]);
    assert!(stdout.contains("[hello.1] env: K=v"), "{stdout}");
    assert!(stdout.contains("[grow] 16"), "{stdout}");
    assert_eq!(tasks[3]["peak_memory_bytes"], 1 << 20);
    assert_eq!(tasks[4]["status"], "killed");
    assert!(tasks[4]["reason"].as_str().unwrap().contains("cpu limit"));

    // Without the spinner every task exits 0, and so does warden.
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = 'hello'\nmodule = '{}'\ncount = 2\n",
            guests::HELLO
        ),
    );
    let (code, tasks, _) = report_of(&["run", "--no-cache", m.to_str().unwrap()], dir.path());
    assert_eq!((code, tasks.len()), (0, 2));
}

/// `--events FILE` writes one JSON object per line: spawn, exit, trap,
/// kill and limit events with the task's id and name.
#[test]
fn event_log_records_lifecycle_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = 'hello'\nmodule = '{}'\n\
             [[task]]\nname = 'grow'\nmodule = '{}'\nmemory_limit = '256KiB'\n\
             [[task]]\nname = 'spin'\nmodule = '{}'\ncpu_limit = '50ms'\n\
             [[task]]\nname = 'fault'\nmodule = '{}'\n",
            guests::HELLO,
            guests::GROW,
            guests::SPIN,
            guests::UNREACHABLE
        ),
    );
    let events = dir.path().join("events.jsonl");
    let out = warden()
        .args(["run", "--no-cache", "--control", "off", "--events"])
        .arg(&events)
        .arg(&m)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |event: &str, name: &str| {
        lines
            .iter()
            .find(|e| e["event"] == event && e["name"] == name)
            .unwrap_or_else(|| panic!("no {event} event for {name}: {lines:?}"))
    };
    for name in ["hello", "grow", "spin", "fault"] {
        assert!(find("spawn", name)["id"].is_u64());
    }
    assert_eq!(find("exit", "hello")["code"], 0);
    assert_eq!(find("limit", "grow")["limit"], "memory");
    assert_eq!(find("exit", "grow")["code"], 0);
    assert!(find("kill", "spin")["reason"]
        .as_str()
        .unwrap()
        .contains("cpu limit"));
    assert!(find("trap", "fault")["reason"]
        .as_str()
        .unwrap()
        .contains("unreachable"));
    assert!(lines.iter().all(|e| e["t_ms"].is_number()));
}

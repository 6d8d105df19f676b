//! Components (WASI 0.2) as tasks: command components built by the real
//! toolchains (componentize-py, clang with the preview-1 adapter, two
//! components composed into one) run with a module's flags and limits,
//! through the library and the `warden` command.

use crate::util::{self, guests, warden};
use std::path::Path;
use std::time::Duration;
use warden::{Runtime, RuntimeConfig, TaskSpec, TaskStatus};

const WASM_PAGE: u64 = 64 << 10;

/// The compiled-code cache the component tests share, so that each
/// component is compiled once (a Python one takes seconds), not once per
/// test.
pub fn cache_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A runtime with the shared cache.
pub fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        workers: 2,
        cache_dir: Some(cache_dir()),
        max_tasks: 1100,
        raise_descriptor_limit: true,
        ..RuntimeConfig::default()
    })
    .expect("runtime starts")
}

/// A component guest's path (failing the test if it was not built).
pub fn component(path: &'static str) -> &'static str {
    guests::built(path)
}

/// `warden run ARGS` with the shared cache: (exit status, stdout, stderr).
fn run(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = warden()
        .arg("run")
        .args(args)
        .env("WARDEN_CACHE_DIR", cache_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn a_python_command_gets_its_arguments_environment_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "from the host").unwrap();
    let mapped = format!("{}::/data", dir.path().display());
    let py = component(guests::PY_COMMAND);
    let (code, out, err) = run(
        &["--dir", &mapped, "--env", "GREETING=hi", py, "hello", "a b"],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("hello from python ['hello', 'a b'] hi"),
        "{out}"
    );
    assert!(out.contains("copied 13 characters"), "{out}");
    let copied = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    assert_eq!(copied, "FROM THE HOST");
    // Without the directory, the program sees none.
    let (code, out, _) = run(&[py, "hello"], None);
    assert_eq!(code, 0);
    assert!(out.contains("no input: No such file or directory"), "{out}");
}

#[test]
fn a_c_component_runs_as_its_module_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "contents").unwrap();
    let mapped = format!("{}::/d", dir.path().display());
    let program = component(guests::PROGRAM_COMPONENT);
    let args = [
        "--dir",
        &mapped,
        "--env",
        "NAME=value",
        program,
        "read",
        "/d/f.txt",
        "NAME",
    ];
    let (code, out, err) = run(&args, None);
    assert_eq!(
        (code, out.as_str()),
        (0, "/d/f.txt: contents\nNAME=value\n"),
        "{err}"
    );
    // An exit code other than 0 is wasi:cli/exit's `err`: status 1, as
    // `wasmtime run` reports it.
    let (code, _, _) = run(&[program, "exit", "7"], None);
    assert_eq!(code, 1);
    let (code, out, _) = run(
        &[
            "--stdin",
            "inherit",
            component(guests::STDIN_COUNT_COMPONENT),
        ],
        Some(&[7u8; 100_000]),
    );
    assert_eq!((code, out.as_str()), (0, "read 100000 bytes\n"));
}

/// Runs the two-memory component with `args` and `limit`: its report.
fn grow(rt: &Runtime, dir: &Path, args: &[&str], limit: Option<u64>) -> warden::TaskReport {
    let mut spec = util::spec(dir, "grow", component(guests::GROW_COMPOSED));
    spec.args = args.iter().map(|a| a.to_string()).collect();
    spec.limits.memory_limit = limit;
    util::run_one(rt, &spec, Duration::from_secs(60))
}

#[test]
fn the_memory_limit_covers_every_memory_of_a_component_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    // What the component holds before it grows either memory.
    let base = grow(&rt, dir.path(), &["0", "0"], None);
    assert!(base.succeeded(), "{base:?}");
    let at_start = base.peak_memory_bytes;
    let grown = grow(&rt, dir.path(), &["3", "5"], None);
    assert_eq!(grown.peak_memory_bytes, at_start + 8 * WASM_PAGE);
    // Room for ten pages more, in whichever memory asks.
    let limit = at_start + 10 * WASM_PAGE;
    let r = grow(&rt, dir.path(), &["6", "6"], Some(limit));
    assert!(r.succeeded(), "{r:?}");
    assert_eq!(
        util::stdout_of(dir.path(), "grow"),
        "own 6 of 6 pages, library 4 of 6 pages\n"
    );
    assert_eq!(r.peak_memory_bytes, limit);
}

#[test]
fn a_python_component_is_held_to_its_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let limit = 48 << 20;
    let mut spec = util::spec(dir.path(), "alloc", component(guests::PY_COMMAND));
    spec.args = vec!["alloc".into()];
    spec.limits.memory_limit = Some(limit);
    let r = util::run_one(&rt, &spec, Duration::from_secs(60));
    // Denied growth is a MemoryError the program catches.
    assert!(r.succeeded(), "{r:?}");
    let out = util::stdout_of(dir.path(), "alloc");
    let blocks: u64 = out
        .strip_prefix("allocated ")
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(blocks >= 20 && blocks < 48, "{out}");
    assert!(r.peak_memory_bytes <= limit, "{r:?}");
    // Under the kill policy the first refused growth ends it.
    spec.limits.on_memory_limit = warden::MemoryPolicy::Kill;
    let r = util::run_one(&rt, &spec, Duration::from_secs(60));
    match &r.ending() {
        TaskStatus::Killed(why) => assert!(why.contains("memory limit exceeded"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A limit below what it needs at instantiation: it cannot start.
    spec.limits.memory_limit = Some(4 << 20);
    spec.limits.on_memory_limit = warden::MemoryPolicy::Deny;
    let r = util::run_one(&rt, &spec, Duration::from_secs(60));
    match &r.ending() {
        TaskStatus::Trapped(why) => assert!(why.starts_with("cannot start"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_spinning_component_is_held_to_its_cpu_limit_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let mut spec = util::spec(dir.path(), "spin", component(guests::PY_COMMAND));
    spec.args = vec!["spin".into()];
    spec.limits.cpu_limit = Some(Duration::from_millis(300));
    let r = util::run_one(&rt, &spec, Duration::from_secs(60));
    match &r.ending() {
        TaskStatus::Killed(why) => assert!(why.contains("cpu limit"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(r.cpu_ms >= 300.0 && r.cpu_ms < 600.0, "{r:?}");
    // Without a limit, an operator's kill ends it, wherever it is.
    spec.limits.cpu_limit = None;
    let id = rt.spawn(&spec).unwrap();
    util::wait_ran(&rt, id, 50.0);
    rt.suspend(id).unwrap();
    rt.resume(id).unwrap();
    rt.kill(id, "by the test").unwrap();
    let r = util::wait(&rt, id, Duration::from_secs(20));
    assert_eq!(r.ending(), TaskStatus::Killed("by the test".into()));
}

#[test]
fn what_a_component_cannot_be_given_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    // A component importing an interface Warden does not provide.
    let file = dir.path().join("keyvalue.wasm");
    let wat = r#"(component
        (import "wasi:keyvalue/store@0.2.0-draft" (instance))
        (core module $m (func (export "run") (result i32) i32.const 0))
        (core instance $i (instantiate $m))
        (func $run (result (result)) (canon lift (core func $i "run")))
        (instance $cli (export "run" (func $run)))
        (export "wasi:cli/run@0.2.0" (instance $cli)))"#;
    std::fs::write(&file, wat::parse_str(wat).unwrap()).unwrap();
    // It loads (a task's `binds` may name a service serving it), and a
    // task that binds nothing to it is refused at its start, naming it.
    let spec = util::spec(dir.path(), "kv", file.to_str().unwrap());
    let r = util::run_one(&rt, &spec, Duration::from_secs(60));
    assert_eq!(
        r.reason.as_deref().unwrap_or(""),
        "cannot start: imports `wasi:keyvalue/store@0.2.0-draft`, which no `binds` entry names \
         (Warden provides the 0.2 versions of wasi:cli, wasi:clocks, wasi:filesystem, wasi:io, \
         wasi:random, wasi:sockets, wasi:http and warden:kernel 0.1 itself)",
        "{r:?}"
    );
    // A core module importing WASI 0.2 interfaces.
    let core = dir.path().join("core.wasm");
    let wat = r#"(module (import "wasi:cli/stdout@0.2.0" "get-stdout" (func (result i32)))
        (func (export "_start")))"#;
    std::fs::write(&core, wat::parse_str(wat).unwrap()).unwrap();
    let e = rt.load_module(&core).err().unwrap().to_string();
    assert!(e.contains("WASI 0.2 interfaces are for components"), "{e}");
    // A truncated component.
    let bytes = std::fs::read(component(guests::PROGRAM_COMPONENT)).unwrap();
    let cut = dir.path().join("cut.wasm");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = rt.load_module(&cut).err().unwrap().to_string();
    assert!(e.contains("invalid component"), "{e}");
    // An HTTP component run as a task with no name to serve under (with
    // one, it is a component servlet), and a command as a route's.
    let spec = util::spec(dir.path(), "http", component(guests::PY_HTTP));
    let e = rt.spawn(&spec).err().unwrap();
    assert!(
        e.to_string().contains("serve it with `warden serve`"),
        "{e}"
    );
    let e = rt
        .load_http_component(Path::new(component(guests::PY_COMMAND)))
        .err()
        .unwrap();
    assert!(e.to_string().contains("run it as a task"), "{e}");
    // A component cannot be given an open listener (it listens itself).
    let mut spec = TaskSpec::new("listener", component(guests::PROGRAM_COMPONENT));
    spec.net.preopen_listeners = vec!["127.0.0.1:0".into()];
    let e = rt.spawn(&spec).err().unwrap().to_string();
    assert!(
        e.contains("a component cannot be given open listeners"),
        "{e}"
    );
    // The same through the command: one line, exit status 2.
    let (code, _, err) = run(&[component(guests::PY_HTTP)], None);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
}

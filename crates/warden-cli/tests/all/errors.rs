use crate::util::*;

fn run_err(args: &[&str]) -> String {
    let out = warden().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn not_wasm_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.wasm");
    std::fs::write(&p, "just text").unwrap();
    let err = run_err(&["run", p.to_str().unwrap()]);
    assert!(
        err.contains("notes.wasm") && err.contains("not a WebAssembly module"),
        "{err}"
    );
    let p = dir.path().join("broken.wasm");
    std::fs::write(&p, b"\0asm\x01\0\0\0\x01\xff").unwrap();
    let err = run_err(&["run", p.to_str().unwrap()]);
    assert!(
        err.contains("broken.wasm") && err.contains("invalid module"),
        "{err}"
    );
}

#[test]
fn unknown_import_is_refused_naming_the_import() {
    let err = run_err(&["run", guests::BAD_IMPORT]);
    assert!(err.contains("bad_import.wasm"), "{err}");
    assert!(err.contains("env::launch_missiles"), "{err}");
}

/// TeaVM's clock import loads; its threads import is refused with the
/// reason and what to use instead.
#[test]
fn teavm_imports_load_or_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let module = |name: &str, import: &str, ty: &str| {
        let path = dir.path().join(format!("{name}.wat"));
        std::fs::write(
            &path,
            format!(
                "(module (import \"teavm\" \"{import}\" (func {ty}))\n\
                 (memory (export \"memory\") 1) (func (export \"_start\")))"
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let clock = module("clock", "nanoTime", "(result f64)");
    let out = warden().args(["run", &clock]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = run_err(&["run", &module("threads", "teavm_interrupt", "")]);
    assert!(
        err.contains("teavm::teavm_interrupt") && err.contains("warden.Task.sleep"),
        "{err}"
    );
}

#[test]
fn module_without_start_is_refused() {
    let err = run_err(&["run", guests::NO_START]);
    assert!(
        err.contains("no_start.wasm") && err.contains("_start"),
        "{err}"
    );
}

#[test]
fn missing_module_is_refused() {
    let err = run_err(&["run", "/nonexistent/x.wasm"]);
    assert!(err.contains("/nonexistent/x.wasm"), "{err}");
}

#[test]
fn bad_manifests_are_refused_naming_the_key_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            format!(
                "[[task]]\nname='a'\nmodule='{}'\nmemory_limt='1MiB'\n",
                guests::HELLO
            ),
            "memory_limt",
        ),
        (
            format!(
                "[[task]]\nname='a'\nmodule='{}'\nmemory_limit='1 lot'\n",
                guests::HELLO
            ),
            "memory_limit",
        ),
        (
            format!(
                "[[task]]\nname='a'\nmodule='{}'\ncpu_limit='fast'\n",
                guests::HELLO
            ),
            "cpu_limit",
        ),
        (
            "[[task]]\nname='a'\nmodule='missing.wasm'\n".to_string(),
            "missing.wasm",
        ),
        (
            format!(
                "[[task]]\nname='a'\nmodule='{0}'\n[[task]]\nname='a'\nmodule='{0}'\n",
                guests::HELLO
            ),
            "duplicate task name",
        ),
        (
            format!("[[task]]\nname='a'\nmodule='{}'\n", guests::BAD_IMPORT),
            "env::launch_missiles",
        ),
        ("[runtime]\nslice_ms = 'x'\n".to_string(), "slice_ms"),
    ];
    for (text, want) in cases {
        let m = manifest(dir.path(), &text);
        let err = run_err(&["run", "--no-cache", m.to_str().unwrap()]);
        assert!(err.contains(want), "want {want:?} in: {err}");
        assert!(
            err.contains("warden.toml") || want.contains("::"),
            "names the manifest: {err}"
        );
    }
}

#[test]
fn module_with_two_memories_is_refused() {
    let err = run_err(&["run", "--no-cache", guests::TWO_MEMORIES]);
    assert!(
        err.contains("two_memories.wasm") && err.contains("memories count of 2"),
        "{err}"
    );
}

/// A `max_tasks` whose task slots cannot fit in the address space, even
/// with the least memory each, is refused at start, with the way out in
/// the message.
#[test]
fn max_tasks_beyond_the_address_space_is_refused() {
    let err = warden::Runtime::new(warden::RuntimeConfig {
        max_tasks: 4_000_000,
        max_map_count: Some(1 << 40),
        cache_dir: None,
        ..Default::default()
    })
    .err()
    .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("address space") && msg.contains("lower max_tasks"),
        "{msg}"
    );
}

/// Modules that cannot be a task: a table over the element limit, and a
/// component (Warden runs core modules).
#[test]
fn oversized_table_and_empty_component_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table.wat");
    std::fs::write(
        &table,
        "(module (table 100001 funcref) (func (export \"_start\")))",
    )
    .unwrap();
    let err = run_err(&["run", table.to_str().unwrap()]);
    assert!(err.contains("table.wat") && err.contains("table"), "{err}");
    // The same module at the limit runs.
    std::fs::write(
        &table,
        "(module (table 100000 funcref) (func (export \"_start\")))",
    )
    .unwrap();
    let out = warden()
        .args(["run", "--control", "off", "--no-cache"])
        .arg(&table)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A component with nothing in it has no wasi:cli/run to call.
    let component = dir.path().join("component.wasm");
    std::fs::write(&component, b"\0asm\x0d\0\x01\0").unwrap();
    let err = run_err(&["run", component.to_str().unwrap()]);
    assert!(err.contains("no `wasi:cli/run@0.2` export"), "{err}");
}

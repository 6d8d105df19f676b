//! What a new user gets wrong, and what Warden says: every problem of a
//! manifest at once, the nearest key for a misspelt one, Warden's way to
//! do what a `wasmtime run` flag does, limits that could never work
//! refused before anything runs.

use crate::util::*;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Problems of every kind — syntax aside — in one run, in line order: a
/// misspelt key (with the key meant), a value of the wrong type, an entry
/// missing a required key (the entries after it still named as
/// written), two bad values in one entry, a duplicate name, and a memory
/// limit below what the module starts with.
#[test]
fn check_reports_problems_of_every_kind_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let hello = guests::HELLO;
    let m = manifest(
        dir.path(),
        &format!(
            "[[task]]\nname = 'a'\nmodule = '{hello}'\nmemory_limt = '1MiB'\n\
             [[task]]\nname = 'b'\nmodule = '{hello}'\ncount = 'two'\n\
             [[task]]\nname = 'nomodule'\n\
             [[task]]\nname = 'd'\nmodule = '{hello}'\ncpu_limit = '0s'\nmemory_limit = 'lots'\n\
             [[task]]\nname = 'a'\nmodule = '{hello}'\n\
             [[task]]\nname = 'f'\nmodule = '{hello}'\nmemory_limit = '64KiB'\n\
             [runtime]\nworkrs = 2\n\
             [[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/x'\nmodule = '{hello}'\n\
             memory_limit = '100KiB'\n"
        ),
    );
    let out = warden().args(["check"]).arg(&m).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let want = [
        "line 4, column 1 (`memory_limt = '1MiB'`): unknown key `memory_limt` (did you mean `memory_limit`?)",
        "line 8, column 9 (`count = 'two'`): invalid type",
        "line 9, column 1 (`[[task]]`): missing key `module`",
        "line 14: task[3] (\"d\"): cpu_limit: bad duration \"0s\": must be more than zero",
        "line 15: task[3] (\"d\"): memory_limit: bad size \"lots\"",
        "line 16: task[4] (\"a\"): duplicate task name \"a\"",
        "line 24, column 1 (`workrs = 2`): unknown key `workrs` (did you mean `workers`?)",
        "line 22: task \"f\": memory limit 64.0 KiB is below the 128.0 KiB of memory",
        "line 30: route \"/x\": memory limit 100.0 KiB is below the 128.0 KiB of memory",
    ];
    let mut from = 0;
    for w in want {
        let at = err[from..].find(w).map(|i| from + i);
        assert!(at.is_some(), "want {w:?} after byte {from} in\n{err}");
        from = at.unwrap();
    }
    assert_eq!(err.lines().count(), want.len(), "{err}");
}

/// `warden check prog.wasm` compiles the program; a file that is neither
/// text nor WebAssembly is named as such.
#[test]
fn check_takes_a_program_too() {
    let out = warden().args(["check", guests::HELLO]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ok: compiled"));
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, [0xff, 0xfe, 0x00, 0x61, 0x80]).unwrap();
    let out = warden().arg("check").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("neither a manifest (TOML text) nor a WebAssembly module"),
        "{err}"
    );
}

/// `wasmtime run` habits get Warden's equivalent, before or after the
/// module.
#[test]
fn wasmtime_flags_point_to_wardens() {
    for (words, want) in [
        (
            &["-W", "max-memory-size=1000000"][..],
            "`--memory-limit SIZE`",
        ),
        (&["-Wfuel=1000"][..], "`--cpu-limit DURATION`"),
        (&["-S", "inherit-network"][..], "`--allow-connect GRANT`"),
        (&["--mapdir", "/a::/tmp"][..], "`--dir HOST::GUEST`"),
    ] {
        let out = warden()
            .arg("run")
            .args(words)
            .arg(guests::HELLO)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{words:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(want) && err.contains("doc/running.md"),
            "{words:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // After the module it is the program's, as with wasmtime; a note
    // says what Warden's flag would be.
    let out = warden()
        .args(["run", guests::HELLO, "-S", "tcp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(
        err.contains("goes to the program") && err.contains("--allow-connect"),
        "{err}"
    );
}

/// Limits that could never work are refused with status 2 before the
/// program runs: a zero CPU limit (not "unlimited"), a memory limit below
/// what the module starts with (not a trap at start, status 134).
#[test]
fn impossible_limits_are_refused_before_running() {
    for flags in [
        &["--cpu-limit", "0s"][..],
        &["--cpu-limit", "0ms"],
        &["--memory-limit", "64KiB"],
    ] {
        let out = warden()
            .arg("run")
            .args(flags)
            .arg(guests::HELLO)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            !text(&out.stdout).contains("hello"),
            "{flags:?} ran the program"
        );
        assert!(
            err.contains("more than zero") || err.contains("below the 128.0 KiB of memory"),
            "{err}"
        );
    }
    let out = warden()
        .args(["run", "--memory-limit", "129KiB", guests::HELLO])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A long compilation says so after a second, and Ctrl-C ends it at once
/// (status 130) rather than after the compiler is done.
#[test]
fn ctrl_c_stops_a_long_compilation() {
    use std::io::BufRead;
    let started = std::time::Instant::now();
    let mut child = Reaped(
        warden()
            .args(["serve", "--no-cache", "--addr", "127.0.0.1:0"])
            .arg(crate::components::component(guests::PY_HTTP))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut lines = lines.map_while(Result::ok);
    let said = lines.find(|l| l.starts_with("warden: compiling"));
    assert_eq!(
        said.as_deref(),
        Some("warden: compiling 1 module (Ctrl-C stops)")
    );
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    let interrupted = std::time::Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_child(
        &mut child,
        std::time::Duration::from_secs(60),
        "still compiling",
    );
    let rest: Vec<String> = lines.collect();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("interrupted while starting")),
        "{rest:?}"
    );
    // A Python component compiles for many seconds on this kind of
    // machine; the interrupted run ends long before that.
    assert!(
        interrupted.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        interrupted.elapsed()
    );
}

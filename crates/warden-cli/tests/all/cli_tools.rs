//! `warden compile`, `warden check`, shell completions and man pages.

use crate::util::*;
use std::path::Path;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn cwasm_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "cwasm")
        })
        .count()
    })
}

#[test]
fn compile_fills_the_cache_and_writes_precompiled_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let with_cache = |args: &[&str], cache: &Path| {
        warden()
            .env("WARDEN_CACHE_DIR", cache)
            .args(args)
            .output()
            .unwrap()
    };
    let out = with_cache(&["compile", guests::HELLO], &cache);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(cwasm_entries(&cache), 1, "compiled into the cache");
    // The run finds it there: no second entry.
    let out = with_cache(&["run", "--control", "off", guests::HELLO], &cache);
    assert!(out.status.success());
    assert_eq!(cwasm_entries(&cache), 1);

    let cwasm = dir.path().join("hello.cwasm");
    let cw = cwasm.to_str().unwrap();
    let out = with_cache(&["compile", guests::HELLO, "-o", cw], &cache);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = with_cache(&["run", "--control", "off", cw, "x"], &cache);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("hello from hello.cwasm\narg 1: x"));

    // Native code Warden did not write here is refused, unless trusted.
    let elsewhere = dir.path().join("other-cache");
    let out = with_cache(&["run", "--control", "off", cw], &elsewhere);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--allow-precompiled"),
        "{}",
        text(&out.stderr)
    );
    let out = with_cache(
        &["run", "--control", "off", "--allow-precompiled", cw],
        &elsewhere,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let out = with_cache(&["compile", guests::HELLO, guests::SPIN, "-o", cw], &cache);
    assert_eq!(out.status.code(), Some(2), "-o takes one module");
}

#[test]
fn check_names_the_line_of_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.wasm"), "not wasm").unwrap();
    let check = |text: &str| {
        let m = manifest(dir.path(), text);
        let out = warden().args(["check"]).arg(&m).output().unwrap();
        (out.status.code().unwrap(), text_of(&out))
    };
    fn text_of(o: &std::process::Output) -> String {
        format!("{}{}", text(&o.stdout), text(&o.stderr))
    }
    let good = format!(
        "[[task]]\nname = 'a'\nmodule = '{}'\ncount = 2\nprovides = ['kv']\nmodules = {{ c = '{}' }}\n\
         [[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/kv/*'\nservice = 'kv'\n\
         [[http.route]]\npath = '/x'\nmodule = '{}'\n",
        guests::HELLO,
        guests::SPIN,
        guests::WAGI
    );
    let (code, out) = check(&good);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("ok: 2 tasks, 1 servers with 2 routes, 3 modules compiled"),
        "{out}"
    );

    let hello = guests::HELLO;
    let cases = [
        (
            format!("[[task]]\nname = 'a'\nmodule = '{hello}'\n\n[[task]]\nname = 'b'\nmodule = '{hello}'\nmemory_limit = 'lots'\n"),
            "line 8: task[1] (\"b\"): memory_limit: bad size",
        ),
        (
            format!("[[task]]\nname = 'a'\nmodule = '{hello}'\n[[task]]\nname = 'b'\nmodule = 'bad.wasm'\n"),
            "line 6: ",
        ),
        (format!("[[task]]\nname = 'a'\nmodul = '{hello}'\n"), "line 3, column 1"),
        (
            format!("[[task]]\nname = 'a'\nmodule = '{hello}'\n[[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/x'\nmodule = '{hello}'\ntimeout = '0s'\n"),
            "line 9: http[0] (\"127.0.0.1:0\"): route[0] (\"/x\"): timeout",
        ),
    ];
    for (text, want) in &cases {
        let (code, out) = check(text);
        assert_eq!(code, 1, "{text}: {out}");
        assert!(out.contains(want), "{text}: want {want:?} in {out}");
    }
    // A service route no task serves is a warning, not a failure.
    let (code, out) = check(&format!(
        "[[task]]\nname = 'a'\nmodule = '{hello}'\n[[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/kv/*'\nservice = 'kv'\n"
    ));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning: route \"/kv/*\" calls service \"kv\", which no task provides"),
        "{out}"
    );
}

/// `warden check` reports every problem of a manifest in one run: each
/// bad key and entry on its own line, and the modules of the good ones.
#[test]
fn check_reports_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.wasm"), "not wasm").unwrap();
    let hello = guests::HELLO;
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\ncontrol = 'nowhere'\n\
             [[task]]\nname = 'a'\nmodule = '{hello}'\nmemory_limit = 'lots'\n\
             [[task]]\nname = 'b'\nmodule = 'bad.wasm'\n\
             [[task]]\nname = 'c'\nmodule = '{hello}'\ngroup = 'nobody'\n\
             [[http]]\nlisten = '127.0.0.1:0'\n[[http.route]]\npath = '/x'\nmodule = '{hello}'\ntimeout = '0s'\n"
        ),
    );
    let out = warden().args(["check"]).arg(&m).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    for want in [
        "line 2: runtime.control: \"nowhere\"",
        "line 6: task[0] (\"a\"): memory_limit: bad size",
        "line 9: ",
        "line 13: task[2] (\"c\"): group: no [[group]] named \"nobody\"",
        "line 19: http[0] (\"127.0.0.1:0\"): route[0] (\"/x\"): timeout",
    ] {
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    assert_eq!(err.lines().count(), 5, "{err}");
}

/// The commands and `warden run`'s flags, as `--help` lists them.
fn commands_and_run_flags() -> (Vec<String>, Vec<String>) {
    let help = |args: &[&str]| text(&warden().args(args).output().unwrap().stdout);
    let top = help(&["--help"]);
    let commands: Vec<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    let flags: Vec<String> = help(&["run", "--help"])
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches([',', '.', ')']).to_string())
        .filter(|w| {
            w.chars()
                .skip(2)
                .all(|c| c.is_ascii_lowercase() || c == '-')
        })
        .collect();
    assert!(
        commands.len() >= 13 && flags.len() >= 30,
        "{commands:?} {flags:?}"
    );
    (commands, flags)
}

#[test]
fn completions_cover_every_command_and_flag() {
    let (commands, flags) = commands_and_run_flags();
    for shell in ["bash", "zsh", "fish"] {
        let out = warden().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = text(&out.stdout);
        for word in commands.iter().chain(&flags) {
            let bare = word.trim_start_matches('-');
            assert!(script.contains(bare), "{shell} completions lack {word}");
        }
    }
    let bash = warden()
        .args(["completions", "bash"])
        .output()
        .unwrap()
        .stdout;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("warden.bash"), bash).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("source ./warden.bash && complete -p warden")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("_warden"),
        "{}",
        text(&out.stderr)
    );
    let out = warden()
        .args(["completions", "powershell"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_pages_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = warden()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../doc/man");
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let pages = names(dir.path());
    let stale = "doc/man is out of date: run `cargo run -- man --dir doc/man`";
    assert_eq!(pages, names(&committed), "{stale}");
    for page in &pages {
        let fresh = std::fs::read_to_string(dir.path().join(page)).unwrap();
        let old = std::fs::read_to_string(committed.join(page)).unwrap();
        assert!(fresh == old, "{page}: {stale}");
    }
    let run = std::fs::read_to_string(dir.path().join("warden-run.1")).unwrap();
    let (_, flags) = commands_and_run_flags();
    for f in &flags {
        assert!(
            run.contains(&f.replace('-', "\\-")),
            "warden-run.1 lacks {f}"
        );
    }
}

/// `--version` names the version and the source commit; a missing
/// required argument is named in the one-line error.
#[test]
fn version_names_the_commit_and_errors_name_missing_arguments() {
    let out = warden().arg("--version").output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".to_string(), |o| {
            text(&o.stdout).trim().to_string()
        });
    assert_eq!(
        said.trim(),
        format!("warden {} (commit {commit})", env!("CARGO_PKG_VERSION"))
    );
    let out = warden().arg("run").output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("not provided: <TARGET>") && err.lines().count() == 1,
        "{err}"
    );
}

/// `warden cluster key` makes the directory its seeds go to, as
/// doc/clusters.md's example (`--dir keys`) expects, readable by its
/// owner only; each seed file is too.
#[test]
fn cluster_key_makes_its_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys/new");
    let out = warden()
        .args(["cluster", "key", "a", "b", "--dir"])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    assert!(
        lines.len() == 2 && lines[0].starts_with("a = \"N"),
        "{lines:?}"
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&keys), 0o700);
    for node in ["a", "b"] {
        let seed = keys.join(format!("{node}.nk"));
        assert_eq!(mode(&seed), 0o600, "{}", seed.display());
        assert!(std::fs::read_to_string(&seed).unwrap().starts_with("SN"));
    }
}

//! `warden new`: each kind of project, exactly as written, builds with its
//! own `./build` and does what its README says when run with the README's
//! `warden run` line (HTTP projects on a free port instead of 8080).

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `warden new KIND hello` in a fresh directory, then `./build`.
fn create(kind: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("hello");
    let out = warden().args(["new", kind]).arg(&project).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert!(said.contains("./build"), "{said}");
    let built = Command::new(project.join("build")).output().unwrap();
    assert!(built.status.success(), "./build: {}", stderr(&built));
    (dir, project)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The README's `warden run` line (its words after `warden`) and what
/// the README says it prints (parts separated by " … ").
fn readme_says(project: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(project.join("README.md")).unwrap();
    let run = text
        .lines()
        .find_map(|l| l.strip_prefix("warden "))
        .expect("a warden line in the README");
    let words = run.trim_end_matches(" &").split_whitespace();
    let prints = text
        .lines()
        .find_map(|l| l.strip_prefix("# prints: "))
        .expect("what it prints");
    (
        words.map(String::from).collect(),
        prints.split(" … ").map(String::from).collect(),
    )
}

/// Runs a program project's README line to its end; checks its output.
fn runs_as_its_readme_says(kind: &str) {
    let (_dir, project) = create(kind);
    let (words, prints) = readme_says(&project);
    let out = warden()
        .current_dir(&project)
        .args(&words)
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{words:?}: {got}{}", stderr(&out));
    for part in prints {
        assert!(got.contains(&part), "{part:?} missing from {got}");
    }
}

#[test]
fn a_c_program() {
    runs_as_its_readme_says("c");
}

#[test]
fn a_c_service_and_client() {
    runs_as_its_readme_says("service");
}

#[test]
fn a_java_program() {
    runs_as_its_readme_says("java");
}

/// Serves an HTTP project's manifest on port 0 and asks `/hi` of it.
fn serves_as_its_readme_says(kind: &str) {
    let (_dir, project) = create(kind);
    let (words, prints) = readme_says(&project);
    assert_eq!(words, ["run", "warden.toml"]);
    let path = project.join("warden.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("127.0.0.1:8080"), "{text}");
    std::fs::write(&path, text.replace("127.0.0.1:8080", "127.0.0.1:0")).unwrap();
    let served = Launch::new(&path).args(["--no-cache"]).start();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "30"])
        .arg(format!("{}/hi", served.base()))
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    for part in prints {
        assert!(got.contains(&part), "{part:?} missing from {got}");
    }
    drop(served);
}

#[test]
fn a_wagi_handler() {
    serves_as_its_readme_says("wagi");
}

#[test]
fn a_servlet() {
    serves_as_its_readme_says("servlet");
}

/// A bad name, an unknown kind and a directory in use are refused with
/// exit status 2, and nothing is written over.
#[test]
fn bad_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let used = dir.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("main.c"), "mine").unwrap();
    for (args, says) in [
        (vec!["c", "9lives"], "a letter"),
        (vec!["cobol", "x"], "invalid value"),
        (vec!["c", "used"], "not empty"),
    ] {
        let out = warden()
            .current_dir(dir.path())
            .arg("new")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_to_string(used.join("main.c")).unwrap(),
        "mine"
    );
    assert!(!dir.path().join("9lives").exists());
}

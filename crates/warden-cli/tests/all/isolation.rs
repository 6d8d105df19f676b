use crate::util::*;
use std::time::Duration;

/// Two tasks each get their own directory as `/data`: each reads its own
/// file, and neither can reach the other's by any path. (Their
/// environments: [`env_is_not_shared`].)
#[test]
fn tasks_see_only_their_own_directories() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("secret.txt"), "alpha-secret").unwrap();
    std::fs::write(b.join("mine.txt"), "beta-file").unwrap();
    let rt = runtime(2);

    let mut ta = spec(dir.path(), "a", guests::FILES);
    ta.dirs = vec![("/data".into(), a.clone())];
    ta.args = vec![
        "/data/secret.txt".into(),
        "write:/data/out.txt:from-a".into(),
    ];
    let mut tb = spec(dir.path(), "b", guests::FILES);
    tb.dirs = vec![("/data".into(), b.clone())];
    let stolen = format!("{}/secret.txt", a.display());
    tb.args = vec![
        "/data/mine.txt".into(),
        "/data/secret.txt".into(),
        "/data/../a/secret.txt".into(),
        stolen.clone(),
        "/etc/passwd".into(),
    ];
    let ia = rt.spawn(&ta).unwrap();
    let ib = rt.spawn(&tb).unwrap();
    assert_eq!(wait(&rt, ia, Duration::from_secs(20)).exit_code, Some(0));
    assert_eq!(wait(&rt, ib, Duration::from_secs(20)).exit_code, Some(0));

    let out_a = stdout_of(dir.path(), "a");
    assert!(out_a.contains("/data/secret.txt: alpha-secret"), "{out_a}");
    assert_eq!(
        std::fs::read_to_string(a.join("out.txt")).unwrap(),
        "from-a"
    );

    let out_b = stdout_of(dir.path(), "b");
    assert!(out_b.contains("/data/mine.txt: beta-file"), "{out_b}");
    assert!(!out_b.contains("alpha-secret"), "b read a's file: {out_b}");
    for path in [
        "/data/secret.txt",
        "/data/../a/secret.txt",
        stolen.as_str(),
        "/etc/passwd",
    ] {
        assert!(
            out_b.contains(&format!("{path}: error")),
            "{path} readable: {out_b}"
        );
    }
}

/// The variables a task sees, from the hello guest's `env: ` lines.
fn env_of(dir: &std::path::Path, name: &str) -> Vec<String> {
    let out = stdout_of(dir, name);
    assert!(out.contains("hello"), "{name} ran: {out}");
    out.lines()
        .filter_map(|l| l.strip_prefix("env: "))
        .map(String::from)
        .collect()
}

/// Two tasks running at once each see exactly the environment their
/// spec gives, one of them none: neither the other's variables nor the
/// host's (this test process has dozens).
#[test]
fn env_is_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut a = spec(dir.path(), "a", guests::HELLO);
    a.env = vec![
        ("ONLY_A".into(), "1".into()),
        ("TOKEN".into(), "a-only".into()),
    ];
    let b = spec(dir.path(), "b", guests::HELLO);
    let ids = [rt.spawn(&a).unwrap(), rt.spawn(&b).unwrap()];
    for id in ids {
        assert_eq!(wait(&rt, id, Duration::from_secs(20)).exit_code, Some(0));
    }
    assert!(std::env::vars().count() > 2, "the host has an environment");
    assert_eq!(env_of(dir.path(), "a"), ["ONLY_A=1", "TOKEN=a-only"]);
    assert_eq!(env_of(dir.path(), "b"), Vec::<String>::new());
}

/// WASI's `random_get` fills what a task asks for (the guest checks 1 MiB
/// of it, and that two draws differ), and two tasks draw different bytes.
/// A range past the end of the task's memory, or 4 GiB long, traps it.
#[test]
fn random_bytes_fill_and_differ_between_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut draws = Vec::new();
    for name in ["r1", "r2"] {
        let r = run_one(
            &rt,
            &spec(dir.path(), name, guests::RANDOM),
            Duration::from_secs(30),
        );
        let out = stdout_of(dir.path(), name);
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?}\n{out}");
        assert!(out.contains("random ok"), "{out}");
        draws.push(out.lines().next().unwrap_or_default().to_string());
    }
    assert_eq!(draws[0].len(), 32, "{draws:?}");
    assert_ne!(draws[0], draws[1]);
    for arg in ["wild", "huge"] {
        let mut s = spec(dir.path(), arg, guests::RANDOM);
        s.args = vec![arg.into()];
        let r = run_one(&rt, &s, Duration::from_secs(30));
        assert_eq!(r.status, "trapped", "{arg}: {r:?}");
        let reason = r.reason.unwrap_or_default();
        assert!(reason.contains("out of bounds"), "{arg}: {reason}");
    }
}

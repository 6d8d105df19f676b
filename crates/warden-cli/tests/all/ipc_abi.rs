//! The guest ABI: the SDK and the host cannot drift apart, and no
//! argument, however wrong, harms the host or another task.

use crate::util::*;
use std::time::Duration;

/// A guest calling every SDK function imports exactly the host's
/// functions, with the host's signatures, and each behaves.
#[test]
fn guest_importing_every_host_function() {
    // The runtime's engine, not one of the test's own: the first engine a
    // process makes must come after Warden's fault handler (see
    // `warden::Runtime::new`), which a runtime's setup installs.
    let rt = runtime(1);
    let module = wasmtime::Module::from_file(rt.engine(), guests::ABI_ALL).unwrap();
    let mut imported: Vec<(String, String, String)> = module
        .imports()
        .filter(|i| i.module() == "warden")
        .map(|i| {
            let wasmtime::ExternType::Func(f) = i.ty() else {
                panic!("{} is not a function", i.name())
            };
            let params: Vec<String> = f.params().map(|t| t.to_string()).collect();
            let results: Vec<String> = f.results().map(|t| t.to_string()).collect();
            (i.name().to_string(), params.join(" "), results.join(" "))
        })
        .collect();
    imported.sort();
    let mut host: Vec<(String, String, String)> = warden::HOST_FUNCTIONS
        .iter()
        .map(|(n, p, r)| (n.to_string(), p.to_string(), r.to_string()))
        .collect();
    host.sort();
    assert_eq!(imported, host);

    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), "abi", guests::ABI_ALL);
    s.ipc.provides = vec!["abi".into()];
    s.ipc.uses = vec!["abi".into(), "absent".into()];
    let r = run_one(&rt, &s, Duration::from_secs(20));
    assert_eq!(stdout_of(dir.path(), "abi"), "abi: ok\n");
    assert_eq!(r.exit_code, Some(0));
}

/// The header's error codes are the host's.
#[test]
fn header_error_codes_match_the_host() {
    let header =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/c/warden.h"))
            .unwrap();
    let defined: Vec<(String, i32)> = header
        .lines()
        .filter(|l| !l.starts_with("#define WARDEN_EVENT_"))
        .filter_map(|l| l.strip_prefix("#define WARDEN_E"))
        .map(|rest| {
            let mut it = rest.split_whitespace();
            let name = it.next().unwrap().to_lowercase();
            let value: i32 = it
                .next()
                .unwrap()
                .trim_matches(|c| c == '(' || c == ')')
                .parse()
                .unwrap();
            (name, value)
        })
        .collect();
    assert_eq!(defined.len(), warden::Errno::ALL.len());
    for e in warden::Errno::ALL {
        let name = format!("{e:?}").to_lowercase();
        assert!(
            defined.contains(&(name.clone(), e.code())),
            "{name} = {} missing from warden.h",
            e.code()
        );
    }
}

/// Random arguments to every host function, from several tasks at once,
/// next to a healthy client and server: nothing traps or hangs, and the
/// healthy pair is unaffected.
#[test]
fn random_arguments_harm_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(2);
    let mut srv = spec(dir.path(), "srv", guests::ECHO);
    srv.args = vec!["server".into(), "echo".into()];
    srv.ipc.provides = vec!["echo".into()];
    let srv = rt.spawn(&srv).unwrap();
    let fuzzers: Vec<_> = (0..4)
        .map(|seed| {
            let mut f = spec(dir.path(), &format!("fuzz{seed}"), guests::FUZZ);
            f.args = vec![seed.to_string(), "20000".into()];
            f.ipc.provides = vec!["fz*".into()];
            f.ipc.uses = vec!["fz*".into()];
            f.limits.memory_limit = Some(64 << 20);
            rt.spawn(&f).unwrap()
        })
        .collect();
    let mut c = spec(dir.path(), "client", guests::ECHO);
    c.args = vec![
        "client".into(),
        "echo".into(),
        "2000".into(),
        "steady".into(),
    ];
    c.ipc.uses = vec!["echo".into()];
    let c = rt.spawn(&c).unwrap();
    for (seed, id) in fuzzers.into_iter().enumerate() {
        let r = wait(&rt, id, Duration::from_secs(60));
        let out = stdout_of(dir.path(), &format!("fuzz{seed}"));
        assert_eq!((r.status, r.exit_code), ("exited", Some(0)), "{r:?} {out}");
        assert!(out.starts_with("fuzz: 20000 calls"), "{out}");
    }
    assert_eq!(wait(&rt, c, Duration::from_secs(60)).exit_code, Some(0));
    assert_eq!(stdout_of(dir.path(), "client"), "client: ok 2000\n");
    rt.kill(srv, "done").unwrap();
}

//! Manifest reload: `warden reload` and SIGHUP apply a changed manifest
//! to a running system — tasks, supervisors and routes added, removed and
//! changed, a module rebuilt in place upgraded — and a bad manifest
//! changes nothing. Judged by what the routes answer and what `ps` and
//! `/api/routes` show.

use crate::control::{cli, ps};
use crate::http::{get, routes};
use crate::supervision::{live as live_ids, wait_live};
use crate::util::{guests, Launch, Served};
use std::path::Path;
use std::time::{Duration, Instant};

/// A servlet task serving `name` (answering "count N"), and a route
/// `/<name>/*` to it.
fn servlet(name: &str, extra: &str) -> (String, String) {
    let task = format!(
        "[[task]]\nname = \"{name}\"\nmodule = \"{m}\"\nargs = [\"{name}\"]\nprovides = [\"{name}\"]\n{extra}\n",
        m = guests::SERVLET
    );
    let route =
        format!("[[http.route]]\npath = \"/{name}/*\"\nservice = \"{name}\"\ntimeout = \"10s\"\n");
    (task, route)
}

/// A manifest of `tasks`, then one web server with a WAGI route `/page`
/// and `routes`.
fn system(tasks: &[String], routes: &[String], tail: &str) -> String {
    format!(
        "{}\n[[http]]\nlisten = \"127.0.0.1:0\"\n\n[[http.route]]\nname = \"page\"\npath = \"/page\"\nmodule = \"{page}\"\n\n{}\n{tail}",
        tasks.concat(),
        routes.concat(),
        page = guests::PAGE,
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Waits until `path` answers `status`.
fn answers(web: &Served, path: &str, status: u16) -> String {
    let t = Instant::now();
    loop {
        let r = get(web, path);
        if r.status == status {
            return r.body.trim_end().to_string();
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{path}: {} {}",
            r.status,
            r.body
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `warden reload ARGS…`: whether it succeeded, and what it said.
fn reload(web: &Served, args: &[&str]) -> (bool, String) {
    let mut all = vec!["reload"];
    all.extend_from_slice(args);
    let out = cli(web.control(), &all);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// The live task named `name`'s id, if there is one.
fn live(web: &Served, name: &str) -> Option<u64> {
    let all = ps(web.control());
    let ended = ["exited", "trapped", "killed"];
    (all.as_array().unwrap().iter())
        .filter(|t| t["name"] == name && !ended.contains(&t["state"].as_str().unwrap_or("")))
        .filter_map(|t| t["id"].as_u64())
        .max()
}

fn route_paths(web: &Served) -> Vec<String> {
    let all = routes(web);
    let mut paths: Vec<String> = (all.as_array().unwrap().iter())
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths
}

fn start(path: &Path) -> Served {
    let web = Launch::new(path).args(["--no-cache"]).start();
    answers(&web, "/a/x", 200);
    web
}

/// One reload adds a supervised task with its route, removes a task with
/// its route, and upgrades a task whose entry changed; an unchanged route
/// keeps its counters.
#[test]
fn a_reload_adds_removes_and_changes_tasks_and_routes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let (a, ra) = servlet("a", "");
    let (b, rb) = servlet("b", "");
    write(&file, &system(&[a, b], &[ra.clone(), rb], ""));
    let web = start(&file);
    assert_eq!(answers(&web, "/b/x", 200), "count 1");
    assert_eq!(answers(&web, "/a/x", 200), "count 2");
    answers(&web, "/page", 200);
    let (old_a, old_b) = (live(&web, "a").unwrap(), live(&web, "b").unwrap());

    // a changed (a memory limit), b gone, c added under a supervisor.
    let (a2, _) = servlet("a", "memory_limit = \"48MiB\"");
    let (c, rc) = servlet("c", "restart = \"permanent\"");
    let sup = "[[supervisor]]\nname = \"cs\"\nmembers = [\"c\"]\n";
    write(&file, &system(&[a2, c], &[ra, rc], sup));
    let (ok, said) = reload(&web, &[]);
    assert!(ok, "{said}");
    for line in [
        "task \"b\" stopped",
        "supervisor \"cs\" started",
        "task \"a\" upgraded",
        "route \"/c/*\"",
        "route \"/b/*\"",
    ] {
        assert!(said.contains(line), "{line:?} in {said}");
    }
    // a is a new task, handed the old one's count; b has ended; c serves.
    assert_eq!(answers(&web, "/a/x", 200), "count 3");
    assert_ne!(live(&web, "a"), Some(old_a));
    assert_eq!(live(&web, "b"), None, "b ended ({old_b})");
    assert_eq!(answers(&web, "/c/x", 200), "count 1");
    assert_eq!(get(&web, "/b/x").status, 404);
    assert_eq!(route_paths(&web), ["/a/*", "/c/*", "/page"]);
    // The unchanged route kept its counters across the swap.
    let page = routes(&web);
    let page = page
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "/page")
        .unwrap();
    assert_eq!(page["codes"]["200"], 1, "{page:#}");
    // c is supervised: killed, it comes back.
    let c_id = live(&web, "c").unwrap();
    assert!(cli(web.control(), &["kill", &c_id.to_string()])
        .status
        .success());
    let t = Instant::now();
    while live(&web, "c").is_none_or(|id| id == c_id) {
        assert!(t.elapsed() < Duration::from_secs(30), "c was not restarted");
        std::thread::sleep(Duration::from_millis(10));
    }
    answers(&web, "/c/x", 200);
}

/// A manifest with several problems changes nothing: every problem is
/// said, with its line, and the system serves as before.
#[test]
fn a_bad_reload_changes_nothing_and_says_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let (a, ra) = servlet("a", "");
    write(&file, &system(&[a.clone()], &[ra.clone()], ""));
    let web = start(&file);
    let id = live(&web, "a").unwrap();
    let (c, rc) = servlet("c", "memory_limt = \"1MiB\"");
    let missing = "[[task]]\nname = \"d\"\nmodule = \"no-such.wasm\"\n";
    let bad = system(
        &[a, c, missing.into()],
        &[ra, rc],
        "[runtime]\nworkers = 1\n",
    );
    let other = dir.path().join("bad.toml");
    write(&other, &bad);
    let (ok, said) = reload(&web, &[other.to_str().unwrap()]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("memory_limt") && said.contains("line "),
        "{said}"
    );
    assert!(said.contains("changed nothing"), "{said}");
    // The problems of a manifest that parses (the module, [runtime]).
    let (c2, rc2) = servlet("c", "");
    let half = system(
        &[servlet("a", "").0, c2, missing.into()],
        &[rc2],
        "[runtime]\nworkers = 1\n",
    );
    write(&other, &half);
    let (ok, said) = reload(&web, &[other.to_str().unwrap()]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("no-such.wasm") && said.contains("[runtime] changed"),
        "{said}"
    );
    assert_eq!(said.matches("warden: ").count(), 3, "one line each: {said}");
    // Nothing changed: the same task serves, c never started.
    assert_eq!(live(&web, "a"), Some(id));
    assert_eq!(live(&web, "c"), None);
    assert_eq!(route_paths(&web), ["/a/*", "/page"]);
    answers(&web, "/a/x", 200);
}

/// SIGHUP reloads the manifest `warden run` was started with; a module
/// rebuilt at the same path is upgraded.
#[test]
fn sighup_reloads_the_manifest_and_a_rebuilt_module_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let module = dir.path().join("a.wasm");
    std::fs::copy(guests::SERVLET, &module).unwrap();
    // (The page servlet serves argv[1] with pages of argv[2] bytes.)
    let task =
        "[[task]]\nname = \"a\"\nmodule = \"a.wasm\"\nargs = [\"a\", \"5\"]\nprovides = [\"a\"]\n";
    let (_, ra) = servlet("a", "");
    write(&file, &system(&[task.into()], &[ra.clone()], ""));
    let web = start(&file);
    assert_eq!(answers(&web, "/a/x", 200), "count 2");
    // The same manifest, the module rebuilt: a page servlet now.
    std::fs::copy(guests::PAGE_SERVLET, &module).unwrap();
    let (c, rc) = servlet("c", "");
    write(&file, &system(&[task.into(), c], &[ra, rc], ""));
    let pid = web.child.id() as i32;
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    answers(&web, "/c/x", 200);
    let t = Instant::now();
    while get(&web, "/a/x").body.trim_end() != "xxxxx" {
        let said = web.stderr.lock().unwrap().clone();
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "a was not upgraded: {said}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let said = web.stderr.lock().unwrap().clone();
    assert!(said.contains("manifest reloaded (SIGHUP)"), "{said}");
}

/// Reload requests that cannot be right are refused, each with its
/// reason, and change nothing: no token, a relative path, something that
/// is not a manifest file (a device that never ends, a directory), an
/// unknown field.
#[test]
fn hostile_reload_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let (a, ra) = servlet("a", "");
    write(&file, &system(&[a], &[ra], ""));
    let web = start(&file);
    let id = live(&web, "a").unwrap();
    let url = format!("http://{}/api/reload", web.control());
    let post = |body: &str, token: bool| {
        let mut args = vec![
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-d",
            body,
        ];
        let auth = format!("Authorization: Bearer {}", web.token.clone().unwrap());
        if token {
            args.extend(["-H", &auth]);
        }
        let out = std::process::Command::new("curl")
            .args(&args)
            .arg(&url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(post("{}", false), "401");
    assert_eq!(post(r#"{"manifest": "system.toml"}"#, true), "400");
    assert_eq!(post(r#"{"manifest": "/x", "extra": 1}"#, true), "400");
    assert_eq!(post("not json", true), "400");
    // The system checks what the command checks too.
    assert_eq!(post(r#"{"manifest": "/dev/zero"}"#, true), "409");
    assert_eq!(post(r#"{"manifest": "/"}"#, true), "409");
    for path in ["/dev/zero", "/"] {
        let (ok, said) = reload(&web, &[path]);
        assert!(!ok && said.contains("not a manifest"), "{path}: {said}");
    }
    assert_eq!(live(&web, "a"), Some(id));
    answers(&web, "/a/x", 200);
}

/// Supervisors through reloads: one whose members change is started
/// again with its new members (a task moved to a new supervisor restarts
/// there), one whose terms alone change keeps its tasks, a task of the
/// root supervisor untouched keeps running, and a supervisor removed
/// takes its tasks with it for good.
#[test]
fn reloads_reshape_the_supervision_tree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let tasks = ["x", "y", "z"]
        .map(|n| {
            format!(
                "[[task]]\nname = \"{n}\"\nmodule = \"{}\"\nrestart = \"permanent\"\n",
                guests::SLEEP
            )
        })
        .concat();
    let sup = |name: &str, members: &str, extra: &str| {
        format!("[[supervisor]]\nname = \"{name}\"\nmembers = [{members}]\n{extra}\n")
    };
    let head = "[runtime]\ncontrol = \"off\"\ncache = false\n";
    write(
        &file,
        &format!("{head}{tasks}{}", sup("s1", "\"x\", \"y\"", "")),
    );
    let sys =
        warden::System::start(warden::SystemSpec::from_manifest_file(&file).unwrap()).unwrap();
    let rt = sys.runtime().clone();
    let reload = || rt.operate("", warden::Operation::Reload(None));
    let first = wait_live(&rt, "three tasks", |l| l.len() == 3);

    // y leaves s1 for a new s2: s1 starts again with x alone, y under s2.
    let two = format!(
        "{}{}",
        sup("s1", "\"x\"", "max_restarts = 7"),
        sup("s2", "\"y\"", "")
    );
    write(&file, &format!("{head}{tasks}{two}"));
    let said = reload().unwrap();
    assert!(
        said.contains("supervisor \"s1\" removed") && said.contains("supervisor \"s2\" started"),
        "{said}"
    );
    let second = wait_live(&rt, "x and y restarted", |l| {
        l.len() == 3 && l["x"] != first["x"] && l["y"] != first["y"]
    });
    assert_eq!(second["z"], first["z"], "the root's task was not touched");

    // s2's terms alone: its task keeps running.
    let terms = format!(
        "{}{}",
        sup("s1", "\"x\"", "max_restarts = 7"),
        sup("s2", "\"y\"", "backoff = \"1ms\"")
    );
    write(&file, &format!("{head}{tasks}{terms}"));
    let said = reload().unwrap();
    assert!(said.contains("supervisor \"s2\": new terms"), "{said}");
    assert_eq!(live_ids(&rt), second);
    // ... and it restarts y when y is killed.
    rt.kill(second["y"], "test").unwrap();
    wait_live(&rt, "y restarted by s2", |l| {
        l.get("y").is_some_and(|y| *y != second["y"])
    });

    // s2 and y removed: y ends for good.
    let tasks_xz: String = tasks
        .split("[[task]]")
        .filter(|t| !t.contains("\"y\""))
        .collect::<Vec<_>>()
        .join("[[task]]");
    write(
        &file,
        &format!("{head}{tasks_xz}{}", sup("s1", "\"x\"", "max_restarts = 7")),
    );
    let said = reload().unwrap();
    assert!(said.contains("supervisor \"s2\" removed"), "{said}");
    let last = wait_live(&rt, "y gone", |l| !l.contains_key("y"));
    assert_eq!(last["z"], first["z"]);
    assert_eq!(last["x"], second["x"]);
    sys.shutdown(Some("test over"));
}

/// A reload finds each server by the address its `[[http]]` entry names,
/// not by the entries' order: after a reload that swapped the entries, a
/// route added to one lands on that one.
#[test]
fn a_reload_finds_servers_by_their_address() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("system.toml");
    let server = |listen: &str, paths: &[&str]| {
        let routes: String = (paths.iter())
            .map(|p| {
                format!(
                    "[[http.route]]\npath = \"{p}\"\nmodule = \"{}\"\n",
                    guests::PAGE
                )
            })
            .collect();
        format!("[[http]]\nlisten = \"{listen}\"\n{routes}\n")
    };
    let head = "[runtime]\ncontrol = \"off\"\ncache = false\n";
    let (a, b) = ("127.0.0.1:0", "127.0.0.2:0");
    write(
        &file,
        &format!("{head}{}{}", server(a, &["/a"]), server(b, &["/b"])),
    );
    let sys =
        warden::System::start(warden::SystemSpec::from_manifest_file(&file).unwrap()).unwrap();
    let addrs: Vec<String> = sys
        .servers()
        .iter()
        .map(|s| format!("http://{}", s.addr()))
        .collect();
    let reload = || {
        sys.runtime()
            .operate("", warden::Operation::Reload(None))
            .unwrap()
    };
    // The entries swapped (nothing else changes), then a route added.
    write(
        &file,
        &format!("{head}{}{}", server(b, &["/b"]), server(a, &["/a"])),
    );
    assert!(reload().contains("nothing changed"));
    write(
        &file,
        &format!("{head}{}{}", server(b, &["/b", "/b2"]), server(a, &["/a"])),
    );
    let said = reload();
    assert!(
        said.contains("route \"/b2\" on 127.0.0.2:0 added"),
        "{said}"
    );
    let status = |base: &str, path: &str| crate::http::curl(&format!("{base}{path}"), &[]).status;
    assert_eq!(status(&addrs[1], "/b2"), 200);
    assert_eq!(status(&addrs[0], "/b2"), 404);
    assert_eq!(status(&addrs[0], "/a"), 200);
    sys.shutdown(None);
}

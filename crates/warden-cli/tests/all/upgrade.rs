//! Live upgrade: a servlet and a per-request route given new code while
//! wrk keeps 64 connections busy, judged by every status the server
//! answered (its route counters) and wrk's own count; upgrades that
//! cannot work are refused while the old code keeps serving; rollback.

use crate::control::cli;
use crate::http::{counter_site, get, routes, wait_for_servlet};
use crate::util::{guests, manifest, Launch, Served};
use std::process::Command;
use std::time::{Duration, Instant};

/// A system with a servlet `counter` (answering "count N"; given
/// `restart`) behind `/count/*`, and a WAGI route `page` (100 bytes of
/// 'x') at `/page`.
fn site(dir: &std::path::Path, restart: &str) -> Served {
    let text = format!(
        r#"
[[task]]
name = "counter"
module = "{servlet}"
args = ["counter", "5"]
provides = ["counter"]
restart = "{restart}"

[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/count/*"
service = "counter"
timeout = "10s"

[[http.route]]
name = "page"
path = "/page"
module = "{page}"
timeout = "10s"
"#,
        servlet = guests::SERVLET,
        page = guests::PAGE,
    );
    let web = Launch::new(&manifest(dir, &text))
        .args(["--no-cache"])
        .start();
    let t = Instant::now();
    while get(&web, "/count/x").status != 200 {
        assert!(t.elapsed() < Duration::from_secs(30), "no servlet");
    }
    web
}

/// `warden upgrade ARGS…` against `web`: whether it succeeded, and what
/// it said.
fn upgrade(web: &Served, args: &[&str]) -> (bool, String) {
    let mut all = vec!["upgrade"];
    all.extend_from_slice(args);
    let out = cli(web.control(), &all);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// Requests the route at `path` has answered, by status.
fn codes(web: &Served, path: &str) -> serde_json::Value {
    let all = routes(web);
    let r = (all.as_array().unwrap().iter())
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("{all:#}"));
    r["codes"].clone()
}

/// wrk at 64 connections on `url` for `secs` seconds, in a thread; its
/// output.
fn wrk(url: String, secs: u32) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let out = Command::new("wrk")
            .args(["-t2", "-c64", &format!("-d{secs}s"), &url])
            .output()
            .expect("wrk is installed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

/// Waits until the route at `path` has answered `n` requests (the load
/// is flowing).
fn answered(web: &Served, path: &str, n: u64) {
    let t = Instant::now();
    let total = |c: &serde_json::Value| -> u64 {
        c.as_object()
            .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum())
    };
    while total(&codes(web, path)) < n {
        assert!(t.elapsed() < Duration::from_secs(30), "no load on {path}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// wrk on `url` (with `route`, the route's path) for 4 s, and `warden
/// upgrade ARGS` once the route has answered 200 requests: the upgrade
/// succeeds, and no request fails.
fn under_load(web: &Served, (url, route): (&str, &str), args: &[&str]) {
    let load = wrk(format!("{}{url}", web.base()), 4);
    answered(web, route, 200);
    let (ok, said) = upgrade(web, args);
    assert!(ok && said.contains("upgraded"), "{said}");
    let out = load.join().unwrap();
    no_failures(web, route, &out);
}

/// Asserts that wrk saw no failure and the route answered only 200s.
fn no_failures(web: &Served, path: &str, wrk: &str) {
    assert!(wrk.contains("requests in"), "{wrk}");
    assert!(
        !wrk.contains("Non-2xx") && !wrk.contains("Socket errors"),
        "{wrk}"
    );
    let c = codes(web, path);
    let statuses: Vec<&String> = c.as_object().unwrap().keys().collect();
    assert_eq!(statuses, ["200"], "{c}");
}

/// A supervised servlet upgraded while wrk runs: no request fails, the
/// new code answers afterwards, and the old task ended as replaced.
#[test]
fn a_servlet_is_upgraded_under_load_without_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "permanent");
    under_load(
        &web,
        ("/count/x", "/count/*"),
        &["counter", guests::PAGE_SERVLET],
    );
    assert_eq!(get(&web, "/count/x").body, "xxxxx");
    // The supervisor did not take the old task's end for a crash, and
    // the old task ended on its own once its service was retired (its
    // `recv` found it gone), not killed at the end of its drain time.
    let tasks = crate::control::ps(web.control());
    let list = tasks.as_array().unwrap();
    assert!(!list.iter().any(|t| t["restarts"] != 0), "{tasks:#}");
    let t = Instant::now();
    loop {
        let tasks = crate::control::ps(web.control());
        let old = (tasks.as_array().unwrap().iter())
            .filter(|t| t["name"] == "counter")
            .min_by_key(|t| t["id"].as_u64())
            .cloned()
            .unwrap();
        if old["state"] == "exited" {
            break;
        }
        assert!(
            old["state"] != "killed",
            "the old servlet was killed: {old}"
        );
        assert!(t.elapsed() < Duration::from_secs(30), "{old}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A per-request route upgraded while wrk runs: no request fails, and
/// requests after it run the new module.
#[test]
fn a_per_request_route_is_upgraded_under_load_without_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "temporary");
    under_load(&web, ("/page", "/page"), &["page", guests::WAGI]);
    let body = get(&web, "/page?fresh").body;
    assert_eq!(body, "seen 1\n", "not the new module");
}

/// Upgrades that cannot work are refused with the reason, and the old
/// code keeps serving; a good one can be rolled back.
#[test]
fn bad_upgrades_are_refused_and_good_ones_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "temporary");
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let junk = junk.to_str().unwrap();
    for (args, why) in [
        (vec!["counter", junk], "not a WebAssembly module"),
        (
            vec!["counter", guests::UNREACHABLE],
            "ended before it served",
        ),
        (vec!["counter", guests::NOOP], "ended before it served"),
        (
            vec!["nobody", guests::SERVLET],
            "no task or per-request route",
        ),
        (vec!["page", junk], "not a WebAssembly module"),
        (vec!["counter", "--rollback"], "no earlier code"),
    ] {
        let (ok, said) = upgrade(&web, &args);
        assert!(!ok && said.contains(why), "{args:?}: {said}");
        assert_eq!(get(&web, "/count/x").status, 200, "after {args:?}");
        assert!(
            get(&web, "/count/x").body.starts_with("count "),
            "after {args:?}"
        );
        assert_eq!(get(&web, "/page").body.len(), 100, "after {args:?}");
    }
    let (ok, said) = upgrade(&web, &["counter", guests::PAGE_SERVLET]);
    assert!(ok, "{said}");
    assert_eq!(get(&web, "/count/x").body, "xxxxx");
    let (ok, said) = upgrade(&web, &["counter", "--rollback"]);
    assert!(ok, "{said}");
    assert_eq!(get(&web, "/count/x").body, "count 1\n");
}

/// A client that looked the service up before the upgrade keeps calling
/// through the portal it holds: its calls reach the new server (the old
/// service sends them on), none fails, and the old server ends on its
/// own once its service is retired.
#[test]
fn a_portal_held_across_an_upgrade_reaches_the_new_server() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[[task]]
name = "counter"
module = "{servlet}"
args = ["counter", "5"]
provides = ["counter"]

[[task]]
name = "holder"
module = "{holder}"
args = ["counter", "GET /count/x HTTP/1.1", "xxxxx"]
uses = ["counter"]
stdout = "holder.out"
"#,
        servlet = guests::SERVLET,
        holder = guests::HOLDER,
    );
    let web = Launch::new(&manifest(dir.path(), &text))
        .args(["--no-cache"])
        .start();
    let t = Instant::now();
    while !std::fs::read_to_string(dir.path().join("holder.out"))
        .unwrap_or_default()
        .contains("ready\n")
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no holder: {}",
            web.stderr()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (ok, said) = upgrade(&web, &["counter", guests::PAGE_SERVLET]);
    assert!(ok, "{said}");
    let t = Instant::now();
    let out = loop {
        let out = std::fs::read_to_string(dir.path().join("holder.out")).unwrap();
        if out.contains("calls") {
            break out;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{out}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(out.contains(" errors 0"), "{out}");
    let tasks = crate::control::ps(web.control());
    let old = (tasks.as_array().unwrap().iter())
        .find(|t| t["name"] == "counter")
        .unwrap();
    assert_ne!(old["state"], "killed", "{tasks:#}");
}

/// The servlet's count is handed to its new code while wrk runs: no
/// request fails, and none of the requests it counted is lost (the old
/// code took no call after it saved).
#[test]
fn a_servlets_state_is_handed_over_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let web = site(dir.path(), "permanent");
    let next = dir.path().join("servlet-next.wasm");
    std::fs::copy(guests::SERVLET, &next).unwrap();
    under_load(
        &web,
        ("/count/x", "/count/*"),
        &["counter", next.to_str().unwrap()],
    );
    let answered = codes(&web, "/count/*")["200"].as_u64().unwrap();
    let body = get(&web, "/count/x").body;
    assert_eq!(body.trim_end(), format!("count {}", answered + 1));
}

/// A server whose save is hostile — a wild pointer, more than the new
/// task's `max_message_bytes`, a trap — has its upgrade refused with the
/// reason, and serves on with its state.
#[test]
fn hostile_hand_overs_are_refused_and_the_old_code_serves_on() {
    for (mode, why) in [
        ("wild", "wild pointer"),
        ("huge", "max_message_bytes"),
        ("trap", "failed"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let keys = format!("args = [\"counter\", \"{mode}\"]");
        let text = counter_site(guests::BAD_SAVER, &keys, "10s");
        let web = Launch::new(&manifest(dir.path(), &text)).start();
        wait_for_servlet(&web);
        let (ok, said) = upgrade(&web, &["counter", guests::SERVLET]);
        assert!(
            !ok && said.contains("could not hand its state over"),
            "{mode}: {said}"
        );
        assert!(said.contains(why), "{mode}: {said}");
        assert_eq!(get(&web, "/count/x").body.trim_end(), "count 2", "{mode}");
    }
}

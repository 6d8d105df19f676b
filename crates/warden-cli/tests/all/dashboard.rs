//! The web dashboard in headless Chromium: the task tree and the charts
//! must render (a screenshot is saved beside the test binary's files).

use crate::util::*;
use std::time::Duration;

fn chromium() -> std::process::Command {
    let mut c = std::process::Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,1100",
        "--virtual-time-budget=5000",
    ]);
    c
}

/// Waits until the control API's history holds `n` samples of each of the
/// system's two tasks, so that the charts have lines to draw.
fn wait_for_history(addr: &str, n: usize) {
    let t = std::time::Instant::now();
    loop {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                &format!("http://{addr}/api/history"),
            ])
            .output()
            .expect("curl is installed");
        let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let full = h.as_object().map_or(0, |tasks| {
            tasks
                .values()
                .filter(|s| s.as_array().is_some_and(|s| s.len() >= n))
                .count()
        });
        if full >= 2 {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no history: {h}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `<div>` element whose id is `id`, inner elements and all.
fn div_with_id<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    let start = html[..html.find(&format!("id=\"{id}\""))?].rfind("<div")?;
    let mut depth = 0;
    let mut at = start;
    loop {
        let open = html[at..].find("<div").map(|i| at + i);
        let close = at + html[at..].find("</div>")?;
        match open {
            Some(o) if o < close => {
                depth += 1;
                at = o + 4;
            }
            _ => {
                depth -= 1;
                at = close + 6;
                if depth == 0 {
                    return Some(&html[start..at]);
                }
            }
        }
    }
}

#[test]
fn dashboard_shows_tree_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[[group]]\nname = 'tenant'\nbandwidth_share = 2\n\
             [[task]]\nname = 'sleeper'\nmodule = '{}'\n\
             [[task]]\nname = 'busy'\nmodule = '{}'\nargs = ['100000']\nmemory_limit = '4MiB'\n\
             group = 'tenant'\n\
             [[task]]\nname = 'quitter'\nmodule = '{}'\nargs = ['exit', '3']\n",
            guests::SLEEP,
            guests::BUSY_PRINT,
            guests::PROGRAM
        ),
    );
    let sys = Launch::new(&m).args(["--no-cache"]).start();
    let addr = sys.control().to_string();
    wait_for_history(&addr, 2);
    // The root budget as `warden ps` writes it ("… of the root budget's
    // 20.6 GiB charged"): the dashboard must say the same.
    let ps = warden().args(["ps", "--control", &addr]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    let root = ps
        .split_once("of the root budget's ")
        .and_then(|(_, r)| r.split_once(" charged"))
        .map(|(size, _)| size.to_string())
        .unwrap_or_else(|| panic!("{ps}"));
    let url = format!("http://{addr}/");
    let profile = dir.path().join("profile");
    let dom = chromium()
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs (apt-get install chromium)");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = chromium()
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output();
    drop(sys);
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("<tr class=\"task"), "no task rows: {html}");
    assert!(
        html.contains(">sleeper<") && html.contains(">busy<"),
        "tree incomplete: {html}"
    );
    assert!(html.contains("class=\"kill\""), "no kill buttons");
    // An ended task keeps its row, with its exit code and its peak.
    let quitter = html.find(">quitter<").expect("the ended task's row");
    let row = &html[quitter
        ..html[quitter..]
            .find("</tr>")
            .map_or(html.len(), |e| quitter + e)];
    assert!(
        row.contains(">exited 3<") && row.contains(">peak "),
        "{row}"
    );
    assert!(
        html.contains("<tr class=\"group\"><td>tenant</td><td>busy</td>"),
        "no group tree: {html}"
    );
    for chart in [
        "chart-cpu",
        "chart-memory",
        "chart-ipc",
        "chart-net_tx",
        "chart-net_rx",
    ] {
        let own = div_with_id(&html, chart).unwrap_or_else(|| panic!("no {chart}: {html}"));
        assert!(own.contains("<canvas"), "{chart} has no canvas: {own}");
    }
    assert!(html.contains("busy: memory"), "no budget tree: {html}");
    // Sizes in the units `warden ps` uses, not bare MiB.
    let busy = html.find(">busy<").expect("busy's row");
    let row = &html[busy..busy + html[busy..].find("</tr>").unwrap()];
    assert!(row.contains("<td>4.0 MiB</td>"), "{row}");
    assert!(html.contains(" of 4.0 MiB (guaranteed 0 B"), "{html}");
    assert!(
        html.contains("root memory budget: ") && html.contains(&format!(" charged of {root}: ")),
        "no root budget line with ps's {root}: {html}"
    );
    assert!(shot.is_file(), "no screenshot");
}

/// The dashboard over HTTPS (the control API's self-signed certificate):
/// a browser that accepts the certificate shows the task tree, and the
/// API answers over HTTP/2.
#[test]
fn the_dashboard_is_served_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\ncontrol_tls = 'self-signed'\n[[task]]\nname = 'sleeper'\nmodule = '{}'\n",
            guests::SLEEP
        ),
    );
    let sys = Launch::new(&m).args(["--no-cache"]).start();
    let addr = sys.control().to_string();
    let url = format!("https://{addr}/");
    let h2 = std::process::Command::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &format!("{url}api/tasks"),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&h2.stdout), "2");
    let profile = dir.path().join("profile");
    let dom = chromium()
        .arg("--ignore-certificate-errors")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs (apt-get install chromium)");
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains(">sleeper<"),
        "no task rows over HTTPS: {html}"
    );
}

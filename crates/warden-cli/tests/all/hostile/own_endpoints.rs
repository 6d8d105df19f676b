//! Tasks against Warden's own endpoints. A task granted `127.0.0.1:*`
//! (as the tcp-echo example is) must not reach the control API or the
//! web server's port, by any spelling of the address; an IPv6 grant must
//! not reach IPv4 through a mapped address; a grant that names the
//! endpoint exactly does reach it. And what tasks wrote is not readable
//! from the control API without its token, even from loopback.

use super::site::*;
use crate::util::{fixed_port, token_of};
use std::time::Duration;

fn prober(name: &str, connect: &str, targets: &[String]) -> String {
    let args: Vec<String> = targets.iter().map(|t| format!("{t:?}")).collect();
    format!(
        r#"
[[task]]
name = "{name}"
module = "{net}"
args = ["reach-when-told", {}]
connect = [{connect}]
listen = ["127.0.0.1:0"]
stdout = "DIR/{name}.out"
memory_limit = "8MiB"
"#,
        args.join(", "),
        net = guests::NET,
    )
}

/// Tells task `name` to go (it listens for the word), then waits for its
/// `n` answers.
fn answers(site: &Site, name: &str, n: usize) -> String {
    site.until("the prober listens", Duration::from_secs(30), || {
        site.out(name).contains("listening ")
    });
    let out = site.out(name);
    let addr = out.lines().next().unwrap().trim_start_matches("listening ");
    let _told = std::net::TcpStream::connect(addr).unwrap();
    site.until("the prober answers", Duration::from_secs(30), || {
        site.out(name).matches("reach ").count() == n
    });
    site.out(name)
}

/// What a task granted every loopback port probes: the control API (on
/// port `cp`) and the web server (`hp`) by several spellings, the first
/// four refused, and a plain listener (`lp`) it may reach.
fn wide_targets(cp: u16, hp: u16, lp: u16) -> [String; 5] {
    [
        format!("127.0.0.1:{cp}"),
        format!("127.0.0.1:{hp}"),
        format!("[::ffff:127.0.0.1]:{hp}"),
        format!("0.0.0.0:{cp}"),
        format!("127.0.0.1:{lp}"),
    ]
}

#[test]
fn task_grants_do_not_reach_wardens_own_endpoints() {
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let lp = plain.local_addr().unwrap().port();
    // The tasks' grants and arguments name Warden's own ports, which must
    // be known before it binds them.
    let (cp, hp) = (fixed_port(), fixed_port());
    let wide = wide_targets(cp, hp, lp);
    let text = format!(
        "{}{}{}[[http]]\nlisten = \"127.0.0.1:{hp}\"\n{}",
        prober("wide", "\"127.0.0.1:*\", \"0.0.0.0:*\", \"*:*\"", &wide),
        prober(
            "v6",
            "\"[::]/0:*\"",
            &[format!("[::ffff:127.0.0.1]:{lp}"), format!("[::1]:{lp}")]
        ),
        prober(
            "named",
            &format!("\"127.0.0.1:{cp}\""),
            &[format!("127.0.0.1:{cp}")]
        ),
        bystander_route(),
    );
    let site = Site::start_with(&text, |launch| launch.control(&format!("127.0.0.1:{cp}")));
    let out = answers(&site, "wide", wide.len());
    for denied in &wide[..4] {
        assert!(
            out.contains(&format!("reach {denied}: denied")),
            "{denied}: {out}"
        );
    }
    assert!(out.contains(&format!("reach 127.0.0.1:{lp}: ok")), "{out}");
    let out = answers(&site, "v6", 2);
    assert!(
        out.contains(&format!("reach [::ffff:127.0.0.1]:{lp}: denied")),
        "{out}"
    );
    let out = answers(&site, "named", 1);
    assert!(out.contains(&format!("reach 127.0.0.1:{cp}: ok")), "{out}");
    // Task output needs the token, even on loopback.
    let logs = "/api/tasks/wide/logs";
    let (status, body) = http1(site.control(), "GET", logs, &[], b"");
    assert_eq!(status, 401, "{body}");
    let auth = format!("Bearer {}", token_of(site.control()));
    let (status, body) = http1(
        site.control(),
        "GET",
        logs,
        &[("Authorization", &auth)],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    site.bystander_answers();
}

/// The same for a component's `wasi:sockets`: a Python component granted
/// every loopback port, spawned into a running system, reaches neither
/// the control API nor the web server by any spelling, while a port of
/// its own grant and an endpoint its grant names exactly are reached.
#[test]
fn a_component_s_grants_do_not_reach_wardens_own_endpoints() {
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let lp = plain.local_addr().unwrap().port();
    let (cp, hp) = (fixed_port(), fixed_port());
    let text = format!(
        "[[http]]\nlisten = \"127.0.0.1:{hp}\"\n{}",
        bystander_route()
    );
    let site = Site::start_with(&text, |launch| launch.control(&format!("127.0.0.1:{cp}")));
    let wide = wide_targets(cp, hp, lp);
    let py = guests::built(guests::PY_COMMAND);
    let spawn = |name: &str, grants: &[String], targets: &[String]| {
        let mut cmd = crate::util::warden();
        cmd.args(["spawn", "--control", site.control(), "--name", name]);
        for g in grants {
            cmd.args(["--allow-connect", g]);
        }
        let out = cmd
            .arg(py)
            .arg("--")
            .arg("reach")
            .args(targets)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let grants = ["127.0.0.1:*", "0.0.0.0:*", "*:*", "[::]/0:*"].map(String::from);
    spawn("wide", &grants, &wide);
    spawn(
        "named",
        &[format!("127.0.0.1:{cp}")],
        &[format!("127.0.0.1:{cp}")],
    );
    let auth = format!("Bearer {}", token_of(site.control()));
    let logs = |name: &str, n: usize| {
        let path = format!("/api/tasks/{name}/logs");
        let mut body = String::new();
        site.until("the component answers", Duration::from_secs(60), || {
            let (_, b) = http1(
                site.control(),
                "GET",
                &path,
                &[("Authorization", &auth)],
                b"",
            );
            body = b;
            body.matches("reach ").count() == n
        });
        body
    };
    let out = logs("wide", wide.len());
    for denied in &wide[..2] {
        assert!(
            out.contains(&format!("reach {denied}: EACCES")),
            "{denied}: {out}"
        );
    }
    // WASI refuses an IPv4-mapped address on an IPv6 socket and the
    // unspecified address as a destination outright.
    for invalid in &wide[2..4] {
        assert!(
            out.contains(&format!("reach {invalid}: EINVAL")),
            "{invalid}: {out}"
        );
    }
    assert!(out.contains(&format!("reach 127.0.0.1:{lp}: ok")), "{out}");
    let out = logs("named", 1);
    assert!(out.contains(&format!("reach 127.0.0.1:{cp}: ok")), "{out}");
    site.bystander_answers();
}

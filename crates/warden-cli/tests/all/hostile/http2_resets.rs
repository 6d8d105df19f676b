//! Requests abandoned while their per-request task works: an HTTP/2
//! client fills a slow route, then resets every stream (RST_STREAM) or
//! closes its connection, again and again. Each request's task must die
//! with its request, and hold its route's slot until it is gone: the
//! route never has more tasks alive than slots, however many requests
//! were abandoned, and none outlives the attack.

use super::site::*;
use std::time::Duration;

/// The slow route's slots.
const SLOTS: usize = 4;

fn slow_site() -> Site {
    Site::start(&format!(
        r#"
[[http]]
listen = "127.0.0.1:0"

[[http.route]]
path = "/slow"
name = "slow"
module = "{wagi}"
memory_limit = "8MiB"
timeout = "120s"
max_concurrent = {SLOTS}
max_queue = 1000

{bystander}
"#,
        wagi = guests::WAGI,
        bystander = bystander_route(),
    ))
}

/// One round: `n` requests for the sleeping handler on one connection,
/// until every slot is taken, then all of them abandoned (`close`: the
/// connection dropped; else each stream reset).
fn round(site: &Site, n: usize, close: bool) {
    let addr = site.addr().to_string();
    with_h2(site.addr(), async move |send| {
        let mut pending = Vec::new();
        for _ in 0..n {
            let mut send = send.clone();
            let req = request(&addr, "GET", "/slow?sleep", Vec::new());
            pending.push(tokio::spawn(async move { send.send_request(req).await }));
        }
        // Readiness: every request arrived, and every slot holds one
        // (the rest wait in the queue).
        site.until("slots taken", Duration::from_secs(60), || {
            site.route_load("slow") == (SLOTS as i64, (n - SLOTS) as i64)
        });
        // Dropping a response future resets its stream; dropping the
        // last handle of the connection closes it.
        for p in &pending {
            p.abort();
        }
        for p in pending {
            let _ = p.await;
        }
        if close {
            drop(send);
        } else {
            // The connection stays open: the resets alone end the tasks.
            site.until(
                "the reset requests' tasks are gone",
                Duration::from_secs(30),
                || site.live("slow#") == 0,
            );
            drop(send);
        }
    });
}

#[test]
fn reset_or_closed_requests_take_their_tasks_with_them() {
    let site = slow_site();
    let mut most = 0;
    for i in 0..6 {
        round(&site, 50, i % 2 == 1);
        let live = site.live("slow#");
        most = most.max(live);
        assert!(
            live <= SLOTS,
            "round {i}: {live} handler tasks alive for a route of {SLOTS} slots"
        );
    }
    site.until(
        "the abandoned requests' tasks are gone",
        Duration::from_secs(30),
        || site.live("slow#") == 0,
    );
    eprintln!("at most {most} handler tasks alive at a time");
    site.bystander_answers();
}

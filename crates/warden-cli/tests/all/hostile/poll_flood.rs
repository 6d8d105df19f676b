//! `poll_oneoff` with half a million subscriptions: refused with EINVAL
//! (past the documented maximum) instead of costing the host a host
//! object per subscription; the next, small call works.

use super::*;

#[test]
fn half_a_million_subscriptions() {
    let flood = task(
        "flood",
        guests::HOSTILE,
        &["poll-flood", "500000"],
        "memory_limit = '64MiB'",
    );
    let run = attack("", &flood);
    run.exited_saying(
        "flood",
        "poll-flood: 500000 subscriptions: errno 28; then 2: errno 0",
    );
}

#[test]
fn the_maximum_is_served() {
    let n = warden::MAX_POLL_SUBSCRIPTIONS.to_string();
    let poll = task(
        "poll",
        guests::HOSTILE,
        &["poll-flood", &n],
        "memory_limit = '8MiB'",
    );
    let run = attack("", &poll);
    run.exited_saying("poll", &format!("poll-flood: {n} subscriptions: errno 0;"));
}

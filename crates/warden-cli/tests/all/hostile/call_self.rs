//! A task that calls a portal to its own service, which no one could ever
//! serve: refused at once as a deadlock, holding no worker.

use super::*;

#[test]
fn a_call_no_one_will_answer() {
    let caller = task(
        "caller",
        guests::HOSTILE,
        &["call-self"],
        "memory_limit = '4MiB'",
    );
    attack("", &caller).exited_saying("caller", "call-self: would deadlock");
}

//! Typed services across nodes: a component client on one `warden run`
//! node bound to a component server another node exports, through a real
//! `nats-server`: checked at bind there, values copied both ways in the
//! wire encoding, faults as for a local server.

use crate::cluster::{Broker, Node};
use crate::util::guests;
use std::path::Path;

/// The store, exported by its node as "kv".
fn store() -> String {
    format!(
        "[[task]]\nname = \"kv\"\nmodule = {:?}\nserves = [\"warden-test:kv/store\"]\n\
         provides = [\"kv\"]\nexport = [\"kv\"]\n",
        guests::built(guests::KV_SERVER)
    )
}

/// A client task named `name` running `module ARGS`, bound to "kv".
fn client(name: &str, module: &'static str, args: &[&str]) -> String {
    format!(
        "[[task]]\nname = {name:?}\nmodule = {:?}\nargs = {args:?}\nuses = [\"kv\"]\n\
         binds = {{ \"warden-test:kv/store\" = \"kv\" }}\n",
        guests::built(module)
    )
}

/// Node "a" exporting the store (which keeps it going: other nodes may
/// call it), and node "b" running `tasks`.
fn nodes(dir: &Path, broker: &Broker, tasks: &str) -> (Node, Node) {
    let a = Node::start(dir, "a", &broker.url(), &store());
    let b = Node::start(dir, "b", &broker.url(), tasks);
    (a, b)
}

#[test]
fn a_typed_call_crosses_nodes_by_copy() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let (a, mut b) = nodes(
        d.path(),
        &broker,
        &(client("client", guests::KV_CLIENT, &["check"])
            + &client("bytes", guests::KV_CLIENT, &["bytes", "30000"])),
    );
    assert_eq!(b.finish(), 0, "{}{}\nA: {}", b.out(), b.err(), a.err());
    let out = b.out();
    assert!(out.contains("typed checks passed"), "{out}");
    assert!(out.contains("got 30000 bytes, checked"), "{out}");
}

#[test]
fn a_mismatch_across_nodes_is_refused_at_bind_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let (_a, mut b) = nodes(d.path(), &broker, &client("probe", guests::KV_RENAMED, &[]));
    b.finish();
    let err = b.err();
    assert!(
        err.contains(
            "warden-test:kv/store@0.1.0: the server has no function fetch (the client imports \
             func(key: string) -> option<list<u8>>)"
        ),
        "{err}"
    );
    assert!(!b.out().contains("probe called"), "{}", b.out());
}

#[test]
fn a_server_s_trap_on_another_node_fails_the_call_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let (a, mut b) = nodes(
        d.path(),
        &broker,
        &client("client", guests::KV_CLIENT, &["crash"]),
    );
    b.finish();
    let err = b.err();
    assert!(
        err.contains(
            "typed call warden-test:kv/store@0.1.0 (on another node): the server kv trapped"
        ),
        "{err}"
    );
    drop(a);
}

/// A function returning `warden:kernel`'s error gets `peer-died` when
/// its server on another node traps, and the caller goes on; enums and
/// results cross in the wire encoding.
#[test]
fn a_remote_server_s_trap_is_an_error_the_caller_gets() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let careful = format!(
        "[[task]]\nname = \"careful\"\nmodule = {:?}\nserves = [\"warden-test:kv/careful\"]\n\
         provides = [\"careful\"]\nexport = [\"careful\"]\n",
        guests::built(guests::COUNTER_SERVER)
    );
    let _a = Node::start(d.path(), "a", &broker.url(), &careful);
    let client = format!(
        "[[task]]\nname = \"client\"\nmodule = {:?}\nargs = [\"seven\", \"crash\", \"seven\"]\n\
         uses = [\"careful\"]\nbinds = {{ \"warden-test:kv/careful\" = \"careful\" }}\n",
        guests::built(guests::CAREFUL_CLIENT)
    );
    let mut b = Node::start(d.path(), "b", &broker.url(), &client);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert_eq!(
        b.out(),
        "seven: 7\ncrash: error peer-died\nseven: error peer-died\n"
    );
}

/// A typed import bound to a byte service another node exports is
/// refused at bind, whatever the service answers the check with.
#[test]
fn a_byte_service_on_another_node_is_no_typed_service() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start();
    let _a = Node::start(
        d.path(),
        "a",
        &broker.url(),
        &crate::cluster::server("kv", "a"),
    );
    let mut b = Node::start(
        d.path(),
        "b",
        &broker.url(),
        &client("client", guests::KV_CLIENT, &["check"]),
    );
    b.finish();
    let err = b.err();
    assert!(
        err.contains("binds warden-test:kv/store@0.1.0 to \"kv\", which is not a typed service"),
        "{err}"
    );
    assert!(!b.out().contains("typed checks"), "{}", b.out());
}

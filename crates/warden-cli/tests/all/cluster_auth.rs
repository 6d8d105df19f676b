//! Nodes that authenticate to a locked-down `nats-server` (passwords,
//! tokens, nkeys, TLS with client certificates) and never print a
//! secret; and the broker configuration `warden cluster config`
//! generates, which holds each node to its own subjects. The attacker is
//! a raw NATS client ([`crate::cluster::Rogue`]).

use crate::cluster::{client, server, Broker, Node, Rogue};
use crate::util::*;
use std::path::Path;
/// A secret that must appear in no output.
const SECRET: &str = "pw-9f3a-SECRET";

fn conf(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("nats.conf");
    std::fs::write(&p, text).unwrap();
    p
}

/// Writes `text` to `dir/name/file` (a node's directory).
pub(crate) fn put(dir: &Path, node: &str, file: &str, text: &str) {
    std::fs::create_dir_all(dir.join(node)).unwrap();
    std::fs::write(dir.join(node).join(file), text).unwrap();
}

pub(crate) fn no_secret_in(n: &Node, secret: &str) {
    assert!(
        !n.out().contains(secret) && !n.err().contains(secret),
        "{}",
        n.err()
    );
}

/// One line on stderr saying `why`, and exit 2.
pub(crate) fn refused(n: &mut Node, why: &str) {
    assert_eq!(n.finish(), 2, "{}", n.err());
    let err = n.err();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(why), "{err}");
}

#[test]
fn passwords_admit_their_users_and_a_wrong_one_is_one_line_without_it() {
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::with_config(&conf(
        d.path(),
        &format!(
            "authorization {{ users = [ {{user: a, password: \"{SECRET}a\"}}, \
             {{user: b, password: \"{SECRET}b\"}} ] }}\n"
        ),
    ));
    put(d.path(), "a", "pw", &format!("{SECRET}a\n"));
    let keys = "user = 'a'\npassword_file = 'pw'";
    let a = Node::start_with(d.path(), "a", &broker.url(), keys, &server("kv", "a"), &[]);
    let calls = client("calls", &["call", "kv", "20", "hi"], &["kv"]);
    let pass = format!("{SECRET}b");
    let env = [("WARDEN_TEST_PASSWORD", pass.as_str())];
    let keys = "user = 'b'\npassword_env = 'WARDEN_TEST_PASSWORD'";
    let mut b = Node::start_with(d.path(), "b", &broker.url(), keys, &calls, &env);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 20"), "{}", b.out());
    put(d.path(), "c", "pw", &format!("{SECRET}wrong"));
    let keys = "user = 'a'\npassword_file = 'pw'";
    let mut c = Node::start_with(d.path(), "c", &broker.url(), keys, &calls, &[]);
    refused(&mut c, "refused the node's credentials");
    let mut none = Node::start(d.path(), "e", &broker.url(), &calls);
    refused(&mut none, "refused the node's credentials");
    for n in [&a, &b, &c, &none] {
        no_secret_in(n, SECRET);
    }
}

#[test]
fn nkeys_and_tokens_authenticate_nodes() {
    let d = tempfile::tempdir().unwrap();
    let (ka, kb) = (nkeys::KeyPair::new_user(), nkeys::KeyPair::new_user());
    let broker = Broker::with_config(&conf(
        d.path(),
        &format!(
            "authorization {{ users = [ {{nkey: {}}}, {{nkey: {}}} ] }}\n",
            ka.public_key(),
            kb.public_key()
        ),
    ));
    put(d.path(), "a", "a.nk", &ka.seed().unwrap());
    put(d.path(), "b", "b.nk", &kb.seed().unwrap());
    let a = Node::start_with(
        d.path(),
        "a",
        &broker.url(),
        "nkey = 'a.nk'",
        &server("kv", "a"),
        &[],
    );
    let calls = client("calls", &["call", "kv", "20", "hi"], &["kv"]);
    let mut b = Node::start_with(d.path(), "b", &broker.url(), "nkey = 'b.nk'", &calls, &[]);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 20"), "{}", b.out());
    // A key the broker does not know, and a file holding no key.
    let stranger = nkeys::KeyPair::new_user();
    put(d.path(), "c", "c.nk", &stranger.seed().unwrap());
    let mut c = Node::start_with(d.path(), "c", &broker.url(), "nkey = 'c.nk'", &calls, &[]);
    refused(&mut c, "refused the node's credentials");
    put(d.path(), "e", "e.nk", SECRET);
    let mut e = Node::start_with(d.path(), "e", &broker.url(), "nkey = 'e.nk'", &calls, &[]);
    refused(&mut e, "holds no nkey seed");
    no_secret_in(&e, SECRET);
    no_secret_in(&a, &ka.seed().unwrap());

    let d = tempfile::tempdir().unwrap();
    let broker = Broker::with_config(&conf(
        d.path(),
        &format!("authorization {{ token: \"{SECRET}\" }}\n"),
    ));
    let env = [("WARDEN_TEST_TOKEN", SECRET)];
    let keys = "token_env = 'WARDEN_TEST_TOKEN'";
    let _a = Node::start_with(d.path(), "a", &broker.url(), keys, &server("kv", "a"), &env);
    let mut b = Node::start_with(d.path(), "b", &broker.url(), keys, &calls, &env);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    let mut c = Node::start_with(d.path(), "c", &broker.url(), keys, &calls, &[]);
    refused(
        &mut c,
        "cluster.token_env: the environment has no WARDEN_TEST_TOKEN",
    );
}

/// Runs openssl in `dir`.
pub(crate) fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate it signed for `name` with `ext` (an
/// openssl extension line).
pub(crate) fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem"],
    ];
    openssl(
        dir,
        &[
            &ca.concat()[..],
            &["-days", "2", "-subj", "/CN=warden test CA"],
        ]
        .concat(),
    );
    for (name, ext) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        let req = [
            &["req"][..],
            &ec,
            &["-keyout", &key, "-out", &csr, "-subj", "/CN=node"],
        ];
        openssl(dir, &req.concat());
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
            ],
        );
    }
}

#[test]
fn tls_with_client_certificates_admits_only_certified_nodes() {
    let d = tempfile::tempdir().unwrap();
    certificates(d.path());
    let at = |f: &str| d.path().join(f).display().to_string();
    let broker = Broker::with_config(&conf(
        d.path(),
        &format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true }}\n",
            at("server.pem"),
            at("server.key"),
            at("ca.pem")
        ),
    ));
    let url = format!("tls://127.0.0.1:{}", broker.port);
    let keys = format!(
        "tls_ca = '{}'\ntls_cert = '{}'\ntls_key = '{}'",
        at("ca.pem"),
        at("client.pem"),
        at("client.key")
    );
    let _a = Node::start_with(d.path(), "a", &url, &keys, &server("kv", "a"), &[]);
    let calls = client("calls", &["call", "kv", "20", "hi"], &["kv"]);
    let mut b = Node::start_with(d.path(), "b", &url, &keys, &calls, &[]);
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 20"), "{}", b.out());
    // Without a client certificate, and without the CA.
    let ca_only = format!("tls_ca = '{}'", at("ca.pem"));
    let mut c = Node::start_with(d.path(), "c", &url, &ca_only, &calls, &[]);
    assert_eq!(c.finish(), 2, "{}", c.err());
    assert_eq!(c.err().lines().count(), 1, "{}", c.err());
    let mut e = Node::start_with(
        d.path(),
        "e",
        &broker.url(),
        "tls_required = true",
        &calls,
        &[],
    );
    refused(&mut e, "TLS with the cluster's broker");
}

/// Runs `warden args`, which must succeed; its stdout.
pub(crate) fn warden_ok(args: &[std::ffi::OsString]) -> Vec<u8> {
    let out = warden().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    out.stdout
}

/// Writes a manifest for node `node` under `dir/gen` (for `warden
/// cluster config`), with `keys` in its `[cluster]` section.
fn manifest_for(dir: &Path, node: &str, keys: &str, tasks: &str) -> std::path::PathBuf {
    let at = dir.join("gen").join(node);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::copy(guests::CLUSTER, at.join("cluster.wasm")).unwrap();
    let text = format!("[cluster]\nnats = 'nats://127.0.0.1:1'\nnode = '{node}'\n{keys}\n{tasks}");
    manifest(&at, &text)
}

#[test]
fn the_generated_broker_config_holds_each_node_to_its_own_subjects() {
    let d = tempfile::tempdir().unwrap();
    let (ka, kb) = (nkeys::KeyPair::new_user(), nkeys::KeyPair::new_user());
    for (node, key) in [("a", &ka), ("b", &kb)] {
        put(d.path(), node, "node.nk", &key.seed().unwrap());
        put(&d.path().join("gen"), node, "node.nk", &key.seed().unwrap());
    }
    let calls = client("calls", &["call", "kv", "50", "hi"], &["kv"]);
    let manifests = [
        manifest_for(d.path(), "a", "nkey = 'node.nk'", &server("kv", "a")),
        manifest_for(d.path(), "b", "nkey = 'node.nk'", &calls),
        manifest_for(
            d.path(),
            "rogue",
            "user = 'rogue'\npassword_env = 'ROGUE_PW'",
            &calls,
        ),
    ];
    let mut args = vec!["cluster".into(), "config".into()];
    args.extend(manifests.iter().map(|m| m.clone().into_os_string()));
    let config = String::from_utf8(warden_ok(&args)).unwrap();
    assert!(!config.contains(&ka.seed().unwrap()), "no secret");
    let config = config.replace("$ROGUE_PW", &format!("\"{SECRET}\""));
    let broker = Broker::with_config(&conf(d.path(), &config));
    let a = Node::start_with(
        d.path(),
        "a",
        &broker.url(),
        "nkey = 'node.nk'",
        &server("kv", "a"),
        &[],
    );
    a.wait_for("server: ready");
    // The rogue is a member with credentials of its own.
    let mut rogue = Rogue::connect_as(broker.port, "rogue", SECRET);
    let announce = "{\"node\":\"a\",\"instance\":1,\"exports\":[\"kv\"]}";
    let attempts: [&[u8]; 7] = [
        b"SUB warden.default.call.*.a.kv 1\r\n",
        b"SUB warden.default.call.> 2\r\n",
        format!(
            "PUB warden.default.node.a {}\r\n{announce}\r\n",
            announce.len()
        )
        .leak()
        .as_bytes(),
        b"SUB warden.default.hello.a 3\r\n",
        b"PUB warden.default.inbox.b.0123456789abcdef.1_0 2\r\nhi\r\n",
        b"SUB warden.default.inbox.> 4\r\n",
        b"PUB warden.default.call.b.a.kv 2\r\nhi\r\n",
    ];
    for a in attempts {
        rogue.send(a);
    }
    rogue.send(b"PING\r\n");
    assert_eq!(rogue.violations(), attempts.len(), "each attempt refused");
    let mut b = Node::start_with(
        d.path(),
        "b",
        &broker.url(),
        "nkey = 'node.nk'",
        &calls,
        &[],
    );
    assert_eq!(b.finish(), 0, "{}{}", b.out(), b.err());
    assert!(b.out().contains("client: from a 50"), "{}", b.out());
    assert_eq!(a.metric("warden_cluster_served_total{name=\"kv\"}"), 50.0);
    // No call reached the rogue's subscriptions.
    rogue.send(b"PING\r\n");
    assert_eq!(rogue.violations(), 0);
}

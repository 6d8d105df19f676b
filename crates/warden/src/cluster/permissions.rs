//! The broker's side of locking a cluster down: for each node, the
//! subjects it may publish on and subscribe to, as a `nats-server`
//! `authorization` block (`warden cluster config`).
//!
//! A node publishes its calls (`call.<node>.<server>.<name>`,
//! `callx.<node>.…`), its
//! announcements (`node.<node>`), questions to every node (`hello.*`,
//! `ps`) and calls through portals it was lent (`portal.*.…`, whose
//! subjects carry a secret); it answers only what it was sent (NATS's
//! `allow_responses`). It subscribes to the calls to it of the names
//! its manifest exports (`call.*.<node>.<name>`), to announcements, to
//! its own `hello`, `inbox` and `portal` subjects, and to `ps`. So a member cannot read or answer
//! another's calls, announce as another, take another's name, or write
//! into another's inbox; a stranger cannot connect at all.

use super::{wire, BrokerAuth, ClusterSpec, Secret};
use std::fmt::Write;

/// A node as the broker must know it: its `[cluster]` section and the
/// names its tasks export.
pub struct Member {
    /// The node's `[cluster]` section.
    pub spec: ClusterSpec,
    /// The names its tasks export.
    pub exports: Vec<String>,
}

/// How many answers (and progress notes) a node may send to one call it
/// was sent, and for how long: a call that runs a day is cut off.
const RESPONSES: &str = "{ max: 1000000, expires: \"24h\" }";

/// The `authorization` block giving each member exactly its subjects.
pub fn broker_config(members: &[Member]) -> Result<String, String> {
    let mut out = String::from(
        "# nats-server authorization for Warden nodes, written by `warden cluster config`.\n\
         # Each node may publish and subscribe only on its own subjects.\n\
         authorization {\n  users = [\n",
    );
    for m in members {
        let who = identity(&m.spec)?;
        let (publish, subscribe) = subjects(m);
        let list = |v: &[String]| {
            let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
            quoted.join(", ")
        };
        let _ = write!(
            out,
            "    # node {} of cluster {}\n    {{ {who}, permissions: {{\n      \
             publish: {{ allow: [{}] }},\n      subscribe: {{ allow: [{}] }},\n      \
             allow_responses: {RESPONSES}\n    }} }},\n",
            m.spec.node,
            m.spec.cluster,
            list(&publish),
            list(&subscribe),
        );
    }
    out.push_str("  ]\n}\n");
    Ok(out)
}

/// The user entry's identity: an nkey's public half, or a user whose
/// password the broker reads from its environment.
fn identity(spec: &ClusterSpec) -> Result<String, String> {
    let node = &spec.node;
    match &spec.auth {
        BrokerAuth::Nkey(path) => {
            let seed = std::fs::read_to_string(path)
                .map_err(|e| format!("node {node}: cannot read {}: {e}", path.display()))?;
            let key = nkeys::KeyPair::from_seed(seed.trim())
                .map_err(|_| format!("node {node}: {} holds no nkey seed", path.display()))?;
            Ok(format!("nkey: \"{}\"", key.public_key()))
        }
        BrokerAuth::User { user, password } => {
            let var = match password {
                Secret::Env(v) => v.clone(),
                Secret::File(_) => password_variable(node),
            };
            Ok(format!("user: \"{user}\", password: ${var}"))
        }
        BrokerAuth::None => Ok(format!(
            "user: \"{node}\", password: ${}",
            password_variable(node)
        )),
        BrokerAuth::Creds(_) => Err(format!(
            "node {node}: a creds file's permissions live in its user JWT (issue it with nsc, \
             giving it the subjects this command prints for an nkey user)"
        )),
        BrokerAuth::Token(_) => Err(format!(
            "node {node}: a token admits anyone who has it, with no per-node permissions; \
             use nkey or user"
        )),
    }
}

/// The environment variable the broker reads node `node`'s password from.
fn password_variable(node: &str) -> String {
    let upper: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("WARDEN_PASSWORD_{upper}")
}

/// What member `m` may publish on and subscribe to.
fn subjects(m: &Member) -> (Vec<String>, Vec<String>) {
    let s = wire::Subjects::of(&m.spec.cluster);
    let p = s.prefix();
    let n = &m.spec.node;
    let publish = vec![
        format!("{p}.call.{n}.>"),
        format!("{p}.callx.{n}.>"),
        s.announce(n),
        s.hello("*"),
        s.ps(),
        format!("{p}.portal.*.>"),
    ];
    let mut subscribe = vec![
        s.announcements(),
        s.hello(n),
        s.ps(),
        format!("{p}.inbox.{n}.>"),
        format!("{p}.portal.{n}.>"),
    ];
    for name in &m.exports {
        subscribe.push(s.calls_to(n, name));
    }
    (publish, subscribe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_gets_its_own_subjects() {
        let d = tempfile::tempdir().unwrap();
        let key = nkeys::KeyPair::new_user();
        std::fs::write(d.path().join("a.nk"), key.seed().unwrap()).unwrap();
        let mut a = ClusterSpec::new(vec![], "a");
        a.cluster = "prod".into();
        a.auth = BrokerAuth::Nkey(d.path().join("a.nk"));
        let b = ClusterSpec::new(vec![], "b-2");
        let members = [
            Member {
                spec: a,
                exports: vec!["kv".into(), "a b".into()],
            },
            Member {
                spec: b,
                exports: vec![],
            },
        ];
        let text = broker_config(&members).unwrap();
        assert!(
            text.contains(&format!("nkey: \"{}\"", key.public_key())),
            "{text}"
        );
        assert!(!text.contains(&key.seed().unwrap()));
        for want in [
            "\"warden.prod.call.a.>\"",
            "\"warden.prod.node.a\"",
            "\"warden.prod.call.*.a.kv\"",
            "\"warden.prod.callx.*.a.612062\"",
            "\"warden.prod.inbox.a.>\"",
            "user: \"b-2\", password: $WARDEN_PASSWORD_B_2",
            "\"warden.default.call.b-2.>\"",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        let mut t = ClusterSpec::new(vec![], "t");
        t.auth = BrokerAuth::Token(Secret::Env("T".into()));
        let e = broker_config(&[Member {
            spec: t,
            exports: vec![],
        }])
        .unwrap_err();
        assert!(e.contains("no per-node permissions"), "{e}");
    }
}

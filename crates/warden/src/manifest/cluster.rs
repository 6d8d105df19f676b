//! The `[cluster]` section: the broker, this node's name, the cluster's
//! name, the node's credentials and TLS for the broker, and (for a keyed
//! cluster) the node's key and the members' public keys. Secrets are
//! named (a file, an environment variable), never written here.

use crate::cluster::{
    valid_node, BrokerAuth, BrokerTls, ClusterKeys, ClusterSpec, Secret, DEFAULT_CLUSTER,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    nats: Urls,
    node: String,
    name: Option<String>,
    creds: Option<String>,
    nkey: Option<String>,
    user: Option<String>,
    password_file: Option<String>,
    password_env: Option<String>,
    token_file: Option<String>,
    token_env: Option<String>,
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    #[serde(default)]
    tls_required: bool,
    key: Option<String>,
    members: Option<Members>,
    open: Option<bool>,
}

/// The members' public keys, by node name: inline, or a file of
/// `node = "key"` lines (what `warden cluster key` prints).
#[derive(Deserialize)]
#[serde(untagged)]
enum Members {
    Listed(BTreeMap<String, String>),
    File(String),
}

/// One URL or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Urls {
    One(String),
    Many(Vec<String>),
}

pub(super) fn spec(raw: RawCluster, base: &Path) -> Result<ClusterSpec, String> {
    let nats = match &raw.nats {
        Urls::One(u) => vec![u.clone()],
        Urls::Many(v) => v.clone(),
    };
    if nats.is_empty() {
        return Err("cluster.nats: at least one broker URL".into());
    }
    for u in &nats {
        if u.contains('@') {
            return Err(format!(
                "cluster.nats: {:?} carries credentials; name them with cluster.user and \
                 password_file or password_env, token_file or token_env, creds or nkey",
                crate::cluster::shown_url(u)
            ));
        }
        u.parse::<async_nats::ServerAddr>()
            .map_err(|e| format!("cluster.nats: {u:?} is not a broker URL: {e}"))?;
    }
    let named = |key: &str, v: &str| {
        if valid_node(v) {
            Ok(v.to_string())
        } else {
            Err(format!(
                "cluster.{key}: {v:?} is not a {key} name (1 to 64 letters, digits, '-' or '_')"
            ))
        }
    };
    let node = named("node", &raw.node)?;
    let cluster = named("name", raw.name.as_deref().unwrap_or(DEFAULT_CLUSTER))?;
    let auth = auth(&raw, base)?;
    let tls = tls(&raw, base)?;
    let keys = keys(&raw, base)?;
    open(raw.open, keys.is_some(), &nats)?;
    Ok(ClusterSpec {
        nats,
        node,
        cluster,
        auth,
        tls,
        keys,
    })
}

/// An open cluster (no `key` and `members`) trusts everyone who reaches
/// its broker: allowed on a broker on this machine, elsewhere only when
/// the manifest says `open = true`.
fn open(open: Option<bool>, keyed: bool, nats: &[String]) -> Result<(), String> {
    if keyed {
        return match open {
            Some(true) => Err("cluster.open: a cluster with key and members is not open".into()),
            _ => Ok(()),
        };
    }
    let remote = nats.iter().find(|u| !on_loopback(u));
    match (open, remote) {
        (Some(true), _) | (_, None) => Ok(()),
        (_, Some(url)) => Err(format!(
            "cluster: the broker {:?} is not on this machine, and without key and members \
             anyone who reaches it can join, take over node names and forge or answer calls; \
             make keys with `warden cluster key`, or accept the risk with open = true",
            crate::cluster::shown_url(url)
        )),
    }
}

/// Whether a broker URL names this machine by loopback.
fn on_loopback(url: &str) -> bool {
    let Ok(addr) = url.parse::<async_nats::ServerAddr>() else {
        return false;
    };
    let host = addr.host().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// This node's key and the members' public keys, which go together.
fn keys(raw: &RawCluster, base: &Path) -> Result<Option<ClusterKeys>, String> {
    let members = match &raw.members {
        None => None,
        Some(Members::Listed(m)) => Some(m.clone()),
        Some(Members::File(f)) => {
            let path = base.join(f);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cluster.members: cannot read {}: {e}", path.display()))?;
            let listed: BTreeMap<String, String> = toml::from_str(&text).map_err(|e| {
                format!(
                    "cluster.members: {} is not a table of node = \"key\" lines: {e}",
                    path.display()
                )
            })?;
            Some(listed)
        }
    };
    let (key, members) = match (&raw.key, members) {
        (None, None) => return Ok(None),
        (Some(k), Some(m)) => (base.join(k), m),
        (Some(_), None) => {
            return Err("cluster.key: needs cluster.members, the members' public keys".into())
        }
        (None, Some(_)) => {
            return Err("cluster.members: needs cluster.key, this node's key file".into())
        }
    };
    for (node, public) in &members {
        if !valid_node(node) {
            return Err(format!("cluster.members: {node:?} is not a node name"));
        }
        if nkeys::KeyPair::from_public_key(public).is_err() {
            return Err(format!(
                "cluster.members: {node}'s key {public:?} is not an nkey public key"
            ));
        }
    }
    if !members.contains_key(&raw.node) {
        return Err(format!(
            "cluster.members: this node, {}, is not listed",
            raw.node
        ));
    }
    Ok(Some(ClusterKeys { seed: key, members }))
}

/// The one way of proving who the node is that the section names.
fn auth(raw: &RawCluster, base: &Path) -> Result<BrokerAuth, String> {
    let secret = |file: &Option<String>, env: &Option<String>, key: &str| match (file, env) {
        (Some(_), Some(_)) => Err(format!("cluster: {key}_file and {key}_env both given")),
        (Some(f), None) => Ok(Some(Secret::File(base.join(f)))),
        (None, Some(v)) if !v.is_empty() => Ok(Some(Secret::Env(v.clone()))),
        (None, Some(_)) => Err(format!("cluster.{key}_env: an empty variable name")),
        (None, None) => Ok(None),
    };
    let password = secret(&raw.password_file, &raw.password_env, "password")?;
    let token = secret(&raw.token_file, &raw.token_env, "token")?;
    let mut ways = vec![];
    if let Some(c) = &raw.creds {
        ways.push(("creds", BrokerAuth::Creds(base.join(c))));
    }
    if let Some(n) = &raw.nkey {
        ways.push(("nkey", BrokerAuth::Nkey(base.join(n))));
    }
    match (&raw.user, password) {
        (Some(user), Some(password)) => ways.push((
            "user",
            BrokerAuth::User {
                user: user.clone(),
                password,
            },
        )),
        (Some(_), None) => return Err("cluster.user: needs password_file or password_env".into()),
        (None, Some(_)) => return Err("cluster: a password without cluster.user".into()),
        (None, None) => {}
    }
    if let Some(t) = token {
        ways.push(("token", BrokerAuth::Token(t)));
    }
    match ways.len() {
        0 => Ok(BrokerAuth::None),
        1 => Ok(ways.pop().unwrap().1),
        _ => {
            let keys: Vec<&str> = ways.iter().map(|(k, _)| *k).collect();
            Err(format!(
                "cluster: one way to authenticate, not {}",
                keys.join(" and ")
            ))
        }
    }
}

fn tls(raw: &RawCluster, base: &Path) -> Result<BrokerTls, String> {
    let cert = match (&raw.tls_cert, &raw.tls_key) {
        (Some(c), Some(k)) => Some((base.join(c), base.join(k))),
        (None, None) => None,
        _ => return Err("cluster: tls_cert and tls_key go together".into()),
    };
    Ok(BrokerTls {
        ca: raw.tls_ca.as_ref().map(|c| base.join(c)),
        cert,
        required: raw.tls_required,
    })
}

#[cfg(test)]
mod tests {
    use crate::Manifest;

    const TASK: &str = "[[task]]\nname='t'\nmodule='m.wasm'\nprovides=['kv','log.*']\n";

    fn parse(text: &str) -> Result<Manifest, String> {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("m.wasm"), b"").unwrap();
        Manifest::parse(text, d.path())
    }

    #[test]
    fn cluster_section() {
        let m = parse(&format!(
            "[cluster]\nnats='nats://127.0.0.1:4222'\nnode='a'\n{TASK}"
        ))
        .unwrap();
        let c = m.cluster.unwrap();
        assert_eq!((c.nats.len(), c.node.as_str()), (1, "a"));
        let m = parse(&format!(
            "[cluster]\nnats=['nats://h1:1','nats://h2:2']\nnode='b-2'\nopen=true\n{TASK}"
        ))
        .unwrap();
        assert_eq!(m.cluster.unwrap().nats.len(), 2);
        assert!(parse(TASK).unwrap().cluster.is_none());
        let m = parse(&format!(
            "[cluster]\nnats='tls://h:1'\nnode='a'\nname='prod'\ntoken_env='T'\nopen=true\n\
             tls_ca='ca.pem'\ntls_cert='c.pem'\ntls_key='k.pem'\n{TASK}"
        ))
        .unwrap();
        let c = m.cluster.unwrap();
        assert_eq!(c.cluster, "prod");
        assert_eq!(
            c.auth,
            crate::cluster::BrokerAuth::Token(crate::cluster::Secret::Env("T".into()))
        );
        assert!(c.tls.ca.unwrap().ends_with("ca.pem") && c.tls.cert.is_some());
        assert_eq!(c.cluster, "prod");
        for local in ["nats://localhost:1", "nats://[::1]:1", "tls://127.0.0.2:1"] {
            let open = parse(&format!("[cluster]\nnats='{local}'\nnode='a'\n{TASK}"));
            assert!(open.is_ok(), "{local}: {open:?}");
        }
        for (bad, why) in [
            ("nats='nats://h:1'\nnode='a'", "not on this machine"),
            (
                "nats=['nats://127.0.0.1:1','nats://10.0.0.1:1']\nnode='a'",
                "accept the risk with open = true",
            ),
            (
                "nats='nats://h:1'\nnode='a'\nkey='k'\nmembers={a='UNOTAKEY'}\nopen=true",
                "not an nkey public key",
            ),
            ("nats='nats://h:1'\nnode='a.b'", "not a node name"),
            ("nats=[]\nnode='a'", "at least one"),
            ("nats='nats://h:1'", "missing key `node`"),
            ("nats='nats://h:1'\nnode='a'\nport=1", "unknown key"),
            ("nats='nats://u:pw@h:1'\nnode='a'", "carries credentials"),
            ("nats='nats://h:1'\nnode='a'\nname='a.b'", "not a name name"),
            (
                "nats='nats://h:1'\nnode='a'\nuser='u'",
                "needs password_file",
            ),
            (
                "nats='nats://h:1'\nnode='a'\npassword_env='P'",
                "without cluster.user",
            ),
            (
                "nats='nats://h:1'\nnode='a'\ntoken_file='t'\ntoken_env='T'",
                "both given",
            ),
            (
                "nats='nats://h:1'\nnode='a'\ntoken_env='T'\nnkey='k'",
                "not nkey and token",
            ),
            ("nats='nats://h:1'\nnode='a'\ntls_cert='c'", "go together"),
            (
                "nats='nats://h:1'\nnode='a'\nkey='a.nk'",
                "needs cluster.members",
            ),
            (
                "nats='nats://h:1'\nnode='a'\nmembers={a='x'}",
                "needs cluster.key",
            ),
            (
                "nats='nats://h:1'\nnode='a'\nkey='k'\nmembers={a='UNOTAKEY'}",
                "not an nkey public key",
            ),
            (
                "nats='nats://h:1'\nnode='a'\nkey='k'\nmembers='none.toml'",
                "cannot read",
            ),
        ] {
            let e = parse(&format!("[cluster]\n{bad}\n{TASK}")).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn export_within_provides() {
        let m = parse(&format!("{TASK}export=['kv','log.*','log.err']")).unwrap();
        assert_eq!(m.tasks[0].ipc.export, ["kv", "log.*", "log.err"]);
        for bad in ["'kv2'", "'*'", "'k*'"] {
            let e = parse(&format!("{TASK}export=[{bad}]")).unwrap_err();
            assert!(
                e.contains("not among the names the task provides"),
                "{bad}: {e}"
            );
        }
    }
}

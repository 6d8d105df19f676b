//! The `[cluster]` section: the broker and this node's name.

use crate::cluster::{valid_node, ClusterSpec};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    nats: Urls,
    node: String,
}

/// One URL or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum Urls {
    One(String),
    Many(Vec<String>),
}

pub(super) fn spec(raw: RawCluster) -> Result<ClusterSpec, String> {
    let nats = match raw.nats {
        Urls::One(u) => vec![u],
        Urls::Many(v) => v,
    };
    if nats.is_empty() {
        return Err("cluster.nats: at least one broker URL".into());
    }
    for u in &nats {
        u.parse::<async_nats::ServerAddr>()
            .map_err(|e| format!("cluster.nats: {u:?} is not a broker URL: {e}"))?;
    }
    if !valid_node(&raw.node) {
        return Err(format!(
            "cluster.node: {:?} is not a node name (1 to 64 letters, digits, '-' or '_')",
            raw.node
        ));
    }
    Ok(ClusterSpec {
        nats,
        node: raw.node,
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
            "[cluster]\nnats=['nats://h1:1','nats://h2:2']\nnode='b-2'\n{TASK}"
        ))
        .unwrap();
        assert_eq!(m.cluster.unwrap().nats.len(), 2);
        assert!(parse(TASK).unwrap().cluster.is_none());
        for (bad, why) in [
            ("nats='nats://h:1'\nnode='a.b'", "not a node name"),
            ("nats=[]\nnode='a'", "at least one"),
            ("nats='nats://h:1'", "missing field `node`"),
            ("nats='nats://h:1'\nnode='a'\nport=1", "unknown field"),
        ] {
            let e = parse(&format!("[cluster]\n{bad}\n{TASK}")).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn export_within_provides() {
        let m = parse(&format!("{TASK}export=['kv','log.*','log.err']")).unwrap();
        assert_eq!(m.tasks[0].export, ["kv", "log.*", "log.err"]);
        for bad in ["'kv2'", "'*'", "'k*'"] {
            let e = parse(&format!("{TASK}export=[{bad}]")).unwrap_err();
            assert!(
                e.contains("not among the names the task provides"),
                "{bad}: {e}"
            );
        }
    }
}

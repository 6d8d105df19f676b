//! The node's connection to its broker: who it is to the broker
//! ([`BrokerAuth`]) and how the connection is protected ([`BrokerTls`]).
//!
//! Secrets never sit in the manifest or in a [`super::ClusterSpec`]: the
//! spec names a file or an environment variable, read when the node
//! connects, and no error or debug output carries a secret's value or a
//! URL's user information.

use super::ClusterSpec;
use std::path::PathBuf;

/// Where a secret (a password or a token) is read from when connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// The whole file, less a trailing newline.
    File(PathBuf),
    /// An environment variable of the `warden` process.
    Env(String),
}

/// How the node proves who it is to the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BrokerAuth {
    /// Nothing (a broker that lets anyone in).
    #[default]
    None,
    /// A NATS credentials file: a user JWT and its nkey seed.
    Creds(PathBuf),
    /// A file holding an nkey seed (`SU…`).
    Nkey(PathBuf),
    /// A user name and its password.
    User {
        /// The user's name.
        user: String,
        /// Where its password is read from.
        password: Secret,
    },
    /// A token.
    Token(Secret),
}

/// TLS to the broker. With a CA, client certificate or `required`, the
/// connection must be TLS; `tls://` URLs ask for it too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerTls {
    /// PEM file of the CA certificates the broker's certificate must
    /// chain to (default: the system's roots).
    pub ca: Option<PathBuf>,
    /// PEM files of the client certificate and its key, when the broker
    /// verifies clients.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// Refuse a broker that does not offer TLS.
    pub required: bool,
}

impl Secret {
    /// The secret's value; the error names where it was looked for.
    fn read(&self, key: &str) -> Result<String, String> {
        let value = match self {
            Secret::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("cluster.{key}_file: cannot read {}: {e}", p.display()))?,
            Secret::Env(v) => std::env::var(v)
                .map_err(|_| format!("cluster.{key}_env: the environment has no {v}"))?,
        };
        let value = value.trim_end_matches(['\n', '\r']).to_string();
        if value.is_empty() {
            return Err(format!("cluster.{key}: the {key} is empty"));
        }
        Ok(value)
    }
}

/// Applies `auth` to the connection's options.
async fn with_auth(
    o: async_nats::ConnectOptions,
    auth: &BrokerAuth,
) -> Result<async_nats::ConnectOptions, String> {
    Ok(match auth {
        BrokerAuth::None => o,
        BrokerAuth::Creds(p) => o
            .credentials_file(p)
            .await
            .map_err(|e| format!("cluster.creds: cannot use {}: {}", p.display(), e.kind()))?,
        BrokerAuth::Nkey(p) => {
            let seed = std::fs::read_to_string(p)
                .map_err(|e| format!("cluster.nkey: cannot read {}: {e}", p.display()))?;
            let seed = seed.trim().to_string();
            if nkeys::KeyPair::from_seed(&seed).is_err() {
                return Err(format!("cluster.nkey: {} holds no nkey seed", p.display()));
            }
            o.nkey(seed)
        }
        BrokerAuth::User { user, password } => {
            o.user_and_password(user.clone(), password.read("password")?)
        }
        BrokerAuth::Token(t) => o.token(t.read("token")?),
    })
}

/// Applies `tls` to the connection's options.
fn with_tls(
    mut o: async_nats::ConnectOptions,
    tls: &BrokerTls,
) -> Result<async_nats::ConnectOptions, String> {
    let readable = |key: &str, p: &PathBuf| {
        std::fs::metadata(p)
            .map(|_| ())
            .map_err(|e| format!("cluster.{key}: cannot read {}: {e}", p.display()))
    };
    if let Some(ca) = &tls.ca {
        readable("tls_ca", ca)?;
        o = o.add_root_certificates(ca.clone());
    }
    if let Some((cert, key)) = &tls.cert {
        readable("tls_cert", cert)?;
        readable("tls_key", key)?;
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    if tls.required || tls.ca.is_some() || tls.cert.is_some() {
        o = o.require_tls(true);
    }
    Ok(o)
}

/// A broker URL as it may be shown: without user information.
pub fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((_, host)) => format!("{scheme}://{host}"),
            None => url.to_string(),
        },
        None => url.rsplit('@').next().unwrap_or(url).to_string(),
    }
}

/// Connects to the first broker of `spec` that answers, as the node.
pub(super) async fn connect(spec: &ClusterSpec) -> Result<async_nats::Client, String> {
    let mut addrs = Vec::new();
    for url in &spec.nats {
        addrs.push(
            url.parse::<async_nats::ServerAddr>()
                .map_err(|e| format!("cluster.nats: {:?}: {e}", shown(url)))?,
        );
    }
    let o = async_nats::ConnectOptions::new()
        .name(format!("warden node {}", spec.node))
        .connection_timeout(super::CONNECT_TIMEOUT)
        .max_reconnects(None)
        .subscription_capacity(SUBSCRIPTION_CAPACITY)
        .custom_inbox_prefix(super::wire::Subjects::of(&spec.cluster).requests_inbox(&spec.node));
    let o = with_tls(with_auth(o, &spec.auth).await?, &spec.tls)?;
    o.connect(addrs).await.map_err(|e| {
        let urls: Vec<String> = spec.nats.iter().map(|u| shown(u)).collect();
        explain(&e, &urls.join(", "))
    })
}

/// Messages one subscription holds before the broker's client drops
/// more. Each subscription is drained into a feed as its messages
/// arrive, and the feeds hold at most `intake::MAX_INTAKE_BYTES` in all
/// (see `cluster::intake`); this bounds what could queue here while a
/// pump waits for a thread.
const SUBSCRIPTION_CAPACITY: usize = 1024;

/// What a failed connection to the brokers at `at` means, in words that
/// name no secret.
fn explain(e: &async_nats::ConnectError, at: &str) -> String {
    use async_nats::ConnectErrorKind as K;
    let certificate = e.to_string().contains("certificate");
    match e.kind() {
        K::Tls | K::Io if certificate => {
            format!("TLS with the cluster's broker at {at} failed: {e}")
        }
        K::AuthorizationViolation => {
            format!("the cluster's broker at {at} refused the node's credentials")
        }
        K::Authentication => {
            format!("the node's key could not answer the challenge of the broker at {at}")
        }
        K::Tls => format!("TLS with the cluster's broker at {at} failed: {e}"),
        _ => format!("cannot reach the cluster's broker at {at}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_user_information() {
        assert_eq!(shown("nats://u:secret@h:4222"), "nats://h:4222");
        assert_eq!(shown("tls://tok@h"), "tls://h");
        assert_eq!(shown("nats://h:4222"), "nats://h:4222");
        assert_eq!(shown("u:p@h:1"), "h:1");
    }

    #[test]
    fn secrets_come_from_files_and_the_environment() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        assert_eq!(Secret::File(f.clone()).read("password").unwrap(), "s3cret");
        std::fs::write(&f, "\n").unwrap();
        let e = Secret::File(f).read("password").unwrap_err();
        assert!(e.contains("is empty"), "{e}");
        let e = Secret::Env("WARDEN_TEST_NO_SUCH_VAR".into())
            .read("token")
            .unwrap_err();
        assert_eq!(
            e,
            "cluster.token_env: the environment has no WARDEN_TEST_NO_SUCH_VAR"
        );
    }
}

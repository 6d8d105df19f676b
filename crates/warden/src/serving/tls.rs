//! TLS for the web servers: rustls with TLS 1.2 and 1.3 only, ALPN `h2`
//! and `http/1.1`, and, if asked, client certificates checked against a
//! CA. The server's certificate comes from PEM files, read again when
//! either file changes (looked at no more than once a second, at a
//! handshake) or when [`reload_certificates`] is called (`warden run`
//! calls it on SIGHUP); a reload that fails keeps the certificate in use
//! and says why on stderr. For development, `tls = "self-signed"` makes a
//! certificate at start, whose SHA-256 fingerprint the server prints.
//!
//! A handshake is part of its connection: it takes a place among the
//! server's connections, is charged [`HANDSHAKE_BYTES`] to the server's
//! byte budget while it runs, and must be done within the time a request
//! head has (`conn::HEAD_TIMEOUT`).

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What a handshake in progress is charged to the server's byte budget:
/// rustls holds a ClientHello and its own messages (at most 64 KiB of
/// handshake data is accepted) while it runs.
pub const HANDSHAKE_BYTES: u64 = 64 << 10;

/// How often, at most, the certificate files are looked at.
const RECHECK: Duration = Duration::from_secs(1);

/// A server's TLS settings, as a manifest gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSpec {
    /// Where its certificate comes from.
    pub certificate: Certificate,
    /// If given, clients must present a certificate this CA (PEM)
    /// issued.
    pub client_ca: Option<PathBuf>,
}

/// Where a server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Certificate {
    /// A PEM certificate chain and its private key.
    Files {
        /// The chain, the server's own certificate first.
        cert: PathBuf,
        /// Its private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// One made at start, for development.
    SelfSigned,
}

/// Bumped by [`reload_certificates`]: every server reads its files again
/// at its next handshake.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Asks every server to read its certificate files again.
pub fn reload_certificates() {
    EPOCH.fetch_add(1, Ordering::Release);
}

/// A server's TLS acceptor, and its certificate's fingerprint.
pub struct Tls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 of the certificate in use at start, as `AB:CD:…`.
    pub fingerprint: String,
}

impl Tls {
    /// The acceptor `spec` describes for a server on `addr`; an error
    /// names the file or setting at fault.
    pub fn new(spec: &TlsSpec, addr: std::net::SocketAddr) -> Result<Tls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (resolver, leaf): (Arc<dyn ResolvesServerCert>, _) = match &spec.certificate {
            Certificate::Files { cert, key } => {
                let r = Reloading::new(cert.clone(), key.clone(), &provider)?;
                let leaf = r.current().cert[0].clone();
                (Arc::new(r), leaf)
            }
            Certificate::SelfSigned => {
                let key = self_signed(addr, &provider)?;
                let leaf = key.cert[0].clone();
                (Arc::new(Fixed(Arc::new(key))), leaf)
            }
        };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
            .map_err(|e| format!("tls: {e}"))?;
        let builder = match &spec.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certificates(ca)? {
                    roots
                        .add(c)
                        .map_err(|e| format!("tls_client_ca {}: {e}", ca.display()))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| format!("tls_client_ca {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            fingerprint: fingerprint(&leaf),
        })
    }
}

/// `AB:CD:…`, the SHA-256 of a certificate.
pub(crate) fn fingerprint(cert: &CertificateDer<'_>) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(cert.as_ref());
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// The certificates of a PEM file.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let all: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect();
    let all = all.map_err(|e| format!("{}: {e}", path.display()))?;
    if all.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(all)
}

/// A certificate chain and its key, loaded and checked to go together.
fn load(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain = certificates(cert)?;
    let der = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let certified = CertifiedKey::from_der(chain, der, provider)
        .map_err(|e| format!("{} and {}: {e}", cert.display(), key.display()))?;
    Ok(certified)
}

/// A certificate for `localhost`, `127.0.0.1` and the server's address.
fn self_signed(
    addr: std::net::SocketAddr,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !addr.ip().is_unspecified() {
        names.push(addr.ip().to_string());
    }
    names.dedup();
    let made = rcgen::generate_simple_self_signed(names).map_err(|e| format!("tls: {e}"))?;
    let der = PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    CertifiedKey::from_der(vec![made.cert.der().clone()], der, provider)
        .map_err(|e| format!("tls: {e}"))
}

/// A certificate that never changes.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A certificate read from files, read again when they change.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: Arc<CertifiedKey>,
    /// The files' modification times when `current` was read.
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
    epoch: u64,
}

impl Reloading {
    fn new(
        cert: PathBuf,
        key: PathBuf,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Reloading, String> {
        let stamps = (modified(&cert), modified(&key));
        let current = Arc::new(load(&cert, &key, provider)?);
        Ok(Reloading {
            cert,
            key,
            provider: provider.clone(),
            state: Mutex::new(State {
                current,
                stamps,
                checked: Instant::now(),
                epoch: EPOCH.load(Ordering::Acquire),
            }),
        })
    }

    /// The certificate to use now, read again first if its files have
    /// changed or a reload was asked for.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = EPOCH.load(Ordering::Acquire);
        if epoch == s.epoch && s.checked.elapsed() < RECHECK {
            return s.current.clone();
        }
        s.checked = Instant::now();
        let stamps = (modified(&self.cert), modified(&self.key));
        if epoch == s.epoch && stamps == s.stamps {
            return s.current.clone();
        }
        s.epoch = epoch;
        s.stamps = stamps;
        match load(&self.cert, &self.key, &self.provider) {
            Ok(k) => s.current = Arc::new(k),
            Err(e) => say!("warden: certificate not reloaded, the old one stays: {e}"),
        }
        s.current.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificates_have_a_fingerprint() {
        let spec = TlsSpec {
            certificate: Certificate::SelfSigned,
            client_ca: None,
        };
        let a = Tls::new(&spec, "127.0.0.1:0".parse().unwrap()).unwrap();
        assert_eq!(a.fingerprint.len(), 32 * 3 - 1);
        let b = Tls::new(&spec, "127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(a.fingerprint, b.fingerprint, "each start makes its own");
    }

    #[test]
    fn missing_or_bad_files_are_named() {
        let d = std::env::temp_dir().join(format!("warden-tls-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("junk.pem"), "not pem").unwrap();
        let spec = |cert: &str, key: &str| TlsSpec {
            certificate: Certificate::Files {
                cert: d.join(cert),
                key: d.join(key),
            },
            client_ca: None,
        };
        let at = "127.0.0.1:0".parse().unwrap();
        let e = Tls::new(&spec("none.pem", "none.key"), at).err().unwrap();
        assert!(e.contains("none.pem"), "{e}");
        let e = Tls::new(&spec("junk.pem", "junk.pem"), at).err().unwrap();
        assert!(
            e.contains("junk.pem") && e.contains("no PEM certificate"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}

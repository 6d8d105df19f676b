//! The operator commands' side of the control API's TLS: a connection to
//! it, over TLS when the system's token file names the certificate it
//! serves (which alone is then accepted: pinned by its SHA-256
//! fingerprint, as `warden run` printed it), or when `WARDEN_CONTROL_CA`
//! names a CA to check it against (for a system whose token file is not
//! here); else plain TCP.

use super::Found;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// A connection to a control API.
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// How long an answer is waited for, unless the caller says.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Connects to the control API at `addr` (`HOST:PORT`), as `found` (its
/// token file) says: over TLS, or not; an answer is waited for at most
/// [`ANSWER_WITHIN`].
pub fn connect(addr: &str, found: Option<&Found>) -> Result<Box<dyn Stream>, String> {
    connect_within(addr, found, ANSWER_WITHIN)
}

/// [`connect`], waiting for an answer at most `wait` (a spawn compiles
/// its module before it answers, which for a large component may take
/// a while).
pub fn connect_within(
    addr: &str,
    found: Option<&Found>,
    wait: Duration,
) -> Result<Box<dyn Stream>, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| {
        format!("no warden running at {addr} ({e}); start one with `warden run`, or pass --control")
    })?;
    tcp.set_read_timeout(Some(wait)).ok();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = match (
        found.and_then(|f| f.tls.as_deref()),
        std::env::var_os("WARDEN_CONTROL_CA"),
    ) {
        (Some(pin), _) => pinned(pin, provider)?,
        (None, Some(ca)) => checked(std::path::Path::new(&ca), provider)?,
        (None, None) => return Ok(Box::new(tcp)),
    };
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("control API at {addr}: {e}"))?;
    let conn = rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|e| format!("control API at {addr}: {e}"))?;
    Ok(Box::new(rustls::StreamOwned::new(conn, tcp)))
}

/// Accepts the one certificate whose SHA-256 is `pin` (`AB:CD:…`).
fn pinned(pin: &str, provider: Arc<CryptoProvider>) -> Result<rustls::ClientConfig, String> {
    let verifier = Pinned {
        pin: pin.to_ascii_uppercase(),
        provider: provider.clone(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// Checks the server's certificate against the CA in `ca` (PEM).
fn checked(
    ca: &std::path::Path,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .map_err(|e| format!("WARDEN_CONTROL_CA {}: {e}", ca.display()))?;
    for c in certs {
        let c = c.map_err(|e| format!("WARDEN_CONTROL_CA {}: {e}", ca.display()))?;
        roots
            .add(c)
            .map_err(|e| format!("WARDEN_CONTROL_CA {}: {e}", ca.display()))?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A certificate verifier that trusts one certificate, named by its hash.
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let served = crate::serving::tls::fingerprint(end_entity);
        match crate::timing_safe::eq(served.as_bytes(), self.pin.as_bytes()) {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::General(
                "the control API's certificate is not the one its token file names".into(),
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

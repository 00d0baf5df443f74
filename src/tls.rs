//! TLS at the edge, with rustls: certificates loaded from PEM with errors that say what
//! is wrong, SNI choosing among them (the first is the default), ALPN `h2` and
//! `http/1.1`, TLS 1.2 and 1.3 only, the server's cipher order, and session resumption
//! that survives reloads.
//!
//! [`load`] runs when the configuration is read (so `tollgate -t` checks certificates
//! too); [`server_config`] runs when a snapshot is built, with the [`Sessions`] the
//! gateway keeps for its whole life.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

/// Sessions a server keeps for resumption by session ID (TLS 1.2).
const SESSION_CACHE: usize = 32 * 1024;

/// One `[[tls.certificates]]` entry, loaded and checked.
#[derive(Clone)]
pub struct Certificate {
    /// The `cert` file, for messages.
    pub path: PathBuf,
    /// The names SNI is matched against: the certificate's DNS names (lowercase,
    /// `*.example.com` for a wildcard), or its subject's common name when it has none.
    pub names: Vec<String>,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
    pub key: Arc<CertifiedKey>,
}

impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("path", &self.path)
            .field("names", &self.names)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// Why a certificate or its key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: no certificate found: expected a PEM \"BEGIN CERTIFICATE\" block", path.display())]
    NoCertificate { path: PathBuf },
    #[error(
        "{}: no private key found: expected a PEM \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" \
         or \"BEGIN EC PRIVATE KEY\" block",
        path.display()
    )]
    NoKey { path: PathBuf },
    #[error("{}: invalid PEM: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    #[error("{}: not a certificate tollgate can read: {reason}", path.display())]
    Certificate { path: PathBuf, reason: String },
    #[error("{}: unsupported private key: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    #[error("the key in {} does not match the certificate in {}", key.display(), cert.display())]
    Mismatch { cert: PathBuf, key: PathBuf },
}

impl CertError {
    /// The file the error is about (the key's, for a mismatch).
    pub fn path(&self) -> &Path {
        match self {
            CertError::Read { path, .. }
            | CertError::NoCertificate { path }
            | CertError::NoKey { path }
            | CertError::Pem { path, .. }
            | CertError::Certificate { path, .. }
            | CertError::Key { path, .. } => path,
            CertError::Mismatch { key, .. } => key,
        }
    }
}

/// Reads and checks a PEM certificate chain (leaf first) and its private key (PKCS#8,
/// PKCS#1 RSA or SEC1 EC; RSA, ECDSA P-256/P-384 or Ed25519).
pub fn load(cert_path: &Path, key_path: &Path) -> Result<Certificate, CertError> {
    let cert_pem = read(cert_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(cert_path, err))?;
    let Some(leaf) = chain.first() else {
        return Err(CertError::NoCertificate {
            path: cert_path.to_owned(),
        });
    };
    let (names, not_after) = describe(leaf).map_err(|reason| CertError::Certificate {
        path: cert_path.to_owned(),
        reason,
    })?;
    let key_pem = read(key_path)?;
    let key = match PrivateKeyDer::from_pem_slice(&key_pem) {
        Ok(key) => key,
        Err(pem::Error::NoItemsFound) => {
            return Err(CertError::NoKey {
                path: key_path.to_owned(),
            })
        }
        Err(err) => return Err(pem_error(key_path, err)),
    };
    let key = CertifiedKey::from_der(chain, key, &provider()).map_err(|err| match err {
        rustls::Error::InconsistentKeys(_) => CertError::Mismatch {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
        },
        other => CertError::Key {
            path: key_path.to_owned(),
            reason: other.to_string(),
        },
    })?;
    Ok(Certificate {
        path: cert_path.to_owned(),
        names,
        not_after,
        key: Arc::new(key),
    })
}

/// An expired certificate is served (the operator may have no other yet), with a
/// warning from `tollgate -t`, at start and at every reload.
pub fn warn_expired(certificates: &[Certificate]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    for cert in certificates {
        if cert.not_after < now {
            let expired = time::OffsetDateTime::from_unix_timestamp(cert.not_after)
                .ok()
                .and_then(|t| {
                    t.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_else(|| cert.not_after.to_string());
            tracing::warn!(
                cert = %cert.path.display(),
                names = ?cert.names,
                expired,
                "certificate has expired; clients will refuse it"
            );
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.to_owned(),
        source,
    })
}

fn pem_error(path: &Path, err: pem::Error) -> CertError {
    CertError::Pem {
        path: path.to_owned(),
        reason: err.to_string(),
    }
}

/// The leaf's SNI names and the end of its validity.
fn describe(leaf: &CertificateDer<'_>) -> Result<(Vec<String>, i64), String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|err| err.to_string())?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => names.push(dns.to_ascii_lowercase()),
                GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_of(bytes) {
                        names.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    if names.is_empty() {
        let common = cert.subject().iter_common_name();
        names.extend(common.filter_map(|cn| Some(cn.as_str().ok()?.to_ascii_lowercase())));
    }
    Ok((names, cert.validity().not_after.timestamp()))
}

fn ip_of(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => Some(<[u8; 4]>::try_from(bytes).ok()?.into()),
        16 => Some(<[u8; 16]>::try_from(bytes).ok()?.into()),
        _ => None,
    }
}

/// The crypto tollgate uses: ring's, with its own order of cipher suites (TLS 1.3's
/// AEADs, then TLS 1.2's ECDHE with AES-GCM or ChaCha20-Poly1305; no CBC, no RSA key
/// exchange).
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// What resumption needs to outlive a reload: the ticket keys (TLS 1.3 and 1.2
/// tickets) and the session cache. The gateway makes them once.
#[derive(Clone)]
pub struct Sessions {
    ticketer: Arc<dyn ProducesTickets>,
    cache: Arc<dyn StoresServerSessions>,
}

impl Sessions {
    pub fn new() -> Result<Sessions, rustls::Error> {
        Ok(Sessions {
            ticketer: rustls::crypto::ring::Ticketer::new()?,
            cache: rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE),
        })
    }
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

/// A server config serving `certificates` (SNI; the first is the default), with ALPN
/// `h2` then `http/1.1`, TLS 1.3 and 1.2, the server's cipher order, and `sessions`.
pub fn server_config(
    certificates: &[Certificate],
    sessions: &Sessions,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let resolver = Resolver {
        certificates: certificates
            .iter()
            .map(|c| (c.names.clone(), c.key.clone()))
            .collect(),
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ignore_client_order = true;
    config.ticketer = sessions.ticketer.clone();
    config.session_storage = sessions.cache.clone();
    Ok(Arc::new(config))
}

/// Chooses a certificate by SNI: an exact name first, then a wildcard; among several,
/// the first whose key the client can verify. No SNI, or no match: the first
/// certificate.
#[derive(Debug)]
struct Resolver {
    certificates: Vec<(Vec<String>, Arc<CertifiedKey>)>,
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let schemes = hello.signature_schemes();
        let usable = |key: &&Arc<CertifiedKey>| key.key.choose_scheme(schemes).is_some();
        if let Some(sni) = hello.server_name() {
            for matches in [exact as fn(&str, &str) -> bool, wildcard] {
                let mut found = self
                    .certificates
                    .iter()
                    .filter(|(names, _)| names.iter().any(|name| matches(name, sni)))
                    .map(|(_, key)| key);
                let first = found.clone().next();
                if let Some(key) = found.find(usable).or(first) {
                    return Some(key.clone());
                }
            }
        }
        let mut all = self.certificates.iter().map(|(_, key)| key);
        let first = all.clone().next();
        all.find(usable).or(first).cloned()
    }
}

fn exact(name: &str, sni: &str) -> bool {
    name.eq_ignore_ascii_case(sni)
}

/// `*.example.com` matches `a.example.com`, not `example.com` nor `a.b.example.com`.
fn wildcard(name: &str, sni: &str) -> bool {
    let Some(suffix) = name.strip_prefix("*.") else {
        return false;
    };
    match sni.split_once('.') {
        Some((label, rest)) => !label.is_empty() && rest.eq_ignore_ascii_case(suffix),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_covers_one_label() {
        assert!(wildcard("*.example.com", "a.example.com"));
        assert!(wildcard("*.example.com", "A.Example.COM"));
        assert!(!wildcard("*.example.com", "example.com"));
        assert!(!wildcard("*.example.com", "a.b.example.com"));
        assert!(!wildcard("*.example.com", ".example.com"));
        assert!(!wildcard("www.example.com", "www.example.com"));
    }
}

//! Certificates as the configuration names them: read from PEM, checked (chain, key,
//! that the two belong together), with errors that say what is wrong, and the names and
//! expiry that SNI and warnings need. [`load`] runs while the file is validated, so
//! `tollgate -t` checks certificates too; the runtime TLS setup is in [`crate::tls`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// One `[[tls.certificates]]` entry, loaded and checked.
#[derive(Clone)]
pub(crate) struct Certificate {
    /// The `cert` file, for messages.
    pub path: PathBuf,
    /// The names SNI is matched against: the certificate's DNS names (lowercase,
    /// `*.example.com` for a wildcard), or its subject's common name when it has none.
    pub names: Vec<String>,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
    pub key: Arc<CertifiedKey>,
}

impl Certificate {
    /// Whether the certificate is good for `name` (lower case, no trailing dot): one of
    /// its names is `name`, or is `*.` and the rest of `name` after its first label
    /// (`*.example.com` covers `a.example.com`, not `example.com` nor
    /// `a.b.example.com`; RFC 6125 §6.4.3).
    pub(crate) fn covers(&self, name: &str) -> bool {
        self.names.iter().any(|own| name_covers(own, name))
    }
}

/// Whether a certificate's name `own` is good for `name`, exactly or as a wildcard.
fn name_covers(own: &str, name: &str) -> bool {
    names_exactly(own, name) || names_by_wildcard(own, name)
}

/// Whether a certificate's name `own` is `name` (any case; a wildcard only itself).
pub(crate) fn names_exactly(own: &str, name: &str) -> bool {
    own.eq_ignore_ascii_case(name)
}

/// Whether a certificate's wildcard name `own` covers `name`: `*.example.com` covers
/// `a.example.com`, not `example.com` nor `a.b.example.com`.
pub(crate) fn names_by_wildcard(own: &str, name: &str) -> bool {
    let Some(suffix) = own.strip_prefix("*.") else {
        return false;
    };
    match name.split_once('.') {
        Some((label, rest)) => !label.is_empty() && rest.eq_ignore_ascii_case(suffix),
        None => false,
    }
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
pub(crate) enum CertError {
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
    #[error("{}: not a CA certificate tollgate can use: {reason}", path.display())]
    Anchor { path: PathBuf, reason: String },
    #[error("the key in {} does not match the certificate in {}", key.display(), cert.display())]
    Mismatch { cert: PathBuf, key: PathBuf },
}

impl CertError {
    /// The file the error is about (the key's, for a mismatch).
    pub(crate) fn path(&self) -> &Path {
        match self {
            CertError::Read { path, .. }
            | CertError::NoCertificate { path }
            | CertError::NoKey { path }
            | CertError::Pem { path, .. }
            | CertError::Certificate { path, .. }
            | CertError::Key { path, .. }
            | CertError::Anchor { path, .. } => path,
            CertError::Mismatch { key, .. } => key,
        }
    }
}

/// Reads and checks a PEM certificate chain (leaf first) and its private key (PKCS#8,
/// PKCS#1 RSA or SEC1 EC; RSA, ECDSA P-256/P-384 or Ed25519). The two may be one file.
pub(crate) fn load(cert_path: &Path, key_path: &Path) -> Result<Certificate, CertError> {
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    parse(&cert_pem, cert_path, &key_pem, key_path)
}

/// [`load`] for PEM text at hand; the paths are for messages.
pub(crate) fn parse(
    cert_pem: &[u8],
    cert_path: &Path,
    key_pem: &[u8],
    key_path: &Path,
) -> Result<Certificate, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
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
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
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

/// Reads a PEM file of CA certificates to trust (a `ca` key): at least one, each usable
/// as a trust anchor.
pub(crate) fn load_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(path, err))?;
    if certs.is_empty() {
        return Err(CertError::NoCertificate {
            path: path.to_owned(),
        });
    }
    for cert in &certs {
        usable_as_root(cert).map_err(|reason| CertError::Anchor {
            path: path.to_owned(),
            reason,
        })?;
    }
    Ok(certs)
}

/// Whether rustls can take `cert` as a root: the check `RootCertStore::add` makes.
fn usable_as_root(cert: &CertificateDer<'_>) -> Result<(), String> {
    rustls::RootCertStore::empty()
        .add(cert.clone())
        .map_err(|err| err.to_string())
}

/// An expired certificate is served (the operator may have no other yet), with a
/// warning from `tollgate -t`, at start and at every reload.
pub(crate) fn warn_expired(certificates: &[Certificate]) {
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

/// The crypto tollgate uses: ring's, its cipher suites those of ring's default (TLS
/// 1.3's AEADs, then TLS 1.2's ECDHE with AES-GCM or ChaCha20-Poly1305; no CBC, no RSA
/// key exchange), with AES-128-GCM first in each version, as Mozilla's intermediate
/// profile orders them. AES-256's suites hash with SHA-384, and the handshake's key
/// schedule with it cost a tenth of a handshake's CPU (perf, `https_handshake` in
/// benches/proxy_vs_nginx.sh); SHA-256 and AES-128 are the cheaper and equally sound
/// choice. ring rather than aws-lc-rs: aws-lc-rs took 4.5 % less CPU per resumed handshake
/// but 2.1 MiB more memory at idle, and a C library more to build (measured 2026-11).
pub(crate) fn provider() -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: each suite keeps its place among those of its own rank.
    provider.cipher_suites.sort_by_key(|suite| {
        let version = match suite.version().version {
            rustls::ProtocolVersion::TLSv1_3 => 0,
            _ => 1,
        };
        let aes_128 = matches!(
            suite.suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        (version, !aes_128)
    });
    provider
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_covers_itself_in_any_case() {
        assert!(name_covers("example.com", "example.com"));
        assert!(name_covers("example.com", "EXAMPLE.com"));
        assert!(!name_covers("example.com", "www.example.com"));
        assert!(!name_covers("www.example.com", "example.com"));
    }

    #[test]
    fn a_wildcard_covers_one_label_only() {
        assert!(name_covers("*.example.com", "a.example.com"));
        assert!(name_covers("*.example.com", "A.Example.COM"));
        assert!(!name_covers("*.example.com", "example.com"));
        assert!(!name_covers("*.example.com", "a.b.example.com"));
        assert!(!name_covers("*.example.com", ".example.com"));
    }

    #[test]
    fn a_ca_file_needs_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "no certificate here\n").unwrap();
        let err = load_ca(&path).unwrap_err();
        assert!(matches!(err, CertError::NoCertificate { .. }), "{err}");
        assert!(matches!(
            load_ca(&dir.path().join("missing.pem")),
            Err(CertError::Read { .. })
        ));
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        std::fs::write(&path, params.self_signed(&key).unwrap().pem()).unwrap();
        assert_eq!(load_ca(&path).unwrap().len(), 1);
    }
}

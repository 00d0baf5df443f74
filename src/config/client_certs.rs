//! A site's `client_certificates = { ca, verify }`: nginx's `ssl_client_certificate` and
//! `ssl_verify_client on | optional`. The `ca` file's certificates are the roots a client
//! certificate must chain to; `verify = "on"` (the default) refuses a request sent
//! without one, `"optional"` lets it pass. A certificate that does not verify is refused
//! either way, as nginx refuses it. How the handshake asks for one and how a request is
//! checked: `tls/client_auth.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use serde_spanned::Spanned;
use sha2::{Digest, Sha256};

use super::diag::Diagnostics;
use super::raw::RawClientCertificates;
use super::upstream_tls::ca_certificates;
use super::{Server, Transport};

/// `verify`: whether a request must come with a client certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VerifyClient {
    /// A request without one is refused (400).
    On,
    /// A request without one passes (`$ssl_client_verify` is `NONE`).
    Optional,
}

/// A site's `client_certificates`, read and checked.
#[derive(Clone)]
pub(crate) struct ClientCertificates {
    /// The `ca` file, for messages.
    pub ca: PathBuf,
    pub roots: Arc<RootCertStore>,
    pub verify: VerifyClient,
    /// The `ca` file's certificates as one digest: a connection whose certificate one
    /// site's roots checked is good for another site's requests only when this is the
    /// same (the same file read again after a reload is).
    pub roots_id: u64,
}

impl std::fmt::Debug for ClientCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificates")
            .field("ca", &self.ca)
            .field("verify", &self.verify)
            .finish_non_exhaustive()
    }
}

/// The site's `client_certificates`: `Some(None)` without the key, `None` when it has a
/// problem (reported). A site that answers on no `listen_tls` address cannot have one.
pub(super) fn client_certificates(
    raw: Option<&Spanned<RawClientCertificates>>,
    answers_on_tls: bool,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<ClientCertificates>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let table = raw.get_ref();
    let verify = match table.verify.as_ref().map(|v| (v.get_ref().as_str(), v.span())) {
        None | Some(("on", _)) => Some(VerifyClient::On),
        Some(("optional", _)) => Some(VerifyClient::Optional),
        Some((other, span)) => {
            let message = match other {
                "optional_no_ca" => "`verify = \"optional_no_ca\"` is not supported: a certificate the `ca` \
                                     does not verify is refused; use \"optional\" and a `ca` that signed it"
                    .to_owned(),
                _ => format!("unknown verify \"{other}\": expected \"on\" or \"optional\""),
            };
            diag.error(span, message);
            None
        }
    };
    let Some(ca) = &table.ca else {
        let message = "`client_certificates` needs `ca`: the PEM file of the CAs that sign clients' certificates";
        diag.error(raw.span(), message);
        return None;
    };
    if !answers_on_tls {
        let message = "`client_certificates` needs the site to answer on a `listen_tls` address: \
                       a plain connection carries no certificate";
        diag.error(raw.span(), message);
        return None;
    }
    let certificates = ca_certificates(ca, base, diag)?;
    let mut digest = Sha256::new();
    for certificate in &certificates {
        digest.update((certificate.len() as u64).to_be_bytes());
        digest.update(certificate);
    }
    let digest = digest.finalize();
    let roots_id = u64::from_be_bytes(digest[..8].try_into().unwrap_or_default());
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certificates);
    Some(Some(ClientCertificates {
        ca: base.join(ca.get_ref()),
        roots: Arc::new(roots),
        verify: verify?,
        roots_id,
    }))
}

/// Whether a site that answers on `listen` (`None`: everywhere) answers on a TLS address.
pub(super) fn answers_on_tls(listen: Option<&[super::Address]>, server: Option<&Server>) -> bool {
    match listen {
        Some(addresses) => addresses.iter().any(|a| a.transport == Transport::Tls),
        // Everywhere: as long as `[server]` has TLS listeners (unknown when it had a
        // problem, which is reported already).
        None => server.is_none_or(|server| !server.listen_tls.is_empty()),
    }
}

//! `[upstreams.NAME] tls`: the client side of TLS to a group's servers, built now so
//! that `tollgate -t` and a reload catch a missing or bad file at its key.
//!
//! The roots are the system's (`tls = true`, or `https://` servers alone) or those of
//! the `ca` file; `cert` and `key` add a client certificate (mTLS). The server's
//! certificate is always verified: against the roots, and for the name
//! (`server_name`, else the host in `servers`). Nothing here can turn that off, unlike
//! nginx, whose `proxy_ssl_verify` is off by default. ALPN offers `http/1.1` only: the
//! upstream client speaks HTTP/1.1.

use std::path::Path;
use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, SignatureScheme};
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawUpstreamTls, RawUpstreamTlsTable, Span};

/// What a group's `tls` key says.
pub(super) enum TlsKey {
    /// No `tls` key: the servers' schemes decide.
    Absent,
    /// `tls = false`, at this span.
    Off(Span),
    /// `tls = true` or a table.
    On {
        client: Arc<ClientConfig>,
        /// `server_name`: the name every server's certificate is checked against.
        server_name: Option<ServerName<'static>>,
    },
}

/// The group's `tls` key, its files read; `None` when it had a problem (reported).
pub(super) fn tls_key(
    raw: Option<Spanned<RawUpstreamTls>>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<TlsKey> {
    let Some(raw) = raw else {
        return Some(TlsKey::Absent);
    };
    let span = raw.span();
    match raw.into_inner() {
        RawUpstreamTls::On(false) => Some(TlsKey::Off(span)),
        RawUpstreamTls::On(true) => Some(TlsKey::On {
            client: system_client(span, diag)?,
            server_name: None,
        }),
        RawUpstreamTls::Table(table) => table_key(table, span, base, diag),
    }
}

/// A client that trusts the system's roots and has no certificate of its own.
pub(super) fn system_client(span: Span, diag: &mut Diagnostics<'_>) -> Option<Arc<ClientConfig>> {
    let roots = system_roots(&span, diag)?;
    client_config(roots, None, &span, diag)
}

fn table_key(
    table: RawUpstreamTlsTable,
    span: Span,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<TlsKey> {
    let server_name = match &table.server_name {
        None => Some(None),
        Some(name) => diag
            .check(name.span(), server_name(name.get_ref()))
            .map(Some),
    };
    let roots = match &table.ca {
        None => system_roots(&span, diag),
        Some(ca) => ca_roots(ca, base, diag),
    };
    let identity = identity(&table, &span, base, diag);
    let client = client_config(roots?, identity?, &span, diag)?;
    Some(TlsKey::On {
        client,
        server_name: server_name?,
    })
}

fn server_name(text: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(text.to_owned()).map_err(|_| {
        format!("invalid server_name \"{text}\": expected a host name or an IP address")
    })
}

/// The roots the system trusts (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set, else the
/// distribution's bundle). None found is an error: TLS without roots verifies nothing.
fn system_roots(span: &Span, diag: &mut Diagnostics<'_>) -> Option<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(String::new, |err| format!(" ({err})"));
        diag.error(
            span.clone(),
            format!(
                "no system root certificates found{why}: name the CA that signed the \
                 servers' certificates with `tls.ca`"
            ),
        );
        return None;
    }
    Some(roots)
}

/// The certificates of the `ca` file (relative to `base`): at least one, each usable as
/// a trust anchor.
fn ca_roots(
    path: &Spanned<String>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<RootCertStore> {
    let certs = ca_certificates(path, base, diag)?;
    let mut roots = RootCertStore::empty();
    // `load_ca` has added each one to a store like this already: none is left out.
    roots.add_parsable_certificates(certs);
    Some(roots)
}

/// The certificates of a `ca` file (relative to `base`), read and checked with
/// [`crate::certs::load_ca`]; a problem is reported at the path.
pub(super) fn ca_certificates(
    path: &Spanned<String>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<CertificateDer<'static>>> {
    let file = base.join(path.get_ref());
    diag.check(
        path.span(),
        crate::certs::load_ca(&file).map_err(|err| err.to_string()),
    )
}

/// The client certificate and key (`cert` and `key`, both or neither), checked to
/// belong together. `Some(None)` when there is none.
fn identity(
    table: &RawUpstreamTlsTable,
    span: &Span,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Arc<CertifiedKey>>> {
    let (cert, key) = match (&table.cert, &table.key) {
        (None, None) => return Some(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) | (None, Some(_)) => {
            let message = "a client certificate needs both `cert` and `key`";
            diag.error(span.clone(), message);
            return None;
        }
    };
    let (cert_path, key_path) = (base.join(cert.get_ref()), base.join(key.get_ref()));
    match crate::certs::load(&cert_path, &key_path) {
        Ok(loaded) => Some(Some(loaded.key)),
        Err(err) => {
            let at = if err.path() == key_path {
                key.span()
            } else {
                cert.span()
            };
            diag.error(at, err.to_string());
            None
        }
    }
}

/// The client: TLS 1.3 and 1.2 with tollgate's crypto, verification against `roots`,
/// `identity` offered when the server asks for a certificate, ALPN `http/1.1`.
fn client_config(
    roots: RootCertStore,
    identity: Option<Arc<CertifiedKey>>,
    span: &Span,
    diag: &mut Diagnostics<'_>,
) -> Option<Arc<ClientConfig>> {
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let builder = ClientConfig::builder_with_provider(Arc::new(crate::certs::provider()))
        .with_protocol_versions(&versions);
    let builder = diag.check(span.clone(), builder.map_err(|err| err.to_string()))?;
    let builder = builder.with_root_certificates(roots);
    let mut config = match identity {
        Some(key) => builder.with_client_cert_resolver(Arc::new(Identity(key))),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Some(Arc::new(config))
}

/// The one client certificate, offered whatever the server names as acceptable issuers
/// (rustls then signs with the key only if the server accepts one of its schemes).
#[derive(Debug)]
struct Identity(Arc<CertifiedKey>);

impl ResolvesClientCert for Identity {
    fn resolve(
        &self,
        _acceptable_issuers: &[&[u8]],
        _schemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

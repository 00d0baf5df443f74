//! Client certificates (a site's `client_certificates`, nginx `ssl_verify_client`).
//!
//! As nginx does, the handshake never fails over a client certificate: the server asks
//! for one (naming the site's CAs) only when the site chosen by SNI has
//! `client_certificates`, takes what the client sends, and checks that the client holds
//! its key (the handshake's signature). Whether the certificate chains to the site's CAs
//! is checked once the handshake is over ([`ClientAuth::check`]), and each request is then
//! answered by what that check found ([`ClientAuth::admit`]): 400 for a certificate that
//! did not verify or (with `verify = "on"`) for none, 421 for a request to this site on a
//! connection whose certificate was checked for another (its SNI named another name).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use sha1::{Digest, Sha1};

use crate::config::{ClientCertificates, VerifyClient};

/// A site's client certificates, ready for handshakes and requests.
#[derive(Debug)]
pub(crate) struct ClientAuth {
    verify: VerifyClient,
    roots_id: u64,
    /// Checks a chain against the site's CAs, after the handshake.
    verifier: Arc<dyn ClientCertVerifier>,
    /// The site's server configs, asking for a certificate: with ALPN `h2`, and without
    /// (for listeners with `http2 = false`, when any).
    server: Arc<ServerConfig>,
    server_http1: Option<Arc<ServerConfig>>,
}

/// Why a request is refused on a site with `client_certificates`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 400: the certificate sent does not chain to the site's CAs (nginx's "The SSL
    /// certificate error").
    BadCertificate,
    /// 400: none was sent, and the site requires one.
    NoCertificate,
    /// 421: the connection's certificate was checked for another site (or none was asked
    /// for): the client should ask again on a connection of its own to this name.
    Misdirected,
}

impl Refusal {
    /// The reason its answer gives, nginx's words for the two 400s.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::BadCertificate => "The SSL certificate error",
            Refusal::NoCertificate => "No required SSL certificate was sent",
            Refusal::Misdirected => "Misdirected Request",
        }
    }
}

/// What the handshake told of a TLS connection, kept with the connection.
#[derive(Debug, Default)]
pub(crate) struct Peer {
    /// The SNI the client sent, as sent.
    pub sni: Option<Box<str>>,
    /// The CAs the client certificate (or its absence) was checked against
    /// ([`ClientCertificates::roots_id`]); `None` when the site SNI chose asks for none.
    pub checked_with: Option<u64>,
    pub certificate: Checked,
    /// `$ssl_client_*` and `$ja4`.
    pub vars: crate::vars::Handshake,
}

/// What the check of a connection's client certificate found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Checked {
    #[default]
    None,
    Verified,
    Failed,
}

impl ClientAuth {
    /// `settings` with the server configs `config` makes (with `h2` when given `true`);
    /// `http1` when some listener has `http2 = false`.
    pub(crate) fn new(
        settings: &ClientCertificates,
        http1: bool,
        config: impl Fn(Arc<dyn ClientCertVerifier>, bool) -> Result<Arc<ServerConfig>, rustls::Error>,
    ) -> Result<ClientAuth, rustls::Error> {
        let provider = Arc::new(crate::certs::provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(settings.roots.clone(), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|err| rustls::Error::General(err.to_string()))?;
        let asking: Arc<dyn ClientCertVerifier> = Arc::new(Asking(verifier.clone()));
        Ok(ClientAuth {
            verify: settings.verify,
            roots_id: settings.roots_id,
            server: config(asking.clone(), true)?,
            server_http1: if http1 { Some(config(asking, false)?) } else { None },
            verifier,
        })
    }

    /// The server config for a handshake on a listener with `http2` or without.
    pub(crate) fn server_config(&self, http2: bool) -> &Arc<ServerConfig> {
        match (http2, &self.server_http1) {
            (false, Some(http1)) => http1,
            _ => &self.server,
        }
    }

    /// Checks the chain a client sent (leaf first; `None` or empty without one) against
    /// the site's CAs at `now`, and fills in `peer`'s `$ssl_client_*`.
    pub(crate) fn check(&self, chain: Option<&[CertificateDer<'_>]>, now: UnixTime, peer: &mut Peer) {
        peer.checked_with = Some(self.roots_id);
        let Some((leaf, intermediates)) = chain.and_then(<[_]>::split_first) else {
            peer.certificate = Checked::None;
            peer.vars.client_verify = "NONE".into();
            return;
        };
        match self.verifier.verify_client_cert(leaf, intermediates, now) {
            Ok(_) => {
                peer.certificate = Checked::Verified;
                peer.vars.client_verify = "SUCCESS".into();
                peer.vars.client_s_dn = super::subject::rfc2253(leaf).unwrap_or_default().into();
                peer.vars.client_fingerprint = fingerprint(leaf).into();
            }
            Err(err) => {
                peer.certificate = Checked::Failed;
                peer.vars.client_verify = format!("FAILED:{}", failure(&err)).into();
            }
        }
    }

    /// Whether a request to this site, naming `host` (as sent), may go on over a
    /// connection whose handshake told `peer` (`https`: over TLS; `None` when the
    /// handshake was before a reload gave the site its `client_certificates`).
    pub(crate) fn admit(&self, https: bool, peer: Option<&Peer>, host: Option<&str>) -> Result<(), Refusal> {
        let Some(peer) = peer else {
            return match (https, self.verify) {
                // Asked nothing: a new connection will be.
                (true, _) => Err(Refusal::Misdirected),
                // Plain HTTP carries no certificate: nginx lets such a request pass a
                // site that requires one, tollgate does not.
                (false, VerifyClient::On) => Err(Refusal::NoCertificate),
                (false, VerifyClient::Optional) => Ok(()),
            };
        };
        // nginx's rule: on a site that checks certificates, the request names the name
        // the handshake did; and ours: the certificate was checked with this site's CAs.
        if let (Some(sni), Some(host)) = (&peer.sni, host) {
            if !sni.eq_ignore_ascii_case(&crate::vars::host_key(host)) {
                return Err(Refusal::Misdirected);
            }
        }
        if peer.checked_with != Some(self.roots_id) {
            return Err(Refusal::Misdirected);
        }
        match (peer.certificate, self.verify) {
            (Checked::Verified, _) | (Checked::None, VerifyClient::Optional) => Ok(()),
            (Checked::Failed, _) => Err(Refusal::BadCertificate),
            (Checked::None, VerifyClient::On) => Err(Refusal::NoCertificate),
        }
    }
}

/// `$ssl_client_fingerprint`: the SHA-1 of the certificate's DER, lower-case hex.
pub(crate) fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha1::digest(cert.as_ref());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The words of `$ssl_client_verify`'s `FAILED:` for `err`.
fn failure(err: &rustls::Error) -> String {
    use rustls::CertificateError as E;
    match err {
        rustls::Error::InvalidCertificate(E::UnknownIssuer) => "unable to get local issuer certificate".to_owned(),
        rustls::Error::InvalidCertificate(E::Expired | E::ExpiredContext { .. }) => "certificate has expired".to_owned(),
        rustls::Error::InvalidCertificate(E::NotValidYet | E::NotValidYetContext { .. }) => {
            "certificate is not yet valid".to_owned()
        }
        rustls::Error::InvalidCertificate(E::Revoked) => "certificate revoked".to_owned(),
        rustls::Error::InvalidCertificate(E::BadSignature) => "certificate signature failure".to_owned(),
        other => other.to_string(),
    }
}

/// What the handshake uses: asks for a certificate naming the site's CAs, accepts any
/// (the chain is checked after the handshake, [`ClientAuth::check`]), and checks the
/// handshake's signature with the certificate's key, so the client holds that key.
#[derive(Debug)]
struct Asking(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Asking {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests;

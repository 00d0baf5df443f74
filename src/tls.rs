//! TLS at the edge, with rustls: SNI choosing among the certificates [`crate::certs`]
//! loaded (the first is the default) and those ACME keeps ([`crate::acme::Published`]),
//! ALPN `h2` (unless a listener says `http2 = false`) and `http/1.1` (and `acme-tls/1`
//! for tls-alpn-01 validation), TLS 1.2 and
//! 1.3 only, the server's cipher order, and session resumption that survives reloads.
//!
//! [`server_config`] runs when a snapshot is built, with the [`Sessions`] the gateway
//! keeps for its whole life.

mod client_auth;
pub mod ja4;
mod names;
mod quic;
mod subject;

use std::fmt;
use std::sync::Arc;

use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::acme::{Published, ACME_TLS_ALPN};
use crate::certs::{names_by_wildcard, names_exactly, provider, Certificate};

pub(crate) use client_auth::{ClientAuth, Peer, Refusal};
pub(crate) use names::openssl_names;
pub(crate) use quic::{host_key, server_config as quic_server_config};

/// Sessions a server keeps for resumption by session ID (TLS 1.2).
const SESSION_CACHE: usize = 32 * 1024;

/// What resumption needs to outlive a reload: the ticket keys (TLS 1.3 and 1.2
/// tickets) and the session cache. The gateway makes them once.
#[derive(Clone)]
pub(crate) struct Sessions {
    ticketer: Arc<dyn ProducesTickets>,
    cache: Arc<dyn StoresServerSessions>,
    /// QUIC's keys: address-validation tokens (Retry) and stateless resets, from
    /// `[quic] host_key_file` (the same across restarts) or random (made once).
    pub quic: quic::Keys,
}

impl Sessions {
    /// With QUIC's keys from `host_key` (`[quic] host_key_file`'s secret), else random.
    pub(crate) fn new(host_key: Option<&[u8; quic::HOST_KEY_LEN]>) -> Result<Sessions, rustls::Error> {
        Ok(Sessions {
            ticketer: rustls::crypto::ring::Ticketer::new()?,
            cache: rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE),
            quic: quic::Keys::new(host_key)?,
        })
    }
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

/// A server config serving `certificates` (SNI; the first is the default) and, with
/// `acme`, the managed names' certificates, with ALPN `h2` (when `http2`) then
/// `http/1.1`, TLS 1.3 and 1.2, the server's cipher order, and `sessions`; asking for a
/// client certificate when given `clients` (a site's, [`ClientAuth`]).
pub(crate) fn server_config(
    certificates: &[Certificate],
    acme: Option<&Arc<Published>>,
    sessions: &Sessions,
    http2: bool,
    clients: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let resolver = Resolver::new(certificates, acme);
    let builder = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match clients {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(resolver));
    // `http/1.0` too, as nginx: a client offering only that (`curl --http1.0`) would
    // otherwise fail the handshake. Without `h2`, a client offering only `h2` fails it,
    // as with nginx's listener without `http2`.
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
    if http2 {
        config.alpn_protocols.insert(0, b"h2".to_vec());
    }
    if acme.is_some() {
        // Last: only a validator, which offers nothing else, gets it.
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    config.ignore_client_order = true;
    config.ticketer = sessions.ticketer.clone();
    // One TLS 1.3 ticket per handshake (rustls's default is two, as OpenSSL's): a resumed
    // connection gets a fresh one, so a client resuming one connection after another
    // never runs out, and each ticket is a key derivation and an encryption more per
    // handshake (Go's crypto/tls sends one too).
    config.send_tls13_tickets = 1;
    config.session_storage = sessions.cache.clone();
    Ok(Arc::new(config))
}

/// Chooses a certificate by SNI: a static one with the exact name first, then with a
/// wildcard (among several, the first whose key the client can verify), then a managed
/// name's. No SNI, or no match: the first static certificate, else the first managed
/// name's. A tls-alpn-01 handshake (ALPN `acme-tls/1` alone) gets the challenge
/// certificate of its name or nothing.
#[derive(Debug)]
struct Resolver {
    certificates: Vec<(Vec<String>, Arc<CertifiedKey>)>,
    acme: Option<Arc<Published>>,
}

impl Resolver {
    fn new(certificates: &[Certificate], acme: Option<&Arc<Published>>) -> Resolver {
        Resolver {
            certificates: certificates
                .iter()
                .map(|c| (c.names.clone(), c.key.clone()))
                .collect(),
            acme: acme.cloned(),
        }
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(acme) = &self.acme {
            // A validator offers `acme-tls/1` alone (RFC 8737 §3); a client offering it
            // beside others is served as any other.
            let mut alpn = hello.alpn().into_iter().flatten();
            if alpn.next() == Some(ACME_TLS_ALPN) && alpn.next().is_none() {
                return acme.tls_alpn01(hello.server_name()?);
            }
        }
        let schemes = hello.signature_schemes();
        let usable = |key: &&Arc<CertifiedKey>| key.key.choose_scheme(schemes).is_some();
        if let Some(sni) = hello.server_name() {
            for matches in [names_exactly as fn(&str, &str) -> bool, names_by_wildcard] {
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
            if let Some(key) = self.acme.as_ref().and_then(|acme| acme.certificate(sni)) {
                return Some(key);
            }
        }
        let mut all = self.certificates.iter().map(|(_, key)| key);
        let first = all.clone().next();
        let fallback = all.find(usable).or(first).cloned();
        fallback.or_else(|| self.acme.as_ref()?.default_certificate())
    }
}

//! The QUIC side of TLS: the server config HTTP/3 listeners accept with. The same
//! certificates and resolver as TCP's (SNI, ACME), TLS 1.3 only (QUIC has no other), ALPN
//! `h3`, 0-RTT only with `early_data`, the same session tickets; and quinn's transport settings from `[quic]`.
//! Also QUIC's own keys ([`Keys`]), from `[quic] host_key_file` ([`host_key`]) so that a
//! restart keeps them: a client's Retry token and a stateless reset stay good across it.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use quinn::crypto::rustls::QuicServerConfig;
use rustls::ServerConfig;

use super::{Resolver, Sessions};
use crate::acme::Published;
use crate::certs::{provider, Certificate};
use crate::config::Quic;

/// HTTP/3's ALPN (RFC 9114 §3.1).
const H3_ALPN: &[u8] = b"h3";

/// The config a QUIC endpoint accepts connections with: `certificates` and `acme`'s as
/// TCP's TLS serves them, `settings`' idle timeout, at most `max_streams` requests at once
/// per connection (`http2_max_concurrent_streams`, HTTP/3 being its kin), and the
/// gateway's `sessions`, whose address-validation key outlives reloads.
pub(crate) fn server_config(
    certificates: &[Certificate],
    acme: Option<&Arc<Published>>,
    sessions: &Sessions,
    settings: &Quic,
    max_streams: u32,
) -> Result<Arc<quinn::ServerConfig>, rustls::Error> {
    let mut tls = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver::new(certificates, acme)));
    tls.alpn_protocols = vec![H3_ALPN.to_vec()];
    tls.send_tls13_tickets = 1;
    tls.session_storage = sessions.cache.clone();
    if settings.early_data {
        // 0-RTT (a replayable first flight; `server/h3.rs` takes safe methods from it),
        // all or nothing in QUIC (RFC 9001 §4.6.1). rustls takes it only on sessions kept
        // here, each resumed once: a captured flight replayed finds its session gone, and
        // another instance has none.
        tls.max_early_data_size = u32::MAX;
    } else {
        tls.ticketer = sessions.ticketer.clone();
    }
    let crypto = QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    let mut config = quinn::ServerConfig::new(Arc::new(crypto), sessions.quic.tokens.clone());
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(settings.max_idle_timeout)
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    transport.max_idle_timeout(Some(idle));
    transport.max_concurrent_bidi_streams(max_streams.into());
    transport.enable_segmentation_offload(settings.segmentation_offload);
    // Clients open no streams of their own beyond HTTP/3's control and QPACK ones.
    transport.max_concurrent_uni_streams(3u32.into());
    config.transport_config(Arc::new(transport));
    Ok(Arc::new(config))
}

/// The length of `host_key_file`'s secret.
pub(crate) const HOST_KEY_LEN: usize = 64;

/// QUIC's keys, both derived from one secret.
#[derive(Clone)]
pub(crate) struct Keys {
    /// Seals and opens address-validation tokens (Retry).
    pub tokens: Arc<dyn quinn::crypto::HandshakeTokenKey>,
    /// Makes stateless-reset tokens (an endpoint's `EndpointConfig`).
    pub reset: Arc<dyn quinn::crypto::HmacKey>,
}

impl Keys {
    /// The keys of `secret`, or of a random one.
    pub(crate) fn new(secret: Option<&[u8; HOST_KEY_LEN]>) -> Result<Keys, rustls::Error> {
        let secret = match secret {
            Some(secret) => *secret,
            None => random()?,
        };
        let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"tollgate quic").extract(&secret);
        let mut reset = [0u8; 32];
        prk.expand(&[b"stateless reset"], ring::hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut reset))
            .map_err(|_| rustls::Error::General("cannot derive QUIC's reset key".to_owned()))?;
        let tokens = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"tollgate quic tokens").extract(&secret);
        Ok(Keys {
            tokens: Arc::new(tokens),
            reset: Arc::new(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &reset)),
        })
    }
}

fn random() -> Result<[u8; HOST_KEY_LEN], rustls::Error> {
    let mut secret = [0u8; HOST_KEY_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
        .map_err(|_| rustls::Error::General("no randomness for QUIC's keys".to_owned()))?;
    Ok(secret)
}

/// The secret in `path` (`[quic] host_key_file`): 64 bytes, made (mode 0600) when the
/// file does not exist. A file of another length, or one others may read, is refused.
pub(crate) fn host_key(path: &Path) -> Result<[u8; HOST_KEY_LEN], String> {
    let shown = path.display();
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut file) => {
            let secret = random().map_err(|err| err.to_string())?;
            file.write_all(&secret)
                .and_then(|()| file.sync_all())
                .map_err(|err| format!("cannot write host_key_file {shown}: {err}"))?;
            tracing::info!(path = %shown, "made QUIC's host key");
            return Ok(secret);
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(format!("cannot make host_key_file {shown}: {err}")),
    }
    let mut file = std::fs::File::open(path).map_err(|err| format!("cannot read host_key_file {shown}: {err}"))?;
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &file.metadata().map_err(|err| format!("cannot read host_key_file {shown}: {err}"))?.permissions(),
    );
    if mode & 0o077 != 0 {
        return Err(format!("host_key_file {shown} may be read by others (mode {:o}): chmod 600 it", mode & 0o777));
    }
    let mut secret = Vec::with_capacity(HOST_KEY_LEN + 1);
    Read::by_ref(&mut file)
        .take(HOST_KEY_LEN as u64 + 1)
        .read_to_end(&mut secret)
        .map_err(|err| format!("cannot read host_key_file {shown}: {err}"))?;
    <[u8; HOST_KEY_LEN]>::try_from(secret.as_slice()).map_err(|_| {
        format!("host_key_file {shown} holds {} bytes, not {HOST_KEY_LEN}: remove it and tollgate makes a new one", secret.len())
    })
}

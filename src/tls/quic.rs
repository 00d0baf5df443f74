//! The QUIC side of TLS: the server config HTTP/3 listeners accept with. The same
//! certificates and resolver as TCP's (SNI, ACME), TLS 1.3 only (QUIC has no other), ALPN
//! `h3`, no 0-RTT, the same session tickets; and quinn's transport settings from `[quic]`.

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
    tls.ticketer = sessions.ticketer.clone();
    tls.send_tls13_tickets = 1;
    tls.session_storage = sessions.cache.clone();
    // 0-RTT stays off (`early_data`, not yet): a replayed request would be charged twice.
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    let mut config = quinn::ServerConfig::new(Arc::new(crypto), sessions.quic_tokens.clone());
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(settings.max_idle_timeout)
        .map_err(|err| rustls::Error::General(err.to_string()))?;
    transport.max_idle_timeout(Some(idle));
    transport.max_concurrent_bidi_streams(max_streams.into());
    // Clients open no streams of their own beyond HTTP/3's control and QPACK ones.
    transport.max_concurrent_uni_streams(3u32.into());
    config.transport_config(Arc::new(transport));
    Ok(Arc::new(config))
}

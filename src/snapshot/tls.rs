//! `[tls]`, `[acme]` and the sites' `client_certificates`, ready to accept with: the
//! server configs handshakes use, and whether a handshake must read the ClientHello
//! first (to choose a site's config by SNI, or for `$ja4`).

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::tls::{self, ClientAuth};
use crate::vars::Var;

use super::{BuildError, Lasting};

/// `[tls]`, ready to use.
#[derive(Clone)]
pub(crate) struct TlsServer {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The same without ALPN `h2`, for listeners with `http2 = false` (when any).
    pub acceptor_http1: Option<tokio_rustls::TlsAcceptor>,
    pub handshake_timeout: Duration,
    /// Each name of the static certificates and the end of its validity (the first
    /// certificate with a name is the one served), for `/metrics`.
    pub expiries: Vec<(String, i64)>,
    /// Some site has `client_certificates`: the server config is chosen per handshake,
    /// by the site its SNI names.
    pub per_site: bool,
    /// A text reads `$ja4`: each ClientHello is fingerprinted before the handshake.
    pub ja4: bool,
    /// What QUIC endpoints accept with, when some `listen_tls` has `quic = true`.
    pub quic: Option<Arc<quinn::ServerConfig>>,
    /// New QUIC connections per second past which they get a Retry, and are refused.
    pub quic_admission: QuicAdmission,
    /// `[quic] early_data`: requests taken from 0-RTT (safe methods only).
    pub quic_early_data: bool,
    /// The key a QUIC endpoint makes stateless resets with (the gateway's, lasting).
    pub quic_reset: Arc<dyn quinn::crypto::HmacKey>,
    /// The `listen_tls` addresses (as configured) whose answers over TCP advertise
    /// HTTP/3 (`quic = true` with `[quic] advertise`), and the port to name
    /// (`advertised_port`; `None`: the connection's own).
    pub advertised: (Vec<std::net::SocketAddr>, Option<u16>),
}

impl TlsServer {
    /// The `Alt-Svc` of the answers over TCP on a connection to `address` (as
    /// configured) at `port`, when they advertise HTTP/3.
    pub(crate) fn alt_svc(&self, address: std::net::SocketAddr, port: u16) -> Option<http::HeaderValue> {
        let (addresses, advertised_port) = &self.advertised;
        if !addresses.contains(&address) {
            return None;
        }
        let port = advertised_port.unwrap_or(port);
        http::HeaderValue::try_from(format!("h3=\":{port}\"; ma=86400")).ok()
    }

    /// The acceptor for a listener serving HTTP/2 (`http2`) or not.
    pub(crate) fn acceptor(&self, http2: bool) -> &tokio_rustls::TlsAcceptor {
        match (http2, &self.acceptor_http1) {
            (false, Some(acceptor)) => acceptor,
            _ => &self.acceptor,
        }
    }
}

/// `[quic] retry_above` and `refuse_above`, per second, and `per_address`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QuicAdmission {
    pub retry_above: Option<f64>,
    pub refuse_above: Option<f64>,
    pub per_address: Option<crate::config::PerAddress>,
}

/// Each site's client certificates (by its index in the file), ready for handshakes.
pub(super) type ClientAuths = Vec<Option<Arc<ClientAuth>>>;

/// `[tls]` and `[acme]`, ready to accept with (`None` when there is no certificate to
/// serve), and each site's [`ClientAuth`]; warns of expired certificates.
pub(super) fn server(config: &Config, lasting: &Lasting<'_>) -> Result<(Option<TlsServer>, ClientAuths), BuildError> {
    let acme = config.acme.as_ref().map(|_| lasting.acme);
    let none = || config.sites.iter().map(|_| None).collect();
    let Some(settings) = &config.tls else {
        return Ok((None, none()));
    };
    if settings.certificates.is_empty() && acme.is_none() {
        return Ok((None, none()));
    }
    crate::certs::warn_expired(&settings.certificates);
    let http1 = config.server.listen_tls.iter().any(|l| !l.http2);
    let server_config =
        |clients, http2| tls::server_config(&settings.certificates, acme, lasting.sessions, http2, clients);
    let acceptor_http1 = match http1 {
        true => Some(tokio_rustls::TlsAcceptor::from(server_config(None, false)?)),
        false => None,
    };
    let mut client_auths = Vec::with_capacity(config.sites.len());
    for site in &config.sites {
        let auth = match &site.client_certificates {
            Some(settings) => Some(Arc::new(ClientAuth::new(settings, http1, |verifier, http2| {
                server_config(Some(verifier), http2)
            })?)),
            None => None,
        };
        client_auths.push(auth);
    }
    let mut expiries: Vec<(String, i64)> = Vec::new();
    for certificate in &settings.certificates {
        for name in &certificate.names {
            if !expiries.iter().any(|(seen, _)| seen == name) {
                expiries.push((name.clone(), certificate.not_after));
            }
        }
    }
    let server = TlsServer {
        acceptor: tokio_rustls::TlsAcceptor::from(server_config(None, true)?),
        acceptor_http1,
        handshake_timeout: settings.handshake_timeout,
        expiries,
        per_site: client_auths.iter().any(Option::is_some),
        ja4: reads_ja4(config),
        quic: match config.server.listen_tls.iter().any(|l| l.quic) {
            true => Some(tls::quic_server_config(
                &settings.certificates,
                acme,
                lasting.sessions,
                &config.quic,
                config.server.http2_max_concurrent_streams,
            )?),
            false => None,
        },
        quic_admission: QuicAdmission {
            retry_above: config.quic.retry_above.map(crate::limit::Rate::per_second),
            refuse_above: config.quic.refuse_above.map(crate::limit::Rate::per_second),
            per_address: config.quic.per_address,
        },
        quic_reset: lasting.sessions.quic.reset.clone(),
        quic_early_data: config.quic.early_data,
        advertised: (
            match config.quic.advertise {
                true => config.server.listen_tls.iter().filter(|l| l.quic).map(|l| l.addr).collect(),
                false => Vec::new(),
            },
            config.quic.advertised_port,
        ),
    };
    Ok((Some(server), client_auths))
}

/// Whether any text of the file reads `$ja4`: a location's, or a zone's key or plan.
fn reads_ja4(config: &Config) -> bool {
    let ja4 = |text: &crate::config::VarText| text.uses(|var| matches!(var, Var::Ja4));
    let locations = config.sites.iter().flat_map(|site| &site.locations);
    let in_locations = locations
        .flat_map(|location| super::texts::texts(location).chain(super::texts::tries(location)))
        .any(ja4);
    let in_zones = config
        .zones
        .iter()
        .any(|zone| ja4(&zone.key) || zone.plan_from.as_ref().is_some_and(ja4));
    in_locations || in_zones
}

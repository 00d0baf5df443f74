//! `auth.request` (DESIGN §18): nginx's `auth_request`, Traefik's ForwardAuth. Before a
//! request goes on, a `GET` carrying its headers asks the auth service at `url`; a 2xx
//! lets it pass with the service's `copy_headers`, anything else is answered
//! (`proxy::auth::forward`).
//!
//! The URL is read here, its host resolved now (as an upstream server's is), so that
//! `tollgate -t` names a bad one; the service is then reached like an upstream group of
//! its own, with pooled connections and, for `https://`, the system's roots.

use std::net::SocketAddr;
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderName, HeaderValue, Uri};
use rustls::pki_types::ServerName;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawForwardAuth, Span};
use super::upstreams::UpstreamServer;
use super::{upstream_tls, values, Balance, Upstream};

/// How long the service has to answer when `timeout` is not set.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Requests asking the service at once when `max_in_flight` is not set.
const DEFAULT_MAX_IN_FLIGHT: u32 = 256;

/// Idle connections kept to the service, per worker.
const KEEPALIVE: usize = 32;

/// The headers `copy_headers` may not name: they frame or route the request, which the
/// service's answer must not change.
const NOT_COPIED: [&str; 10] = [
    "connection",
    "content-length",
    "expect",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// `auth.request`, read and resolved.
#[derive(Debug)]
pub(crate) struct ForwardAuth {
    /// The URL as written (for messages and `/metrics`).
    pub url: String,
    /// What the request line asks for: the URL's path and query.
    pub target: PathAndQuery,
    /// The `Host` sent: the URL's host and port, as nginx's `proxy_pass` sends it.
    pub host: HeaderValue,
    /// The service as an upstream group of one host: its addresses, TLS, timeouts.
    pub upstream: Upstream,
    /// The headers of a 2xx answer that go on with the request, replacing the client's.
    pub copy_headers: Vec<HeaderName>,
    /// The most the whole exchange may take, waiting for a turn included.
    pub timeout: Duration,
    /// Requests asking the service at once; more wait for a turn within `timeout`.
    pub max_in_flight: u32,
}

pub(super) fn forward_auth(raw: &Spanned<RawForwardAuth>, diag: &mut Diagnostics<'_>) -> Option<ForwardAuth> {
    let written = raw.get_ref();
    let Some(url) = &written.url else {
        diag.error(raw.span(), "auth.request needs `url`, the auth service's address, e.g. \"http://127.0.0.1:4180/oauth2/auth\"");
        return None;
    };
    let timeout = match &written.timeout {
        Some(value) => diag.check(value.span(), values::duration(value.get_ref())),
        None => Some(DEFAULT_TIMEOUT),
    };
    let max_in_flight = match &written.max_in_flight {
        Some(n) => diag.check(n.span(), in_flight(*n.get_ref())),
        None => Some(DEFAULT_MAX_IN_FLIGHT),
    };
    let copy_headers = match &written.copy_headers {
        Some(names) => copied(names, diag),
        None => Some(Vec::new()),
    };
    let timeout = timeout?;
    let service = Endpoint::read(url, "auth", timeout, diag)?;
    Some(ForwardAuth {
        url: url.get_ref().clone(),
        target: service.target,
        host: service.host,
        upstream: service.upstream,
        copy_headers: copy_headers?,
        timeout,
        max_in_flight: max_in_flight?,
    })
}

fn in_flight(n: i64) -> Result<u32, String> {
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=65_536).contains(n))
        .ok_or_else(|| format!("invalid max_in_flight {n}: expected 1 to 65536"))
}

/// `copy_headers`: header names, none that frames or routes the request.
fn copied(names: &Spanned<Vec<Spanned<String>>>, diag: &mut Diagnostics<'_>) -> Option<Vec<HeaderName>> {
    let mut valid = true;
    let mut copied = Vec::new();
    for name in names.get_ref() {
        let checked = HeaderName::from_bytes(name.get_ref().as_bytes())
            .map_err(|_| format!("invalid header name {:?} in copy_headers", name.get_ref()))
            .and_then(|header| match NOT_COPIED.contains(&header.as_str()) {
                true => Err(format!("copy_headers cannot name {header}: it frames or routes the request")),
                false => Ok(header),
            });
        match diag.check(name.span(), checked) {
            Some(header) if !copied.contains(&header) => copied.push(header),
            Some(_) => {}
            None => valid = false,
        }
    }
    valid.then_some(copied)
}

/// A URL tollgate asks itself (an auth service, a JWK set): where to connect and what
/// to ask, its host resolved now.
pub(super) struct Endpoint {
    /// The URL's path and query.
    pub target: PathAndQuery,
    /// The `Host` sent: the URL's host and port.
    pub host: HeaderValue,
    /// The host's addresses as a group, TLS with the system's roots for `https://`.
    pub upstream: Upstream,
}

impl Endpoint {
    /// The URL at `url`; `what` names its group (`auth URL`, `jwks URL`).
    pub(super) fn read(url: &Spanned<String>, what: &str, timeout: Duration, diag: &mut Diagnostics<'_>) -> Option<Endpoint> {
        let parts = diag.check(url.span(), Parts::parse(url.get_ref()))?;
        let upstream = parts.upstream(&format!("{what} {}", url.get_ref()), url.span(), timeout, diag)?;
        Some(Endpoint {
            target: parts.target,
            host: parts.host,
            upstream,
        })
    }
}

/// The parts of the URL that matter.
struct Parts {
    https: bool,
    authority: Authority,
    port: u16,
    target: PathAndQuery,
    host: HeaderValue,
}

impl Parts {
    fn parse(url: &str) -> Result<Parts, String> {
        let invalid = |why: &str| format!("invalid url {url:?}: {why}");
        let uri: Uri = url.parse().map_err(|_| invalid("not a URL"))?;
        let https = match uri.scheme() {
            Some(scheme) if *scheme == Scheme::HTTPS => true,
            Some(scheme) if *scheme == Scheme::HTTP => false,
            _ => return Err(invalid("expected http:// or https://")),
        };
        let Some(authority) = uri.authority().cloned() else {
            return Err(invalid("no host"));
        };
        if authority.as_str().contains('@') {
            return Err(invalid("a user or password in the URL would be sent to the service in the clear; put credentials in the service's own config"));
        }
        if authority.host().is_empty() {
            return Err(invalid("no host"));
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let target = uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
        let target = match target.as_str().is_empty() {
            true => PathAndQuery::from_static("/"),
            false => target,
        };
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| invalid("its host cannot be sent"))?;
        Ok(Parts {
            https,
            authority,
            port,
            target,
            host,
        })
    }

    /// The service as a group of the host's addresses (resolved now), TLS with the
    /// system's roots for `https://`.
    fn upstream(&self, name: &str, span: Span, timeout: Duration, diag: &mut Diagnostics<'_>) -> Option<Upstream> {
        let host = self.authority.host();
        let addrs: Vec<SocketAddr> = diag.check(span.clone(), values::upstream_addrs(&format!("{host}:{}", self.port)))?;
        let (tls, tls_name) = match self.https {
            true => {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(bare.to_owned())
                    .map_err(|_| format!("\"{bare}\" is not a name a certificate can carry"));
                let name = diag.check(span.clone(), name)?;
                (Some(upstream_tls::system_client(span, diag)?), Some(name))
            }
            false => (None, None),
        };
        let servers = addrs.into_iter().map(|addr| UpstreamServer {
            addr,
            weight: 1,
            tls_name: tls_name.clone(),
        });
        Some(Upstream {
            name: name.to_owned(),
            servers: servers.collect(),
            balance: Balance::RoundRobin,
            connect_timeout: timeout,
            read_timeout: timeout,
            keepalive: KEEPALIVE,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            tls,
            concurrency: None,
        })
    }
}

//! `[upstreams.NAME]`: the servers of each group (host names resolved now), their
//! weights, the balancing policy, the timeouts, and whether the group speaks TLS
//! (`tls`, or servers written `https://`; the TLS settings themselves are in
//! [`super::upstream_tls`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawBalance, RawServerItem, RawUpstream, RawUpstreamEntry, Span};
use super::upstream_tls::{self, TlsKey};
use super::values::duration_or;
use super::{values, AutoSettings};

/// `[upstreams.NAME]`.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub name: String,
    /// Never empty. A host name in the file is resolved when the file is loaded and
    /// each of its addresses becomes a server of the same weight (as nginx does).
    pub servers: Vec<UpstreamServer>,
    pub balance: Balance,
    pub connect_timeout: Duration,
    /// No response bytes for this long (head or between body chunks): 504.
    pub read_timeout: Duration,
    /// Idle connections kept per server (per worker).
    pub keepalive: usize,
    /// Passive health: `max_fails` failures within `fail_timeout` take a server out for
    /// `fail_timeout`. 0 turns passive health off (nginx).
    pub max_fails: u32,
    pub fail_timeout: Duration,
    /// TLS to every server of the group (`tls`, or servers written `https://`); `None`
    /// speaks plain HTTP. Its roots are the system's or the `ca` file's, it may carry a
    /// client certificate, and it offers ALPN `http/1.1` only. Certificates are always
    /// verified: there is no setting that turns verification off.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `max_in_flight` and its queue; `None`: no gate.
    pub concurrency: Option<Concurrency>,
}

/// `max_in_flight` with `queue` and `queue_timeout`: at most the limit in flight on the
/// group, up to `queue` more waiting at most `queue_timeout`, the rest answered 503.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Concurrency {
    pub max_in_flight: MaxInFlight,
    pub queue: u32,
    pub queue_timeout: Duration,
}

/// `max_in_flight`: a number, or `"auto"` with its keys (`in_flight_min`, `in_flight_max`,
/// `probe_interval`): the limit is then found from the group's latency by
/// `limit::adaptive::gradient`, starting at `in_flight_min`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxInFlight {
    Fixed(u32),
    Auto(AutoSettings),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    pub addr: SocketAddr,
    /// At least 1.
    pub weight: u32,
    /// In a TLS group, the name the server's certificate must carry: `tls.server_name`,
    /// else the host as written in `servers`. It is sent as SNI unless it is an IP
    /// address (then the certificate must carry that address). `None` in a plain group.
    pub tls_name: Option<rustls::pki_types::ServerName<'static>>,
}

/// How an upstream group spreads requests (`balance` in `[upstreams.NAME]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    RoundRobin,
    LeastConn,
    IpHash,
}

const MAX_WEIGHT: i64 = 1000;

/// One `[upstreams.NAME]`, or `None` when it had a problem (reported). `base` is where
/// the `tls` files are looked for.
pub(super) fn upstream(
    entry: RawUpstreamEntry,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Upstream> {
    let name = entry.name.get_ref();
    let valid_name = diag
        .check(entry.name.span(), values::table_name("upstream", name))
        .is_some();
    let body = entry.body?;
    let items = diag
        .required(body.get_ref().servers.as_ref(), &body.span(), "servers")
        .and_then(|list| servers(list, diag));
    let raw: RawUpstream = body.into_inner();
    let connect_timeout = duration_or(&raw.connect_timeout, 2, diag);
    let read_timeout = duration_or(&raw.read_timeout, 60, diag);
    let fail_timeout = duration_or(&raw.fail_timeout, 10, diag);
    let balance = match raw.balance.unwrap_or(RawBalance::RoundRobin) {
        RawBalance::RoundRobin => Balance::RoundRobin,
        RawBalance::LeastConn => Balance::LeastConn,
        RawBalance::IpHash => Balance::IpHash,
    };
    let concurrency = super::concurrency::concurrency(&raw, read_timeout, diag);
    let tls = upstream_tls::tls_key(raw.tls, base, diag);
    let (servers, tls) = with_tls(items?, tls?, diag)?;
    valid_name.then_some(())?;
    Some(Upstream {
        name: name.clone(),
        servers,
        balance,
        connect_timeout: connect_timeout?,
        read_timeout: read_timeout?,
        keepalive: raw.keepalive.unwrap_or(64),
        max_fails: raw.max_fails.unwrap_or(1),
        fail_timeout: fail_timeout?,
        tls,
        concurrency: concurrency?,
    })
}

/// How a `servers` item was written: `HOST:PORT`, `http://HOST[:PORT]` or
/// `https://HOST[:PORT]`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Bare,
    Http,
    Https,
}

/// One item of `servers`: its addresses (a host name may have several), its weight, and
/// what TLS needs of it.
struct Item {
    addrs: Vec<SocketAddr>,
    weight: u32,
    scheme: Scheme,
    /// The host as written, port and scheme removed (IPv6 brackets too).
    host: String,
    span: Span,
}

/// Every item of `servers`, host names resolved.
fn servers(
    list: &Spanned<Vec<Spanned<RawServerItem>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Item>> {
    if list.get_ref().is_empty() {
        diag.error(list.span(), "`servers` must list at least one server");
        return None;
    }
    let mut items = Vec::new();
    let mut valid = true;
    for item in list.get_ref() {
        let (addr, weight) = match item.get_ref() {
            RawServerItem::Addr(addr) => (Some((addr, item.span())), Some(1)),
            RawServerItem::Table(table) => {
                let weight = table.weight.as_ref().map_or(Some(1), |w| weight(w, diag));
                let addr = diag.required(table.addr.as_ref(), &item.span(), "addr");
                (addr.map(|addr| (addr.get_ref(), addr.span())), weight)
            }
        };
        let parsed = addr.and_then(|(text, span)| {
            let (scheme, host_port) = scheme(text);
            let addrs = diag.check(span.clone(), values::upstream_addrs(&host_port))?;
            Some((addrs, scheme, host_of(&host_port), span))
        });
        match (parsed, weight) {
            (Some((addrs, scheme, host, span)), Some(weight)) => items.push(Item {
                addrs,
                weight,
                scheme,
                host,
                span,
            }),
            _ => valid = false,
        }
    }
    valid.then_some(items)
}

/// The scheme of a server address and the `HOST:PORT` after it; without a port, an
/// `http://` server is on 80 and an `https://` one on 443 (as in nginx's `proxy_pass`).
fn scheme(text: &str) -> (Scheme, String) {
    let (scheme, rest, port) = if let Some(rest) = text.strip_prefix("https://") {
        (Scheme::Https, rest, 443)
    } else if let Some(rest) = text.strip_prefix("http://") {
        (Scheme::Http, rest, 80)
    } else {
        return (Scheme::Bare, text.to_owned());
    };
    let has_port = !rest.ends_with(']') && rest.contains(':');
    if has_port || rest.is_empty() {
        (scheme, rest.to_owned())
    } else {
        (scheme, format!("{rest}:{port}"))
    }
}

/// The host of a valid `HOST:PORT`, brackets removed from an IPv6 address.
fn host_of(host_port: &str) -> String {
    if let Ok(addr) = host_port.parse::<SocketAddr>() {
        return addr.ip().to_string();
    }
    let host = host_port
        .rsplit_once(':')
        .map_or(host_port, |(host, _)| host);
    host.to_owned()
}

/// The group's servers, and its TLS client when it speaks TLS: `tls` turns it on or
/// off; without `tls`, servers written `https://` turn it on with the system's roots.
/// A group speaks TLS to all of its servers or to none, so mixing is refused.
fn with_tls(
    items: Vec<Item>,
    tls: TlsKey,
    diag: &mut Diagnostics<'_>,
) -> Option<(Vec<UpstreamServer>, Option<Arc<rustls::ClientConfig>>)> {
    let first = |scheme: Scheme| items.iter().find(|item| item.scheme == scheme);
    let (https, http, bare) = (
        first(Scheme::Https),
        first(Scheme::Http),
        first(Scheme::Bare),
    );
    let conflict = match (&tls, https, http, bare) {
        (TlsKey::Off(span), Some(_), _, _) => Some((
            span.clone(),
            "`tls = false`, but a server is written https://",
        )),
        (TlsKey::On { .. }, _, Some(item), _) => Some((
            item.span.clone(),
            "an http:// server in a group with `tls`: a group speaks TLS to all of its servers or to none",
        )),
        (_, Some(_), Some(item), _) | (TlsKey::Absent, Some(_), _, Some(item)) => Some((
            item.span.clone(),
            "`servers` mixes https:// with plain servers: a group speaks TLS to all of its \
             servers or to none (write https:// on every server, or set `tls`)",
        )),
        _ => None,
    };
    if let Some((span, message)) = conflict {
        diag.error(span, message);
        return None;
    }
    let (client, server_name) = match tls {
        TlsKey::On {
            client,
            server_name,
        } => (client, server_name),
        TlsKey::Absent if https.is_some() => {
            let span = https.map(|item| item.span.clone()).unwrap_or_default();
            (upstream_tls::system_client(span, diag)?, None)
        }
        TlsKey::Absent | TlsKey::Off(_) => return Some((plain(items), None)),
    };
    let mut servers = Vec::new();
    for item in items {
        let name = match &server_name {
            Some(name) => name.clone(),
            None => diag.check(item.span.clone(), tls_name(&item.host))?,
        };
        servers.extend(item.addrs.into_iter().map(|addr| UpstreamServer {
            addr,
            weight: item.weight,
            tls_name: Some(name.clone()),
        }));
    }
    Some((servers, Some(client)))
}

fn plain(items: Vec<Item>) -> Vec<UpstreamServer> {
    let mut servers = Vec::new();
    for item in items {
        servers.extend(item.addrs.into_iter().map(|addr| UpstreamServer {
            addr,
            weight: item.weight,
            tls_name: None,
        }));
    }
    servers
}

/// The name a server's certificate is checked against when `tls.server_name` is not set.
fn tls_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_owned()).map_err(|_| {
        format!(
            "\"{host}\" is not a name a certificate can carry: set `tls.server_name` to the \
             name the server's certificate is for"
        )
    })
}

fn weight(weight: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<u32> {
    let value = *weight.get_ref();
    if (1..=MAX_WEIGHT).contains(&value) {
        return u32::try_from(value).ok();
    }
    diag.error(
        weight.span(),
        format!("invalid weight {value}: expected 1 to {MAX_WEIGHT}"),
    );
    None
}

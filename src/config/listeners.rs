//! `[server] listen` and `listen_tls`: each item an address (`"IP:PORT"`) or a table
//! (`{ addr = "IP:PORT", http2 = false }`), at least one in all, each address once; and
//! [`Address`], where a listener listens and over which [`Transport`].

use std::net::SocketAddr;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawListenItem, RawServer, Span};
use super::{values, Server};

const NO_LISTENER: &str = "at least one of `listen` / `listen_tls` must be non-empty";

/// An item of `listen` or `listen_tls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listener {
    pub addr: SocketAddr,
    /// `http2`: HTTP/2 is served (the default).
    pub http2: bool,
}

/// The listeners of `listen` and `listen_tls`.
pub(super) struct Listeners {
    pub listen: Vec<Listener>,
    pub listen_tls: Vec<Listener>,
}

/// `[server]` holds no listener at all.
pub(super) fn none(diag: &mut Diagnostics<'_>) {
    diag.error_nowhere(NO_LISTENER);
}

/// `listen` and `listen_tls`: at least one address in all, each address once.
pub(super) fn listeners(
    raw: &RawServer,
    span: &Span,
    certificates: Option<bool>,
    diag: &mut Diagnostics<'_>,
) -> Option<Listeners> {
    let mut seen = Vec::new();
    let listen_span = raw.listen.as_ref().map(|l| l.span());
    let tls_span = raw.listen_tls.as_ref().map(|l| l.span());
    let listen = addresses(raw.listen.as_ref(), &mut seen, diag);
    let listen_tls = addresses(raw.listen_tls.as_ref(), &mut seen, diag);
    let left_out = |diag: &Diagnostics<'_>| {
        diag.was_left_out(span, "listen") || diag.was_left_out(span, "listen_tls")
    };
    if let (Some(plain), Some(tls)) = (&listen, &listen_tls) {
        if plain.is_empty() && tls.is_empty() && !left_out(diag) {
            diag.error(
                listen_span.or(tls_span.clone()).unwrap_or(span.clone()),
                NO_LISTENER,
            );
        }
        if let (false, Some(false), Some(at)) = (tls.is_empty(), certificates, tls_span) {
            diag.error(
                at,
                "`listen_tls` needs a certificate: add a [[tls.certificates]] table with `cert` and `key`, or set `acme = true` on a site to order one",
            );
        }
    }
    Some(Listeners {
        listen: listen?,
        listen_tls: listen_tls?,
    })
}

/// A `listen` or `listen_tls` list (absent: empty). `seen` holds the addresses of the
/// lists before, so an address is listened on once, plain or TLS.
fn addresses(
    raw: Option<&Spanned<Vec<Spanned<RawListenItem>>>>,
    seen: &mut Vec<SocketAddr>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Listener>> {
    let mut listeners = Vec::new();
    let mut valid = true;
    for item in raw
        .map(|list| list.get_ref().as_slice())
        .unwrap_or_default()
    {
        let Some((addr, http2)) = listen_item(item, diag) else {
            valid = false;
            continue;
        };
        // Port 0 asks for any free port, so two of them do not collide.
        if addr.port() != 0 && seen.contains(&addr) {
            diag.error(item.span(), format!("duplicate listen address {addr}"));
            valid = false;
        }
        seen.push(addr);
        diag.listed(&item.span(), addr);
        listeners.push(Listener { addr, http2 });
    }
    valid.then_some(listeners)
}

/// One item: its address and whether it offers HTTP/2.
fn listen_item(
    item: &Spanned<RawListenItem>,
    diag: &mut Diagnostics<'_>,
) -> Option<(SocketAddr, bool)> {
    match item.get_ref() {
        RawListenItem::Addr(text) => {
            let addr = diag.check(item.span(), values::listen_addr(text))?;
            Some((addr, true))
        }
        RawListenItem::Table(table) => {
            let later = [
                ("proxy_protocol", &table.proxy_protocol),
                ("quic", &table.quic),
            ];
            let mut valid = true;
            for (key, value) in later {
                if let Some(value) = value {
                    not_yet(key, value, diag);
                    valid = false;
                }
            }
            let written = diag.required(table.addr.as_ref(), &item.span(), "addr")?;
            let addr = diag.check(written.span(), values::listen_addr(written.get_ref()))?;
            valid.then_some((addr, table.http2.unwrap_or(true)))
        }
    }
}

/// A key of a listener table that a later release brings.
fn not_yet(key: &str, value: &Loose, diag: &mut Diagnostics<'_>) {
    let message = format!("`{key}` on a listener is not yet supported");
    diag.error(value.span(), message);
}

/// Where a listener listens, and over which transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Address {
    pub addr: SocketAddr,
    pub transport: Transport,
    /// Whether HTTP/2 is served here (`http2`, true unless a listener table says
    /// `false`): ALPN `h2` over TLS, prior knowledge over plain TCP.
    pub http2: bool,
}

/// What a listener's connections arrive over, below HTTP: one variant per kind of
/// listener, each with its key in `[server]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Plain TCP (`listen`).
    Tcp,
    /// TLS over TCP (`listen_tls`).
    Tls,
}

impl Transport {
    /// Whether it is encrypted: its requests' scheme is `https`.
    pub(crate) fn is_secure(self) -> bool {
        match self {
            Transport::Tcp => false,
            Transport::Tls => true,
        }
    }
}

impl Server {
    /// Every address of `listen` and `listen_tls`, in that order.
    pub(crate) fn addresses(&self) -> impl Iterator<Item = Address> + '_ {
        let at = |transport| {
            move |listener: &Listener| Address {
                addr: listener.addr,
                transport,
                http2: listener.http2,
            }
        };
        let tcp = self.listen.iter().map(at(Transport::Tcp));
        let tls = self.listen_tls.iter().map(at(Transport::Tls));
        tcp.chain(tls)
    }
}

//! `[server] listen` and `listen_tls`: each item an address (`"IP:PORT"`) or a table
//! (`{ addr = "IP:PORT", http2 = false, proxy_protocol = true, quic = true }`, `quic`
//! on `listen_tls` only), at least one in all,
//! each address once; `[server] proxy_protocol_from`, the senders a `proxy_protocol`
//! listener takes the header from; and [`Address`], where a listener listens and over
//! which [`Transport`].

use std::net::SocketAddr;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawListenItem, RawServer, Span};
use super::{values, Server};

const NO_LISTENER: &str = "at least one of `listen` / `listen_tls` must be non-empty";

/// An item of `listen` or `listen_tls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listener {
    pub addr: SocketAddr,
    /// `http2`: HTTP/2 is served (the default).
    pub http2: bool,
    /// `proxy_protocol`: each connection starts with a PROXY protocol header (v1 or v2)
    /// naming the client, from a sender of `proxy_protocol_from`.
    pub proxy_protocol: bool,
    /// `quic`: HTTP/3 on UDP at the same address (`listen_tls` only; `config/quic.rs`).
    pub quic: bool,
}

/// The listeners of `listen` and `listen_tls`, and who may send them PROXY headers.
pub(super) struct Listeners {
    pub listen: Vec<Listener>,
    pub listen_tls: Vec<Listener>,
    pub proxy_protocol_from: Vec<ipnet::IpNet>,
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
    let listen = addresses(raw.listen.as_ref(), false, &mut seen, diag);
    let listen_tls = addresses(raw.listen_tls.as_ref(), true, &mut seen, diag);
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
    let from = proxy_protocol_from(raw, diag);
    Some(Listeners {
        listen: listen?,
        listen_tls: listen_tls?,
        proxy_protocol_from: from?,
    })
}

/// `proxy_protocol_from`, which a listener with `proxy_protocol` needs: without it, no
/// sender could be believed.
fn proxy_protocol_from(raw: &RawServer, diag: &mut Diagnostics<'_>) -> Option<Vec<ipnet::IpNet>> {
    let from = super::access::networks(raw.proxy_protocol_from.as_ref(), diag)?;
    let items = [&raw.listen, &raw.listen_tls].into_iter().flatten();
    let wanting = items.flat_map(|list| list.get_ref().iter()).find_map(|item| match item.get_ref() {
        RawListenItem::Table(table) => table.proxy_protocol.as_ref().filter(|on| *on.get_ref()),
        RawListenItem::Addr(_) => None,
    });
    if let (Some(on), true) = (wanting, from.is_empty()) {
        let message = "a listener with `proxy_protocol` needs `[server] proxy_protocol_from`, the addresses of the balancers allowed to send the header (`[\"10.0.0.0/8\"]`)";
        diag.error(on.span(), message);
        return None;
    }
    Some(from)
}

/// A `listen` or `listen_tls` (`tls`) list (absent: empty). `seen` holds the addresses
/// of the lists before, so an address is listened on once, plain or TLS.
fn addresses(
    raw: Option<&Spanned<Vec<Spanned<RawListenItem>>>>,
    tls: bool,
    seen: &mut Vec<SocketAddr>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Listener>> {
    let mut listeners = Vec::new();
    let mut valid = true;
    for item in raw
        .map(|list| list.get_ref().as_slice())
        .unwrap_or_default()
    {
        let Some(listener) = listen_item(item, tls, diag) else {
            valid = false;
            continue;
        };
        let addr = listener.addr;
        // Port 0 asks for any free port, so two of them do not collide.
        if addr.port() != 0 && seen.contains(&addr) {
            diag.error(item.span(), format!("duplicate listen address {addr}"));
            valid = false;
        }
        seen.push(addr);
        diag.listed(&item.span(), addr);
        listeners.push(listener);
    }
    valid.then_some(listeners)
}

/// One item of a `listen` or `listen_tls` (`tls`) list.
fn listen_item(item: &Spanned<RawListenItem>, tls: bool, diag: &mut Diagnostics<'_>) -> Option<Listener> {
    match item.get_ref() {
        RawListenItem::Addr(text) => {
            let addr = diag.check(item.span(), values::listen_addr(text))?;
            Some(Listener {
                addr,
                http2: true,
                proxy_protocol: false,
                quic: false,
            })
        }
        RawListenItem::Table(table) => {
            let quic = table.quic.as_ref().filter(|on| *on.get_ref());
            if let (Some(on), false) = (quic, tls) {
                let message = "`quic` needs TLS: put this address in `listen_tls` (HTTP/3 is always encrypted)";
                diag.error(on.span(), message);
                return None;
            }
            let written = diag.required(table.addr.as_ref(), &item.span(), "addr")?;
            let addr = diag.check(written.span(), values::listen_addr(written.get_ref()))?;
            Some(Listener {
                addr,
                http2: table.http2.unwrap_or(true),
                proxy_protocol: table.proxy_protocol.as_ref().is_some_and(|on| *on.get_ref()),
                quic: quic.is_some(),
            })
        }
    }
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

/// Which listeners read a PROXY protocol header first, and whose they believe.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProxyProtocol {
    listeners: Vec<(SocketAddr, Transport)>,
    /// `proxy_protocol_from`.
    pub from: Vec<ipnet::IpNet>,
}

impl ProxyProtocol {
    /// Whether connections accepted at `address` start with a header. (Two listeners on
    /// port 0 of one address are told apart by their transport only.)
    pub(crate) fn reads(&self, address: &Address) -> bool {
        let at = (address.addr, address.transport);
        self.listeners.contains(&at)
    }
}

impl Server {
    /// The listeners with `proxy_protocol`, and `proxy_protocol_from`.
    pub(crate) fn proxy_protocol(&self) -> ProxyProtocol {
        let at = |transport| move |l: &Listener| l.proxy_protocol.then_some((l.addr, transport));
        let tcp = self.listen.iter().filter_map(at(Transport::Tcp));
        let tls = self.listen_tls.iter().filter_map(at(Transport::Tls));
        ProxyProtocol {
            listeners: tcp.chain(tls).collect(),
            from: self.proxy_protocol_from.clone(),
        }
    }

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

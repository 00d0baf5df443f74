//! What is forwarded upstream and back (docs/architecture.md, the request's path): X-Forwarded-*,
//! X-Real-IP (those `forwarded_headers` names), hop-by-hop headers (their rules in
//! `hop_by_hop`), and the headers dropped from an upstream's answer by default (nginx's
//! proxy list: `Date`, `Server`, `X-Pad`, `X-Accel-*`) unless `pass_headers` names them.
//!
//! Everything is rewritten in place on the request's own `HeaderMap`. Per request this costs one
//! allocation for the client address (shared by `X-Real-IP` and an untrusted `X-Forwarded-For`)
//! or one for a trusted `X-Forwarded-For` chain; values that already exist are moved by refcount.

use std::io::Write;
use std::net::IpAddr;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::access::canonical;
use crate::config::{Forwarded, Passed};

mod hop_by_hop;
mod present;

pub(crate) use hop_by_hop::{is_websocket_accept, is_websocket_handshake};
pub(crate) use present::Present;
use present::Watched;

const X_FORWARDED_FOR: HeaderName = Watched::XForwardedFor.name();
const X_REAL_IP: HeaderName = Watched::XRealIp.name();
const X_FORWARDED_PROTO: HeaderName = Watched::XForwardedProto.name();
const X_FORWARDED_HOST: HeaderName = Watched::XForwardedHost.name();

/// What the gateway knows about the request's origin.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forwarding<'a> {
    /// The client after realip (what `X-Real-IP` carries).
    pub client: IpAddr,
    /// The TCP peer.
    pub peer: IpAddr,
    /// Whether the peer is a trusted proxy, whose `X-Forwarded-For` is extended rather than replaced.
    pub peer_trusted: bool,
    /// Whether the client connection was TLS.
    pub https: bool,
    /// The request's host (`Host` or the HTTP/2 `:authority`), for `X-Forwarded-Host`.
    pub host: Option<&'a HeaderValue>,
    /// `client` already written as a header value, when one is at hand (the connection
    /// keeps its peer's), saving an allocation per request.
    pub client_value: Option<&'a HeaderValue>,
    /// Which of the headers tollgate writes (`forwarded_headers`).
    pub set: Forwarded,
}

/// The forwarding headers tollgate adds, kept beside the request rather than inserted
/// into its map: the upstream client writes them after the request's own headers, so
/// the map never has to grow (a rehash and an allocation per request otherwise).
pub(crate) struct Added {
    pairs: [(HeaderName, HeaderValue); 4],
    len: usize,
}

impl Added {
    pub(crate) fn as_slice(&self) -> &[(HeaderName, HeaderValue)] {
        &self.pairs[..self.len]
    }
}

/// A request's headers for the upstream: hop-by-hop headers and the client's own
/// X-Forwarded-* / X-Real-IP are removed from `headers`, and the values to send instead
/// are returned. With `websocket` (see [`is_websocket_handshake`]) the request keeps
/// `Connection: upgrade` and `Upgrade: websocket`; every other upgrade is stripped like
/// any hop-by-hop header. `present` is [`Present::of`] `headers`.
pub(crate) fn for_upstream(
    headers: &mut HeaderMap,
    present: Present,
    fwd: &Forwarding<'_>,
    websocket: bool,
) -> Added {
    hop_by_hop::strip_request(headers, present, websocket);
    if fwd.set != Forwarded::ALL {
        return some(headers, present, fwd);
    }

    let client = match fwd.client_value {
        Some(value) => value.clone(),
        None => ip_value(fwd.client),
    };
    let xff = if fwd.peer_trusted {
        extended_xff(headers, fwd.peer).unwrap_or_else(|| client.clone())
    } else {
        // ours (§4): a header from an untrusted peer is a spoof, so it is dropped, not passed on.
        client.clone()
    };
    // Whether the client sent any of ours (rarely).
    let ours = [
        Watched::XForwardedFor,
        Watched::XRealIp,
        Watched::XForwardedProto,
        Watched::XForwardedHost,
    ];
    if present.any(&ours) {
        headers.remove(X_FORWARDED_FOR);
        headers.remove(X_REAL_IP);
        headers.remove(X_FORWARDED_PROTO);
        headers.remove(X_FORWARDED_HOST);
    }
    let proto = if fwd.https { "https" } else { "http" };
    let host = fwd.host.cloned();
    let len = if host.is_some() { 4 } else { 3 };
    let pairs = [
        (X_FORWARDED_FOR, xff),
        (X_REAL_IP, client),
        (X_FORWARDED_PROTO, HeaderValue::from_static(proto)),
        (
            X_FORWARDED_HOST,
            host.unwrap_or(HeaderValue::from_static("")),
        ),
    ];
    Added { pairs, len }
}

/// The forwarding headers of a `forwarded_headers` list that leaves some out: only the
/// client's copies of those written are removed, so the others pass as the client sent
/// them.
fn some(headers: &mut HeaderMap, present: Present, fwd: &Forwarding<'_>) -> Added {
    let mut added = Added {
        pairs: std::array::from_fn(|_| (X_FORWARDED_FOR, HeaderValue::from_static(""))),
        len: 0,
    };
    let mut push = |name: HeaderName, value: HeaderValue| {
        added.pairs[added.len] = (name, value);
        added.len += 1;
    };
    let client = || match fwd.client_value {
        Some(value) => value.clone(),
        None => ip_value(fwd.client),
    };
    if fwd.set.has(Forwarded::FOR) {
        let xff = match fwd.peer_trusted {
            true => extended_xff(headers, fwd.peer).unwrap_or_else(client),
            false => client(),
        };
        if present.has(Watched::XForwardedFor) {
            headers.remove(X_FORWARDED_FOR);
        }
        push(X_FORWARDED_FOR, xff);
    }
    let written = [
        (Forwarded::REAL_IP, Watched::XRealIp),
        (Forwarded::PROTO, Watched::XForwardedProto),
        (Forwarded::HOST, Watched::XForwardedHost),
    ];
    for (one, watched) in written {
        if !fwd.set.has(one) {
            continue;
        }
        if present.has(watched) {
            headers.remove(watched.name());
        }
        let value = match one {
            Forwarded::REAL_IP => Some(client()),
            Forwarded::PROTO => Some(HeaderValue::from_static(if fwd.https {
                "https"
            } else {
                "http"
            })),
            _ => fwd.host.cloned(),
        };
        if let Some(value) = value {
            push(watched.name(), value);
        }
    }
    added
}

/// Rewrites a response's headers in place for the client; `upgraded` (a 101 to a WebSocket
/// handshake) keeps `Connection: upgrade` and `Upgrade`. The headers dropped by default
/// (`config::Passed::DROPPED`) go unless `pass` names them: tollgate writes its own
/// `Date` and `Server`.
pub(crate) fn to_client(headers: &mut HeaderMap, upgraded: bool, pass: Passed) {
    let present = Present::of_answer(headers);
    hop_by_hop::strip(headers, present, upgraded);
    let dropped = present.dropped();
    if dropped == 0 {
        return;
    }
    for (index, name) in DROPPED.iter().enumerate() {
        if dropped & (1 << index) != 0 && !pass.has(index) {
            headers.remove(name);
        }
    }
}

/// [`Passed::DROPPED`] as header names, made at compile time: a removal by a `&str` would
/// parse the name again on every answer.
const DROPPED: [HeaderName; 8] = [
    http::header::DATE,
    http::header::SERVER,
    HeaderName::from_static("x-pad"),
    HeaderName::from_static("x-accel-expires"),
    HeaderName::from_static("x-accel-redirect"),
    HeaderName::from_static("x-accel-limit-rate"),
    HeaderName::from_static("x-accel-buffering"),
    HeaderName::from_static("x-accel-charset"),
];

/// Every incoming `X-Forwarded-For` line joined with ", ", then the peer appended — nginx's
/// `$proxy_add_x_forwarded_for` with the hop's own address. Blank lines are skipped. `None` only if
/// the result were somehow not a valid header value, in which case the caller sends the client.
fn extended_xff(headers: &HeaderMap, peer: IpAddr) -> Option<HeaderValue> {
    let mut peer_buf = [0u8; IP_TEXT_MAX];
    let peer_text = write_ip(&mut peer_buf, peer);
    let incoming = headers.get_all(X_FORWARDED_FOR);
    let capacity = incoming.iter().map(|v| v.len() + 2).sum::<usize>() + peer_text.len();
    let mut out = Vec::with_capacity(capacity);
    for line in incoming.iter() {
        let line = line.as_bytes().trim_ascii();
        if !line.is_empty() {
            out.extend_from_slice(line);
            out.extend_from_slice(b", ");
        }
    }
    out.extend_from_slice(peer_text);
    HeaderValue::from_maybe_shared(Bytes::from(out)).ok()
}

/// Longest `IpAddr` text is 45 bytes (`ffff:...:255.255.255.255`); rounded up.
const IP_TEXT_MAX: usize = 48;

/// Formats a canonical address (IPv6 plain, no brackets) into `buf` without a heap String.
/// IPv4, the common case, is written by hand: `core::fmt` costs about twenty times as much.
fn write_ip(buf: &mut [u8; IP_TEXT_MAX], ip: IpAddr) -> &[u8] {
    let v6 = match canonical(ip) {
        IpAddr::V4(v4) => {
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    buf[n] = b'.';
                    n += 1;
                }
                if octet >= 100 {
                    buf[n] = b'0' + octet / 100;
                    n += 1;
                }
                if octet >= 10 {
                    buf[n] = b'0' + octet / 10 % 10;
                    n += 1;
                }
                buf[n] = b'0' + octet % 10;
                n += 1;
            }
            return &buf[..n];
        }
        IpAddr::V6(v6) => v6,
    };
    let mut cursor: &mut [u8] = &mut buf[..];
    // Cannot fail: the buffer fits any address; on failure the text is simply cut short.
    let _ = write!(cursor, "{v6}");
    let written = IP_TEXT_MAX - cursor.len();
    &buf[..written]
}

/// An address as a header value (IPv6 plain, no brackets).
pub(crate) fn ip_value(ip: IpAddr) -> HeaderValue {
    let mut buf = [0u8; IP_TEXT_MAX];
    HeaderValue::from_bytes(write_ip(&mut buf, ip))
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod tests;

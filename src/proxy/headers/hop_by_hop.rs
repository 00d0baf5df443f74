//! Hop-by-hop headers (RFC 9110 §7.6.1) and the one upgrade carried through a hop: what
//! `Connection` and the fixed list take out of a message both ways, and when a request is a
//! WebSocket handshake (and a 101 its acceptance) so that `Connection: upgrade` stays.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, UPGRADE};
use http::{Method, Version};

use super::present::{Present, Watched};
use crate::wire::h1;

/// Hop-by-hop headers every hop removes (RFC 9110 §7.6.1, plus the legacy `Keep-Alive` and
/// `Proxy-Connection`, and `HTTP2-Settings`, which only means something with an `h2c` upgrade
/// tollgate never forwards). `Connection` itself and the headers it names are handled separately.
const HOP_BY_HOP: [Watched; 7] = [
    Watched::KeepAlive,
    Watched::ProxyConnection,
    Watched::Http2Settings,
    Watched::Te,
    Watched::Trailer,
    Watched::TransferEncoding,
    Watched::Upgrade,
];

const WEBSOCKET: HeaderValue = HeaderValue::from_static("websocket");

/// Names a peer may list in `Connection` that are removed anyway: `Host` and `Content-Length` are
/// left alone (§4 passes Host unchanged; framing is the upstream client's), so a client cannot strip them by
/// naming them — the hop-by-hop abuse trick. The X-Forwarded-* headers are rewritten afterwards,
/// so naming those gains nothing either.
fn is_protected(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"host") || name.eq_ignore_ascii_case(b"content-length")
}

/// A WebSocket opening handshake (RFC 6455 §4.1): an HTTP/1.1 `GET` whose `Connection` has the
/// `upgrade` token and whose `Upgrade` names `websocket`, with `Sec-WebSocket-Key` and
/// `Sec-WebSocket-Version`. The only upgrade tollgate carries through: after a 101 the
/// connection is a tunnel that no routing, access rule or limit sees into, so an `h2c` (or any
/// other) upgrade would let every later request on it pass unchecked. `present` is
/// [`Present::of`] the same headers.
pub(crate) fn is_websocket_handshake(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
    present: Present,
) -> bool {
    *method == Method::GET
        && version == Version::HTTP_11
        && present.has(Watched::Connection)
        && present.has(Watched::Upgrade)
        && present.has(Watched::SecWebSocketKey)
        && present.has(Watched::SecWebSocketVersion)
        && has_token(headers, &CONNECTION, b"upgrade")
        && has_token(headers, &UPGRADE, b"websocket")
}

/// A 101 that switches to WebSocket, as the handshake asked (RFC 6455 §4.2.2): anything else
/// is not the protocol whose rules were checked.
pub(crate) fn is_websocket_accept(headers: &HeaderMap) -> bool {
    has_token(headers, &CONNECTION, b"upgrade") && has_token(headers, &UPGRADE, b"websocket")
}

/// Some line of `name` lists `token` (ASCII case-insensitive).
fn has_token(headers: &HeaderMap, name: &HeaderName, token: &[u8]) -> bool {
    headers
        .get_all(name)
        .iter()
        .any(|line| h1::has_token(line.as_bytes(), token))
}

/// Strips a request's hop-by-hop headers for the upstream. A WebSocket handshake keeps
/// `Connection: upgrade` and `Upgrade: websocket`.
pub(super) fn strip_request(headers: &mut HeaderMap, present: Present, websocket: bool) {
    strip(headers, present, websocket);
    if websocket {
        // Exactly the protocol that was checked: `Upgrade: websocket, h2c` would let the
        // upstream pick a protocol no rule of ours could see into.
        headers.insert(UPGRADE, WEBSOCKET);
    }
}

/// Removes `Connection`, every header it names, and the fixed hop-by-hop list. With
/// `keep_upgrade`, `Upgrade` stays and `Connection` becomes exactly `upgrade`. `present` is
/// [`Present::of`] the same headers: most messages carry none of these, and then nothing
/// is looked up.
pub(super) fn strip(headers: &mut HeaderMap, present: Present, keep_upgrade: bool) {
    let has_connection = present.has(Watched::Connection);
    if !has_connection && !present.any(&HOP_BY_HOP) {
        return;
    }
    // The Connection lines are cloned (a refcount bump each) because removing the headers they
    // name needs the map mutably; one line is the norm, so the Vec stays empty and unallocated.
    let mut lines = headers.get_all(CONNECTION).iter();
    let first = lines.next().cloned();
    let rest: Vec<HeaderValue> = lines.cloned().collect();
    if let Some(first) = &first {
        headers.remove(CONNECTION);
        for line in std::iter::once(first).chain(&rest) {
            for token in h1::tokens(line.as_bytes()) {
                // `close` names no header and `keep-alive` goes with the fixed list below; both are
                // common enough to skip the name parsing `remove(&str)` does.
                if is_protected(token)
                    || token.eq_ignore_ascii_case(b"close")
                    || token.eq_ignore_ascii_case(b"keep-alive")
                    || (keep_upgrade && token.eq_ignore_ascii_case(b"upgrade"))
                {
                    continue;
                }
                // An invalid header name finds nothing; `remove` does not panic on it.
                if let Ok(name) = std::str::from_utf8(token) {
                    headers.remove(name);
                }
            }
        }
    }
    for hop in HOP_BY_HOP {
        if present.has(hop) && !(keep_upgrade && hop == Watched::Upgrade) {
            headers.remove(hop.name());
        }
    }
    if keep_upgrade {
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

//! Hop-by-hop headers (RFC 9110 §7.6.1) and the one upgrade carried through a hop: what
//! `Connection` and the fixed list take out of a message both ways, and when a request is a
//! WebSocket handshake (and a 101 its acceptance) so that `Connection: upgrade` stays.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, TE,
    TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::{Method, Version};

/// Hop-by-hop headers every hop removes (RFC 9110 §7.6.1, plus the legacy `Keep-Alive` and
/// `Proxy-Connection`, and `HTTP2-Settings`, which only means something with an `h2c` upgrade
/// tollgate never forwards). `Connection` itself and the headers it names are handled separately.
/// `Upgrade` is last, which the upgrade case relies on to keep it. A `static`, not a `const`: a
/// const array would be built and dropped at every use.
static HOP_BY_HOP: [HeaderName; 7] = [
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("http2-settings"),
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
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
/// other) upgrade would let every later request on it pass unchecked.
pub fn is_websocket_handshake(method: &Method, version: Version, headers: &HeaderMap) -> bool {
    *method == Method::GET
        && version == Version::HTTP_11
        && has_token(headers, &CONNECTION, b"upgrade")
        && has_token(headers, &UPGRADE, b"websocket")
        && headers.contains_key(SEC_WEBSOCKET_KEY)
        && headers.contains_key(SEC_WEBSOCKET_VERSION)
}

/// A 101 that switches to WebSocket, as the handshake asked (RFC 6455 §4.2.2): anything else
/// is not the protocol whose rules were checked.
pub fn is_websocket_accept(headers: &HeaderMap) -> bool {
    has_token(headers, &CONNECTION, b"upgrade") && has_token(headers, &UPGRADE, b"websocket")
}

/// Some line of `name` lists `token` (ASCII case-insensitive).
fn has_token(headers: &HeaderMap, name: &HeaderName, token: &[u8]) -> bool {
    headers
        .get_all(name)
        .iter()
        .any(|line| tokens(line).any(|t| t.eq_ignore_ascii_case(token)))
}

/// Strips a request's hop-by-hop headers for the upstream. A WebSocket handshake keeps
/// `Connection: upgrade` and `Upgrade: websocket`.
pub(super) fn strip_request(headers: &mut HeaderMap, websocket: bool) {
    strip(headers, websocket);
    if websocket {
        // Exactly the protocol that was checked: `Upgrade: websocket, h2c` would let the
        // upstream pick a protocol no rule of ours could see into.
        headers.insert(UPGRADE, WEBSOCKET);
    }
}

/// Removes `Connection`, every header it names, and the fixed hop-by-hop list. With
/// `keep_upgrade`, `Upgrade` stays and `Connection` becomes exactly `upgrade`.
pub(super) fn strip(headers: &mut HeaderMap, keep_upgrade: bool) {
    // Most messages carry none of these: one pass over the names (enum compares for the standard
    // ones) finds which are present, instead of seven hashed removals that mostly find nothing.
    let mut present = 0u8;
    let mut has_connection = false;
    for name in headers.keys() {
        match hop_by_hop(name) {
            Some(Hop::Connection) => has_connection = true,
            Some(Hop::Listed(i)) => present |= 1 << i,
            None => {}
        }
    }
    if !has_connection && present == 0 {
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
            for token in tokens(line) {
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
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        let is_upgrade = i == HOP_BY_HOP.len() - 1;
        if present & (1 << i) != 0 && !(keep_upgrade && is_upgrade) {
            headers.remove(name);
        }
    }
    if keep_upgrade {
        headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// A hop-by-hop name: `Connection`, or the one at this index of [`HOP_BY_HOP`].
enum Hop {
    Connection,
    Listed(usize),
}

/// Whether `name` is hop-by-hop. Its length turns most names away before any compare:
/// comparing every name with eight others was a tenth of a proxied request's own work.
fn hop_by_hop(name: &HeaderName) -> Option<Hop> {
    let name = name.as_str();
    if !matches!(name.len(), 2 | 7 | 10 | 14 | 16 | 17) {
        return None;
    }
    if name == CONNECTION.as_str() {
        return Some(Hop::Connection);
    }
    HOP_BY_HOP
        .iter()
        .position(|hop| hop.as_str() == name)
        .map(Hop::Listed)
}

/// The comma-separated, space-trimmed, non-empty tokens of one header line.
fn tokens(line: &HeaderValue) -> impl Iterator<Item = &[u8]> {
    line.as_bytes()
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hop_by_hop_name_passes_the_length_filter() {
        assert!(matches!(hop_by_hop(&CONNECTION), Some(Hop::Connection)));
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert!(matches!(hop_by_hop(name), Some(Hop::Listed(at)) if at == i), "{name}");
        }
        for name in ["user-agent", "referer", "content-length", "set-cookie", "x-te"] {
            let name = HeaderName::from_static(name);
            assert!(hop_by_hop(&name).is_none(), "{name}");
        }
    }
}

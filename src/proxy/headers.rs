//! What is forwarded upstream and back (docs/architecture.md, the request's path): X-Forwarded-*, X-Real-IP, hop-by-hop headers.
//!
//! Everything is rewritten in place on the request's own `HeaderMap`. Per request this costs one
//! allocation for the client address (shared by `X-Real-IP` and an untrusted `X-Forwarded-For`)
//! or one for a trusted `X-Forwarded-For` chain; values that already exist are moved by refcount.

use std::io::Write;
use std::net::IpAddr;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, TE,
    TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::{Method, Version};

use crate::access::canonical;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

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

/// What the gateway knows about the request's origin.
#[derive(Clone, Copy, Debug)]
pub struct Forwarding<'a> {
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
}

/// Rewrites a request's headers in place for the upstream. With `websocket` (see
/// [`is_websocket_handshake`]) the request keeps `Connection: upgrade` and `Upgrade: websocket`;
/// every other upgrade is stripped like any hop-by-hop header.
pub fn to_upstream(headers: &mut HeaderMap, fwd: &Forwarding<'_>, websocket: bool) {
    let added = for_upstream(headers, fwd, websocket);
    for (name, value) in added.iter() {
        headers.insert(name.clone(), value.clone());
    }
}

/// The forwarding headers tollgate adds, kept beside the request rather than inserted
/// into its map: the upstream client writes them after the request's own headers, so
/// the map never has to grow (a rehash and an allocation per request otherwise).
pub struct Added {
    pairs: [(HeaderName, HeaderValue); 4],
    len: usize,
}

impl Added {
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.pairs[..self.len].iter().map(|(n, v)| (n, v))
    }

    pub fn as_slice(&self) -> &[(HeaderName, HeaderValue)] {
        &self.pairs[..self.len]
    }
}

/// [`to_upstream`] without the inserts: hop-by-hop headers and the client's own
/// X-Forwarded-* / X-Real-IP are removed from `headers`, and the values to send
/// instead are returned.
pub fn for_upstream(headers: &mut HeaderMap, fwd: &Forwarding<'_>, websocket: bool) -> Added {
    strip_hop_by_hop(headers, websocket);
    if websocket {
        // Exactly the protocol that was checked: `Upgrade: websocket, h2c` would let the
        // upstream pick a protocol no rule of ours could see into.
        headers.insert(UPGRADE, WEBSOCKET);
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
    // One pass over the names finds whether the client sent any of ours (rarely).
    let sent_any = headers.keys().any(|name| {
        *name == X_FORWARDED_FOR
            || *name == X_REAL_IP
            || *name == X_FORWARDED_PROTO
            || *name == X_FORWARDED_HOST
    });
    if sent_any {
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

/// Rewrites a response's headers in place for the client; `upgraded` (a 101 to a WebSocket
/// handshake) keeps `Connection: upgrade` and `Upgrade`.
pub fn to_client(headers: &mut HeaderMap, upgraded: bool) {
    strip_hop_by_hop(headers, upgraded);
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

/// Removes `Connection`, every header it names, and the fixed hop-by-hop list. With
/// `keep_upgrade`, `Upgrade` stays and `Connection` becomes exactly `upgrade`.
fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // Most messages carry none of these: one pass over the names (enum compares for the standard
    // ones) finds which are present, instead of seven hashed removals that mostly find nothing.
    let mut present = 0u8;
    let mut has_connection = false;
    for name in headers.keys() {
        if *name == CONNECTION {
            has_connection = true;
        } else if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            present |= 1 << i;
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

/// The comma-separated, space-trimmed, non-empty tokens of one header line.
fn tokens(line: &HeaderValue) -> impl Iterator<Item = &[u8]> {
    line.as_bytes()
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

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
pub fn ip_value(ip: IpAddr) -> HeaderValue {
    let mut buf = [0u8; IP_TEXT_MAX];
    HeaderValue::from_bytes(write_ip(&mut buf, ip))
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).expect("test name"),
                HeaderValue::from_str(v).expect("test value"),
            );
        }
        m
    }

    fn all(m: &HeaderMap, name: &str) -> Vec<String> {
        m.get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    fn untrusted(client: &str) -> Forwarding<'static> {
        Forwarding {
            client: ip(client),
            peer: ip(client),
            peer_trusted: false,
            https: false,
            host: None,
            client_value: None,
        }
    }

    #[test]
    fn spoofed_xff_from_untrusted_peer_is_replaced_by_the_client() {
        let mut h = map(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "7.7.7.7"),
        ]);
        to_upstream(&mut h, &untrusted("203.0.113.9"), false);
        assert_eq!(all(&h, "x-forwarded-for"), ["203.0.113.9"]);
    }

    #[test]
    fn trusted_chain_is_joined_and_the_peer_appended() {
        let mut h = map(&[
            ("x-forwarded-for", "1.1.1.1, 2.2.2.2"),
            ("x-forwarded-for", " 3.3.3.3 "),
        ]);
        let fwd = Forwarding {
            client: ip("1.1.1.1"),
            peer: ip("10.0.0.1"),
            peer_trusted: true,
            https: false,
            host: None,
            client_value: None,
        };
        to_upstream(&mut h, &fwd, false);
        assert_eq!(
            all(&h, "x-forwarded-for"),
            ["1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.1"]
        );
        assert_eq!(all(&h, "x-real-ip"), ["1.1.1.1"]);
    }

    #[test]
    fn trusted_peer_without_xff_sends_just_the_peer() {
        let mut h = HeaderMap::new();
        let fwd = Forwarding {
            peer_trusted: true,
            ..untrusted("10.0.0.1")
        };
        to_upstream(&mut h, &fwd, false);
        assert_eq!(all(&h, "x-forwarded-for"), ["10.0.0.1"]);
    }

    #[test]
    fn ipv4_addresses_are_written_like_display() {
        for text in ["0.0.0.0", "9.10.99.100", "255.255.255.255", "1.20.200.7"] {
            let mut buf = [0u8; IP_TEXT_MAX];
            assert_eq!(write_ip(&mut buf, ip(text)), text.as_bytes());
        }
    }

    #[test]
    fn ipv6_addresses_are_written_plain_and_mapped_ones_as_ipv4() {
        let mut h = HeaderMap::new();
        let fwd = Forwarding {
            client: ip("2001:db8::1"),
            peer: ip("::ffff:10.0.0.1"),
            peer_trusted: true,
            https: true,
            host: None,
            client_value: None,
        };
        to_upstream(&mut h, &fwd, false);
        assert_eq!(all(&h, "x-forwarded-for"), ["10.0.0.1"]);
        assert_eq!(all(&h, "x-real-ip"), ["2001:db8::1"]);
        let mut h = HeaderMap::new();
        to_upstream(
            &mut h,
            &untrusted("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            false,
        );
        assert_eq!(
            all(&h, "x-real-ip"),
            ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]
        );
    }

    #[test]
    fn forwarded_headers_are_always_replaced() {
        let mut h = map(&[
            ("x-real-ip", "6.6.6.6"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("host", "app.example"),
        ]);
        to_upstream(&mut h, &untrusted("203.0.113.9"), false);
        assert_eq!(all(&h, "x-real-ip"), ["203.0.113.9"]);
        assert_eq!(all(&h, "x-forwarded-proto"), ["http"]);
        assert!(h.get("x-forwarded-host").is_none());
        assert_eq!(all(&h, "host"), ["app.example"]);

        let host = HeaderValue::from_static("app.example:8443");
        let fwd = Forwarding {
            https: true,
            host: Some(&host),
            ..untrusted("203.0.113.9")
        };
        to_upstream(&mut h, &fwd, false);
        assert_eq!(all(&h, "x-forwarded-proto"), ["https"]);
        assert_eq!(all(&h, "x-forwarded-host"), ["app.example:8443"]);
    }

    #[test]
    fn fixed_hop_by_hop_headers_are_removed_both_ways() {
        let pairs = [
            ("connection", "close"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("content-length", "12"),
            ("x-app", "1"),
        ];
        let mut req = map(&pairs);
        to_upstream(&mut req, &untrusted("1.2.3.4"), false);
        let mut resp = map(&pairs);
        to_client(&mut resp, false);
        for h in [&req, &resp] {
            for (name, _) in &pairs[..7] {
                assert!(h.get(*name).is_none(), "{name} kept");
            }
            assert_eq!(all(h, "content-length"), ["12"]);
            assert_eq!(all(h, "x-app"), ["1"]);
        }
    }

    #[test]
    fn headers_named_in_connection_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, X-Foo"),
            ("connection", "x-bar"),
            ("x-foo", "1"),
            ("x-bar", "2"),
            ("x-baz", "3"),
        ]);
        to_client(&mut h, false);
        assert!(h.get("connection").is_none());
        assert!(h.get("x-foo").is_none());
        assert!(h.get("x-bar").is_none());
        assert_eq!(all(&h, "x-baz"), ["3"]);
    }

    #[test]
    fn connection_cannot_strip_host_or_content_length() {
        let mut h = map(&[
            (
                "connection",
                "Host, content-length, x-real-ip, bad name, a/b",
            ),
            ("host", "app.example"),
            ("content-length", "3"),
        ]);
        to_upstream(&mut h, &untrusted("1.2.3.4"), false);
        assert_eq!(all(&h, "host"), ["app.example"]);
        assert_eq!(all(&h, "content-length"), ["3"]);
        assert_eq!(all(&h, "x-real-ip"), ["1.2.3.4"]);
    }

    fn websocket_handshake() -> HeaderMap {
        map(&[
            ("connection", "keep-alive, Upgrade, x-foo"),
            ("upgrade", "websocket"),
            ("x-foo", "1"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
        ])
    }

    #[test]
    fn websocket_handshake_keeps_connection_upgrade_and_upgrade() {
        let mut h = websocket_handshake();
        assert!(is_websocket_handshake(&Method::GET, Version::HTTP_11, &h));
        to_upstream(&mut h, &untrusted("1.2.3.4"), true);
        assert_eq!(all(&h, "connection"), ["upgrade"]);
        assert_eq!(all(&h, "upgrade"), ["websocket"]);
        assert!(h.get("x-foo").is_none());
        assert!(h.get("sec-websocket-key").is_some());

        let mut resp = map(&[("connection", "Upgrade"), ("upgrade", "websocket")]);
        assert!(is_websocket_accept(&resp));
        to_client(&mut resp, true);
        assert_eq!(all(&resp, "connection"), ["upgrade"]);
        assert_eq!(all(&resp, "upgrade"), ["websocket"]);
    }

    #[test]
    fn only_a_complete_websocket_handshake_is_an_upgrade() {
        let h = websocket_handshake();
        assert!(!is_websocket_handshake(&Method::POST, Version::HTTP_11, &h));
        assert!(!is_websocket_handshake(&Method::GET, Version::HTTP_10, &h));
        assert!(!is_websocket_handshake(&Method::GET, Version::HTTP_2, &h));
        for missing in [
            "connection",
            "upgrade",
            "sec-websocket-key",
            "sec-websocket-version",
        ] {
            let mut h = websocket_handshake();
            h.remove(missing);
            assert!(
                !is_websocket_handshake(&Method::GET, Version::HTTP_11, &h),
                "without {missing}"
            );
        }
        let mut h2c = websocket_handshake();
        h2c.insert("upgrade", HeaderValue::from_static("h2c"));
        assert!(!is_websocket_handshake(
            &Method::GET,
            Version::HTTP_11,
            &h2c
        ));
        let mut connection = websocket_handshake();
        connection.insert("connection", HeaderValue::from_static("upgraded"));
        assert!(!is_websocket_handshake(
            &Method::GET,
            Version::HTTP_11,
            &connection
        ));
    }

    #[test]
    fn a_websocket_handshake_offering_more_protocols_is_sent_as_websocket_only() {
        let mut h = websocket_handshake();
        h.insert("upgrade", HeaderValue::from_static("websocket, h2c"));
        assert!(is_websocket_handshake(&Method::GET, Version::HTTP_11, &h));
        to_upstream(&mut h, &untrusted("1.2.3.4"), true);
        assert_eq!(all(&h, "upgrade"), ["websocket"]);
    }

    #[test]
    fn h2c_upgrade_and_its_settings_are_stripped() {
        let mut h = map(&[
            ("connection", "Upgrade, HTTP2-Settings"),
            ("upgrade", "h2c"),
            ("http2-settings", "AAMAAABkAAQCAAAAAAIAAAAA"),
        ]);
        assert!(!is_websocket_handshake(&Method::GET, Version::HTTP_11, &h));
        to_upstream(&mut h, &untrusted("1.2.3.4"), false);
        assert!(h.get("connection").is_none());
        assert!(h.get("upgrade").is_none());
        assert!(h.get("http2-settings").is_none());
        // Not even named in Connection, HTTP2-Settings goes.
        let mut h = map(&[("http2-settings", "AAMAAABkAAQCAAAAAAIAAAAA")]);
        to_upstream(&mut h, &untrusted("1.2.3.4"), false);
        assert!(h.get("http2-settings").is_none());
    }

    #[test]
    fn a_101_must_switch_to_websocket() {
        assert!(!is_websocket_accept(&map(&[
            ("connection", "upgrade"),
            ("upgrade", "h2c")
        ])));
        assert!(!is_websocket_accept(&map(&[("upgrade", "websocket")])));
    }

    #[test]
    fn response_to_a_non_upgrade_strips_upgrade() {
        let mut resp = map(&[("connection", "upgrade"), ("upgrade", "websocket")]);
        to_client(&mut resp, false);
        assert!(resp.get("connection").is_none());
        assert!(resp.get("upgrade").is_none());
    }
}

//! Forwarding headers, hop-by-hop stripping and the WebSocket handshake, as the
//! upstream and the client see them.

use http::{Method, Version};

use super::*;

/// [`for_upstream`] with what it adds inserted into `headers`: the headers the upstream
/// sees.
fn to_upstream(headers: &mut HeaderMap, fwd: &Forwarding<'_>, websocket: bool) {
    let present = Present::of(headers);
    let added = for_upstream(headers, present, fwd, websocket);
    for (name, value) in added.as_slice() {
        headers.insert(name.clone(), value.clone());
    }
}

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
        set: Forwarded::ALL,
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
        set: Forwarded::ALL,
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
        set: Forwarded::ALL,
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
    to_client(&mut resp, false, Passed::default());
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
    to_client(&mut h, false, Passed::default());
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

/// [`is_websocket_handshake`], with the names looked at as the forwarding code does.
fn handshake(method: &Method, version: Version, headers: &HeaderMap) -> bool {
    is_websocket_handshake(method, version, headers, Present::of(headers))
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
    assert!(handshake(&Method::GET, Version::HTTP_11, &h));
    to_upstream(&mut h, &untrusted("1.2.3.4"), true);
    assert_eq!(all(&h, "connection"), ["upgrade"]);
    assert_eq!(all(&h, "upgrade"), ["websocket"]);
    assert!(h.get("x-foo").is_none());
    assert!(h.get("sec-websocket-key").is_some());

    let mut resp = map(&[("connection", "Upgrade"), ("upgrade", "websocket")]);
    assert!(is_websocket_accept(&resp));
    to_client(&mut resp, true, Passed::default());
    assert_eq!(all(&resp, "connection"), ["upgrade"]);
    assert_eq!(all(&resp, "upgrade"), ["websocket"]);
}

#[test]
fn only_a_complete_websocket_handshake_is_an_upgrade() {
    let h = websocket_handshake();
    assert!(!handshake(&Method::POST, Version::HTTP_11, &h));
    assert!(!handshake(&Method::GET, Version::HTTP_10, &h));
    assert!(!handshake(&Method::GET, Version::HTTP_2, &h));
    for missing in [
        "connection",
        "upgrade",
        "sec-websocket-key",
        "sec-websocket-version",
    ] {
        let mut h = websocket_handshake();
        h.remove(missing);
        assert!(
            !handshake(&Method::GET, Version::HTTP_11, &h),
            "without {missing}"
        );
    }
    let mut h2c = websocket_handshake();
    h2c.insert("upgrade", HeaderValue::from_static("h2c"));
    assert!(!handshake(&Method::GET, Version::HTTP_11, &h2c));
    let mut connection = websocket_handshake();
    connection.insert("connection", HeaderValue::from_static("upgraded"));
    assert!(!handshake(&Method::GET, Version::HTTP_11, &connection));
}

#[test]
fn a_websocket_handshake_offering_more_protocols_is_sent_as_websocket_only() {
    let mut h = websocket_handshake();
    h.insert("upgrade", HeaderValue::from_static("websocket, h2c"));
    assert!(handshake(&Method::GET, Version::HTTP_11, &h));
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
    assert!(!handshake(&Method::GET, Version::HTTP_11, &h));
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
    to_client(&mut resp, false, Passed::default());
    assert!(resp.get("connection").is_none());
    assert!(resp.get("upgrade").is_none());
}

#[test]
fn each_forwarding_header_a_client_sends_is_taken_out() {
    for name in [
        "x-forwarded-for",
        "x-real-ip",
        "x-forwarded-proto",
        "x-forwarded-host",
    ] {
        let mut h = map(&[(name, "6.6.6.6"), ("host", "app.example")]);
        let host = HeaderValue::from_static("app.example");
        let fwd = Forwarding {
            host: Some(&host),
            ..untrusted("203.0.113.9")
        };
        let present = Present::of(&h);
        let added = for_upstream(&mut h, present, &fwd, false);
        assert!(h.get(name).is_none(), "{name} kept");
        assert_eq!(all(&h, "host"), ["app.example"]);
        assert!(added.as_slice().iter().any(|(n, _)| n == name), "{name} not added");
    }
}

#[test]
fn an_answers_date_server_x_pad_and_x_accel_headers_go_unless_passed() {
    let pairs = [
        ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ("server", "Apache"),
        ("x-pad", "avoid browser bug"),
        ("x-accel-expires", "0"),
        ("x-accel-redirect", "/x"),
        ("x-accel-limit-rate", "1"),
        ("x-accel-buffering", "no"),
        ("x-accel-charset", "utf-8"),
        ("x-accel-other", "kept"),
        ("x-powered-by", "PHP"),
    ];
    let mut h = map(&pairs);
    to_client(&mut h, false, Passed::default());
    let mut left: Vec<&str> = h.keys().map(|name| name.as_str()).collect();
    left.sort_unstable();
    assert_eq!(left, ["x-accel-other", "x-powered-by"]);
    let mut h = map(&pairs);
    to_client(&mut h, false, Passed::of(&["server", "x-accel-buffering"]));
    assert_eq!(all(&h, "server"), ["Apache"]);
    assert_eq!(all(&h, "x-accel-buffering"), ["no"]);
    assert!(h.get("date").is_none());
    assert!(h.get("x-accel-redirect").is_none());
}

#[test]
fn only_the_forwarding_headers_in_the_set_are_written_and_the_others_pass() {
    let sent = [
        ("host", "a.example"),
        ("x-forwarded-for", "6.6.6.6"),
        ("x-real-ip", "6.6.6.6"),
        ("x-forwarded-proto", "gopher"),
        ("x-forwarded-host", "spoof.example"),
    ];
    let host = HeaderValue::from_static("a.example");
    let base = Forwarding {
        host: Some(&host),
        https: true,
        ..untrusted("1.2.3.4")
    };
    let mut h = map(&sent);
    to_upstream(&mut h, &Forwarding { set: Forwarded::NONE, ..base }, false);
    for (name, value) in &sent {
        assert_eq!(all(&h, name), [*value], "{name}");
    }
    let mut h = map(&sent);
    let set = Forwarded::PROTO;
    to_upstream(&mut h, &Forwarding { set, ..base }, false);
    assert_eq!(all(&h, "x-forwarded-proto"), ["https"]);
    assert_eq!(all(&h, "x-forwarded-for"), ["6.6.6.6"]);
    assert_eq!(all(&h, "x-forwarded-host"), ["spoof.example"]);
    // Each subset writes what all four would, for the headers it names.
    let mut every = map(&sent);
    to_upstream(&mut every, &base, false);
    for set in [Forwarded::FOR, Forwarded::REAL_IP, Forwarded::HOST] {
        let mut h = map(&sent);
        to_upstream(&mut h, &Forwarding { set, ..base }, false);
        let differs: Vec<&str> = ["x-forwarded-for", "x-real-ip", "x-forwarded-proto", "x-forwarded-host"]
            .into_iter()
            .filter(|name| all(&h, name) != all(&every, name))
            .collect();
        assert_eq!(differs.len(), 3, "{set:?}: {differs:?}");
    }
}

#[test]
fn the_dropped_names_are_the_configs_list_in_its_order() {
    let dropped = super::DROPPED;
    let names: Vec<&str> = dropped.iter().map(|n| n.as_str()).collect();
    assert_eq!(names, crate::config::Passed::DROPPED);
}

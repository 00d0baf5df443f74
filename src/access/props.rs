//! Properties of the real client address over arbitrary forwarded-for header bytes: it never
//! panics, the answer is the peer or an address written in the header, an untrusted peer
//! (or no trusted network at all) keeps the peer, and the walk matches a plain model of
//! nginx's realip over the list of entries flattened.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use ipnet::IpNet;
use proptest::prelude::*;

use super::{canonical, real_client};

const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");

/// A few addresses, so that trusted networks and header entries meet often.
const POOL: &[&str] = &[
    "10.0.0.1",
    "10.0.0.2",
    "192.0.2.7",
    "127.0.0.1",
    "::1",
    "2001:db8::1",
    "::ffff:10.0.0.3",
    "fd00::5",
];

fn pool_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        3 => prop::sample::select(POOL).prop_map(|s| s.parse().expect("pool address")),
        1 => any::<IpAddr>(),
    ]
}

/// One entry as proxies and attackers write them.
fn entry() -> impl Strategy<Value = Vec<u8>> {
    let written = (pool_ip(), 0..6u8, "[0-9]{0,6}").prop_map(|(ip, form, port)| {
        match (form, ip) {
            (0, _) => ip.to_string(),
            (1, IpAddr::V4(v4)) => format!("{v4}:{port}"),
            (1, IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            (2, _) => format!("[{ip}]"),
            (3, _) => format!(" \t{ip}  "),
            (4, _) => format!("{ip}]"),
            _ => format!("[{ip}"),
        }
        .into_bytes()
    });
    prop_oneof![
        6 => written,
        1 => prop::collection::vec(any::<u8>(), 0..12),
        1 => "[0-9a-fA-F:.\\[\\] ]{0,16}".prop_map(String::into_bytes),
    ]
}

/// Header lines: lists of entries or arbitrary bytes, kept when `http` takes them.
fn lines() -> impl Strategy<Value = Vec<HeaderValue>> {
    let line = prop_oneof![
        4 => prop::collection::vec(entry(), 0..5).prop_map(|e| e.join(&b","[..])),
        1 => prop::collection::vec(any::<u8>(), 0..32),
    ];
    prop::collection::vec(line, 0..4).prop_map(|lines| {
        lines
            .iter()
            .filter_map(|l| HeaderValue::from_bytes(l).ok())
            .collect()
    })
}

fn trusted() -> impl Strategy<Value = Vec<IpNet>> {
    let net = (pool_ip(), 0..=128u8).prop_map(|(ip, len)| {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        IpNet::new(ip, len.min(max)).expect("a prefix within the family")
    });
    prop::collection::vec(net, 0..4)
}

fn port_ok(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok()
}

/// What an entry names, as nginx's `ngx_parse_addr_port` reads it: an address, `v4:port`,
/// `[v6]` or `[v6]:port`.
fn model_entry(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    if let Some(inner) = entry.strip_prefix('[') {
        let close = inner.find(']')?;
        let after = &inner[close + 1..];
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(port_ok)) {
            return None;
        }
        return inner[..close].parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let (host, port) = entry.rsplit_once(':')?;
    let v4 = host.parse::<Ipv4Addr>().ok()?;
    port_ok(port).then_some(IpAddr::V4(v4))
}

fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net.contains(&canonical(ip)))
}

/// Every non-empty entry of every line, first line first.
fn entries(lines: &[HeaderValue]) -> Vec<&[u8]> {
    lines
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|e| !e.is_empty())
        .collect()
}

/// nginx's realip, plainly: from the right, believe each entry while the address before
/// it is trusted; an entry that names no address ends the walk.
fn model(peer: IpAddr, lines: &[HeaderValue], trusted: &[IpNet], recursive: bool) -> IpAddr {
    let mut addr = canonical(peer);
    if !is_trusted(addr, trusted) {
        return addr;
    }
    for entry in entries(lines).into_iter().rev() {
        let named = std::str::from_utf8(entry).ok().and_then(model_entry);
        let Some(ip) = named else {
            return addr;
        };
        addr = canonical(ip);
        if !recursive || !is_trusted(addr, trusted) {
            return addr;
        }
    }
    addr
}

fn header_map(lines: &[HeaderValue], other: &[HeaderValue]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in lines {
        map.append(XFF, line.clone());
    }
    // Lines of another header must not count.
    for line in other {
        map.append(HeaderName::from_static("x-real-ip"), line.clone());
    }
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn the_client_is_the_peer_or_an_address_in_the_header(
        peer in pool_ip(),
        lines in lines(),
        other in lines(),
        trusted in trusted(),
        recursive in any::<bool>(),
    ) {
        let got = real_client(peer, &header_map(&lines, &other), &trusted, &XFF, recursive);
        let written = entries(&lines).into_iter().any(|e| {
            let named = std::str::from_utf8(e).ok().and_then(model_entry);
            named.is_some_and(|ip| canonical(ip) == got)
        });
        prop_assert!(got == canonical(peer) || written, "{got} is neither the peer nor written");
        prop_assert_eq!(got, model(peer, &lines, &trusted, recursive));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_the_header_says(
        peer in pool_ip(),
        lines in lines(),
        trusted in trusted(),
        recursive in any::<bool>(),
    ) {
        let headers = header_map(&lines, &[]);
        prop_assert_eq!(real_client(peer, &headers, &[], &XFF, recursive), canonical(peer));
        if !is_trusted(peer, &trusted) {
            prop_assert_eq!(real_client(peer, &headers, &trusted, &XFF, recursive), canonical(peer));
        }
    }
}

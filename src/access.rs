//! Who the client is and whether it may pass: the real client address, as nginx's realip
//! module decides it (`set_real_ip_from`, `real_ip_header`, `real_ip_recursive`), CIDR
//! rule lists (`[access]` and nginx's allow/deny), and HTTP basic auth against htpasswd
//! files (`basic`, `hash`), and JSON Web Tokens (`jwt`).
//!
//! Pure; the address and the rules allocate nothing: the header lines are walked in place,
//! right to left.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub mod basic;
pub(crate) mod constant_time;
pub mod hash;
pub mod jwt;
mod md5_crypt;

/// `[real_ip]`: who the client is, as nginx's realip module decides it.
#[derive(Debug, Clone)]
pub struct RealIp {
    pub trusted: Vec<ipnet::IpNet>,
    /// Lower-case header name, e.g. `x-forwarded-for`.
    pub header: http::HeaderName,
    pub recursive: bool,
}

impl RealIp {
    /// The client of a request from `peer` with `headers` ([`real_client`]).
    pub(crate) fn client(&self, peer: IpAddr, headers: &http::HeaderMap) -> IpAddr {
        real_client(peer, headers, &self.trusted, &self.header, self.recursive)
    }

    /// Whether `peer` is one of the trusted proxies.
    pub(crate) fn trusts(&self, peer: IpAddr) -> bool {
        is_trusted(peer, &self.trusted)
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports for an IPv4
/// peer) as the IPv4 address it is, so IPv4 rules and limit keys apply to it (nginx does the same
/// for allow/deny). Every other address is returned unchanged.
#[inline]
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Whether `ip` (canonicalized first) lies in one of the `trusted` networks. A linear scan: the
/// list is a handful of proxies, and `IpNet::contains` is a mask and compare.
#[inline]
pub(crate) fn is_trusted(ip: IpAddr, trusted: &[ipnet::IpNet]) -> bool {
    listed(ip, trusted)
}

/// Whether `ip` (canonicalized first) lies in one of `nets` (`[access]` deny and exempt).
#[inline]
pub(crate) fn listed(ip: IpAddr, nets: &[ipnet::IpNet]) -> bool {
    let ip = canonical(ip);
    nets.iter().any(|net| net.contains(&ip))
}

/// The client's address for a request from `peer`, as nginx's realip module finds it (`[real_ip]` in docs/config.md).
///
/// The `header` is believed only when the peer is trusted. Addresses are taken from the right
/// end; with `recursive`, trusted addresses are skipped leftwards and the first untrusted one
/// wins (all trusted: the left-most). Several header lines are walked from the last to the first.
/// An unparsable entry stops the walk and the last good address stands — so a garbage right-most
/// entry leaves the peer. Entries may be padded with spaces, and may be `a.b.c.d`, `a.b.c.d:port`,
/// a bare IPv6 address, `[v6]` or `[v6]:port` (nginx's `ngx_parse_addr_port` accepts ports too).
/// The result is canonicalized.
pub(crate) fn real_client(
    peer: IpAddr,
    headers: &http::HeaderMap,
    trusted: &[ipnet::IpNet],
    header: &http::HeaderName,
    recursive: bool,
) -> IpAddr {
    let peer = canonical(peer);
    if !is_trusted(peer, trusted) {
        return peer;
    }
    // Invariant inside the loop: `addr` is trusted, so the next entry to the left is believed.
    let mut addr = peer;
    for line in headers.get_all(header).iter().rev() {
        for entry in line.as_bytes().rsplit(|&b| b == b',') {
            let entry = entry.trim_ascii();
            if entry.is_empty() {
                // nginx skips runs of separators, so "a, , b" and a trailing comma are harmless.
                continue;
            }
            match parse_entry(entry) {
                Some(ip) => addr = canonical(ip),
                None => return addr,
            }
            if !recursive || !is_trusted(addr, trusted) {
                return addr;
            }
        }
    }
    addr
}

/// One forwarded-address entry: an address with an optional port, IPv6 optionally in brackets.
fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !after.is_empty() && !is_port(after.strip_prefix(':')?) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    // `a.b.c.d:port`; a bare IPv6 address has several colons and was handled above.
    let (host, port) = text.split_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(s: &str) -> bool {
    // The digit check rules out the `+` that `u16::from_str` would accept.
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u16>().is_ok()
}

/// An ordered allow/deny list (nginx's access module): the first rule that matches the
/// client decides; when none matches the request is allowed, so a list that should
/// deny by default ends with `deny all`. Rules see the address after realip, and an
/// IPv4-mapped IPv6 client is matched as the IPv4 address it is.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    rules: Box<[Rule]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub allow: bool,
    /// `None` is `all`.
    pub net: Option<ipnet::IpNet>,
}

impl Rules {
    pub(crate) fn new(rules: Vec<Rule>) -> Rules {
        Rules {
            rules: rules.into_boxed_slice(),
        }
    }

    /// Whether `client` may pass; with the index of the rule that denied it otherwise.
    pub(crate) fn check(&self, client: IpAddr) -> Result<(), usize> {
        match self.decided(client) {
            Some(index) if !self.rules[index].allow => Err(index),
            _ => Ok(()),
        }
    }

    /// The rule at `index` as written: `deny 10.0.0.0/8`, `deny all`.
    pub(crate) fn describe(&self, index: usize) -> String {
        match self.rules.get(index) {
            Some(rule) => {
                let verb = if rule.allow { "allow" } else { "deny" };
                match rule.net {
                    Some(net) => format!("{verb} {net}"),
                    None => format!("{verb} all"),
                }
            }
            None => String::new(),
        }
    }

    /// Whether an `allow` rule names `client` (nginx's `satisfy any` passes only then: a
    /// client no rule matches must still log in).
    pub(crate) fn allows(&self, client: IpAddr) -> bool {
        self.decided(client).is_some_and(|index| self.rules[index].allow)
    }

    /// The first rule that matches `client`.
    fn decided(&self, client: IpAddr) -> Option<usize> {
        let client = canonical(client);
        (self.rules.iter()).position(|rule| rule.net.is_none_or(|net| net.contains(&client)))
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderName, HeaderValue};
    use http::HeaderMap;
    use ipnet::IpNet;

    const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
    const XRI: HeaderName = HeaderName::from_static("x-real-ip");

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().expect("test net")).collect()
    }

    fn headers(name: &HeaderName, lines: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(name, HeaderValue::from_str(line).expect("test header"));
        }
        map
    }

    fn xff(peer: &str, lines: &[&str], recursive: bool) -> IpAddr {
        let trusted = nets(&["127.0.0.1/32", "10.0.0.0/8", "fd00::/8"]);
        real_client(ip(peer), &headers(&XFF, lines), &trusted, &XFF, recursive)
    }

    #[test]
    fn untrusted_peer_with_spoofed_header_stays_the_peer() {
        assert_eq!(xff("198.51.100.7", &["1.2.3.4"], true), ip("198.51.100.7"));
        assert_eq!(xff("198.51.100.7", &["1.2.3.4"], false), ip("198.51.100.7"));
    }

    #[test]
    fn trusted_peer_without_header_stays_the_peer() {
        assert_eq!(xff("10.0.0.1", &[], true), ip("10.0.0.1"));
    }

    #[test]
    fn trusted_proxy_chain_resolves_to_the_first_untrusted_from_the_right() {
        let got = xff(
            "10.0.0.1",
            &["6.6.6.6, 203.0.113.9, 10.0.0.2, 127.0.0.1"],
            true,
        );
        assert_eq!(got, ip("203.0.113.9"));
    }

    #[test]
    fn non_recursive_takes_the_right_most_whatever_it_is() {
        let line = ["203.0.113.9, 10.0.0.2"];
        assert_eq!(xff("10.0.0.1", &line, false), ip("10.0.0.2"));
    }

    #[test]
    fn all_trusted_chain_ends_on_the_left_most() {
        let got = xff("10.0.0.1", &["10.0.0.5, 10.0.0.4,10.0.0.3"], true);
        assert_eq!(got, ip("10.0.0.5"));
    }

    #[test]
    fn garbage_entry_stops_the_walk_keeping_the_last_good_address() {
        let got = xff("10.0.0.1", &["1.1.1.1, unknown, 10.0.0.2"], true);
        assert_eq!(got, ip("10.0.0.2"));
        assert_eq!(xff("10.0.0.1", &["1.1.1.1, garbage"], true), ip("10.0.0.1"));
        assert_eq!(
            xff("10.0.0.1", &["1.1.1.1, 300.1.1.1"], false),
            ip("10.0.0.1")
        );
        assert_eq!(xff("10.0.0.1", &["1.1.1.1, [::1"], true), ip("10.0.0.1"));
    }

    #[test]
    fn empty_entries_and_padding_are_skipped() {
        assert_eq!(
            xff("10.0.0.1", &[" 1.1.1.1 ,, 10.0.0.2 , "], true),
            ip("1.1.1.1")
        );
    }

    #[test]
    fn several_header_lines_are_walked_from_the_last_to_the_first() {
        let lines = ["203.0.113.1", "10.0.0.3, 10.0.0.2"];
        assert_eq!(xff("10.0.0.1", &lines, true), ip("203.0.113.1"));
        assert_eq!(xff("10.0.0.1", &lines, false), ip("10.0.0.2"));
        let lines = ["203.0.113.1", "203.0.113.2"];
        assert_eq!(xff("10.0.0.1", &lines, true), ip("203.0.113.2"));
    }

    #[test]
    fn x_real_ip_style_single_value_replaces_the_peer() {
        let trusted = nets(&["10.0.0.0/8"]);
        let map = headers(&XRI, &["203.0.113.50"]);
        assert_eq!(
            real_client(ip("10.1.2.3"), &map, &trusted, &XRI, false),
            ip("203.0.113.50")
        );
        // The configured header is the only one read.
        let map = headers(&XFF, &["203.0.113.50"]);
        assert_eq!(
            real_client(ip("10.1.2.3"), &map, &trusted, &XRI, false),
            ip("10.1.2.3")
        );
    }

    #[test]
    fn ipv4_mapped_peer_is_matched_against_ipv4_trusted_list() {
        assert!(is_trusted(ip("::ffff:10.9.9.9"), &nets(&["10.0.0.0/8"])));
        assert_eq!(
            xff("::ffff:10.0.0.1", &["203.0.113.4"], true),
            ip("203.0.113.4")
        );
        assert_eq!(
            xff("::ffff:198.51.100.1", &["203.0.113.4"], true),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn forwarded_addresses_are_canonicalized() {
        assert_eq!(
            xff("10.0.0.1", &["::ffff:203.0.113.4"], true),
            ip("203.0.113.4")
        );
        assert_eq!(
            xff("10.0.0.1", &["1.1.1.1, ::ffff:10.0.0.7"], true),
            ip("1.1.1.1")
        );
    }

    #[test]
    fn ipv6_entries_bare_bracketed_and_with_ports_are_accepted() {
        assert_eq!(xff("10.0.0.1", &["2001:db8::1"], true), ip("2001:db8::1"));
        assert_eq!(xff("10.0.0.1", &["[2001:db8::2]"], true), ip("2001:db8::2"));
        assert_eq!(
            xff("10.0.0.1", &["[2001:db8::3]:443"], true),
            ip("2001:db8::3")
        );
        assert_eq!(
            xff("10.0.0.1", &["203.0.113.5:8080"], true),
            ip("203.0.113.5")
        );
        assert_eq!(xff("fd00::1", &["1.1.1.1, [fd00::2]"], true), ip("1.1.1.1"));
        assert_eq!(
            xff("10.0.0.1", &["203.0.113.5:99999"], true),
            ip("10.0.0.1")
        );
        assert_eq!(xff("10.0.0.1", &["[2001:db8::3]x"], true), ip("10.0.0.1"));
    }

    #[test]
    fn canonical_leaves_native_ipv6_and_ipv4_alone() {
        assert_eq!(canonical(ip("::1")), ip("::1"));
        assert_eq!(canonical(ip("1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(canonical(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
    }

    fn rules(list: &[(bool, Option<&str>)]) -> Rules {
        Rules::new(
            list.iter()
                .map(|(allow, net)| Rule {
                    allow: *allow,
                    net: net.map(|n| n.parse().expect("net")),
                })
                .collect(),
        )
    }

    #[test]
    fn the_first_matching_rule_decides_and_no_match_allows() {
        // nginx's documentation example, shortened.
        let list = rules(&[
            (false, Some("10.0.0.13/32")),
            (true, Some("10.0.0.0/8")),
            (false, None),
        ]);
        assert_eq!(list.check("10.0.0.13".parse().expect("ip")), Err(0));
        assert_eq!(list.check("10.9.9.9".parse().expect("ip")), Ok(()));
        assert_eq!(list.check("192.0.2.1".parse().expect("ip")), Err(2));
        let open = rules(&[(false, Some("192.0.2.0/24"))]);
        assert_eq!(open.check("198.51.100.1".parse().expect("ip")), Ok(()));
    }

    #[test]
    fn ipv4_mapped_clients_match_ipv4_rules() {
        let list = rules(&[(false, Some("192.0.2.0/24"))]);
        assert_eq!(list.check("::ffff:192.0.2.9".parse().expect("ip")), Err(0));
    }
}

//! Zone keys (`key` in docs/config.md): a template of literal text and nginx variables, rendered
//! per request into a reusable byte buffer.
//!
//! If every variable of a template renders empty, so does the key, and the zone does not
//! limit that request (nginx: an empty key is skipped). A template of literal text only,
//! such as `"global"`, is one key shared by everyone. As nginx, a key longer than 65 535
//! bytes is skipped too.

use std::io::Write;
use std::net::IpAddr;

use http::{HeaderMap, HeaderName, Method};

/// nginx skips keys longer than this.
const MAX_KEY_LEN: usize = 65_535;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Box<[Part]>,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Literal(Box<[u8]>),
    /// The client address as 4 or 16 bytes, masked to the zone's prefix.
    BinaryRemoteAddr,
    /// The client address as text.
    RemoteAddr,
    Header(HeaderName),
    /// A query argument as sent (not decoded); names compare case-insensitively, as nginx.
    Arg(Box<str>),
    /// A cookie's value; names compare case-insensitively, as nginx.
    Cookie(Box<str>),
    /// The normalized path.
    Uri,
    RequestMethod,
    /// The host without port, lower case.
    Host,
}

/// What a key can be made of, borrowed from the request.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    /// After realip, canonical (IPv4-mapped IPv6 as IPv4).
    pub client: IpAddr,
    pub method: &'a Method,
    /// The normalized path (`$uri`).
    pub path: &'a [u8],
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// The request's host as sent (authority or `Host`), port included.
    pub host: Option<&'a str>,
    /// `$host` when the request names no host: the first name of the site that answers
    /// (nginx's `$host`, and `vars`' own).
    pub server_name: &'a str,
}

impl Template {
    pub fn new(parts: Vec<Part>, ipv4_prefix: u8, ipv6_prefix: u8) -> Template {
        Template {
            parts: parts.into_boxed_slice(),
            ipv4_prefix: ipv4_prefix.min(32),
            ipv6_prefix: ipv6_prefix.min(128),
        }
    }

    /// Renders the key into `out` (cleared first). `false` when the key is empty or too
    /// long: the zone then does not apply to this request.
    pub fn render(&self, req: &RequestView<'_>, out: &mut Vec<u8>) -> bool {
        out.clear();
        self.render_append(req, out)
    }

    /// Whether the key reads the request's host (`$host`).
    pub fn reads_host(&self) -> bool {
        self.parts.contains(&Part::Host)
    }

    /// Renders the key at the end of `out`; what it wrote is the key. `false` as
    /// [`render`](Template::render) (what was written is then to be discarded).
    pub fn render_append(&self, req: &RequestView<'_>, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let mut variables = 0usize;
        let mut filled = 0usize;
        for part in self.parts.iter() {
            let before = out.len();
            match part {
                Part::Literal(text) => {
                    out.extend_from_slice(text);
                    continue;
                }
                Part::BinaryRemoteAddr => self.binary_addr(req.client, out),
                Part::RemoteAddr => {
                    // Writing to a Vec cannot fail.
                    let _ = write!(out, "{}", req.client);
                }
                Part::Header(name) => {
                    // Repeated lines joined as nginx (1.23+) and `vars` join them.
                    for (i, value) in req.headers.get_all(name).iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        out.extend_from_slice(value.as_bytes());
                    }
                }
                Part::Arg(name) => {
                    if let Some(value) = req.query.and_then(|q| arg(q, name)) {
                        out.extend_from_slice(value.as_bytes());
                    }
                }
                Part::Cookie(name) => {
                    if let Some(value) = cookie(req.headers, name) {
                        out.extend_from_slice(value);
                    }
                }
                Part::Uri => out.extend_from_slice(req.path),
                Part::RequestMethod => out.extend_from_slice(req.method.as_str().as_bytes()),
                Part::Host => {
                    let host = req.host.map_or(req.server_name, host_name);
                    out.extend(host.bytes().map(|b| b.to_ascii_lowercase()));
                }
            }
            variables += 1;
            filled += usize::from(out.len() > before);
        }
        let empty = variables > 0 && filled == 0;
        let len = out.len() - start;
        !empty && len > 0 && len <= MAX_KEY_LEN
    }

    /// The stored key an operator means by `text` (the admin API): for a key of
    /// `$binary_remote_addr` alone, the address `text` names, masked as requests are
    /// (written plain or as [`Template::text_of`] shows a masked one, `2001:db8::/64`);
    /// otherwise `text`'s bytes, as the template renders them.
    pub fn key_of(&self, text: &[u8]) -> Vec<u8> {
        let addr = std::str::from_utf8(text).ok().and_then(|text| {
            let addr = match text.split_once('/') {
                Some((addr, prefix)) if prefix.parse::<u8>().is_ok() => addr,
                _ => text,
            };
            addr.parse().ok()
        });
        match (&*self.parts, addr) {
            ([Part::BinaryRemoteAddr], Some(addr)) => {
                let mut key = Vec::with_capacity(16);
                self.binary_addr(addr, &mut key);
                key
            }
            _ => text.to_vec(),
        }
    }

    /// A stored key as people read it: in a zone keyed by `$binary_remote_addr` alone,
    /// the address (with the zone's prefix when it masks, `2001:db8::/64`); otherwise the
    /// key's text.
    pub fn text_of(&self, key: &[u8]) -> String {
        let addr = match (&*self.parts, key.len()) {
            ([Part::BinaryRemoteAddr], 4) => <[u8; 4]>::try_from(key)
                .ok()
                .map(|bytes| (IpAddr::from(bytes), self.ipv4_prefix, 32)),
            ([Part::BinaryRemoteAddr], 16) => <[u8; 16]>::try_from(key)
                .ok()
                .map(|bytes| (IpAddr::from(bytes), self.ipv6_prefix, 128)),
            _ => None,
        };
        match addr {
            Some((addr, prefix, full)) if prefix < full => format!("{addr}/{prefix}"),
            Some((addr, ..)) => addr.to_string(),
            None => String::from_utf8_lossy(key).into_owned(),
        }
    }

    fn binary_addr(&self, client: IpAddr, out: &mut Vec<u8>) {
        match client {
            IpAddr::V4(v4) => {
                let bits = u32::from(v4) & mask32(self.ipv4_prefix);
                out.extend_from_slice(&bits.to_be_bytes());
            }
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & mask128(self.ipv6_prefix);
                out.extend_from_slice(&bits.to_be_bytes());
            }
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

fn mask128(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}

/// The first `name=value` of a query string.
fn arg<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        key.eq_ignore_ascii_case(name).then_some(value)
    })
}

/// The first cookie called `name` in any `Cookie` header line.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let at = pair.iter().position(|&b| b == b'=')?;
            pair[..at]
                .trim_ascii()
                .eq_ignore_ascii_case(name.as_bytes())
                .then(|| pair[at + 1..].trim_ascii())
        })
}

/// The host's name as `$host` means it (before lower-casing): without the port and
/// without a trailing dot. `example.com.:8080` → `example.com`; `[::1]:80` → `[::1]`.
fn host_name(host: &str) -> &str {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.find(']').map_or(host, |end| &host[..end + 2]),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.strip_suffix('.').unwrap_or(name)
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(client: &str, headers: &'a HeaderMap, query: Option<&'a str>) -> RequestView<'a> {
        RequestView {
            client: client.parse().expect("ip"),
            method: &Method::GET,
            path: b"/api/x",
            query,
            headers,
            host: Some("Example.COM:8080"),
            server_name: "site.test",
        }
    }

    fn render(template: &Template, req: &RequestView<'_>) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        template.render(req, &mut out).then_some(out)
    }

    #[test]
    fn binary_remote_addr_is_masked_to_the_zone_prefix() {
        let headers = HeaderMap::new();
        let t = Template::new(vec![Part::BinaryRemoteAddr], 24, 64);
        assert_eq!(
            render(&t, &view("192.0.2.77", &headers, None)),
            Some(vec![192, 0, 2, 0])
        );
        let key = render(&t, &view("2001:db8:0:1:2:3:4:5", &headers, None)).expect("key");
        assert_eq!(key.len(), 16);
        assert_eq!(&key[..8], &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1]);
        assert_eq!(&key[8..], &[0; 8]);
        // Shown as the zone sees clients.
        assert_eq!(t.text_of(&key), "2001:db8:0:1::/64");
        assert_eq!(t.text_of(&[192, 0, 2, 0]), "192.0.2.0/24");
        // And looked up as shown (the admin page sends keys back as /status shows them).
        assert_eq!(t.key_of(b"2001:db8:0:1::/64"), key);
        assert_eq!(t.key_of(b"192.0.2.0/24"), [192, 0, 2, 0]);
        let whole = Template::new(vec![Part::BinaryRemoteAddr], 32, 128);
        assert_eq!(whole.text_of(&[192, 0, 2, 77]), "192.0.2.77");
        let api = Template::new(
            vec![Part::Header(HeaderName::from_static("x-api-key"))],
            32,
            128,
        );
        assert_eq!(api.text_of(b"abcd"), "abcd");
    }

    #[test]
    fn a_key_whose_variables_are_all_empty_is_empty() {
        let headers = HeaderMap::new();
        let t = Template::new(
            vec![
                Part::Header(HeaderName::from_static("x-api-key")),
                Part::Literal(Box::from(&b":"[..])),
                Part::Arg("k".into()),
            ],
            32,
            128,
        );
        assert_eq!(render(&t, &view("1.2.3.4", &headers, None)), None);
        assert_eq!(
            render(&t, &view("1.2.3.4", &headers, Some("a=1&K=v"))),
            Some(b":v".to_vec())
        );
    }

    #[test]
    fn a_literal_key_is_one_key_for_everyone() {
        let headers = HeaderMap::new();
        let t = Template::new(vec![Part::Literal(Box::from(&b"global"[..]))], 32, 128);
        assert_eq!(
            render(&t, &view("1.2.3.4", &headers, None)),
            Some(b"global".to_vec())
        );
    }

    #[test]
    fn composite_keys_join_headers_cookies_host_method_and_uri() {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", "k1".parse().expect("value"));
        headers.append("cookie", "a=1; Session = s2 ".parse().expect("value"));
        let t = Template::new(
            vec![
                Part::Header(HeaderName::from_static("x-api-key")),
                Part::Literal(Box::from(&b"|"[..])),
                Part::Cookie("session".into()),
                Part::Literal(Box::from(&b"|"[..])),
                Part::Host,
                Part::RequestMethod,
                Part::Uri,
                Part::Literal(Box::from(&b"|"[..])),
                Part::RemoteAddr,
            ],
            32,
            128,
        );
        assert_eq!(
            render(&t, &view("10.1.2.3", &headers, None)),
            Some(b"k1|s2|example.comGET/api/x|10.1.2.3".to_vec())
        );
    }

    #[test]
    fn a_key_reads_the_host_only_with_a_host_part() {
        let with = Template::new(
            vec![Part::Literal(b"k".to_vec().into()), Part::Host],
            32,
            128,
        );
        let without = Template::new(vec![Part::BinaryRemoteAddr], 32, 128);
        assert!(with.reads_host());
        assert!(!without.reads_host());
    }

    #[test]
    fn hosts_lose_their_port_and_trailing_dot_but_ipv6_keeps_its_brackets() {
        assert_eq!(host_name("a.example:80"), "a.example");
        assert_eq!(host_name("a.example.:80"), "a.example");
        assert_eq!(host_name("a.example."), "a.example");
        assert_eq!(host_name("[::1]:8080"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
        assert_eq!(host_name("a.example"), "a.example");
    }

    #[test]
    fn host_falls_back_to_the_server_name_and_headers_join_their_lines() {
        let mut headers = HeaderMap::new();
        headers.append("x-team", http::HeaderValue::from_static("a"));
        headers.append("x-team", http::HeaderValue::from_static("b"));
        let t = Template::new(
            vec![
                Part::Host,
                Part::Literal(b"|".to_vec().into()),
                Part::Header(HeaderName::from_static("x-team")),
            ],
            32,
            128,
        );
        let req = RequestView {
            host: None,
            ..view("192.0.2.1", &headers, None)
        };
        assert_eq!(render(&t, &req).as_deref(), Some(&b"site.test|a, b"[..]));
    }
}

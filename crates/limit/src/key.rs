//! Zone keys (`key` in docs/config.md): a template of literal text and nginx variables (the
//! one language of [`crate::vars`]), rendered per request into a reusable byte buffer.
//!
//! If every variable of a template renders empty, so does the key, and the zone does not
//! limit that request (nginx: an empty key is skipped). A template of literal text only,
//! such as `"global"`, is one key shared by everyone. As nginx, a key longer than 65 535
//! bytes is skipped too.

use std::net::IpAddr;

use crate::vars::{self, Piece, Request, Var, VarText};

/// nginx skips keys longer than this.
const MAX_KEY_LEN: usize = 65_535;

/// A zone's key: text in the one variable language ([`crate::vars`]), each variable
/// meaning what it means in a `return`, with the zone's own prefixes for
/// `$binary_remote_addr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: VarText,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
}

impl Template {
    pub fn new(text: VarText, ipv4_prefix: u8, ipv6_prefix: u8) -> Template {
        Template {
            text,
            ipv4_prefix: ipv4_prefix.min(32),
            ipv6_prefix: ipv6_prefix.min(128),
        }
    }

    /// Renders the key into `out` (cleared first). `false` when the key is empty or too
    /// long: the zone then does not apply to this request.
    pub fn render(&self, req: &Request<'_>, out: &mut Vec<u8>) -> bool {
        out.clear();
        self.render_append(req, out)
    }

    /// Whether the key reads the request's host (`$host`), itself or through a map.
    pub fn reads_host(&self) -> bool {
        self.text.uses(|var| *var == Var::Host)
    }

    /// Whether the key reads a verified token's claim (`$jwt_claim_NAME`).
    pub fn reads_claims(&self) -> bool {
        self.text.uses(|var| matches!(var, Var::JwtClaim(_)))
    }

    /// Renders the key at the end of `out`; what it wrote is the key. `false` as
    /// [`render`](Template::render) (what was written is then to be discarded).
    pub fn render_append(&self, req: &Request<'_>, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let mut variables = 0usize;
        let mut filled = 0usize;
        for piece in self.text.pieces() {
            let before = out.len();
            match piece {
                Piece::Text(text) => {
                    out.extend_from_slice(text.as_bytes());
                    continue;
                }
                Piece::Var(Var::BinaryRemoteAddr) => self.binary_addr(req.remote_addr, out),
                Piece::Var(var) => req.append(var, out),
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
        match addr {
            Some(addr) if self.is_binary_addr() => {
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
        let addr = match (self.is_binary_addr(), key.len()) {
            (true, 4) => <[u8; 4]>::try_from(key)
                .ok()
                .map(|bytes| (IpAddr::from(bytes), self.ipv4_prefix, 32)),
            (true, 16) => <[u8; 16]>::try_from(key)
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

    /// Whether the key is `$binary_remote_addr` alone (its keys are addresses).
    fn is_binary_addr(&self) -> bool {
        matches!(self.text.pieces(), [Piece::Var(Var::BinaryRemoteAddr)])
    }

    /// `$binary_remote_addr` as this zone keeps it: masked to its prefixes.
    fn binary_addr(&self, client: IpAddr, out: &mut Vec<u8>) {
        vars::binary_addr(client, self.ipv4_prefix, self.ipv6_prefix, out);
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;

    fn view<'a>(client: &str, headers: &'a HeaderMap, query: Option<&'a str>) -> Request<'a> {
        Request {
            uri: b"/api/x",
            args: query,
            host: Some("Example.COM:8080"),
            server_name: "site.test",
            ..Request::new(client.parse().expect("ip"), headers)
        }
    }

    /// The template a zone's `key = "text"` makes, with the zone's prefixes.
    fn template(text: &str, ipv4_prefix: u8, ipv6_prefix: u8) -> Template {
        let text = VarText::parse(text).expect("a key");
        Template::new(text, ipv4_prefix, ipv6_prefix)
    }

    fn render(template: &Template, req: &Request<'_>) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        template.render(req, &mut out).then_some(out)
    }

    #[test]
    fn binary_remote_addr_is_masked_to_the_zone_prefix() {
        let headers = HeaderMap::new();
        let t = template("$binary_remote_addr", 24, 64);
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
        let whole = template("$binary_remote_addr", 32, 128);
        assert_eq!(whole.text_of(&[192, 0, 2, 77]), "192.0.2.77");
        let api = template("$http_x_api_key", 32, 128);
        assert_eq!(api.text_of(b"abcd"), "abcd");
    }

    #[test]
    fn a_key_whose_variables_are_all_empty_is_empty() {
        let headers = HeaderMap::new();
        let t = template("$http_x_api_key:$arg_k", 32, 128);
        assert_eq!(render(&t, &view("1.2.3.4", &headers, None)), None);
        assert_eq!(
            render(&t, &view("1.2.3.4", &headers, Some("a=1&K=v"))),
            Some(b":v".to_vec())
        );
    }

    #[test]
    fn a_literal_key_is_one_key_for_everyone() {
        let headers = HeaderMap::new();
        let t = template("global", 32, 128);
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
        let t = template(
            "$http_x_api_key|$cookie_session|$host$request_method$uri|$remote_addr",
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
        let with = template("k$host", 32, 128);
        let without = template("$binary_remote_addr", 32, 128);
        assert!(with.reads_host());
        assert!(!without.reads_host());
        let map = vars::Map::new(
            "by_host",
            VarText::parse("$host").expect("a source"),
            Vec::new(),
            VarText::default(),
        );
        let through_a_map = VarText::from_pieces(vec![Piece::Var(Var::Map(map.into()))]);
        assert!(Template::new(through_a_map, 32, 128).reads_host());
    }

    #[test]
    fn host_falls_back_to_the_server_name_and_headers_join_their_lines() {
        let mut headers = HeaderMap::new();
        headers.append("x-team", http::HeaderValue::from_static("a"));
        headers.append("x-team", http::HeaderValue::from_static("b"));
        let t = template("$host|$http_x_team", 32, 128);
        let req = Request {
            host: None,
            ..view("192.0.2.1", &headers, None)
        };
        assert_eq!(render(&t, &req).as_deref(), Some(&b"site.test|a, b"[..]));
    }
}

/// A zone's `plan` read from the request (`plan = "$jwt_claim_plan"`): the text names one
/// of the plans (`[zones.NAME] plans`, `[api_keys]`'s), which the request is then on in
/// this zone. An unknown or empty name is no plan (the zone's own `rate`).
#[derive(Clone, Debug)]
pub struct PlanFrom {
    pub text: VarText,
    /// Every plan's name, by plan id (sorted, as the ids are given).
    pub names: std::sync::Arc<[Box<str>]>,
}

impl PlanFrom {
    /// The plan id `req` names; the text is rendered at the end of `scratch`, which is left
    /// as it was.
    pub fn plan(&self, req: &Request<'_>, scratch: &mut Vec<u8>) -> Option<usize> {
        let start = scratch.len();
        self.text.render(req, scratch);
        let named = &scratch[start..];
        let id = self
            .names
            .binary_search_by(|name| name.as_bytes().cmp(named))
            .ok();
        scratch.truncate(start);
        id
    }

    /// Whether the text reads a verified token's claim.
    pub fn reads_claims(&self) -> bool {
        self.text.uses(|var| matches!(var, Var::JwtClaim(_)))
    }
}

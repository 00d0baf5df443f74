//! Properties of key rendering over arbitrary templates and request values: it never
//! panics, a key is the concatenation of its parts, each variable renders only what the
//! request holds, and a key the zone uses is never empty nor longer than nginx's limit.

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use proptest::prelude::*;

use super::{Template, MAX_KEY_LEN};
use crate::vars::{self, Piece, Var, VarText};

/// Header names the templates and the requests share, so that lookups hit.
const NAMES: &[&str] = &["x-api-key", "cookie", "x-big", "x-a"];

/// What a request brings, owned.
#[derive(Debug)]
struct Request {
    client: IpAddr,
    method: Method,
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    host: Option<String>,
}

impl Request {
    fn view(&self) -> vars::Request<'_> {
        vars::Request {
            method: &self.method,
            uri: self.path.as_bytes(),
            args: self.query.as_deref(),
            host: self.host.as_deref(),
            ..vars::Request::new(self.client, &self.headers)
        }
    }

    /// The most bytes `part` can add to a key: what the request holds for it.
    fn bound(&self, part: &Piece) -> usize {
        // Every line, and the ", " between two.
        let all = |name: &HeaderName| -> usize {
            let lines = self.headers.get_all(name).iter();
            lines.map(|v| v.len() + 2).sum::<usize>().saturating_sub(2)
        };
        let var = match part {
            Piece::Text(text) => return text.len(),
            Piece::Var(var) => var,
        };
        let view = self.view();
        match var {
            Var::BinaryRemoteAddr => 16,
            // The longest IPv6 text, `ffff:…:255.255.255.255` included.
            Var::RemoteAddr => 45,
            Var::Header(name) => all(name),
            Var::Arg(_) | Var::Args => self.query.as_ref().map_or(0, String::len),
            Var::Cookie(_) => all(&http::header::COOKIE),
            Var::Uri => self.path.len(),
            Var::RequestMethod => self.method.as_str().len(),
            Var::Host => self.host.as_ref().map_or(0, String::len),
            Var::Scheme => "https".len(),
            Var::ServerName => view.server_name.len(),
            Var::ServerPort | Var::RemotePort => "65535".len(),
            Var::RequestUri => view.request_uri.len(),
            Var::RemoteUser => all(&http::header::AUTHORIZATION),
            // Refused in keys (config), and unset in the limit phase.
            Var::RequestId | Var::Capture(_) => 0,
            // The generated templates hold no map, and the view no claims and no TLS.
            Var::Map(_) | Var::JwtClaim(_) => 0,
            Var::SslClientVerify | Var::SslClientSDn | Var::SslClientFingerprint | Var::Ja4 => 0,
        }
    }
}

/// A header value from arbitrary bytes, skipping the ones `http` refuses.
fn header_value() -> impl Strategy<Value = Option<HeaderValue>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24)
            .prop_map(|bytes| HeaderValue::from_bytes(&bytes).ok()),
        "[ -~]{0,24}".prop_map(|text| HeaderValue::from_str(&text).ok()),
        "[ a-zA-Z0-9=;]{0,40}".prop_map(|text| HeaderValue::from_str(&text).ok()),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let header = (prop::sample::select(NAMES), header_value());
    let method = prop_oneof![
        prop::sample::select(&["GET", "POST", "OPTIONS"][..]).prop_map(String::from),
        "[A-Z!#$%&'*+.^_`|~-]{1,12}",
    ];
    (
        any::<IpAddr>(),
        method,
        any::<String>(),
        prop::option::of(prop_oneof![
            any::<String>(),
            "([a-zA-Z]{0,3}=?[^&]{0,6}&?){0,4}"
        ]),
        prop::collection::vec(header, 0..6),
        prop::option::of(prop_oneof![
            any::<String>(),
            "\\[?[a-zA-Z0-9:.]{0,12}\\]?(:[0-9]{0,5})?"
        ]),
    )
        .prop_map(|(client, method, path, query, headers, host)| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                if let Some(value) = value {
                    map.append(HeaderName::from_static(name), value);
                }
            }
            Request {
                client,
                method: Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET),
                path,
                query,
                headers: map,
                host,
            }
        })
}

/// A piece of a key: literal text, or a variable a key may hold.
fn part() -> impl Strategy<Value = Piece> {
    let name = prop_oneof![any::<String>(), "[a-zA-Z]{1,3}"];
    let var = prop_oneof![
        Just(Var::BinaryRemoteAddr),
        Just(Var::RemoteAddr),
        prop::sample::select(NAMES).prop_map(|n| Var::Header(HeaderName::from_static(n))),
        name.clone().prop_map(|n| Var::Arg(n.into())),
        name.prop_map(|n| Var::Cookie(n.into())),
        Just(Var::Uri),
        Just(Var::RequestMethod),
        Just(Var::Host),
        Just(Var::Scheme),
        Just(Var::ServerName),
        Just(Var::ServerPort),
        Just(Var::RequestUri),
        Just(Var::Args),
        Just(Var::RemotePort),
    ];
    prop_oneof![
        ".{0,12}".prop_map(|text: String| Piece::Text(text.into())),
        var.prop_map(Piece::Var),
    ]
}

fn template() -> impl Strategy<Value = Template> {
    (
        prop::collection::vec(part(), 0..8),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(parts, v4, v6)| Template::new(VarText::from_pieces(parts), v4, v6))
}

/// What `part` alone renders for `req`, through the same code as a whole key.
fn render_part(template: &Template, part: &Piece, req: &vars::Request<'_>) -> Vec<u8> {
    let alone = Template::new(
        VarText::from_pieces(vec![part.clone()]),
        template.ipv4_prefix,
        template.ipv6_prefix,
    );
    let mut out = Vec::new();
    alone.render_append(req, &mut out);
    out
}

/// `needle` appears in `haystack` as a run of bytes.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn keys_are_their_parts_in_order_and_bounded_by_the_request(
        template in template(),
        req in request(),
        prefix in prop::collection::vec(any::<u8>(), 0..4),
    ) {
        let view = req.view();
        let mut out = prefix.clone();
        let used = template.render_append(&view, &mut out);
        prop_assert_eq!(&out[..prefix.len()], &prefix[..], "the prefix was touched");
        let key = &out[prefix.len()..];

        let pieces = template.text.pieces();
        let parts: Vec<Vec<u8>> =
            pieces.iter().map(|p| render_part(&template, p, &view)).collect();
        prop_assert_eq!(key, &parts.concat()[..]);
        let bound: usize = pieces.iter().map(|p| req.bound(p)).sum();
        prop_assert!(key.len() <= bound, "{} bytes from at most {}", key.len(), bound);

        let variables = pieces.iter().zip(&parts)
            .filter(|(p, _)| !matches!(p, Piece::Text(_)));
        let all_empty = variables.clone().count() > 0 && variables.clone().all(|(_, r)| r.is_empty());
        prop_assert_eq!(used, !key.is_empty() && key.len() <= MAX_KEY_LEN && !all_empty);

        let mut again = Vec::new();
        prop_assert_eq!(template.render(&view, &mut again), used);
        prop_assert_eq!(&again[..], key, "rendering twice differs");
    }

    #[test]
    fn variables_render_only_what_the_request_holds(part in part(), req in request()) {
        let view = req.view();
        let template = Template::new(VarText::from_pieces(vec![part.clone()]), 32, 128);
        let got = render_part(&template, &part, &view);
        let cookie_lines: Vec<&[u8]> =
            req.headers.get_all(http::header::COOKIE).iter().map(HeaderValue::as_bytes).collect();
        let Piece::Var(var) = &part else {
            return Ok(());
        };
        match var {
            Var::Header(name) => {
                let lines: Vec<&[u8]> = req.headers.get_all(name).iter().map(HeaderValue::as_bytes).collect();
                prop_assert_eq!(&got[..], &lines.join(&b", "[..])[..]);
            }
            Var::Arg(_) => prop_assert!(contains(req.query.as_deref().unwrap_or("").as_bytes(), &got)),
            Var::Cookie(_) => prop_assert!(got.is_empty() || cookie_lines.iter().any(|l| contains(l, &got))),
            Var::BinaryRemoteAddr => prop_assert_eq!(got.len(), if req.client.is_ipv4() { 4 } else { 16 }),
            Var::RemoteAddr => prop_assert_eq!(got, req.client.to_string().into_bytes()),
            Var::Host => {
                let host = req.host.as_deref().unwrap_or("").to_ascii_lowercase();
                prop_assert!(host.as_bytes().starts_with(&got));
            }
            _ => {}
        }
    }

    #[test]
    fn stored_keys_and_their_text_go_back_and_forth(
        template in template(),
        req in request(),
        text in prop::collection::vec(any::<u8>(), 0..24),
    ) {
        let mut key = Vec::new();
        template.render(&req.view(), &mut key);
        let shown = template.text_of(&key);
        // An address (whole, or masked and shown as `addr/prefix`) or valid UTF-8 text
        // comes back as the same stored key: /status's keys can be looked up as shown.
        if std::str::from_utf8(&key).is_ok() || template.is_binary_addr() {
            prop_assert_eq!(template.key_of(shown.as_bytes()), key);
        }
        template.text_of(&text);
        template.key_of(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn keys_past_nginx_limit_are_skipped(copies in 1..6usize, len in 0..40_000usize) {
        let name = HeaderName::from_static("x-big");
        let pieces = vec![Piece::Var(Var::Header(name.clone())); copies];
        let template = Template::new(VarText::from_pieces(pieces), 32, 128);
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(&"k".repeat(len)).expect("a valid value"));
        let req = Request {
            client: IpAddr::from([192, 0, 2, 1]),
            method: Method::GET,
            path: "/".into(),
            query: None,
            headers,
            host: None,
        };
        let mut key = Vec::new();
        let used = template.render(&req.view(), &mut key);
        prop_assert_eq!(key.len(), copies * len);
        prop_assert_eq!(used, len > 0 && copies * len <= MAX_KEY_LEN);
    }
}

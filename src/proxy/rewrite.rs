//! `upstream_path`: the path a location's upstream gets instead of the client's (nginx's
//! `proxy_pass http://app/v2/;`), as "Path rewrite" in docs/config.md says.

use http::uri::PathAndQuery;

use crate::routing::{self, PathByte};
use crate::vars::{self, Piece, Var, VarText};

/// A location's rewrite, ready to use.
#[derive(Clone, Debug)]
pub struct Rewrite {
    /// `upstream_path` up to its first literal `?`.
    path: VarText,
    /// What `upstream_path` writes after that `?`: the query the upstream gets instead
    /// of the client's.
    query: Option<VarText>,
    replaces: Replaces,
}

/// What of the normalized path `to` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replaces {
    /// The location's prefix, this many bytes: the rest of the path follows `to`.
    Prefix(usize),
    /// The whole path (an exact or regex location, or a `to` with variables).
    Whole,
}

impl Rewrite {
    pub(crate) fn new(to: VarText, replaces: Replaces) -> Rewrite {
        let replaces = match to.as_literal() {
            Some(_) => replaces,
            None => Replaces::Whole,
        };
        let (path, query) = to.split_once('?');
        Rewrite {
            path,
            query,
            replaces,
        }
    }

    /// The upstream's path and query for a request whose path arrived as `raw_path`
    /// with `query`; `None` when the path would climb above `/` (a capture holding
    /// `..`). Bytes from the client's path stay in the path: a reserved byte that
    /// arrived encoded (`%3F`, `%26`, `%2F`) goes upstream encoded, and the prefix's
    /// remainder goes before the query `upstream_path` writes, never into it. The
    /// client's query follows unless `upstream_path` writes one.
    pub(crate) fn apply(
        &self,
        raw_path: &str,
        query: Option<&str>,
        req: Option<&vars::Request<'_>>,
    ) -> Option<PathAndQuery> {
        let marked = routing::normalize_marked(raw_path).ok()?;
        let mut out = Vec::with_capacity(raw_path.len() + 16);
        self.write_path(&marked, req, &mut out);
        if let Replaces::Prefix(len) = self.replaces {
            reencode(marked.get(len..).unwrap_or_default(), &mut out);
        }
        if climbs(&routing::percent_decode(&out).ok()?) {
            return None;
        }
        match (&self.query, query) {
            (Some(own), _) => {
                out.push(b'?');
                write_query(own, req, query, &mut out);
            }
            (None, Some(query)) => {
                out.push(b'?');
                out.extend_from_slice(query.as_bytes());
            }
            (None, None) => {}
        }
        PathAndQuery::from_maybe_shared(bytes::Bytes::from(out)).ok()
    }

    /// The path `upstream_path` writes, percent-encoded: its text, and its variables'
    /// values (a capture or `$uri` from the marked path, so what arrived encoded stays so).
    fn write_path(&self, marked: &[PathByte], req: Option<&vars::Request<'_>>, out: &mut Vec<u8>) {
        let mut value = Vec::new();
        for piece in self.path.pieces() {
            match (piece, req) {
                (Piece::Text(text), _) => encode(text.as_bytes(), out),
                (Piece::Var(Var::Uri), _) => reencode(marked, out),
                (Piece::Var(Var::Capture(n)), Some(req)) => {
                    let group = req.captures.and_then(|c| c.get(*n));
                    let range = group.map_or(0..0, |m| m.range());
                    reencode(marked.get(range).unwrap_or_default(), out);
                }
                (Piece::Var(var), Some(req)) => {
                    value.clear();
                    req.append(var, &mut value);
                    encode(&value, out);
                }
                (Piece::Var(_), None) => {}
            }
        }
    }
}

/// The query `upstream_path` writes: its text as written (`=`, `&` and `?` kept), the
/// client's `$args` as they came, and every other variable's value encoded as one
/// component, so that no value adds a parameter.
fn write_query(
    own: &VarText,
    req: Option<&vars::Request<'_>>,
    args: Option<&str>,
    out: &mut Vec<u8>,
) {
    let mut value = Vec::new();
    for piece in own.pieces() {
        match (piece, req) {
            (Piece::Text(text), _) => encode_query(text.as_bytes(), out),
            (Piece::Var(Var::Args), _) => encode_query(args.unwrap_or("").as_bytes(), out),
            (Piece::Var(var), Some(req)) => {
                value.clear();
                req.append(var, &mut value);
                vars::percent_encode_into(out, &value, is_unreserved);
            }
            (Piece::Var(_), None) => {}
        }
    }
}

/// Whether `path` has a `.` or `..` segment, or does not start with `/`: the upstream
/// could read it as a path outside the one meant.
fn climbs(path: &[u8]) -> bool {
    path.first() != Some(&b'/')
        || path
            .split(|&b| b == b'/')
            .any(|segment| segment == b".." || segment == b".")
}

/// Appends the marked path bytes percent-encoded: a reserved byte (RFC 3986's gen-delims
/// and sub-delims) or `%` that arrived encoded is encoded again, the others as [`encode`]
/// does.
fn reencode(marked: &[PathByte], out: &mut Vec<u8>) {
    for &PathByte { byte, escaped } in marked {
        let keep = if escaped {
            is_unreserved(byte)
        } else {
            keeps_in_path(byte)
        };
        if keep {
            out.push(byte);
        } else {
            vars::push_escaped(out, byte);
        }
    }
}

/// Appends a decoded path, every byte that may not stand as it is percent-encoded.
fn encode(path: &[u8], out: &mut Vec<u8>) {
    vars::percent_encode_into(out, path, keeps_in_path)
}

/// RFC 3986's pchar and `/`: what a path may hold unencoded.
fn keeps_in_path(b: u8) -> bool {
    is_unreserved(b) || b"!$&'()*+,;=:@/".contains(&b)
}

/// RFC 3986's unreserved bytes, which mean the same encoded or not.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// Appends a query written in `upstream_path`: it keeps its `=`, `&` and `?`.
fn encode_query(query: &[u8], out: &mut Vec<u8>) {
    vars::percent_encode_into(out, query, |b| (0x21..0x7f).contains(&b) && b != b'#')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn literal(to: &str, replaces: Replaces) -> Rewrite {
        Rewrite::new(VarText::parse(to).expect("parses"), replaces)
    }

    fn applied(rewrite: &Rewrite, path: &str, query: Option<&str>) -> Option<String> {
        rewrite
            .apply(path, query, None)
            .map(|pq| pq.as_str().to_owned())
    }

    #[test]
    fn a_prefix_is_replaced_and_the_query_kept() {
        let api = literal("/v2/", Replaces::Prefix(5));
        assert_eq!(
            applied(&api, "/api/x", Some("y=1")).as_deref(),
            Some("/v2/x?y=1")
        );
        assert_eq!(applied(&api, "/api/", None).as_deref(), Some("/v2/"));
        assert_eq!(
            applied(&api, "/api/a%20b/%25/%C3%A9", None).as_deref(),
            Some("/v2/a%20b/%25/%C3%A9")
        );
        let exact = literal("/health", Replaces::Whole);
        assert_eq!(
            applied(&exact, "/status", Some("v")).as_deref(),
            Some("/health?v")
        );
        let own = literal("/v2/?fixed=1", Replaces::Whole);
        assert_eq!(
            applied(&own, "/x", Some("q")).as_deref(),
            Some("/v2/?fixed=1")
        );
    }

    #[test]
    fn a_result_outside_the_root_is_refused() {
        let root = literal("", Replaces::Prefix(5));
        assert_eq!(applied(&root, "/api/x", None), None, "no leading slash");
        assert!(climbs(b"/v2/../etc"));
        assert!(climbs(b"/v2/./x"));
        assert!(climbs(b"/.."));
        assert!(!climbs(b"/v2/..x/.y"));
    }

    #[test]
    fn an_encoded_question_mark_stays_in_the_path() {
        let api = literal("/v2/", Replaces::Prefix(5));
        assert_eq!(
            applied(&api, "/api/x%3fapi_key=K1", None).as_deref(),
            Some("/v2/x%3Fapi_key=K1")
        );
        assert_eq!(
            applied(&api, "/api/a%23b%26c%2Fd&e", Some("q=1")).as_deref(),
            Some("/v2/a%23b%26c%2Fd&e?q=1")
        );
        let fixed = literal("/v3/?tenant=public", Replaces::Prefix(7));
        assert_eq!(
            applied(&fixed, "/fixed/x%3ftenant=admin%26", Some("a=1")).as_deref(),
            Some("/v3/x%3Ftenant=admin%26?tenant=public")
        );
    }

    #[test]
    fn a_capture_keeps_what_arrived_encoded() {
        let regex = regex::bytes::Regex::new(r"^/users/(.+)$").expect("valid");
        let users = Rewrite::new(
            VarText::parse("/v2/users/$1?via=$1").expect("parses"),
            Replaces::Whole,
        );
        let raw = "/users/1%3fadmin=true";
        let path = routing::normalize_path(raw).expect("valid");
        let captures = regex.captures(&path).expect("matches");
        let headers = http::HeaderMap::new();
        let req = vars::Request {
            https: false,
            method: &http::Method::GET,
            host: None,
            server_name: "",
            server_port: 80,
            request_uri: raw,
            uri: &path,
            args: Some("orig=2"),
            remote_addr: std::net::Ipv4Addr::LOCALHOST.into(),
            remote_port: 1,
            request_id: Some("id"),
            headers: &headers,
            captures: Some(&captures),
            claims: None,
            tls: None,
        };
        let target = users
            .apply(raw, Some("orig=2"), Some(&req))
            .expect("in root");
        assert_eq!(target.path(), "/v2/users/1%3Fadmin=true");
        assert_eq!(target.query(), Some("via=1%3Fadmin%3Dtrue"));
    }

    proptest::proptest! {
        /// Whatever the client's path holds, the upstream's query is the client's (or
        /// the one `upstream_path` writes), and its path decodes to the rewritten one.
        #[test]
        fn the_query_never_takes_bytes_from_the_path(
            rest in proptest::collection::vec(proptest::prop_oneof![
                proptest::string::string_regex("[a-z0-9/._~-]{0,4}").expect("regex"),
                proptest::sample::select(vec![
                    "%3f", "%3F", "%23", "%26", "%3d", "%2f", "%25", "%20", "?", "#", "&", "=",
                    "%2e", "..", ".", "//",
                ]).prop_map(str::to_owned),
            ], 0..8),
            query in proptest::option::of("[a-z0-9=&%]{0,8}"),
        ) {
            let raw = format!("/api/{}", rest.concat());
            // Only what a request line can carry: `?` and `#` end the path there.
            let raw = raw.split(['?', '#']).next().unwrap_or("/api/").to_owned();
            let Ok(normal) = routing::normalize_path(&raw) else { return Ok(()) };
            let api = literal("/v2/", Replaces::Prefix(5));
            let fixed = literal("/v3/?tenant=public", Replaces::Prefix(5));
            for (rewrite, want) in [(&api, query.as_deref()), (&fixed, Some("tenant=public"))] {
                let Some(target) = rewrite.apply(&raw, query.as_deref(), None) else { continue };
                proptest::prop_assert_eq!(target.query(), want);
                let path = routing::percent_decode(target.path().as_bytes()).expect("decodes");
                if let Some(rest) = normal.strip_prefix(b"/api/".as_slice()) {
                    let prefix = &rewrite.path.as_literal().expect("literal").as_bytes();
                    proptest::prop_assert_eq!(&path[..prefix.len()], *prefix);
                    proptest::prop_assert_eq!(&path[prefix.len()..], rest);
                }
            }
        }
    }
}

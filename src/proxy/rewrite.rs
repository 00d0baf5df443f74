//! `upstream_path`: the path a location's upstream gets instead of the client's (nginx's
//! `proxy_pass http://app/v2/;`), as "Path rewrite" in docs/config.md says.

use http::uri::PathAndQuery;

use crate::vars::{self, VarText};

/// A location's rewrite, ready to use.
#[derive(Clone, Debug)]
pub struct Rewrite {
    to: VarText,
    replaces: Replaces,
}

/// What of the normalized path `to` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaces {
    /// The location's prefix, this many bytes: the rest of the path follows `to`.
    Prefix(usize),
    /// The whole path (an exact or regex location, or a `to` with variables).
    Whole,
}

impl Rewrite {
    pub fn new(to: VarText, replaces: Replaces) -> Rewrite {
        let replaces = match to.as_literal() {
            Some(_) => replaces,
            None => Replaces::Whole,
        };
        Rewrite { to, replaces }
    }

    /// The upstream's path and query for a request with the normalized `path` and
    /// `query`; `None` when the path would climb above `/` (a capture holding `..`).
    /// The query follows unless `to` writes one.
    pub fn apply(
        &self,
        path: &[u8],
        query: Option<&str>,
        req: Option<&vars::Request<'_>>,
    ) -> Option<PathAndQuery> {
        let mut target = Vec::with_capacity(path.len() + 16);
        match req {
            Some(req) => self.to.render(req, &mut target),
            None => target.extend_from_slice(self.to.as_literal().unwrap_or("/").as_bytes()),
        }
        if let Replaces::Prefix(len) = self.replaces {
            target.extend_from_slice(path.get(len..).unwrap_or_default());
        }
        let (new_path, own_query) = match target.iter().position(|&b| b == b'?') {
            Some(at) => (&target[..at], Some(&target[at + 1..])),
            None => (&target[..], None),
        };
        if climbs(new_path) {
            return None;
        }
        let mut out = encode(new_path);
        match (own_query, query) {
            (Some(own), _) => {
                out.push(b'?');
                out.extend_from_slice(&encode_query(own));
            }
            (None, Some(query)) => {
                out.push(b'?');
                out.extend_from_slice(query.as_bytes());
            }
            (None, None) => {}
        }
        PathAndQuery::from_maybe_shared(bytes::Bytes::from(out)).ok()
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

/// Percent-encodes every byte of a decoded path that may not stand as it is.
fn encode(path: &[u8]) -> Vec<u8> {
    vars::percent_encode(path, |b| {
        b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b)
    })
}

/// A query written in `upstream_path` keeps its `=`, `&` and `?`.
fn encode_query(query: &[u8]) -> Vec<u8> {
    vars::percent_encode(query, |b| (0x21..0x7f).contains(&b) && b != b'#')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(to: &str, replaces: Replaces) -> Rewrite {
        Rewrite::new(VarText::parse(to).expect("parses"), replaces)
    }

    fn applied(rewrite: &Rewrite, path: &str, query: Option<&str>) -> Option<String> {
        rewrite
            .apply(path.as_bytes(), query, None)
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
            applied(&api, "/api/a b/%/é", None).as_deref(),
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
}

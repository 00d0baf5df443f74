//! nginx's trailing-slash redirect (`auto_redirect` in `ngx_http_core_find_static_location`):
//! a request for exactly the path of a location whose name ends in `/` and that proxies,
//! without that `/`, is answered 301 with the name (and the query) as `Location`.
//!
//! nginx's rules, from its source: the name may be an exact (`= /api/`), prefix or `^~`
//! location's; a regex location never redirects, and regexes are not tried for a path that
//! does (the redirect is decided in the prefix walk, before them). A location whose name is
//! the path itself, exact or prefix, matches instead. When an exact and a prefix location
//! share the name, the redirect belongs to the exact one, which redirects if either proxies.
//! The path is compared as it is routed: normalized, case sensitive.
//!
//! Where nginx differs: its location tree is searched on bytes compared up to the shorter
//! length, so another location whose name extends the path with a byte before `/`
//! (`/api.json` beside `/api/`) can hide the redirect, depending on the tree's shape. Here
//! the redirect depends on the locations named, not on their tree.

use super::Router;

impl Router {
    /// This router with nginx's trailing-slash redirect for the locations `proxies` says
    /// forward upstream (by their index, as in [`Router::new`]).
    pub fn redirect_slashless(mut self, proxies: impl Fn(usize) -> bool) -> Router {
        let exact = |name: &[u8]| {
            let found = self.exact.binary_search_by(|(p, _)| (**p).cmp(name));
            found.ok().map(|i| self.exact[i].1)
        };
        let prefix = |name: &[u8]| {
            let entry = self.prefixes.iter().find(|e| e.prefix.as_bytes() == name);
            entry.map(|e| e.summary.location)
        };
        let names = self.exact.iter().map(|(name, _)| &name[..]);
        let names = names.chain(self.prefixes.iter().map(|e| e.prefix.as_bytes()));
        let mut slashless: Vec<(Box<[u8]>, usize)> = Vec::new();
        for name in names {
            let Some(path) = name.strip_suffix(b"/").filter(|path| !path.is_empty()) else {
                continue;
            };
            if exact(path).is_some() || prefix(path).is_some() {
                continue;
            }
            let (exact, prefix) = (exact(name), prefix(name));
            if !exact.into_iter().chain(prefix).any(&proxies) {
                continue;
            }
            if let Some(location) = exact.or(prefix) {
                slashless.push((path.into(), location));
            }
        }
        slashless.sort();
        slashless.dedup_by(|later, first| later.0 == first.0);
        self.slashless = slashless;
        self
    }

    /// The location answering a request for `path` without its slash, if nginx's
    /// redirect applies (the exact locations were looked up already).
    #[inline]
    pub(super) fn slashless(&self, path: &[u8]) -> Option<usize> {
        if self.slashless.is_empty() {
            return None;
        }
        let found = self.slashless.binary_search_by(|(p, _)| (**p).cmp(path));
        found.ok().map(|i| self.slashless[i].1)
    }
}

/// The redirect's `Location` before nginx makes it absolute: the path with `/` added,
/// escaped as nginx escapes a location's name (`ngx_escape_uri` with `NGX_ESCAPE_URI`),
/// then `?` and the query as sent (none when it is empty).
pub fn slashed_target(path: &[u8], query: Option<&str>) -> String {
    escaped_target(path, "/", query)
}

/// A request target for a decoded `path` (and `suffix`, written as it is): the path
/// escaped as [`slashed_target`] escapes it, then `?` and the query (none when empty).
pub fn escaped_target(path: &[u8], suffix: &str, query: Option<&str>) -> String {
    let mut out = String::with_capacity(path.len() + 2 + query.map_or(0, str::len));
    for &byte in path {
        if escaped(byte) {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push(char::from(byte));
        }
    }
    out.push_str(suffix);
    if let Some(query) = query.filter(|query| !query.is_empty()) {
        out.push('?');
        out.push_str(query);
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The bytes nginx escapes in a URI: controls, space, `"`, `#`, `%`, `<`, `>`, `?`, `\`,
/// `^`, `` ` ``, `{`, `|`, `}`, and DEL and above.
fn escaped(byte: u8) -> bool {
    byte <= b' ' || byte >= 0x7f || b"\"#%<>?\\^`{|}".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::super::{Pattern, Routed, Router};

    fn router(locations: &[(&str, bool)]) -> Router {
        let patterns = locations.iter().map(|(text, _)| match text.split_once(' ') {
            Some(("=", p)) => Pattern::Exact(p.into()),
            Some(("^~", p)) => Pattern::PriorityPrefix(p.into()),
            Some(("~", re)) => Pattern::regex(re, false).unwrap(),
            _ => Pattern::Prefix((*text).into()),
        });
        let proxies: Vec<bool> = locations.iter().map(|(_, proxies)| *proxies).collect();
        Router::new(patterns.collect()).redirect_slashless(|i| proxies[i])
    }

    #[test]
    fn a_proxying_prefix_redirects_its_path_without_the_slash() {
        let r = router(&[("/", true), ("/api/", true)]);
        assert_eq!(r.route(b"/api"), Some(Routed::AddSlash(1)));
        assert_eq!(r.route(b"/api/"), Some(Routed::Location(1)));
        assert_eq!(r.route(b"/apix"), Some(Routed::Location(0)));
        assert_eq!(r.route(b"/API"), Some(Routed::Location(0)), "case sensitive");
        assert_eq!(r.find(b"/api"), Some(0), "find is plain matching");
    }

    #[test]
    fn priority_prefix_and_exact_locations_redirect_too() {
        let r = router(&[("^~ /static/", true), ("= /one/", true)]);
        assert_eq!(r.route(b"/static"), Some(Routed::AddSlash(0)));
        assert_eq!(r.route(b"/one"), Some(Routed::AddSlash(1)));
    }

    #[test]
    fn a_location_that_answers_itself_does_not_redirect() {
        let r = router(&[("/", true), ("/api/", false), ("~ ^/x/", true)]);
        assert_eq!(r.route(b"/api"), Some(Routed::Location(0)));
        assert_eq!(r.route(b"/x"), Some(Routed::Location(0)), "regexes never redirect");
    }

    #[test]
    fn a_location_named_like_the_path_matches_instead() {
        let r = router(&[("/api/", true), ("= /api", false)]);
        assert_eq!(r.route(b"/api"), Some(Routed::Location(1)));
        let r = router(&[("/api/", true), ("/api", false)]);
        assert_eq!(r.route(b"/api"), Some(Routed::Location(1)));
        let r = router(&[("/api/", true), ("^~ /api", false)]);
        assert_eq!(r.route(b"/api"), Some(Routed::Location(1)));
    }

    #[test]
    fn the_redirect_beats_regexes_and_shorter_prefixes() {
        let r = router(&[("~ api", false), ("/a", false), ("/api/", true)]);
        assert_eq!(r.route(b"/api"), Some(Routed::AddSlash(2)));
        assert_eq!(r.route(b"/apiv"), Some(Routed::Location(0)));
    }

    #[test]
    fn an_exact_location_sharing_the_name_owns_the_redirect() {
        let r = router(&[("/api/", true), ("= /api/", false)]);
        assert_eq!(r.route(b"/api"), Some(Routed::AddSlash(1)));
        let r = router(&[("/api/", false), ("= /api/", false)]);
        assert_eq!(r.route(b"/api"), None);
    }

    #[test]
    fn the_root_never_redirects() {
        let r = router(&[("/", true)]);
        assert_eq!(r.route(b"/"), Some(Routed::Location(0)));
        assert_eq!(Router::new(Vec::new()).route(b"/x"), None);
    }

    #[test]
    fn the_target_is_escaped_like_an_nginx_location_name_and_keeps_the_query() {
        use super::slashed_target;
        assert_eq!(slashed_target(b"/api", None), "/api/");
        assert_eq!(slashed_target(b"/api", Some("")), "/api/");
        assert_eq!(slashed_target(b"/api", Some("a=1&b=%20")), "/api/?a=1&b=%20");
        assert_eq!(
            slashed_target("/caf\u{e9} x%?#\"".as_bytes(), None),
            "/caf%C3%A9%20x%25%3F%23%22/"
        );
        assert_eq!(slashed_target(b"/a:b@c!$&'()*+,;=~-._", None), "/a:b@c!$&'()*+,;=~-._/");
    }
}

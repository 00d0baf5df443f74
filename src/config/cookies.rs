//! `cookie_path` and `cookie_domain` (nginx `proxy_cookie_path`, `proxy_cookie_domain`):
//! tables from → to applied to the `Path=` and `Domain=` attributes of each `Set-Cookie`
//! the upstream sends, checked.
//!
//! As in nginx, a plain path is a prefix of the attribute's value (case sensitive); a
//! plain domain is the whole value, in any case, a leading `.` on either side set aside
//! (the value keeps its own). `~regex` (and `~*regex`) is found anywhere in the value and
//! replaces it whole, lending `to` its captures; a domain's regex ignores case either way.
//! Rules are tried in the order written; the first that matches wins. `{}` turns a site's
//! rules off for a location.

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::maps::Maps;
use super::raw::RawCookieRewrites;
use super::redirects::{rule, RewriteRule};
use super::Pattern;

/// A location's `cookie_path` and `cookie_domain` rules, in order; empty: off.
#[derive(Clone, Debug, Default)]
pub(crate) struct CookieRewrites {
    pub paths: Vec<RewriteRule>,
    pub domains: Vec<RewriteRule>,
}

/// Which attribute a table rewrites.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Attribute {
    Path,
    Domain,
}

/// The rules of `cookie_path` or `cookie_domain`; `pattern` is the location's (a site
/// passes a plain prefix), which a plain `from`'s `$1` refers to.
pub(super) fn cookie_rewrites(
    raw: &Spanned<RawCookieRewrites>,
    attribute: Attribute,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<RewriteRule>> {
    let domain = attribute == Attribute::Domain;
    let rules: Vec<Option<RewriteRule>> = (raw.get_ref().0.iter())
        .map(|(from, to)| rule(from, to, pattern, domain, maps, diag))
        .collect();
    rules.into_iter().collect()
}

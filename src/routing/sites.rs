//! Which site (nginx `server {}`) answers a request: nginx's `server_name` rules, per
//! listening address. Exact names first, then the longest leading wildcard
//! (`*.example.com`), then the longest trailing wildcard (`mail.*`), then regex names
//! (`~…`) in file order, then the address's default site.
//!
//! Host names are compared as nginx compares them: lower case, without a port and a
//! trailing dot ([`host_key`]).

use hashbrown::HashMap;

use crate::vars::host_key;

/// One name a site answers to.
#[derive(Clone, Debug)]
pub enum SiteName {
    /// `example.com`; `""` answers a request without a host.
    Exact(String),
    /// `*.example.com`: kept as the suffix `.example.com`.
    LeadingWildcard(String),
    /// `mail.*`: kept as the prefix `mail.`.
    TrailingWildcard(String),
    /// `~^www\d+\.example\.net$`, matched against the host key.
    Regex(regex::Regex),
}

impl SiteName {
    /// Parses a name as a `names` item is written; an error says why it is not one.
    pub fn parse(text: &str) -> Result<SiteName, String> {
        if let Some(source) = text.strip_prefix('~') {
            return regex::RegexBuilder::new(source)
                .case_insensitive(true)
                .build()
                .map(SiteName::Regex)
                .map_err(|err| format!("invalid name regex: {}", one_line(&err.to_string())));
        }
        if let Some(bare) = text.strip_prefix('.') {
            return Err(format!(
                r#"invalid name "{text}": nginx's shorthand is not taken, write "{bare}" and "*.{bare}""#
            ));
        }
        let name = text.to_ascii_lowercase();
        let name = name.strip_suffix('.').unwrap_or(&name).to_owned();
        let valid = |part: &str| {
            part.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        };
        if let Some(suffix) = name.strip_prefix('*') {
            if suffix.starts_with('.') && suffix.len() > 1 && valid(suffix) {
                return Ok(SiteName::LeadingWildcard(suffix.to_owned()));
            }
        } else if let Some(prefix) = name.strip_suffix('*') {
            if prefix.ends_with('.') && prefix.len() > 1 && valid(prefix) {
                return Ok(SiteName::TrailingWildcard(prefix.to_owned()));
            }
        } else if valid(&name) || is_ipv6_literal(&name) {
            return Ok(SiteName::Exact(name));
        }
        Err(format!(
            r#"invalid name "{text}": expected "example.com", "*.example.com", "mail.*" or "~regex""#
        ))
    }
}

impl SiteName {
    /// The name as nginx compares two names for being the same, `*` and all; `None` for
    /// a regex (two regexes are never the same name).
    pub(crate) fn key(&self) -> Option<String> {
        match self {
            SiteName::Exact(name) => Some(name.clone()),
            SiteName::LeadingWildcard(suffix) => Some(format!("*{suffix}")),
            SiteName::TrailingWildcard(prefix) => Some(format!("{prefix}*")),
            SiteName::Regex(_) => None,
        }
    }
}

/// `[::1]`: an IPv6 address as a Host header carries it (what [`host_key`] keeps).
fn is_ipv6_literal(name: &str) -> bool {
    name.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|inner| inner.parse::<std::net::Ipv6Addr>().is_ok())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The sites of one listening address, ready to pick from.
#[derive(Debug, Default)]
pub struct Selector {
    /// hashbrown's hasher: several times cheaper than std's on a short host, and the
    /// table never grows at run time, so a client cannot make it collide its way slow.
    exact: HashMap<Box<str>, usize>,
    /// Suffixes (`.example.com`), longest first.
    leading: Vec<(Box<str>, usize)>,
    /// Prefixes (`mail.`), longest first.
    trailing: Vec<(Box<str>, usize)>,
    regexes: Vec<(regex::Regex, usize)>,
    /// Every regex at once: one pass over the host finds which match (the first in
    /// file order wins), where trying them one by one costs a pass each.
    any_regex: Option<regex::RegexSet>,
    default: Option<usize>,
}

impl Selector {
    /// The selector over `sites` (site id and its names, in file order); `default` is
    /// the site marked so, else the first. A name two sites share goes to the first, as
    /// in nginx (which warns about it; the configuration refuses it).
    pub fn new<'a>(
        sites: impl IntoIterator<Item = (usize, &'a [SiteName])>,
        default: Option<usize>,
    ) -> Selector {
        let mut selector = Selector {
            default,
            ..Selector::default()
        };
        for (site, names) in sites {
            selector.default.get_or_insert(site);
            for name in names {
                match name {
                    SiteName::Exact(exact) => {
                        selector.exact.entry(exact.as_str().into()).or_insert(site);
                    }
                    SiteName::LeadingWildcard(suffix) => {
                        selector.leading.push((suffix.as_str().into(), site))
                    }
                    SiteName::TrailingWildcard(prefix) => {
                        selector.trailing.push((prefix.as_str().into(), site))
                    }
                    SiteName::Regex(regex) => selector.regexes.push((regex.clone(), site)),
                }
            }
        }
        // Stable: of two equal wildcards, the first in the file stays first.
        selector
            .leading
            .sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.len()));
        selector
            .trailing
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        let sources = selector.regexes.iter().map(|(regex, _)| regex.as_str());
        selector.any_regex = match selector.regexes.len() {
            0 | 1 => None,
            // Each compiled alone already, so together they compile too; were the set
            // too big, the regexes are simply tried one by one.
            _ => regex::RegexSetBuilder::new(sources)
                .case_insensitive(true)
                .build()
                .ok(),
        };
        selector
    }

    /// The site for a request with `host` (as sent; `None` without one), or `None` when
    /// no site listens here.
    pub fn select(&self, host: Option<&str>) -> Option<usize> {
        let key = host_key(host.unwrap_or(""));
        let key = key.as_ref();
        if let Some(&site) = self.exact.get(key) {
            return Some(site);
        }
        if key.is_empty() {
            // No host: the name `""`, else the default; nginx tries no pattern on it.
            return self.default;
        }
        let leading = self
            .leading
            .iter()
            .find(|(suffix, _)| key.len() > suffix.len() && key.ends_with(&**suffix));
        if let Some(&(_, site)) = leading {
            return Some(site);
        }
        let trailing = self
            .trailing
            .iter()
            .find(|(prefix, _)| key.len() > prefix.len() && key.starts_with(&**prefix));
        if let Some(&(_, site)) = trailing {
            return Some(site);
        }
        let first = match &self.any_regex {
            // Telling "none" costs a third of telling which: a scanner's made-up name,
            // the usual miss, pays only that.
            Some(set) if !set.is_match(key) => None,
            Some(set) => set.matches(key).iter().next(),
            None => self
                .regexes
                .iter()
                .position(|(regex, _)| regex.is_match(key)),
        };
        first.map(|i| self.regexes[i].1).or(self.default)
    }
}

#[cfg(test)]
mod tests;

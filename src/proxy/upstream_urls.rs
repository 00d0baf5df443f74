//! What an upstream's answer says about its own URLs, said in the client's terms:
//! `redirect_rewrite` rewrites its `Location` and `Refresh` (nginx `proxy_redirect`),
//! `cookie_path` and `cookie_domain` the `Path=` and `Domain=` of its `Set-Cookie`s
//! (`proxy_cookie_path`, `proxy_cookie_domain`; parsed in `set_cookie`).
//!
//! Matching is nginx's: a plain `from` is a prefix of the value (a domain: the whole
//! value, in any case, after a leading `.`), the first rule that matches wins, and a
//! regex `from` replaces the whole value with `to`, its captures filled in. A `Location`
//! rewritten into a path is made absolute with the request's scheme, host and port, as
//! nginx's `absolute_redirect` (on by default) does; one left alone is left as it is.
//!
//! A location without rules costs nothing per request. Texts with variables are filled in
//! when the request is forwarded ([`UpstreamUrls::prepare`]), since the request is gone
//! when the answer comes: a regex `from`'s `$1`… stay slots its match fills.

mod set_cookie;

use http::header::{Entry, LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderName, HeaderValue};
use regex::bytes::Captures;

use crate::config::{self, Redirects, RewriteFrom, RewriteRule};
use crate::vars::{self, Piece, Var, VarText};

/// A location's rules, ready to apply.
#[derive(Default)]
pub(crate) struct UpstreamUrls {
    /// `redirect_rewrite`, then `cookie_path`, then `cookie_domain`, each in order.
    rules: Vec<RewriteRule>,
    redirects: usize,
    paths: usize,
    /// The rules' texts when none has a variable; else [`Prepared`] has them per request.
    fixed: Option<Vec<Filled>>,
}

/// One rule's texts with the request's variables in: `from` (empty for a regex) and
/// `to` in parts.
#[derive(Debug, Default)]
struct Filled {
    from: Vec<u8>,
    to: Vec<Part>,
}

/// A piece of `to`: bytes, or a capture of a regex `from` (filled in by its match).
#[derive(Debug)]
enum Part {
    Bytes(Vec<u8>),
    Capture(usize),
}

/// What one request's answer needs of the request: the texts with variables filled in,
/// and `scheme://host[:port]`, which a `Location` rewritten into a path is put under.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    filled: Vec<Filled>,
    origin: Vec<u8>,
}

const REFRESH: HeaderName = HeaderName::from_static("refresh");

impl UpstreamUrls {
    /// The rules of `location`, whose upstream group (for `"default"`) is `upstream`.
    pub(crate) fn new(location: &config::Location, upstream: Option<&config::Upstream>) -> Self {
        let redirects = match (&location.redirects, upstream) {
            (Redirects::Rules(rules), _) => rules.clone(),
            (Redirects::Default { path, to }, Some(group)) => {
                let scheme = if group.tls.is_some() { "https" } else { "http" };
                let from = format!("{scheme}://{}{path}", group.name);
                let literal = |text: String| VarText::from_pieces(vec![Piece::Text(text.into())]);
                vec![RewriteRule {
                    from: RewriteFrom::Text(literal(from)),
                    to: literal(to.clone()),
                }]
            }
            (Redirects::Default { .. }, None) => Vec::new(),
        };
        let cookies = &location.cookies;
        UpstreamUrls::of(redirects, cookies.paths.clone(), cookies.domains.clone())
    }

    /// From each key's rules.
    fn of(redirects: Vec<RewriteRule>, paths: Vec<RewriteRule>, domains: Vec<RewriteRule>) -> Self {
        let (count, paths_count) = (redirects.len(), paths.len());
        let mut rules = redirects;
        rules.extend(paths);
        rules.extend(domains);
        let mut urls = UpstreamUrls {
            rules,
            redirects: count,
            paths: paths_count,
            fixed: None,
        };
        if !urls.per_request() {
            urls.fixed = Some(urls.fill(None));
        }
        urls
    }

    /// Whether a rule's text reads the request (then the pipeline gathers its variables).
    /// A regex `from`'s captures in `to` do not: its match fills them in.
    pub(crate) fn per_request(&self) -> bool {
        let reads = |text: &VarText, slots: bool| {
            text.pieces().iter().any(|piece| match piece {
                Piece::Var(Var::Capture(_)) => !slots,
                Piece::Var(_) => true,
                Piece::Text(_) => false,
            })
        };
        self.rules.iter().any(|rule| match &rule.from {
            RewriteFrom::Text(from) => reads(from, false) || reads(&rule.to, false),
            RewriteFrom::Regex(_) => reads(&rule.to, true),
        })
    }

    /// Whether a rule uses the location regex's captures (a `$1` beside a plain `from`).
    pub(crate) fn location_captures(&self) -> bool {
        self.rules.iter().any(|rule| match &rule.from {
            RewriteFrom::Text(from) => from.max_capture() > 0 || rule.to.max_capture() > 0,
            RewriteFrom::Regex(_) => false,
        })
    }

    /// What the answer to this request needs: `req` fills the variables in (`None` when
    /// the location's texts have none); `https`, `host` (as sent) and `port` make the
    /// origin a rewritten `Location` goes under, `server_name` standing in for a missing
    /// host as in `$host`.
    pub(crate) fn prepare(
        &self,
        req: Option<&vars::Request<'_>>,
        https: bool,
        host: Option<&str>,
        server_name: &str,
        port: u16,
    ) -> Prepared {
        if self.rules.is_empty() {
            return Prepared::default();
        }
        let filled = match (&self.fixed, req) {
            (None, Some(req)) => self.fill(Some(req)),
            _ => Vec::new(),
        };
        let origin = match self.redirects {
            0 => Vec::new(),
            _ => origin(https, host, server_name, port).into_bytes(),
        };
        Prepared { filled, origin }
    }

    /// Each rule's texts, with `req`'s variables (none without it).
    fn fill(&self, req: Option<&vars::Request<'_>>) -> Vec<Filled> {
        let render = |text: &VarText, slots: bool| {
            let mut parts = Vec::new();
            let mut bytes = Vec::new();
            for piece in text.pieces() {
                match (piece, req) {
                    (Piece::Text(text), _) => bytes.extend_from_slice(text.as_bytes()),
                    (Piece::Var(Var::Capture(n)), _) if slots => {
                        parts.push(Part::Bytes(std::mem::take(&mut bytes)));
                        parts.push(Part::Capture(*n));
                    }
                    (Piece::Var(var), Some(req)) => req.append(var, &mut bytes),
                    (Piece::Var(_), None) => {}
                }
            }
            parts.push(Part::Bytes(bytes));
            parts
        };
        let bytes_of = |parts: Vec<Part>| match parts.into_iter().next() {
            Some(Part::Bytes(bytes)) => bytes,
            _ => Vec::new(),
        };
        (self.rules.iter())
            .map(|rule| match &rule.from {
                RewriteFrom::Text(from) => Filled {
                    from: bytes_of(render(from, false)),
                    to: render(&rule.to, false),
                },
                RewriteFrom::Regex(_) => Filled {
                    from: Vec::new(),
                    to: render(&rule.to, true),
                },
            })
            .collect()
    }

    /// Rewrites the upstream answer's headers by the rules; nothing without rules.
    pub(crate) fn rewrite(&self, headers: &mut HeaderMap, prepared: &Prepared) {
        if self.rules.is_empty() {
            return;
        }
        let filled = self.fixed.as_deref().unwrap_or(&prepared.filled);
        let group = |range: std::ops::Range<usize>| Rules {
            rules: self.rules.get(range.clone()).unwrap_or_default(),
            filled: filled.get(range).unwrap_or_default(),
        };
        let paths_end = self.redirects + self.paths;
        let redirects = group(0..self.redirects);
        let paths = group(self.redirects..paths_end);
        let domains = group(paths_end..self.rules.len());
        if !redirects.rules.is_empty() {
            each_value(headers, LOCATION, |value| {
                let mut rewritten = redirects.first_match(value, 0, Compare::Prefix)?;
                if rewritten.first() == Some(&b'/') {
                    rewritten.splice(0..0, prepared.origin.iter().copied());
                }
                Some(rewritten)
            });
            each_value(headers, REFRESH, |value| {
                let start = find_url(value)?;
                redirects.first_match(value, start, Compare::Prefix)
            });
        }
        if !paths.rules.is_empty() || !domains.rules.is_empty() {
            each_value(headers, SET_COOKIE, |value| {
                set_cookie::rewrite(value, |attribute, value| match attribute {
                    set_cookie::Attribute::Path => paths.first_match(value, 0, Compare::Prefix),
                    set_cookie::Attribute::Domain => domains.first_match(value, 0, Compare::Domain),
                })
            });
        }
    }
}

/// Some of a location's rules, with their texts for this request.
struct Rules<'a> {
    rules: &'a [RewriteRule],
    filled: &'a [Filled],
}

/// `scheme://host[:port]`, what nginx puts before a `Location` that is a path (its
/// `absolute_redirect`): the request's scheme, its host as `$host` has it (`server_name`
/// for a request without one) and the port it arrived on unless the scheme's own.
pub(crate) fn origin(https: bool, host: Option<&str>, server_name: &str, port: u16) -> String {
    let host = host.map(vars::host_key).filter(|host| !host.is_empty());
    let host = host.as_deref().unwrap_or(server_name);
    let scheme = if https { "https" } else { "http" };
    if port == if https { 443 } else { 80 } {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// How a plain `from` is compared with the value.
#[derive(Clone, Copy)]
enum Compare {
    /// A prefix, byte for byte (nginx's `ngx_rstrncmp`).
    Prefix,
    /// The whole value after a leading `.`, in any case (`ngx_rstrncasecmp`).
    Domain,
}

impl Rules<'_> {
    /// `value` with `value[start..]` rewritten by the first rule that matches it, or
    /// `None`.
    fn first_match(&self, value: &[u8], start: usize, compare: Compare) -> Option<Vec<u8>> {
        let (head, tail) = value.split_at(start.min(value.len()));
        let out = |kept: &[u8], to: &[Part], captures: Option<&Captures<'_>>, rest: &[u8]| {
            let mut out = Vec::with_capacity(value.len() + 32);
            out.extend_from_slice(head);
            out.extend_from_slice(kept);
            write_to(to, captures, &mut out);
            out.extend_from_slice(rest);
            out
        };
        self.rules.iter().zip(self.filled).find_map(|(rule, filled)| {
            match (&rule.from, compare) {
                (RewriteFrom::Regex(regex), _) => {
                    let captures = regex.captures(tail)?;
                    Some(out(b"", &filled.to, Some(&captures), b""))
                }
                (RewriteFrom::Text(_), Compare::Prefix) => {
                    let rest = tail.strip_prefix(filled.from.as_slice())?;
                    Some(out(b"", &filled.to, None, rest))
                }
                (RewriteFrom::Text(_), Compare::Domain) => {
                    let dot = usize::from(tail.first() == Some(&b'.'));
                    let (dot, name) = tail.split_at(dot);
                    let same = name.eq_ignore_ascii_case(&filled.from);
                    same.then(|| out(dot, &filled.to, None, b""))
                }
            }
        })
    }
}

fn write_to(parts: &[Part], captures: Option<&Captures<'_>>, out: &mut Vec<u8>) {
    for part in parts {
        match part {
            Part::Bytes(bytes) => out.extend_from_slice(bytes),
            Part::Capture(n) => {
                let group = captures.and_then(|c| c.get(*n));
                out.extend_from_slice(group.map_or(&[][..], |m| m.as_bytes()));
            }
        }
    }
}

/// Where the URL of a `Refresh` starts: after its first `url=`, in any case (nginx).
fn find_url(value: &[u8]) -> Option<usize> {
    let at = value
        .windows(4)
        .position(|w| w.eq_ignore_ascii_case(b"url="))?;
    Some(at + 4)
}

/// Each value of `name` that `rewrite` rewrites is replaced (a byte no header value
/// may hold, which a variable could bring, is percent-encoded).
fn each_value(
    headers: &mut HeaderMap,
    name: HeaderName,
    mut rewrite: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) {
    let Entry::Occupied(mut entry) = headers.entry(name) else {
        return;
    };
    for value in entry.iter_mut() {
        let Some(new) = rewrite(value.as_bytes()) else {
            continue;
        };
        let new = HeaderValue::from_bytes(&new).or_else(|_| {
            let mut escaped = Vec::with_capacity(new.len());
            vars::percent_encode_into(&mut escaped, &new, |b| b == b'\t' || (b' '..0x7f).contains(&b) || b >= 0x80);
            HeaderValue::from_bytes(&escaped)
        });
        if let Ok(new) = new {
            *value = new;
        }
    }
}

#[cfg(test)]
mod tests;

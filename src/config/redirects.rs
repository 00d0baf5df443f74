//! `redirect_rewrite` (nginx `proxy_redirect`): how the `Location` and `Refresh` of an
//! upstream's answer are rewritten, checked; and the rule type `cookie_path` and
//! `cookie_domain` share (`config/cookies.rs`).
//!
//! A rule's `from` is text matched at the start of the value (variables allowed, case
//! sensitive, as nginx compares), or `~regex` / `~*regex` matched anywhere in it, which
//! then replaces the whole value and lends `to` its captures (`$1`…). `"default"` is
//! nginx's `proxy_redirect default`, resolved here per location ([`resolve`]).

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawLocation, RawRedirectRewrite, RawRewriteRule};
use super::maps::Maps;
use super::var_text::var_text;
use super::{Action, Pattern, VarText};

/// One rule of `redirect_rewrite`, `cookie_path` or `cookie_domain`.
#[derive(Clone, Debug)]
pub(crate) struct RewriteRule {
    pub from: RewriteFrom,
    /// What replaces what `from` matched; `$1`… are a regex `from`'s captures, else the
    /// location regex's.
    pub to: VarText,
}

/// What a rule matches.
#[derive(Clone, Debug)]
pub(crate) enum RewriteFrom {
    /// A prefix of the value (`redirect_rewrite`, `cookie_path`) or the whole of it, in
    /// any case and after a leading `.` (`cookie_domain`).
    Text(VarText),
    /// `~regex` or `~*regex`: found anywhere in the value, which it then replaces whole.
    Regex(regex::bytes::Regex),
}

/// `redirect_rewrite` as a site or location writes it (`"off"` is no rules).
#[derive(Clone, Debug)]
pub(crate) enum RedirectRewrite {
    Default,
    Rules(Vec<RewriteRule>),
}

/// A location's `redirect_rewrite`, with `"default"` resolved.
#[derive(Clone, Debug)]
pub(crate) enum Redirects {
    /// In order; the first that matches rewrites the value. Empty: off.
    Rules(Vec<RewriteRule>),
    /// nginx's `proxy_redirect default`: from `SCHEME://GROUP` followed by `path` (the
    /// upstream group's scheme and name, known where the group is built) to `to`.
    Default { path: String, to: String },
}

const WORDS: &str = r#"expected "off", "default", or a list like [{ from = "http://app/v2/", to = "/api/" }]"#;

/// `redirect_rewrite` as written; `pattern` is the location's (a site passes a plain
/// prefix), which a plain `from`'s `$1` refers to.
pub(super) fn redirect_rewrite(
    raw: &Spanned<RawRedirectRewrite>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<RedirectRewrite> {
    match raw.get_ref() {
        RawRedirectRewrite::Word(word) => match word.as_str() {
            "off" => Some(RedirectRewrite::Rules(Vec::new())),
            "default" => Some(RedirectRewrite::Default),
            other => {
                diag.error(raw.span(), format!(r#"invalid redirect_rewrite "{other}": {WORDS}"#));
                None
            }
        },
        RawRedirectRewrite::Rules(list) => {
            let rules: Vec<Option<RewriteRule>> = list
                .iter()
                .map(|rule| listed_rule(rule, pattern, maps, diag))
                .collect();
            rules.into_iter().collect::<Option<_>>().map(RedirectRewrite::Rules)
        }
    }
}

fn listed_rule(
    rule: &Spanned<RawRewriteRule>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<RewriteRule> {
    let table = rule.span();
    let from = diag.required(rule.get_ref().from.as_ref(), &table, "from");
    let to = diag.required(rule.get_ref().to.as_ref(), &table, "to");
    self::rule(from?, to?, pattern, false, maps, diag)
}

/// One rule from `from` and `to` as written. `domain`: `cookie_domain`'s, whose `~regex`
/// is case-insensitive (nginx's) and whose plain names lose a leading `.`.
pub(super) fn rule(
    from: &Spanned<String>,
    to: &Spanned<String>,
    pattern: Option<&Pattern>,
    domain: bool,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<RewriteRule> {
    let header_safe = |text: &Spanned<String>, diag: &mut Diagnostics<'_>| {
        let safe = http::HeaderValue::from_str(text.get_ref()).is_ok();
        if !safe {
            let message = format!(
                r#"invalid rewrite "{}": control characters cannot be in a header value"#,
                text.get_ref().escape_debug()
            );
            diag.error(text.span(), message);
        }
        safe
    };
    let safe = header_safe(from, diag) & header_safe(to, diag);
    let written = from.get_ref();
    let (from, captures) = match written.strip_prefix('~') {
        Some(source) => {
            let (source, insensitive) = match source.strip_prefix('*') {
                Some(source) => (source, true),
                None => (source, domain),
            };
            let regex = diag.check(from.span(), compile(source, insensitive))?;
            let captures = Pattern::Regex {
                regex: regex.clone(),
                case_insensitive: insensitive,
            };
            (RewriteFrom::Regex(regex), Some(captures))
        }
        None => {
            let text = match (domain, written.strip_prefix('.')) {
                (true, Some(name)) => Spanned::new(from.span(), name.to_owned()),
                _ => from.clone(),
            };
            (RewriteFrom::Text(var_text(&text, pattern, maps, diag)?), None)
        }
    };
    let to = match (domain, &from, to.get_ref().strip_prefix('.')) {
        (true, RewriteFrom::Text(_), Some(name)) => Spanned::new(to.span(), name.to_owned()),
        _ => to.clone(),
    };
    let to = var_text(&to, captures.as_ref().or(pattern), maps, diag)?;
    safe.then_some(RewriteRule { from, to })
}

fn compile(source: &str, case_insensitive: bool) -> Result<regex::bytes::Regex, String> {
    if source.is_empty() {
        return Err("a regex must follow `~` or `~*`".to_owned());
    }
    regex::bytes::RegexBuilder::new(source)
        .case_insensitive(case_insensitive)
        .build()
        .map_err(|err| {
            // The regex crate's message is several lines (pattern, caret, `error: …`).
            let text = err.to_string();
            let reason = text.rsplit_once("error: ").map_or(&*text, |(_, r)| r.trim());
            format!(r#"invalid regex "{source}": {reason}"#)
        })
}

/// A location's rewrites once it has inherited its site's (`written`): `"default"` made
/// into its rule, or refused where nginx gives it no meaning. `own` tells whether the
/// location wrote `redirect_rewrite` itself; `upstream_path` is `None` when it had a
/// problem (reported).
pub(super) fn resolve(
    written: Option<RedirectRewrite>,
    location: &RawLocation,
    action: Option<&Action>,
    pattern: Option<&Pattern>,
    upstream_path: Option<&Option<VarText>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Redirects> {
    let rules = match written {
        None => return Some(Redirects::Rules(Vec::new())),
        Some(RedirectRewrite::Rules(rules)) => return Some(Redirects::Rules(rules)),
        Some(RedirectRewrite::Default) => Vec::new(),
    };
    let own = location.redirect_rewrite.as_ref().map(Spanned::span);
    match action? {
        // Nothing of an upstream's to rewrite; written here, it is a mistake.
        Action::Return(_) | Action::Files { upstream: None, .. } => match own {
            None => Some(Redirects::Rules(rules)),
            Some(span) => {
                let message = r#"redirect_rewrite = "default" rewrites the upstream's answers: this location has no `upstream`"#;
                diag.error(span, message);
                None
            }
        },
        Action::Proxy { .. } | Action::Files { upstream: Some(_), .. } => {
            let (pattern, upstream_path) = (pattern?, upstream_path?);
            let literal = upstream_path.as_ref().map(VarText::as_literal);
            let named = match pattern {
                Pattern::Exact(path) | Pattern::Prefix(path) | Pattern::PriorityPrefix(path) => {
                    Some(path)
                }
                Pattern::Regex { .. } => None,
            };
            match (literal, named) {
                (None, _) => Some(Redirects::Default {
                    path: "/".to_owned(),
                    to: "/".to_owned(),
                }),
                (Some(Some(path)), Some(name)) => Some(Redirects::Default {
                    path: path.to_owned(),
                    to: name.clone(),
                }),
                _ => {
                    let inherited = if own.is_some() { "" } else { " (its site's)" };
                    let span = own
                        .or_else(|| location.upstream_path.as_ref().map(Spanned::span))
                        .or_else(|| location.pattern.as_ref().map(Spanned::span))?;
                    let message = format!(
                        r#"redirect_rewrite = "default"{inherited} has no meaning for a location whose `upstream_path` has variables or whose match is a regex (nginx refuses `proxy_redirect default` there too): write its rules, e.g. [{{ from = "http://app/v2/", to = "/api/" }}], or "off""#
                    );
                    diag.error(span, message);
                    None
                }
            }
        }
    }
}

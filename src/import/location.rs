//! `location`: its pattern as tollgate's `match`, its content (`proxy_pass`, `return`,
//! `rewrite`), and the `[[site.location]]` it becomes, with every setting it inherits
//! written on it. Nested locations are flattened into the site, after their parent.

use std::collections::BTreeMap;

use tollgate_nginx::Directive;

use super::build::{loose, sp, Site};
use super::level::{Context, Level};
use super::proxy::{self, Target};
use super::report::Status;
use super::walk::{setting, Walk};
use super::{limits, rewrite};
use crate::config::raw::{RawLocation, RawReturn};

/// A location's pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    /// As tollgate's `match` writes it: `= /x`, `^~ /x`, `/x`, `~ re`, `~* re`.
    pub text: String,
    pub kind: Kind,
    /// The path or the regex.
    pub path: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Exact,
    Prefix,
    /// `^~`
    PrefixStop,
    Regex,
}

impl Pattern {
    /// `location`'s arguments (`= /x`, `=/x`, `~* \.php$`, `/x`); why not when it
    /// cannot be written.
    pub(super) fn parse(args: &[String]) -> Result<Pattern, String> {
        let (modifier, path) = match args {
            [m, p] => (m.as_str(), p.as_str()),
            [one] => ["^~", "~*", "=", "~"]
                .iter()
                .find_map(|m| Some((*m, one.strip_prefix(m)?)))
                .filter(|(_, rest)| !rest.is_empty())
                .unwrap_or(("", one.as_str())),
            _ => return Err("`location` takes a modifier and a path".to_owned()),
        };
        if path.starts_with('@') {
            return Err("a named location serves try_files and error_page, which tollgate has not yet (DESIGN §17): write the fallback as a location of its own".to_owned());
        }
        let kind = match modifier {
            "" => Kind::Prefix,
            "=" => Kind::Exact,
            "^~" => Kind::PrefixStop,
            "~" | "~*" => Kind::Regex,
            other => return Err(format!("unknown location modifier `{other}`")),
        };
        if kind == Kind::Regex {
            let source = match modifier {
                "~*" => format!("(?i){path}"),
                _ => path.to_owned(),
            };
            if let Err(err) = regex::Regex::new(&source) {
                let first = err.to_string();
                let first = first.lines().last().unwrap_or_default().trim().to_owned();
                return Err(format!("a regex tollgate's engine does not take ({first}): lookaround and backreferences have no equivalent; write it without them"));
            }
        } else if !path.starts_with('/') {
            return Err(format!("`{path}` does not start with `/`: no request path matches it"));
        }
        let text = match modifier {
            "" => path.to_owned(),
            m => format!("{m} {path}"),
        };
        Ok(Pattern {
            text,
            kind,
            path: path.to_owned(),
        })
    }
}

/// What a location answers with.
#[derive(Default)]
pub(super) struct Content<'d> {
    pub proxy: Option<(Target, &'d Directive)>,
    pub ret: Option<Ret>,
    /// A `rewrite … break` that maps to a path for the upstream.
    pub upstream_path: Option<String>,
}

/// A `return`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Ret {
    pub status: i64,
    pub body: Option<String>,
    pub location: Option<String>,
}

pub(super) fn location(
    w: &mut Walk<'_>,
    d: &Directive,
    parent: &Level,
    site: &mut Site,
    outer: Option<&Pattern>,
) {
    let pattern = match Pattern::parse(&d.args) {
        Ok(pattern) => pattern,
        Err(why) => {
            let status = Status::Unsupported(why);
            w.record(d, status, &mut site.note);
            let inside = Status::Unsupported(format!("inside the location at line {}, which is not translated", d.place.line));
            w.record_inside(d, &inside);
            return;
        }
    };
    let mut note = vec![w.source(d.place)];
    let mut own = Level::default();
    let mut content = Content::default();
    let mut nested = Vec::new();
    for c in d.block.iter().flatten() {
        match c.name.as_str() {
            "location" => nested.push(c),
            "proxy_pass" => match proxy::pass(w, c) {
                Ok(target) => content.proxy = Some((target, c)),
                Err(status) => w.record(c, status, &mut note),
            },
            "return" | "rewrite" => {
                let status = rewrite::at_location(w, c, &pattern, &mut content);
                w.record(c, status, &mut note);
            }
            _ => setting(w, c, &mut own, Context::Location, &mut note),
        }
    }
    let level = own.under(parent);
    let (raw, proxy_status) = assemble(w, &pattern, &level, &content);
    if let (Some((_, pass)), Some(status)) = (&content.proxy, proxy_status) {
        w.record(pass, status, &mut note);
    }
    let status = location_status(&pattern, outer, &content, site, &raw);
    let keep = !matches!(status, Status::Approx(ref why) if why.starts_with("left out"));
    w.record(d, status, &mut note);
    if keep {
        site.locations.push((raw, note));
    }
    for inner in nested {
        location(w, inner, &level, site, Some(&pattern));
    }
}

fn location_status(
    pattern: &Pattern,
    outer: Option<&Pattern>,
    content: &Content<'_>,
    site: &Site,
    raw: &RawLocation,
) -> Status {
    let duplicate = pattern.kind != Kind::Regex
        && site.locations.iter().any(|(l, _)| same_tree_key(l, pattern));
    if duplicate {
        return Status::Approx(format!("left out: a location for `{}` is already written (nested locations are flattened into the site)", pattern.path));
    }
    let mut differences = Vec::new();
    if let (Some(outer), Kind::Regex) = (outer, pattern.kind) {
        differences.push(format!("nested in `{}`, flattened: its regex is tried for every request, not only for those `{}` matched, and after the site's earlier regexes", outer.text, outer.text));
    }
    if content.proxy.is_none() && content.ret.is_none() && raw.ret.is_some() {
        differences.push("no proxy_pass or return: answered 404 (nginx would serve files from `root`; files come with DESIGN §17)".to_owned());
    }
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}

/// Whether `l` is the same exact or prefix path as `pattern` (tollgate's "duplicate
/// location").
fn same_tree_key(l: &RawLocation, pattern: &Pattern) -> bool {
    let Some(text) = l.pattern.as_ref().map(|p| p.get_ref().as_str()) else {
        return false;
    };
    let Ok(other) = Pattern::parse(&text.split_whitespace().map(str::to_owned).collect::<Vec<_>>()) else {
        return false;
    };
    let exact = |k: Kind| k == Kind::Exact;
    other.kind != Kind::Regex && exact(other.kind) == exact(pattern.kind) && other.path == pattern.path
}

/// The location tollgate writes for `pattern`, with `level`'s settings, and the
/// report of its `proxy_pass` (when it has one).
pub(super) fn assemble(
    w: &mut Walk<'_>,
    pattern: &Pattern,
    level: &Level,
    content: &Content<'_>,
) -> (RawLocation, Option<Status>) {
    let mut raw = RawLocation {
        pattern: Some(sp(pattern.text.clone())),
        ..RawLocation::default()
    };
    let mut proxy_status = None;
    if let Some(ret) = &content.ret {
        // nginx answers `return` in its rewrite phase, before allow/deny and limits:
        // none are written on this location.
        raw.ret = Some(sp(RawReturn {
            status: Some(sp(ret.status)),
            body: ret.body.clone().map(sp),
            location: ret.location.clone().map(sp),
        }));
    } else {
        match &content.proxy {
            Some((target, _)) => {
                let path = content.upstream_path.clone().or_else(|| target.path.clone());
                proxy_status = Some(proxy::forward(w, &mut raw, level, target, path));
            }
            None => raw.ret = Some(sp(RawReturn {
                status: Some(sp(404)),
                ..RawReturn::default()
            })),
        }
        raw.access = level
            .access
            .as_ref()
            .map(|rules| sp(rules.iter().cloned().map(sp).collect()));
        limits::write(w, &mut raw, level);
    }
    if let Some(headers) = &level.add_headers {
        let table: BTreeMap<_, _> = headers
            .iter()
            .map(|(name, value, _)| (sp(name.clone()), sp(value.clone())))
            .collect();
        raw.response_headers = (!table.is_empty()).then(|| sp(table));
    }
    raw.client_max_body_size = level.client_max_body_size.as_deref().map(loose);
    raw.request_buffering = level.request_buffering;
    (raw, proxy_status)
}

/// Whether a location is nginx's `location /` (or `= /` …): one that every path
/// matches.
pub(super) fn is_root(l: &RawLocation) -> bool {
    l.pattern
        .as_ref()
        .is_some_and(|p| matches!(p.get_ref().as_str(), "/" | "^~ /"))
}

/// A `location /` answering 404, for the paths no location of the site matches.
pub(super) fn add_root_404(site: &mut Site) {
    let raw = RawLocation {
        pattern: Some(sp("/".to_owned())),
        ret: Some(sp(RawReturn {
            status: Some(sp(404)),
            ..RawReturn::default()
        })),
        ..RawLocation::default()
    };
    let note = vec!["no location / in nginx: what no location matches is a 404".to_owned()];
    site.locations.push((raw, note));
}

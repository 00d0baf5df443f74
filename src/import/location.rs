//! The `[[site.location]]` a `location` becomes, with every setting it inherits
//! written on it, and what the report says of it.

use std::collections::BTreeMap;

use super::build::{loose, sp, Site};
use super::auth;
use super::files;
use super::level::Level;
use super::limits;
use super::pattern::{Content, Kind, Pattern};
use super::proxy;
use super::redirects;
use super::report::Status;
use super::state::Walk;
use crate::config::raw::{
    RawLocation, RawResponseHeader, RawResponseHeaderTable, RawReturn, RawStatus,
};
use crate::config::When;

pub(super) fn location_status(
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
        differences.push("no proxy_pass, return or root: answered 404 (nginx would serve files from its default root, `html` under its prefix)".to_owned());
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
            status: Some(sp(match &ret.status_map {
                Some(name) => RawStatus::Var(format!("${name}")),
                None => RawStatus::Code(ret.status),
            })),
            body: ret.body.clone().map(sp),
            location: ret.location.clone().map(sp),
        }));
    } else {
        match &content.proxy {
            Some((target, _)) => {
                let path = content.upstream_path.clone().or_else(|| target.path.clone());
                let tls = w.build.group(&target.group).is_some_and(|g| {
                    g.servers.iter().all(|(addr, _)| addr.starts_with("https://"))
                });
                redirects::write(&mut raw, level, pattern, target, path.as_deref(), tls);
                proxy_status = Some(proxy::forward(w, &mut raw, level, target, path));
            }
            None if files::serves(level) => {
                if let Some(pass) = files::serve(w, &mut raw, level) {
                    // `try_files … @name`: the named location's proxy_pass.
                    match proxy::pass(w, &pass) {
                        Ok(target) => {
                            let path = target.path.clone();
                            proxy_status = Some(proxy::forward(w, &mut raw, level, &target, path));
                        }
                        Err(status) => proxy_status = Some(status),
                    }
                }
            }
            None => raw.ret = Some(sp(RawReturn {
                status: Some(sp(RawStatus::Code(404))),
                ..RawReturn::default()
            })),
        }
        raw.access = level
            .access
            .as_ref()
            .map(|rules| sp(rules.iter().cloned().map(sp).collect()));
        auth::write(&mut raw, level);
        limits::write(w, &mut raw, level);
    }
    if let Some(headers) = &level.add_headers {
        let table: BTreeMap<_, _> = headers
            .iter()
            .map(|(name, value, always)| {
                // nginx's add_header: 2xx/3xx only, or with `always` every answer.
                let when = if *always { When::Always } else { When::Success };
                let table = RawResponseHeaderTable {
                    value: Some(sp(value.clone())),
                    when: Some(sp(when)),
                };
                (sp(name.clone()), sp(RawResponseHeader::Table(table)))
            })
            .collect();
        raw.response_headers = (!table.is_empty()).then(|| sp(table));
    }
    let forwards = raw.upstream.is_some();
    files::write(&mut raw, level, forwards);
    raw.client_max_body_size = level.client_max_body_size.as_deref().map(loose);
    raw.request_buffering = level.request_buffering;
    raw.log = level.log.as_ref().map(|log| sp(log.raw()));
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
            status: Some(sp(RawStatus::Code(404))),
            ..RawReturn::default()
        })),
        ..RawLocation::default()
    };
    let note = vec!["no location / in nginx: what no location matches is a 404".to_owned()];
    site.locations.push((raw, note));
}

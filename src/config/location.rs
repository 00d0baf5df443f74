//! `[[location]]`: the nginx `match` syntax, duplicate detection and the action
//! (`upstream`, `return` or files) of each location, and its `cost_from`.

use std::collections::HashMap;

use http::{HeaderValue, StatusCode};
use serde_spanned::Spanned;

use super::context::Context;
use super::diag::Diagnostics;
use super::Auth;
use super::files;
use super::suggest::unknown_name;
use super::limits;
use super::values;
use super::maps::{self, Maps};
use super::redirects;
use super::raw::{RawLocation, RawReturn, RawStatus, Span};
use super::rules::{self, Rules};
use super::var_text::var_text;
use super::{Action, CostFrom, Location, Pattern, Return, ReturnStatus, VarText};

const MATCH_HINT: &str = r#"expected "/path", "= /path", "^~ /path", "~ regex" or "~* regex""#;

/// Typed locations in file order, or `None` when any of them had a problem (reported).
/// `site` holds the rules of the site the locations belong to, which they inherit.
pub(super) fn locations(
    raw: Vec<Option<Spanned<RawLocation>>>,
    site: &Rules,
    context: &Context<'_>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Location>> {
    // Paths nginx keeps in one tree: an exact match, or a prefix (with or without `^~`).
    let mut seen: HashMap<(bool, String), usize> = HashMap::new();
    raw.into_iter()
        .map(|raw| raw.and_then(|raw| location(raw, &mut seen, site, context, diag)))
        .collect::<Vec<_>>()
        .into_iter()
        .collect()
}


/// The location's `match`, a duplicate of one in `seen` (the exact and prefix paths
/// before it, to their lines) reported.
fn pattern(
    location: &RawLocation,
    table: &Span,
    seen: &mut HashMap<(bool, String), usize>,
    diag: &mut Diagnostics<'_>,
) -> Option<Pattern> {
    let written = diag.required(location.pattern.as_ref(), table, "match")?;
    let span = written.span();
    let pattern = diag.check(span.clone(), parse_match(written.get_ref()))?;
    if let Some(key) = tree_key(&pattern) {
        if let Some(line) = seen.get(&key) {
            let written = written.get_ref().trim();
            let message = format!(r#"duplicate location "{written}": already defined at line {line}"#);
            diag.error(span, message);
        } else {
            seen.insert(key, diag.line_of(span.start));
        }
    }
    Some(pattern)
}

/// One location; `seen` maps the exact and prefix paths before it to their lines.
fn location(
    raw: Spanned<RawLocation>,
    seen: &mut HashMap<(bool, String), usize>,
    site: &Rules,
    context: &Context<'_>,
    diag: &mut Diagnostics<'_>,
) -> Option<Location> {
    let table = raw.span();
    let location = raw.into_inner();
    let pattern = pattern(&location, &table, seen, diag);
    let action = action(&location, &table, context, pattern.as_ref(), diag);
    let upstream_path = upstream_path(&location, pattern.as_ref(), context.maps, diag);
    let cost = limits::cost(location.cost.as_ref(), diag);
    let cost_from = cost_from(&location, action.as_ref(), diag);
    let zones = context.zones;
    let expires = match &location.expires {
        None => Some(None),
        Some(value) => diag.check(value.span(), files::expires(value)),
    };
    let rules = cost.and_then(|cost| {
        let inherited = site.inherited();
        let own = rules::rules(&location.rules(), cost, pattern.as_ref(), context, inherited, diag)?;
        if let (None, Some(site), Some(written)) =
            (&own.limits, &site.limits, &location.cost)
        {
            limits::inherited(site, zones, cost, written.span(), diag)?;
        }
        Some(own.inherit(site))
    });
    let rules = rules?;
    super::jwt::claims_verified(rules.limits.as_deref(), rules.auth.as_ref(), zones, &table, diag)?;
    let cookies = rules.cookies();
    let redirects = redirects::resolve(
        rules.redirect_rewrite,
        &location,
        action.as_ref(),
        pattern.as_ref(),
        upstream_path.as_ref(),
        diag,
    );
    Some(Location {
        pattern: pattern?,
        action: action?,
        limits: rules.limits.unwrap_or_default(),
        access: rules.access.unwrap_or_default(),
        cost: cost?,
        cost_from: cost_from?,
        limit_status: rules.limit_status,
        limit_action: rules.limit_action,
        headers: rules.headers,
        upstream_path: upstream_path?,
        client_max_body_size: rules.client_max_body_size,
        request_buffering: rules.request_buffering,
        redirects: redirects?,
        cookies,
        forwarded: rules.forwarded,
        timeouts: rules.timeouts,
        error_pages: rules.error_pages.unwrap_or_default(),
        intercept_errors: rules.intercept_errors.unwrap_or(false),
        expires: expires?,
        compress: rules.compress,
        auth: rules.auth.and_then(Auth::in_force),
        satisfy: rules.satisfy.unwrap_or_default(),
        log: rules.log,
    })
}

/// Headers that frame or route the answer: the cost may not be taken from one (it is
/// removed before the client sees the answer).
const NOT_A_COST: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "trailer",
    "te",
    "content-type",
];

/// `cost_from` and `keep_cost_header`: a header of the upstream's answer, so only on a
/// location that forwards.
fn cost_from(
    location: &RawLocation,
    action: Option<&Action>,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<CostFrom>> {
    let keep = location.keep_cost_header.as_ref();
    let Some(written) = &location.cost_from else {
        if let Some(keep) = keep {
            diag.error(keep.span(), "`keep_cost_header` needs `cost_from`");
            return None;
        }
        return Some(None);
    };
    let without = match action {
        Some(Action::Return(_)) => Some("answers with `return`"),
        Some(Action::Files { upstream: None, .. }) => Some("serves files and has no `upstream`"),
        _ => None,
    };
    if let Some(without) = without {
        let message = format!("`cost_from` reads the upstream's answer; this location {without}");
        diag.error(written.span(), message);
        return None;
    }
    let name = written.get_ref().trim();
    let header = match http::HeaderName::from_bytes(name.as_bytes()) {
        Ok(header) if !NOT_A_COST.contains(&header.as_str()) => header,
        Ok(_) => {
            let message =
                format!(r#"`cost_from` cannot be "{name}": the answer's framing depends on it"#);
            diag.error(written.span(), message);
            return None;
        }
        Err(_) => {
            let message = format!(r#"invalid header name "{name}" in `cost_from`"#);
            diag.error(written.span(), message);
            return None;
        }
    };
    Some(Some(CostFrom {
        header,
        keep: keep.is_some_and(|keep| *keep.get_ref()),
    }))
}

/// nginx's `location` argument: an optional modifier, whitespace, then the path or regex.
pub(super) fn parse_match(written: &str) -> Result<Pattern, String> {
    let text = written.trim();
    if text.starts_with('/') {
        return path(written, text).map(Pattern::Prefix);
    }
    let (modifier, rest) = text
        .split_once(char::is_whitespace)
        .map_or((text, ""), |(modifier, rest)| (modifier, rest.trim_start()));
    match modifier {
        "=" => path(written, rest).map(Pattern::Exact),
        "^~" => path(written, rest).map(Pattern::PriorityPrefix),
        "~" => regex(written, rest, false),
        "~*" => regex(written, rest, true),
        _ => Err(format!(r#"invalid match "{written}": {MATCH_HINT}"#)),
    }
}

fn path(written: &str, path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!(
            r#"invalid match "{written}": the path must start with "/""#
        ));
    }
    if path.contains(char::is_whitespace) {
        return Err(format!(
            r#"invalid match "{written}": the path must not contain whitespace"#
        ));
    }
    Ok(path.to_owned())
}

fn regex(written: &str, source: &str, case_insensitive: bool) -> Result<Pattern, String> {
    if source.is_empty() {
        return Err(format!(
            r#"invalid match "{written}": a regex must follow the modifier"#
        ));
    }
    Pattern::regex(source, case_insensitive)
        .map_err(|err| format!(r#"invalid regex "{source}": {}"#, values::regex_reason(&err)))
}

/// Exact and prefix locations of one path may not repeat (nginx: "duplicate location").
/// `^~ /x` and `/x` are the same prefix; regexes may repeat.
fn tree_key(pattern: &Pattern) -> Option<(bool, String)> {
    match pattern {
        Pattern::Exact(path) => Some((true, path.clone())),
        Pattern::Prefix(path) | Pattern::PriorityPrefix(path) => Some((false, path.clone())),
        Pattern::Regex { .. } => None,
    }
}

/// What the location does: forward (`upstream`), answer (`return`) or serve files
/// (`root`/`alias`), one of them; `upstream` beside `root`/`alias` only for a `try_files`
/// ending `"@upstream"`. `table` is the span of the location's table.
fn action(
    location: &RawLocation,
    table: &Span,
    context: &Context<'_>,
    pattern: Option<&Pattern>,
    diag: &mut Diagnostics<'_>,
) -> Option<Action> {
    // Problems with the action are reported at `match`, or at the table without it.
    let span = location
        .pattern
        .as_ref()
        .map_or(table.clone(), Spanned::span);
    let files = files::files(location, pattern, context.base, context.maps, diag);
    let directory = location.root.as_ref().or(location.alias.as_ref());
    let upstream = location.upstream.as_ref().map(|name| {
        let upstreams = context.upstreams;
        let found = upstreams.iter().position(|known| known == name.get_ref());
        if found.is_none() {
            diag.error(name.span(), unknown_upstream(name.get_ref(), upstreams));
        }
        (name.span(), found)
    });
    match (upstream, &location.ret, directory) {
        (_, Some(_), Some(directory)) => {
            let message = "a location takes `upstream`, `return` or `root`/`alias`: this one answers with `return`";
            diag.error(directory.span(), message);
            None
        }
        (Some(_), Some(_), None) => {
            let message = "a location takes `upstream`, `return` or `root`/`alias`, not both `upstream` and `return`";
            diag.error(span, message);
            None
        }
        (Some((at, found)), None, Some(_)) => {
            let files = files??;
            let last = files.try_files.as_ref().map(|t| &t.last);
            if !matches!(last, Some(files::Last::Upstream)) {
                let message = "a location takes `upstream`, `return` or `root`/`alias`; `upstream` beside `root`/`alias` is for a `try_files` ending \"@upstream\"";
                diag.error(at, message);
                return None;
            }
            Some(Action::Files {
                files,
                upstream: Some(found?),
            })
        }
        (None, None, Some(_)) => Some(Action::Files {
            files: files??,
            upstream: None,
        }),
        (Some((_, found)), None, None) => Some(Action::Proxy { upstream: found? }),
        (None, Some(ret), None) => returned(ret, pattern, context.maps, diag).map(Action::Return),
        (None, None, None) => {
            let left_out = ["upstream", "return", "root", "alias"]
                .iter()
                .any(|key| diag.was_left_out(table, key));
            if !left_out {
                diag.error(span, "a location needs `upstream`, `return` or `root`/`alias`");
            }
            None
        }
    }
}

fn unknown_upstream(name: &str, upstreams: &[String]) -> String {
    let known: Vec<&str> = upstreams.iter().map(String::as_str).collect();
    unknown_name("upstream", name, &known, "no `[upstreams.NAME]` is defined")
}

/// `upstream_path`: only beside `upstream`, a path (starting with `/`) that may hold
/// variables.
fn upstream_path(
    location: &RawLocation,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<VarText>> {
    let Some(written) = &location.upstream_path else {
        return Some(None);
    };
    if location.upstream.is_none() {
        diag.error(written.span(), "`upstream_path` needs `upstream`");
        return None;
    }
    if !written.get_ref().starts_with('/') {
        let message = r#"an upstream path starts with "/""#;
        diag.error(written.span(), message);
        return None;
    }
    var_text(written, pattern, maps, diag).map(Some)
}

/// `return`; `pattern` is the location's (captures need a regex), `None` when it is
/// itself wrong.
fn returned(
    ret: &Spanned<RawReturn>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Return> {
    let written = ret.get_ref();
    let status = diag
        .required(written.status.as_ref(), &ret.span(), "status")
        .and_then(|status| match status.get_ref() {
            RawStatus::Code(code) => {
                let status = diag.check(status.span(), literal_status(&code.to_string()));
                status.map(ReturnStatus::Fixed)
            }
            RawStatus::Var(text) => {
                let map = maps::status_map(text, status.span(), maps, literal_status, diag);
                map.map(ReturnStatus::Map)
            }
        });
    let statuses: Vec<StatusCode> = match &status {
        Some(ReturnStatus::Fixed(status)) => vec![*status],
        Some(ReturnStatus::Map(map)) => map.statuses().collect(),
        None => Vec::new(),
    };
    if statuses.iter().any(|s| s.as_u16() == 444)
        && (written.body.is_some() || written.location.is_some())
    {
        let message =
            "status 444 closes the connection without an answer: it takes no `body` or `location`";
        diag.error(ret.span(), message);
        return None;
    }
    if let (Some(ReturnStatus::Map(_)), None) = (&status, &written.location) {
        if let Some(redirect) = statuses.iter().find(|s| ReturnStatus::redirects(**s)) {
            let message = format!(
                "the status may be {}, a redirect: `return` needs a `location`",
                redirect.as_u16()
            );
            diag.error(ret.span(), message);
            return None;
        }
    }
    let location = match &written.location {
        None => Some(None),
        Some(location) => {
            let value = location.get_ref();
            let valid = !value.is_empty() && HeaderValue::from_str(value).is_ok();
            if !valid {
                let message = format!(
                    r#"invalid location "{value}": expected a URL usable as a header value"#
                );
                diag.error(location.span(), message);
            }
            let text = var_text(location, pattern, maps, diag);
            if valid {
                text.map(Some)
            } else {
                None
            }
        }
    };
    let body = match &written.body {
        None => Some(VarText::default()),
        Some(body) => var_text(body, pattern, maps, diag),
    };
    Some(Return {
        status: status?,
        body: body?,
        location: location?,
    })
}

/// A status `return` answers with: 200 to 599, written as a number.
fn literal_status(written: &str) -> Result<StatusCode, String> {
    written
        .parse::<u16>()
        .ok()
        .filter(|code| (200..=599).contains(code))
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| format!("invalid status {written}: expected 200 to 599"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_takes_the_nginx_modifiers() {
        assert!(matches!(parse_match("= /login"), Ok(Pattern::Exact(p)) if p == "/login"));
        assert!(
            matches!(parse_match("^~ /static/"), Ok(Pattern::PriorityPrefix(p)) if p == "/static/")
        );
        assert!(matches!(parse_match("/api/"), Ok(Pattern::Prefix(p)) if p == "/api/"));
        assert!(matches!(parse_match("  =   /x "), Ok(Pattern::Exact(p)) if p == "/x"));
    }

    #[test]
    fn regex_matches_compile_with_the_right_case_sensitivity() {
        let Ok(Pattern::Regex {
            regex,
            case_insensitive,
        }) = parse_match(r"~ \.php$")
        else {
            panic!("not a regex");
        };
        assert!(!case_insensitive && regex.is_match(b"/a.php") && !regex.is_match(b"/a.PHP"));
        let Ok(Pattern::Regex {
            regex,
            case_insensitive,
        }) = parse_match(r"~* \.(gif|jpg)$")
        else {
            panic!("not a regex");
        };
        assert!(case_insensitive && regex.is_match(b"/A.JPG"));
    }

    #[test]
    fn regex_error_is_one_line_with_the_regex_reason() {
        let err = parse_match("~ (unclosed").unwrap_err();
        assert_eq!(err, r#"invalid regex "(unclosed": unclosed group"#);
    }

    #[test]
    fn malformed_matches_say_what_is_expected() {
        let hint = |w: &str| format!(r#"invalid match "{w}": {MATCH_HINT}"#);
        assert_eq!(parse_match("api/").unwrap_err(), hint("api/"));
        assert_eq!(parse_match("=/x").unwrap_err(), hint("=/x"));
        assert_eq!(parse_match("").unwrap_err(), hint(""));
        assert!(parse_match("= x")
            .unwrap_err()
            .contains(r#"must start with "/""#));
        assert!(parse_match("/a b").unwrap_err().contains("whitespace"));
        assert!(parse_match("~")
            .unwrap_err()
            .contains("a regex must follow"));
    }
}

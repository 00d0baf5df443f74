//! A location's header rules: `request_headers` (nginx `proxy_set_header`),
//! `response_headers` (`add_header`) and `hide_headers` (`proxy_hide_header`).

use std::collections::BTreeMap;

use http::HeaderName;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::RawRules;
use super::maps::Maps;
use super::var_text::var_text;
use super::{HeaderRules, Pattern, VarText};

/// Headers tollgate writes itself on the way up (`X-Forwarded-*`, `X-Real-IP`) or that
/// frame the message: a rule may not set or remove them.
const RESERVED_UP: [&str; 13] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
];

/// Headers that frame a response: a rule may not set or hide them.
const RESERVED_DOWN: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// A location's or a site's header rules, each problem reported where it is written.
pub(super) fn header_rules(
    location: &RawRules<'_>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<HeaderRules> {
    let request = set_rules(location.request_headers, Up, pattern, maps, diag);
    let response = set_rules(location.response_headers, Down, pattern, maps, diag);
    let mut hide = Some(Vec::new());
    for written in location.hide_headers.iter().flat_map(|list| list.get_ref()) {
        let name = header_name(written, &RESERVED_DOWN, diag);
        match (&mut hide, name) {
            (Some(hide), Some(name)) => hide.push(name),
            _ => hide = None,
        }
    }
    let response: Vec<(HeaderName, VarText)> = response?
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect();
    Some(HeaderRules {
        request: request?,
        response,
        hide: hide?,
    })
}

/// Which way a rule's headers go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}
use Way::{Down, Up};

/// `{ NAME = "value" }` rules: each name checked against the headers tollgate keeps,
/// each value parsed for variables; on the way up `""` is `None` (remove).
fn set_rules(
    table: Option<&Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
    way: Way,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<(HeaderName, Option<VarText>)>> {
    let reserved: &[&str] = match way {
        Up => &RESERVED_UP,
        Down => &RESERVED_DOWN,
    };
    let mut rules = Some(Vec::new());
    for (name, value) in table.iter().flat_map(|table| table.get_ref()) {
        let name = header_name(name, reserved, diag);
        let value = match value.get_ref().as_str() {
            "" if way == Up => Some(None),
            "" => {
                diag.error(
                    value.span(),
                    r#"an empty value: `hide_headers` removes a response header"#,
                );
                None
            }
            text if text.as_bytes().iter().any(|b| b.is_ascii_control()) => {
                diag.error(
                    value.span(),
                    "a header value may not hold control characters",
                );
                None
            }
            _ => var_text(value, pattern, maps, diag).map(Some),
        };
        match (&mut rules, name, value) {
            (Some(rules), Some(name), Some(value)) => rules.push((name, value)),
            _ => rules = None,
        }
    }
    rules
}

fn header_name(
    written: &Spanned<String>,
    reserved: &[&str],
    diag: &mut Diagnostics<'_>,
) -> Option<HeaderName> {
    let text = written.get_ref();
    let Ok(name) = HeaderName::from_bytes(text.as_bytes()) else {
        let message = format!(r#"invalid header name "{text}""#);
        diag.error(written.span(), message);
        return None;
    };
    if reserved.contains(&name.as_str()) {
        let message = format!(
            r#""{text}" is tollgate's to write (forwarding and framing headers are not rules' to change)"#
        );
        diag.error(written.span(), message);
        return None;
    }
    Some(name)
}

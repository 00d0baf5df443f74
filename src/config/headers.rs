//! A location's header rules: `request_headers` (nginx `proxy_set_header`),
//! `response_headers` (`add_header`, with `when`), `hide_headers` (`proxy_hide_header`),
//! `pass_headers` (`proxy_pass_header`), and `forwarded_headers`, which of the
//! forwarding headers tollgate writes upstream.

use http::HeaderName;
use serde::{Deserialize, Serialize};
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::maps::Maps;
use super::raw::{RawResponseHeader, RawRules};
use super::var_text::var_text;
use super::{HeaderRules, Pattern, VarText};

/// `forwarded_headers`: which of the four forwarding headers tollgate writes upstream
/// (all four unless a table says otherwise). One left out is not written by tollgate,
/// and the client's own copy of it passes as sent (nginx without a `proxy_set_header`
/// for it does the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forwarded(u8);

impl Forwarded {
    pub const FOR: Forwarded = Forwarded(1);
    pub const REAL_IP: Forwarded = Forwarded(2);
    pub const PROTO: Forwarded = Forwarded(4);
    pub const HOST: Forwarded = Forwarded(8);
    pub const ALL: Forwarded = Forwarded(15);
    pub const NONE: Forwarded = Forwarded(0);

    /// Each header with its name, lowercase as `HeaderName` keeps it.
    const NAMES: [(&'static str, Forwarded); 4] = [
        ("x-forwarded-for", Forwarded::FOR),
        ("x-real-ip", Forwarded::REAL_IP),
        ("x-forwarded-proto", Forwarded::PROTO),
        ("x-forwarded-host", Forwarded::HOST),
    ];

    /// Whether every header of `other` is in the set.
    pub(crate) fn has(self, other: Forwarded) -> bool {
        self.0 & other.0 == other.0
    }

    pub(super) fn with(self, other: Forwarded) -> Forwarded {
        Forwarded(self.0 | other.0)
    }

    fn and(self, other: Forwarded) -> Forwarded {
        Forwarded(self.0 & other.0)
    }

    /// The forwarding header `name` is, if it is one.
    fn of(name: &HeaderName) -> Option<Forwarded> {
        Forwarded::NAMES
            .iter()
            .find(|(known, _)| *known == name.as_str())
            .map(|&(_, one)| one)
    }

    /// The names in the set, as the docs write them, for messages.
    fn names(self) -> impl Iterator<Item = &'static str> {
        const WRITTEN: [&str; 4] = [
            "X-Forwarded-For",
            "X-Real-IP",
            "X-Forwarded-Proto",
            "X-Forwarded-Host",
        ];
        (Forwarded::NAMES.into_iter().zip(WRITTEN))
            .filter(move |&((_, one), _)| self.has(one))
            .map(|(_, written)| written)
    }
}

/// `pass_headers`: which of the headers nginx's proxy drops from an upstream's answer
/// by default the client gets all the same. The set is nginx's (`Date`, `Server`,
/// `X-Pad` and five `X-Accel-*`); tollgate writes its own `Date` and `Server` instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passed(u8);

impl Passed {
    /// The headers dropped by default, lowercase; a header's place is its bit.
    pub(crate) const DROPPED: [&'static str; 8] = [
        "date",
        "server",
        "x-pad",
        "x-accel-expires",
        "x-accel-redirect",
        "x-accel-limit-rate",
        "x-accel-buffering",
        "x-accel-charset",
    ];

    /// Whether the header at `index` of [`Passed::DROPPED`] is passed.
    pub(crate) fn has(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }

    pub(super) fn with(self, other: Passed) -> Passed {
        Passed(self.0 | other.0)
    }

    /// The set of `names` (lowercase) that are dropped by default.
    #[cfg(test)]
    pub(crate) fn of(names: &[&str]) -> Passed {
        let index = |name| Passed::DROPPED.iter().position(|d| d == name);
        Passed(names.iter().filter_map(index).fold(0, |set, i| set | 1 << i))
    }
}

/// When a `response_headers` rule applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum When {
    /// A plain string: every answer from the upstream or the location's `return`.
    #[serde(skip)]
    Served,
    /// Only answers with a status nginx's `add_header` applies to without `always`:
    /// 200 201 204 206 301 302 303 304 307 308.
    Success,
    /// Every answer of the site or location, tollgate's own (403, 404, 413, 429, 5xx…)
    /// too: nginx's `add_header … always`.
    Always,
}

impl When {
    /// The statuses nginx's `add_header` applies to without `always`.
    pub(crate) fn is_success(status: http::StatusCode) -> bool {
        matches!(
            status.as_u16(),
            200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
        )
    }
}

/// A `response_headers` rule's value and when it applies.
#[derive(Clone, Debug)]
pub struct ResponseValue {
    pub value: VarText,
    pub when: When,
}

/// Headers that frame the message: a rule may not set or remove them. The forwarding
/// headers `forwarded_headers` names are refused too (tollgate writes them).
const RESERVED_UP: [&str; 9] = [
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

/// Headers that frame a response: a rule may not set or hide them (`tollgate import`
/// leaves them out too).
pub(crate) const RESERVED_DOWN: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// A location's or a site's header rules, each problem reported where it is written,
/// and the forwarding headers its `request_headers` set or remove. `forwarded` is what
/// `forwarded_headers` makes tollgate write there: a rule may not touch one of those.
pub(super) fn header_rules(
    location: &RawRules<'_>,
    pattern: Option<&Pattern>,
    forwarded: Forwarded,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<(HeaderRules, Forwarded)> {
    let mut sets = Forwarded::NONE;
    let mut request = Some(Vec::new());
    for (name, value) in location.request_headers.iter().flat_map(|t| t.get_ref()) {
        let checked = header_name(name, &RESERVED_UP, diag).and_then(|checked| {
            let Some(one) = Forwarded::of(&checked) else {
                return Some(checked);
            };
            if forwarded.has(one) {
                let message = format!(
                    r#""{}" is written by tollgate here (`forwarded_headers` names it): leave it out of `forwarded_headers` to set it with a rule"#,
                    name.get_ref()
                );
                diag.error(name.span(), message);
                return None;
            }
            sets = sets.with(one);
            Some(checked)
        });
        let value = match value.get_ref().as_str() {
            "" => Some(None),
            _ => value_text(value, pattern, maps, diag).map(Some),
        };
        match (&mut request, checked, value) {
            (Some(rules), Some(name), Some(value)) => rules.push((name, value)),
            _ => request = None,
        }
    }
    let response = response_rules(location, pattern, maps, diag);
    let hide = names(location.hide_headers, diag);
    let pass = hide
        .as_ref()
        .and_then(|hide| pass_headers(location.pass_headers, hide, diag));
    let rules = HeaderRules {
        request: request?,
        response: response?,
        hide: hide?,
        pass: pass?,
    };
    Some((rules, sets))
}

/// `response_headers`: each value a string (on what the location serves) or a
/// `{ value, when }` table.
fn response_rules(
    location: &RawRules<'_>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<(HeaderName, super::ResponseValue)>> {
    let mut rules = Some(Vec::new());
    for (name, written) in location.response_headers.iter().flat_map(|t| t.get_ref()) {
        let name = header_name(name, &RESERVED_DOWN, diag);
        let (value, when) = match written.get_ref() {
            RawResponseHeader::Value(value) => {
                (Some(Spanned::new(written.span(), value.clone())), When::Served)
            }
            RawResponseHeader::Table(table) => {
                let value = diag.required(table.value.as_ref(), &written.span(), "value");
                let when = table.when.as_ref().map_or(When::Served, |w| *w.get_ref());
                (value.cloned(), when)
            }
        };
        let value = value.and_then(|value| {
            if value.get_ref().is_empty() {
                let message = r#"an empty value: `hide_headers` removes a response header"#;
                diag.error(value.span(), message);
                return None;
            }
            value_text(&value, pattern, maps, diag)
        });
        match (&mut rules, name, value) {
            (Some(rules), Some(name), Some(value)) => {
                rules.push((name, super::ResponseValue { value, when }))
            }
            _ => rules = None,
        }
    }
    rules
}

/// A header value, parsed for variables.
fn value_text(
    value: &Spanned<String>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<VarText> {
    if value.get_ref().as_bytes().iter().any(|b| b.is_ascii_control()) {
        diag.error(
            value.span(),
            "a header value may not hold control characters",
        );
        return None;
    }
    var_text(value, pattern, maps, diag)
}

/// `hide_headers`: names, none of them one that frames the answer.
fn names(
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<HeaderName>> {
    let mut names = Some(Vec::new());
    for written in list.iter().flat_map(|list| list.get_ref()) {
        let name = header_name(written, &RESERVED_DOWN, diag);
        match (&mut names, name) {
            (Some(names), Some(name)) => names.push(name),
            _ => names = None,
        }
    }
    names
}

/// `pass_headers`: names of headers dropped by default ([`Passed::DROPPED`]), none
/// also in the same table's `hide_headers`.
fn pass_headers(
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    hide: &[HeaderName],
    diag: &mut Diagnostics<'_>,
) -> Option<Passed> {
    let mut passed = Some(Passed::default());
    for written in list.iter().flat_map(|list| list.get_ref()) {
        let text = written.get_ref();
        let name = HeaderName::from_bytes(text.as_bytes()).ok();
        let index = name
            .as_ref()
            .and_then(|name| Passed::DROPPED.iter().position(|d| *d == name.as_str()));
        let problem = match (&name, index) {
            (None, _) => Some(format!(r#"invalid header name "{text}""#)),
            (Some(_), None) => Some(format!(
                r#""{text}" reaches the client anyway: `pass_headers` names only headers dropped by default (Date, Server, X-Pad, X-Accel-Expires, X-Accel-Redirect, X-Accel-Limit-Rate, X-Accel-Buffering, X-Accel-Charset)"#
            )),
            (Some(name), Some(_)) if hide.contains(name) => Some(format!(
                r#""{text}" is in `hide_headers` too: pass it or hide it"#
            )),
            _ => None,
        };
        if let Some(message) = problem {
            diag.error(written.span(), message);
            passed = None;
        }
        if let (Some(set), Some(index)) = (&mut passed, index) {
            *set = set.with(Passed(1 << index));
        }
    }
    passed
}

/// `forwarded_headers`: a list of forwarding header names, in any case.
pub(super) fn forwarded_headers(
    list: &Spanned<Vec<Spanned<String>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Forwarded> {
    let mut set = Some(Forwarded::NONE);
    for written in list.get_ref() {
        let text = written.get_ref();
        let one = HeaderName::from_bytes(text.as_bytes())
            .ok()
            .and_then(|name| Forwarded::of(&name));
        match (&mut set, one) {
            (Some(set), Some(one)) => *set = set.with(one),
            (_, Some(_)) => {}
            (_, None) => {
                let message = format!(
                    r#""{text}" is not a header tollgate forwards: `forwarded_headers` takes X-Forwarded-For, X-Real-IP, X-Forwarded-Proto and X-Forwarded-Host"#
                );
                diag.error(written.span(), message);
                set = None;
            }
        }
    }
    set
}

/// The forwarding headers a table's own `forwarded_headers` (at `span`) has tollgate
/// write while its site's `request_headers` set them (`site_sets`): reported there.
pub(super) fn clash(
    own: Forwarded,
    site_sets: Forwarded,
    span: crate::config::raw::Span,
    diag: &mut Diagnostics<'_>,
) -> bool {
    let both = own.and(site_sets);
    if both == Forwarded::NONE {
        return false;
    }
    let names: Vec<&str> = both.names().collect();
    let message = format!(
        "{} set by the site's `request_headers`: leave {} out of `forwarded_headers` here, or drop the site's rule",
        names.join(", "),
        if names.len() == 1 { "it" } else { "them" },
    );
    diag.error(span, message);
    true
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
            r#""{text}" is tollgate's to write (framing headers are not rules' to change)"#
        );
        diag.error(written.span(), message);
        return None;
    }
    Some(name)
}

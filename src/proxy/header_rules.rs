//! A location's header rules at run time ("Header rules" in docs/config.md): headers set
//! or removed on the request to the upstream, set on the answers the location gives (each
//! as its `when` says), hidden from its upstream's answers, and which of the headers
//! dropped by default it passes. Values without variables are made once; the others are
//! filled in per request by [`HeaderRules::render`].

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::response::Filled;
use crate::config::{self, Passed, When};
use crate::vars::{self, VarText};

#[derive(Default)]
pub struct HeaderRules {
    /// `None` removes the header.
    request: Vec<(HeaderName, Option<Filled<HeaderValue>>)>,
    response: Vec<(HeaderName, Filled<HeaderValue>, When)>,
    hide: Vec<HeaderName>,
    pass: Passed,
    /// Some response rule may go on an answer of tollgate's own (`success` or `always`).
    own: bool,
    /// One of those has variables.
    own_per_request: bool,
}

/// The values with variables of one request, in rule order.
#[derive(Default)]
pub(crate) struct Rendered {
    request: Vec<HeaderValue>,
    response: Vec<HeaderValue>,
}

/// Who made an answer, which says which response rules it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The upstream: every rule by its `when`, and `hide_headers`.
    Upstream,
    /// The location's `return`: every rule by its `when`.
    Return,
    /// tollgate itself (403, 404, 413, 429, 5xx…): `success` and `always` rules only.
    Own,
}

impl Source {
    /// An answer from the upstream, else from the `return` (`returned`), else tollgate's.
    pub(crate) fn of(from_upstream: bool, returned: bool) -> Source {
        match (from_upstream, returned) {
            (true, _) => Source::Upstream,
            (false, true) => Source::Return,
            (false, false) => Source::Own,
        }
    }
}

impl HeaderRules {
    pub(crate) fn new(rules: &config::HeaderRules) -> HeaderRules {
        let response: Vec<_> = rules
            .response
            .iter()
            .map(|(name, rule)| (name.clone(), filled(&rule.value), rule.when))
            .collect();
        let own_rules = response.iter().filter(|(_, _, when)| *when != When::Served);
        let own_per_request = own_rules
            .clone()
            .any(|(_, value, _)| matches!(value, Filled::PerRequest(_)));
        HeaderRules {
            request: rules
                .request
                .iter()
                .map(|(name, value)| (name.clone(), value.as_ref().map(filled)))
                .collect(),
            own: own_rules.count() > 0,
            own_per_request,
            response,
            // A header the site hides and the location passes (or the other way round)
            // is passed, as nginx's `proxy_pass_header` wins over `proxy_hide_header`.
            hide: (rules.hide.iter())
                .filter(|name| !passes(rules.pass, name))
                .cloned()
                .collect(),
            pass: rules.pass,
        }
    }

    /// Which of the upstream's headers dropped by default reach the client.
    pub(crate) fn pass(&self) -> Passed {
        self.pass
    }

    /// Whether an answer of tollgate's own may get a rule's header.
    pub(crate) fn touches_own(&self) -> bool {
        self.own
    }

    /// Whether one of those rules needs the request's variables.
    pub(crate) fn own_per_request(&self) -> bool {
        self.own_per_request
    }

    /// The values with variables, filled in from `req` (nothing without `req`).
    pub(crate) fn render(&self, req: Option<&vars::Request<'_>>) -> Rendered {
        let Some(req) = req else {
            return Rendered::default();
        };
        let render = |text: &VarText| {
            let mut value = Vec::new();
            text.render(req, &mut value);
            // Control bytes are escaped: a variable cannot add a header line.
            HeaderValue::from_bytes(&vars::escape_for_header(&value))
                .unwrap_or(HeaderValue::from_static(""))
        };
        let per_request = |value: &Filled<HeaderValue>| match value {
            Filled::PerRequest(text) => Some(render(text)),
            Filled::Once(_) => None,
        };
        Rendered {
            request: (self.request.iter())
                .filter_map(|(_, value)| per_request(value.as_ref()?))
                .collect(),
            response: (self.response.iter())
                .filter_map(|(_, value, _)| per_request(value))
                .collect(),
        }
    }

    /// Sets and removes the request rules' headers on the request to the upstream.
    pub(crate) fn to_request(&self, headers: &mut HeaderMap, rendered: &Rendered) {
        let mut filled = rendered.request.iter();
        for (name, value) in &self.request {
            match value {
                None => {
                    headers.remove(name);
                }
                Some(value) => set(headers, name, value, &mut filled),
            }
        }
    }

    /// On an answer with `status` from `source`: hides the hidden headers (the
    /// upstream's), then sets the response rules' headers whose `when` takes it. With
    /// `lines_written`, the rules without variables are left out: the answer's header
    /// lines have them already ([`HeaderRules::own_lines`]).
    pub(crate) fn to_response(
        &self,
        headers: &mut HeaderMap,
        rendered: &Rendered,
        status: StatusCode,
        source: Source,
        lines_written: bool,
    ) {
        if source == Source::Upstream {
            for name in &self.hide {
                headers.remove(name);
            }
        }
        let mut filled = rendered.response.iter();
        for (name, value, when) in &self.response {
            let applies = match when {
                When::Served => source != Source::Own,
                When::Success => When::is_success(status),
                When::Always => true,
            };
            let value = match value {
                Filled::Once(value) => (!lines_written).then_some(value),
                Filled::PerRequest(_) => filled.next(),
            };
            // An empty value (a variable with none, `$remote_user` without a login) is not
            // sent, as nginx's `add_header` sends none.
            if let (true, Some(value)) = (applies, value.filter(|value| !value.is_empty())) {
                headers.insert(name.clone(), value.clone());
            }
        }
    }

    /// The rules without variables that an answer of tollgate's own with `status` gets,
    /// as header lines (`name: value\r\n`), for answers written beforehand.
    pub(crate) fn own_lines(&self, status: StatusCode) -> Bytes {
        let mut lines = Vec::new();
        for (name, value, when) in &self.response {
            let applies = match when {
                When::Served => false,
                When::Success => When::is_success(status),
                When::Always => true,
            };
            if let (true, Filled::Once(value)) = (applies, value) {
                lines.extend_from_slice(name.as_str().as_bytes());
                lines.extend_from_slice(b": ");
                lines.extend_from_slice(value.as_bytes());
                lines.extend_from_slice(b"\r\n");
            }
        }
        Bytes::from(lines)
    }
}

fn set<'a>(
    headers: &mut HeaderMap,
    name: &HeaderName,
    value: &Filled<HeaderValue>,
    filled: &mut impl Iterator<Item = &'a HeaderValue>,
) {
    let value = match value {
        Filled::Once(value) => Some(value),
        Filled::PerRequest(_) => filled.next(),
    };
    if let Some(value) = value {
        headers.insert(name.clone(), value.clone());
    }
}

/// Whether `pass` lets `name` through.
fn passes(pass: Passed, name: &HeaderName) -> bool {
    let dropped = Passed::DROPPED.iter().position(|d| *d == name.as_str());
    dropped.is_some_and(|index| pass.has(index))
}

/// A value made once when it has no variable.
fn filled(text: &VarText) -> Filled<HeaderValue> {
    match text.as_literal().map(HeaderValue::from_str) {
        Some(Ok(value)) => Filled::Once(value),
        _ => Filled::PerRequest(text.clone()),
    }
}

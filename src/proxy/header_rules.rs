//! A location's header rules at run time ("Header rules" in docs/config.md): headers set
//! or removed on the request to the upstream, set on the responses the location serves,
//! and hidden from its upstream's responses. Values without variables are made once;
//! the others are filled in per request by [`HeaderRules::render`].

use http::{HeaderMap, HeaderName, HeaderValue};

use super::response::Filled;
use crate::config;
use crate::vars::{self, VarText};

#[derive(Default)]
pub struct HeaderRules {
    /// `None` removes the header.
    request: Vec<(HeaderName, Option<Filled<HeaderValue>>)>,
    response: Vec<(HeaderName, Filled<HeaderValue>)>,
    hide: Vec<HeaderName>,
}

/// The values with variables of one request, in rule order.
#[derive(Default)]
pub(crate) struct Rendered {
    request: Vec<HeaderValue>,
    response: Vec<HeaderValue>,
}

impl HeaderRules {
    pub(crate) fn new(rules: &config::HeaderRules) -> HeaderRules {
        HeaderRules {
            request: rules
                .request
                .iter()
                .map(|(name, value)| (name.clone(), value.as_ref().map(filled)))
                .collect(),
            response: rules
                .response
                .iter()
                .map(|(name, value)| (name.clone(), filled(value)))
                .collect(),
            hide: rules.hide.clone(),
        }
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
                .filter_map(|(_, value)| per_request(value))
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

    /// Hides the hidden headers, then sets the response rules' headers, on a response
    /// the location serves.
    pub(crate) fn to_response(&self, headers: &mut HeaderMap, rendered: &Rendered) {
        for name in &self.hide {
            headers.remove(name);
        }
        let mut filled = rendered.response.iter();
        for (name, value) in &self.response {
            set(headers, name, value, &mut filled);
        }
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

/// A value made once when it has no variable.
fn filled(text: &VarText) -> Filled<HeaderValue> {
    match text.as_literal().map(HeaderValue::from_str) {
        Some(Ok(value)) => Filled::Once(value),
        _ => Filled::PerRequest(text.clone()),
    }
}

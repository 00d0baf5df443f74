//! `[admin] explain`: a request that carries the admin token in `X-Tollgate-Explain`
//! gets a `Tollgate-Decision` header on its answer, naming the site and location that
//! took it and what decided it (the `[access] deny` list, the location's access rule, a
//! zone and its key, a ban), with the numbers of each zone it went through:
//!
//! ```text
//! Tollgate-Decision: answer=429; site="a.test"; location="/api/"; decided-by="zone per_ip"; zones="per_ip key=192.0.2.7 rejected remaining=0 retry-after=0.999"
//! ```
//!
//! The header is taken out of every request while `explain` is on, whether its token is
//! right or not, so neither the upstream nor a log line (`$http_x_tollgate_explain`)
//! ever sees it; a wrong token gets no answer of its own, only the plain one.

use std::fmt::Write as _;
use std::sync::Arc;

use http::header::{HeaderName, HeaderValue};
use http::{Request, StatusCode};

use crate::access::constant_time::same;
use crate::config::AdminToken;
use crate::limit::keys::Keys;
use crate::limit::outcome::Outcome;
use crate::limit::rule::LimitRule;
use crate::limit::Verdict;

/// The request header that asks, with the admin token.
pub(crate) const ASK: HeaderName = HeaderName::from_static("x-tollgate-explain");

/// The answer's header that tells.
pub(crate) const DECISION: HeaderName = HeaderName::from_static("tollgate-decision");

/// Whether `req` asks with `token` (exactly one header, the token's value); every
/// `X-Tollgate-Explain` is taken out. Without `token` (`explain` off) nothing is looked
/// at or taken.
pub(super) fn asked<B>(req: &mut Request<B>, token: Option<&AdminToken>) -> bool {
    let Some(token) = token else {
        return false;
    };
    let headers = req.headers_mut();
    if !headers.contains_key(&ASK) {
        return false;
    }
    let mut given = match headers.entry(&ASK) {
        http::header::Entry::Occupied(entry) => entry.remove_entry_mult().1,
        http::header::Entry::Vacant(_) => return false,
    };
    match (given.next(), given.next()) {
        (Some(value), None) => same(value.as_bytes(), token.as_bytes()),
        _ => false,
    }
}

/// What is known so far of why a request is answered as it is.
#[derive(Default)]
pub(super) struct Explain {
    site: Option<Arc<str>>,
    location: Option<Arc<str>>,
    /// What refused it before its limits: `[access] deny`, or the location's rule.
    refused_by: Option<String>,
    /// Each zone it went through: `NAME key=KEY VERDICT remaining=N`.
    zones: Vec<String>,
    /// The zone whose ban or refusal it was.
    decided_by: Option<String>,
}

impl Explain {
    pub(super) fn located(&mut self, site: &Arc<str>, location: &Arc<str>) {
        self.site = (!site.is_empty()).then(|| Arc::clone(site));
        self.location = Some(Arc::clone(location));
    }

    /// Refused before its limits, by `what`.
    pub(super) fn refused(&mut self, what: String) {
        self.refused_by = Some(what);
    }

    /// The limits' decision: each zone's verdict, key and numbers.
    pub(super) fn limited(&mut self, outcome: &Outcome, rules: &[LimitRule], keys: Option<&Keys>) {
        for applied in outcome.applied.iter() {
            let Some(rule) = rules.get(applied.rule) else { continue };
            let zone = &rule.zone;
            let key = keys
                .and_then(|keys| keys.get(applied.rule))
                .map(|key| zone.template.text_of(key))
                .unwrap_or_default();
            let verdict = match applied.decision.verdict {
                Verdict::Pass if applied.soft => "passed-soft".to_owned(),
                Verdict::Pass => "passed".to_owned(),
                Verdict::Delay(nanos) => format!("delayed {}", seconds(nanos)),
                Verdict::Reject { .. } => "rejected".to_owned(),
            };
            let mut seen = format!("{} key={key} {verdict} remaining={}", zone.name, applied.decision.remaining);
            if applied.dry_run {
                seen.push_str(" dry-run");
            }
            if let Verdict::Reject { retry_after } = applied.decision.verdict {
                let _ = write!(seen, " retry-after={}", seconds(retry_after));
            }
            self.zones.push(seen);
        }
        let decided = outcome.banned.map(|banned| (banned.rule, "ban in zone")).or(outcome.rejected_by.map(|rule| (rule, "zone")));
        if let Some((rule, what)) = decided {
            if let Some(rule) = rules.get(rule) {
                self.decided_by = Some(format!("{what} {}", rule.zone.name));
            }
        }
    }

    /// The header, for an answer of `status`.
    pub(super) fn header(&self, status: StatusCode) -> HeaderValue {
        let mut text = format!("answer={}", status.as_u16());
        let mut field = |name: &str, value: &str| {
            let _ = write!(text, "; {name}=\"");
            quoted(&mut text, value);
            text.push('"');
        };
        if let Some(site) = &self.site {
            field("site", site);
        }
        if let Some(location) = &self.location {
            field("location", location);
        }
        let decided = self.refused_by.as_deref().or(self.decided_by.as_deref());
        field("decided-by", decided.unwrap_or("none"));
        if !self.zones.is_empty() {
            field("zones", &self.zones.join(", "));
        }
        // Only visible ASCII was written: `quoted` escapes the rest.
        HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static("answer=?"))
    }
}

/// `value` with `"`, `\` and bytes outside visible ASCII and space as `\xHH`: a key or
/// name a client chose cannot break the header or the quoting.
fn quoted(out: &mut String, value: &str) {
    for b in value.bytes() {
        match b {
            b'"' | b'\\' | 0..=0x1f | 0x7f..=0xff => {
                let _ = write!(out, "\\x{b:02X}");
            }
            _ => out.push(char::from(b)),
        }
    }
}

/// Nanoseconds as seconds to the millisecond.
fn seconds(nanos: u64) -> String {
    let millis = nanos / 1_000_000;
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> AdminToken {
        crate::config::AdminToken::for_tests("0123456789abcdef0123")
    }

    #[test]
    fn only_one_header_with_the_token_asks_and_every_one_is_taken_out() {
        let ask = |values: &[&str], token: Option<&AdminToken>| {
            let mut req = Request::new(());
            for value in values {
                req.headers_mut().append(&ASK, HeaderValue::from_str(value).unwrap());
            }
            let asked = asked(&mut req, token);
            (asked, req.headers().contains_key(&ASK))
        };
        let right = "0123456789abcdef0123";
        assert_eq!(ask(&[right], Some(&token())), (true, false));
        assert_eq!(ask(&["0123456789abcdef0124"], Some(&token())), (false, false));
        assert_eq!(ask(&[right, right], Some(&token())), (false, false));
        assert_eq!(ask(&[], Some(&token())), (false, false));
        // `explain` off: the header is any other header.
        assert_eq!(ask(&[right], None), (false, true));
    }

    #[test]
    fn the_header_names_what_decided_and_escapes_what_clients_chose() {
        let mut explain = Explain::default();
        explain.located(&Arc::from("a.test"), &Arc::from("~* \"x\""));
        explain.zones.push("per_key key=a\"b\u{1b} rejected remaining=0".to_owned());
        explain.decided_by = Some("zone per_key".to_owned());
        let header = explain.header(StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            header.to_str().unwrap(),
            "answer=429; site=\"a.test\"; location=\"~* \\x22x\\x22\"; decided-by=\"zone per_key\"; \
             zones=\"per_key key=a\\x22b\\x1B rejected remaining=0\""
        );
        let refused = Explain { refused_by: Some("[access] deny".to_owned()), ..Explain::default() };
        assert_eq!(refused.header(StatusCode::FORBIDDEN).to_str().unwrap(), "answer=403; decided-by=\"[access] deny\"");
        assert_eq!(seconds(59_998_765_432), "59.998");
    }
}

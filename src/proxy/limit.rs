//! The access and limit phases (DESIGN §3 steps 3–4) and what a limited response
//! carries (§5.6): the rejection itself (status, `Retry-After`, problem+json) and the
//! rate-limit headers added to every response a zone applied to.

use std::fmt::Write;
use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};

use crate::body::ResponseBody;
use crate::limit::key::RequestView;
use crate::limit::zone::{self, Applied, Kind, Outcome};

use super::Location;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Which rate-limit headers to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderStyle {
    pub draft: bool,
    pub legacy: bool,
}

/// `[api_keys]`, ready to use: API key → plan id.
pub struct ApiKeys {
    pub header: HeaderName,
    pub plans: std::collections::HashMap<Box<[u8]>, usize>,
}

impl ApiKeys {
    pub fn plan<B>(&self, req: &Request<B>) -> Option<usize> {
        let key = req.headers().get(&self.header)?;
        self.plans.get(key.as_bytes()).copied()
    }
}

/// Applies the location's limits. `path` is the normalized path.
pub(super) fn decide<B>(
    location: &Location,
    req: &Request<B>,
    client: IpAddr,
    path: &str,
    plan: Option<usize>,
    now: Instant,
) -> Outcome {
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(http::header::HOST)?.to_str().ok());
    let view = RequestView {
        client,
        method: req.method(),
        path,
        query: req.uri().query(),
        headers: req.headers(),
        host,
    };
    zone::decide(&location.rules, &view, plan, location.cost, now)
}

/// The answer to a rejected request: the location's `limit_status`, `Retry-After`
/// (whole seconds, rounded up, so never earlier than the truth) and a problem+json body.
pub(super) fn rejection(
    location: &Location,
    outcome: &Outcome,
    style: HeaderStyle,
) -> Response<ResponseBody> {
    let status = location.limit_status;
    let retry_after = retry_after_secs(outcome.retry_after);
    let rejected = outcome.rejected_by.and_then(|rule| {
        let applied = outcome.applied.iter().find(|a| a.rule == rule)?;
        Some((&location.rules.get(rule)?.zone, applied))
    });
    let (zone, detail) = match rejected {
        Some((zone, _)) if zone.kind == Kind::Concurrency => (
            zone.name.as_ref(),
            format!(
                "more than {} requests in flight for this client",
                zone.max()
            ),
        ),
        Some((zone, applied)) => (
            zone.name.as_ref(),
            format!("rate limit of {} exceeded", applied.rate),
        ),
        None => ("", "rate limit exceeded".to_owned()),
    };
    let mut body = String::with_capacity(256);
    let _ = write!(
        body,
        r#"{{"type":"{QUOTA_EXCEEDED}","title":"{}","status":{},"detail":"{detail}","zone":"{zone}","retry_after":{retry_after}}}"#,
        status.canonical_reason().unwrap_or("Too Many Requests"),
        status.as_u16(),
    );
    body.push('\n');
    let mut response = Response::new(ResponseBody::full(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, HeaderValue::from(retry_after));
    add_headers(headers, location, outcome, style);
    response
}

/// Seconds for `Retry-After`: rounded up, at least 1 (0 would invite an instant retry,
/// and an in-flight count has no known release time).
fn retry_after_secs(nanos: u64) -> u64 {
    nanos.div_ceil(NANOS_PER_SEC).max(1)
}

/// Adds the rate-limit headers for every enforcing zone that applied (dry-run zones
/// only observe, so they are not announced).
pub(super) fn add_headers(
    headers: &mut HeaderMap,
    location: &Location,
    outcome: &Outcome,
    style: HeaderStyle,
) {
    let mut applied = outcome
        .applied
        .iter()
        .filter(|a| !a.dry_run)
        .filter_map(|a| Some((&location.rules.get(a.rule)?.zone, a)))
        .peekable();
    if applied.peek().is_none() {
        return;
    }
    if style.draft {
        let (mut policy, mut state) = (String::with_capacity(64), String::with_capacity(64));
        for (zone, a) in applied.clone() {
            if !policy.is_empty() {
                policy.push_str(", ");
                state.push_str(", ");
            }
            for text in [&mut policy, &mut state] {
                text.push('"');
                text.push_str(&zone.name);
                text.push('"');
            }
            // Numbers pushed by hand: `write!` costs more than the rest of the header.
            if zone.kind == Kind::Concurrency {
                push_field(&mut policy, ";q=", zone.max());
                push_field(&mut state, ";r=", a.decision.remaining);
            } else {
                push_field(&mut policy, ";q=", a.rate.count.get());
                push_field(&mut policy, ";w=", a.rate.period.seconds());
                push_field(&mut state, ";r=", a.decision.remaining);
                push_field(&mut state, ";t=", reset_secs(a));
            }
        }
        // Handed over without a copy; zone names and numbers are always valid values.
        if let (Ok(policy), Ok(state)) = (
            HeaderValue::from_maybe_shared(Bytes::from(policy)),
            HeaderValue::from_maybe_shared(Bytes::from(state)),
        ) {
            headers.insert(POLICY, policy);
            headers.insert(RATELIMIT, state);
        }
    }
    if style.legacy {
        // The most restrictive zone: the fewest requests left, then the longest wait.
        let fewest = applied
            .min_by_key(|(_, a)| (a.decision.remaining, std::cmp::Reverse(a.decision.reset)));
        if let Some((zone, a)) = fewest {
            let limit = match zone.kind {
                Kind::Concurrency => zone.max(),
                _ => a.rate.count.get(),
            };
            headers.insert(X_LIMIT, HeaderValue::from(limit));
            headers.insert(X_REMAINING, HeaderValue::from(a.decision.remaining));
            headers.insert(X_RESET, HeaderValue::from(reset_secs(a)));
        }
    }
}

/// Appends `name` and the decimal digits of `value`.
fn push_field(text: &mut String, name: &str, value: u64) {
    text.push_str(name);
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[at..] {
        text.push(char::from(digit));
    }
}

/// Whole seconds, rounded up, until the zone's state for this key has fully drained.
fn reset_secs(a: &Applied) -> u64 {
    a.decision.reset.div_ceil(NANOS_PER_SEC)
}

/// The delay the request must wait, as a `Duration`.
pub(super) fn delay(outcome: &Outcome) -> Option<std::time::Duration> {
    (outcome.delay > 0).then(|| std::time::Duration::from_nanos(outcome.delay))
}

//! What a limited response carries: the rejection itself (its status, `Retry-After` and
//! problem+json body, or the 503 when Redis cannot decide) and the rate-limit headers added
//! to every response a zone applied to ("Rate-limit headers" in docs/config.md).

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

use crate::config::RateLimitHeaders;
use crate::limit::outcome::{Applied, Banned, Outcome};
use crate::limit::zone::Zone;
use crate::limit::{Algorithm, Period, Rate, NANOS_PER_SEC};
use crate::upstream::ResponseBody;
use crate::wire::body::{Rendered, MOST_NUMBERS};

use super::text::{self, number_value, Text};
use super::Location;

mod prewritten;

pub(crate) use prewritten::Prewritten;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The answer when Redis cannot decide and a zone says `on_error = "deny"`: 503, with
/// `Retry-After: 1` and a problem+json body.
pub(super) fn unavailable() -> Response<ResponseBody> {
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let mut body = Text::<256>::new();
    body.push(r#"{"type":""#)
        .push(REDUCED_CAPACITY)
        .push(r#"","title":"Service Unavailable","status":503,"detail":"the rate limiter cannot decide right now","retry_after":1}"#)
        .push("\n");
    let mut response = Response::new(ResponseBody::full(body.to_shared_bytes()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The answer when an upstream group's gate sheds a request (its queue full, its wait
/// over, or its place taken by a higher priority): 503, `Retry-After` of the queue's
/// longest wait (whole seconds, at least 1) and a problem+json body naming the group.
pub(super) fn overloaded(upstream: &str, queue_timeout: Duration) -> Response<ResponseBody> {
    let retry_after = queue_timeout.as_secs() + u64::from(queue_timeout.subsec_nanos() > 0);
    let retry_after = retry_after.max(1);
    let mut body = Text::<256>::new();
    body.push(r#"{"type":""#)
        .push(REDUCED_CAPACITY)
        .push(r#"","title":"Service Unavailable","status":503,"detail":"the upstream has no capacity left for this request","upstream":""#)
        .push(upstream)
        .push(r#"","retry_after":"#)
        .push_u64(retry_after)
        .push("}\n");
    let mut response = Response::new(ResponseBody::full(body.to_shared_bytes()));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, number_value(retry_after));
    response
}

/// The answer to a rejected request: the location's `limit_status`, `Retry-After`
/// (whole seconds, rounded up, so never earlier than the truth) and a problem+json body.
/// Its headers go into `headers`, an empty map (a used one has its room already); where
/// the location wrote the answer beforehand ([`Form`]), only its numbers are kept
/// ([`Rendered`]) and the map stays empty.
pub(super) fn rejection(
    location: &Location,
    outcome: &Outcome,
    style: RateLimitHeaders,
    mut headers: HeaderMap,
) -> Response<ResponseBody> {
    let status = location.limit_status;
    let retry_after = retry_after_secs(outcome.retry_after);
    let rejected = outcome.rejected_by.and_then(|rule| {
        let applied = outcome.applied.iter().find(|a| a.rule == rule)?;
        Some((&location.limits.rules().get(rule)?.zone, applied))
    });
    let body = match rejected.and_then(|(_, applied)| rendered(location, outcome, style, applied, retry_after)) {
        Some(rendered) => ResponseBody::Rendered(rendered),
        None => {
            let prewritten = rejected.and_then(|(_, applied)| location.prewritten.problem(applied));
            let body = match (prewritten, rejected) {
                (Some(start), _) => problem_end(start, retry_after),
                (None, Some((zone, _))) if zone.algorithm == Algorithm::Concurrency => {
                    problem(status, Detail::InFlight(zone.max()), &zone.name, retry_after)
                }
                (None, Some((zone, applied))) => {
                    problem(status, Detail::Rate(applied.rate), &zone.name, retry_after)
                }
                (None, None) => problem(status, Detail::Unknown, "", retry_after),
            };
            // Room for every header it gets, so that adding them never regrows the map.
            headers.reserve(2 + style.count());
            headers.insert(CONTENT_TYPE, PROBLEM_JSON);
            headers.insert(RETRY_AFTER, number_value(retry_after));
            add_headers(&mut headers, location, outcome, style);
            ResponseBody::full(body)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A rejection by `rejected`'s zone as the numbers of the location's [`Form`] for it,
/// when it has one for this answer: `Retry-After`, then for each announced zone its
/// requests left and, but for a `concurrency` zone, its seconds to reset (draft), the
/// legacy three (limit, remaining, reset), and the body's `retry_after`.
fn rendered(
    location: &Location,
    outcome: &Outcome,
    style: RateLimitHeaders,
    rejected: &Applied,
    retry_after: u64,
) -> Option<Rendered> {
    let announced = announced(location, outcome);
    let form = location
        .prewritten
        .form(rejected, announced.clone().map(|(_, a)| a), style)?;
    let mut numbers = [0; MOST_NUMBERS];
    let mut count = 0;
    let mut push = |n: u64| {
        if let Some(slot) = numbers.get_mut(count) {
            *slot = n;
        }
        count += 1;
    };
    push(retry_after);
    let limited = style.count() > 0 && announced.clone().next().is_some();
    if limited && style.draft() {
        for (zone, a) in announced.clone() {
            push(a.decision.remaining);
            if zone.algorithm != Algorithm::Concurrency {
                push(reset_secs(a));
            }
        }
    }
    if limited && style.legacy() {
        legacy(announced).into_iter().flatten().for_each(&mut push);
    }
    push(retry_after);
    // The form was written for these very zones: its holes are these numbers.
    (count == form.numbers()).then(|| Rendered::new(form.clone(), numbers))
}

#[cfg(doc)]
use crate::wire::body::Form;

/// The answer to a banned key (the penalty box): the ban's status, `Retry-After` (the
/// ban's time left, whole seconds rounded up) and a problem+json body. No rate-limit
/// headers: no zone was asked.
pub(super) fn banned(location: &Location, banned: &Banned) -> Response<ResponseBody> {
    let retry_after = retry_after_secs(banned.left);
    let zone = location
        .limits
        .rules()
        .get(banned.rule)
        .map_or("", |rule| &*rule.zone.name);
    let body = problem(banned.status, Detail::Banned, zone, retry_after);
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = banned.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, number_value(retry_after));
    response
}

/// What the rejecting zone enforces, as the problem's `detail` tells it.
enum Detail {
    /// A ban for repeated rejections.
    Banned,
    /// A `concurrency` zone's most requests in flight.
    InFlight(u64),
    /// The rate the request was held to.
    Rate(Rate),
    /// No zone is known.
    Unknown,
}

/// The problem+json body (RFC 9457) of a rejection, written piece by piece.
fn problem(status: StatusCode, detail: Detail, zone: &str, retry_after: u64) -> Bytes {
    let mut body = Text::<320>::new();
    problem_start(&mut body, status, detail, zone);
    body.push_u64(retry_after).push("}\n");
    body.to_shared_bytes()
}

/// A body whose start was written beforehand: one copy, the number and the end.
fn problem_end(start: &[u8], retry_after: u64) -> Bytes {
    let mut end = Text::<24>::new();
    end.push_u64(retry_after).push("}\n");
    text::shared(&[start, end.as_bytes()])
}

/// A rejection's problem+json body up to its `retry_after` number.
fn problem_start<const N: usize>(
    body: &mut Text<N>,
    status: StatusCode,
    detail: Detail,
    zone: &str,
) {
    body.push(r#"{"type":""#)
        .push(QUOTA_EXCEEDED)
        .push(r#"","title":""#)
        .push(status.canonical_reason().unwrap_or("Too Many Requests"))
        .push(r#"","status":"#)
        .push_u64(u64::from(status.as_u16()))
        .push(r#","detail":""#);
    match detail {
        Detail::InFlight(max) => {
            body.push("more than ")
                .push_u64(max)
                .push(" requests in flight for this client");
        }
        Detail::Rate(rate) => {
            body.push("rate limit of ");
            push_rate(body, rate);
            body.push(" exceeded");
        }
        Detail::Unknown => {
            body.push("rate limit exceeded");
        }
        Detail::Banned => {
            body.push("banned for exceeding the rate limit repeatedly");
        }
    }
    body.push(r#"","zone":""#)
        .push(zone)
        .push(r#"","retry_after":"#);
}

/// `rate` as its `Display` writes it (`10r/s`), without the formatting machinery.
fn push_rate<const N: usize>(text: &mut Text<N>, rate: Rate) {
    let unit = match rate.period {
        Period::Second => "r/s",
        Period::Minute => "r/m",
        Period::Hour => "r/h",
        Period::Day => "r/d",
    };
    text.push_u64(rate.count.get()).push(unit);
}

/// Seconds for `Retry-After`: rounded up, at least 1 (0 would invite an instant retry,
/// and an in-flight count has no known release time).
fn retry_after_secs(nanos: u64) -> u64 {
    nanos.div_ceil(NANOS_PER_SEC).max(1)
}

/// The enforcing zones that applied, with their answers (dry-run zones only observe, so
/// they are not announced).
fn announced<'a>(
    location: &'a Location,
    outcome: &'a Outcome,
) -> impl Iterator<Item = (&'a Zone, &'a Applied)> + Clone {
    outcome
        .applied
        .iter()
        .filter(|a| !a.dry_run)
        .filter_map(|a| Some((&*location.limits.rules().get(a.rule)?.zone, a)))
}

/// Adds the rate-limit headers for every enforcing zone that applied.
pub(super) fn add_headers(
    headers: &mut HeaderMap,
    location: &Location,
    outcome: &Outcome,
    style: RateLimitHeaders,
) {
    let announced = announced(location, outcome);
    if style.count() == 0 || announced.clone().next().is_none() {
        return;
    }
    // An upstream response's map has room for the two draft headers (`upstream::h1`'s
    // decoder leaves it); when more are added, the map grows once, here, to fit them all.
    headers.reserve(style.count());
    if style.draft() {
        let policy = match location
            .prewritten
            .policy(announced.clone().map(|(_, a)| a))
        {
            Some(policy) => Some(policy.clone()),
            None => {
                let mut policy = Text::<96>::new();
                for (zone, a) in announced.clone() {
                    write_policy(&mut policy, zone, a.rate);
                }
                policy.to_shared_value()
            }
        };
        let mut state = Text::<96>::new();
        write_state(&mut state, announced.clone());
        // Zone names and numbers are always valid values.
        if let (Some(policy), Some(state)) = (policy, state.to_shared_value()) {
            headers.insert(POLICY, policy);
            headers.insert(RATELIMIT, state);
        }
    }
    if style.legacy() {
        if let Some([limit, remaining, reset]) = legacy(announced) {
            headers.insert(X_LIMIT, number_value(limit));
            headers.insert(X_REMAINING, number_value(remaining));
            headers.insert(X_RESET, number_value(reset));
        }
    }
}

/// The `RateLimit` value: each announced zone's requests left and, but for a
/// `concurrency` zone, seconds until its state for this key has drained.
fn write_state<'a, const N: usize>(
    state: &mut Text<N>,
    announced: impl Iterator<Item = (&'a Zone, &'a Applied)>,
) {
    for (i, (zone, a)) in announced.enumerate() {
        if i > 0 {
            state.push(", ");
        }
        state.push("\"").push(&zone.name).push("\"");
        state.push(";r=").push_u64(a.decision.remaining);
        if zone.algorithm != Algorithm::Concurrency {
            state.push(";t=").push_u64(reset_secs(a));
        }
    }
}

/// `X-RateLimit-Limit`, `-Remaining` and `-Reset` of the most restrictive announced
/// zone: the fewest requests left, then the longest wait.
fn legacy<'a>(announced: impl Iterator<Item = (&'a Zone, &'a Applied)>) -> Option<[u64; 3]> {
    let (zone, a) = announced
        .min_by_key(|(_, a)| (a.decision.remaining, std::cmp::Reverse(a.decision.reset)))?;
    let limit = match zone.algorithm {
        Algorithm::Concurrency => zone.max(),
        _ => a.rate.count.get(),
    };
    Some([limit, a.decision.remaining, reset_secs(a)])
}

/// Appends one zone's item of `RateLimit-Policy` (a rate zone's `q` and `w`, a
/// `concurrency` zone's `q`) to `policy`.
fn write_policy<const N: usize>(policy: &mut Text<N>, zone: &Zone, rate: Rate) {
    if !policy.is_empty() {
        policy.push(", ");
    }
    policy.push("\"").push(&zone.name).push("\"");
    if zone.algorithm == Algorithm::Concurrency {
        policy.push(";q=").push_u64(zone.max());
    } else {
        policy
            .push(";q=")
            .push_u64(rate.count.get())
            .push(";w=")
            .push_u64(rate.period.seconds());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overloaded_is_a_503_retrying_after_the_longest_wait_rounded_up() {
        for (wait, retry_after) in [(1500, "2"), (1000, "1"), (200, "1"), (30_000, "30")] {
            let response = overloaded("app-1", Duration::from_millis(wait));
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(response.headers()[RETRY_AFTER], retry_after);
            assert_eq!(response.headers()[CONTENT_TYPE], PROBLEM_JSON);
        }
        let body = match overloaded("app-1", Duration::from_secs(1)).into_body() {
            ResponseBody::Full(Some(body)) => body,
            _ => panic!("a whole body"),
        };
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(json["type"], REDUCED_CAPACITY);
        assert_eq!(json["status"], 503);
        assert_eq!(json["upstream"], "app-1");
        assert_eq!(json["retry_after"], 1);
    }

    /// The body as `format!` wrote it before it was written piece by piece.
    fn formatted(status: StatusCode, detail: &str, zone: &str, retry_after: u64) -> String {
        format!(
            r#"{{"type":"{QUOTA_EXCEEDED}","title":"{}","status":{},"detail":"{detail}","zone":"{zone}","retry_after":{retry_after}}}"#,
            status.canonical_reason().unwrap_or("Too Many Requests"),
            status.as_u16(),
        ) + "\n"
    }

    #[test]
    fn problem_body_reads_as_the_formatted_one() {
        let rate = |count, period| Rate::new(count, period).expect("a rate");
        let cases = [
            (
                StatusCode::TOO_MANY_REQUESTS,
                Detail::Rate(rate(1, Period::Second)),
                "per_ip",
                1,
                "rate limit of 1r/s exceeded",
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Detail::Rate(rate(120, Period::Minute)),
                "k",
                60,
                "rate limit of 120r/m exceeded",
            ),
            (
                StatusCode::TOO_MANY_REQUESTS,
                Detail::InFlight(10),
                "conns",
                1,
                "more than 10 requests in flight for this client",
            ),
            (
                StatusCode::from_u16(599).expect("a status"),
                Detail::Unknown,
                "",
                86_400,
                "rate limit exceeded",
            ),
        ];
        for (status, detail, zone, retry_after, text) in cases {
            let body = problem(status, detail, zone, retry_after);
            assert_eq!(body, formatted(status, text, zone, retry_after).as_bytes());
        }
    }

    #[test]
    fn rates_are_written_as_display_writes_them() {
        for period in [Period::Second, Period::Minute, Period::Hour, Period::Day] {
            for count in [1, 9, 10, 1_000_000, u64::MAX] {
                let rate = Rate::new(count, period).expect("a rate");
                let mut text = Text::<64>::new();
                push_rate(&mut text, rate);
                assert_eq!(text.as_bytes(), rate.to_string().as_bytes());
            }
        }
    }
}

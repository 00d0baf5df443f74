//! The access and limit phases (docs/architecture.md, the request's path) and what a limited response
//! carries (§5.6): the rejection itself (status, `Retry-After`, problem+json) and the
//! rate-limit headers added to every response a zone applied to.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};

use crate::limit::decision::{self, Applied, Outcome, Rule, Status};
use crate::limit::key::RequestView;
use crate::limit::redis::{redis_key, Backend, OnError};
use crate::limit::{Algorithm, Decision, Params, Period, Rate, Verdict};
use crate::metrics;
use crate::upstream::body::ResponseBody;

use super::text::{number_value, Text};
use super::Location;

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";
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

impl HeaderStyle {
    /// How many headers a limited response gets.
    fn count(self) -> usize {
        2 * usize::from(self.draft) + 3 * usize::from(self.legacy)
    }
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

/// Applies the location's limits, and counts each zone's decision (`/metrics`) and
/// rejected key (`/status`) on the worker's own cells. `path` is the normalized path;
/// `at` is the request's arrival and its worker.
pub(super) fn decide<B>(
    location: &Location,
    req: &Request<B>,
    client: IpAddr,
    path: &[u8],
    plan: Option<usize>,
    (now, worker): (Instant, usize),
) -> Outcome {
    let view = view_of(req, client, path);
    let outcome = decision::decide(&location.rules, &view, plan, location.cost, now);
    count(location, &outcome, &view, (now, worker));
    outcome
}

/// The request as key templates read it.
fn view_of<'r, B>(req: &'r Request<B>, client: IpAddr, path: &'r [u8]) -> RequestView<'r> {
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(http::header::HOST)?.to_str().ok());
    RequestView {
        client,
        method: req.method(),
        path,
        query: req.uri().query(),
        headers: req.headers(),
        host,
    }
}

/// Counts each zone's decision, and each rejected key in the zone's sketch.
fn count(
    location: &Location,
    outcome: &Outcome,
    view: &RequestView<'_>,
    (now, worker): (Instant, usize),
) {
    for applied in outcome.applied.iter() {
        let (Some(stats), Some(rule)) = (
            location.zone_stats.get(applied.rule),
            location.rules.get(applied.rule),
        ) else {
            continue;
        };
        stats.decisions.get(worker).add(metric_outcome(applied));
        if !applied.decision.admitted() {
            // The key again, for the sketch: only rejections pay for it.
            KEY.with(|key| {
                // Only re-entry could hold it; the sketch then misses one rejection.
                if let Ok(mut key) = key.try_borrow_mut() {
                    key.clear();
                    if rule.zone.template.render_append(view, &mut key) {
                        stats.limited(worker, now, &key);
                    }
                }
            });
        }
    }
}

/// The local zones of a location whose `limit` list also names Redis zones.
pub struct SharedRules {
    pub local: Vec<Rule>,
    /// `local[i]` is item `local_index[i]` of the location's list.
    pub local_index: Vec<usize>,
}

impl SharedRules {
    /// `None` when no zone of `rules` is kept in Redis.
    pub fn of(rules: &[Rule]) -> Option<SharedRules> {
        if rules.iter().all(|rule| rule.zone.redis.is_none()) {
            return None;
        }
        let (local, local_index) = rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.zone.redis.is_none())
            .map(|(index, rule)| (rule.clone(), index))
            .unzip();
        Some(SharedRules { local, local_index })
    }
}

/// [`decide`] for a location with Redis zones ("Zones in Redis" in docs/config.md). The Redis zones go first, in
/// list order, each decided and charged by one script call; a rejection ends it. Then
/// the local zones, at once as [`decide`] does. A request that a later zone rejects
/// gives back what the Redis zones before it charged. A key Redis rejected is rejected
/// here, without asking Redis, until it may pass. When Redis fails, the zone follows its
/// `on_error`.
pub(super) async fn decide_shared<B>(
    location: &Location,
    shared: &SharedRules,
    redis: &Arc<Backend>,
    req: &Request<B>,
    (client, path): (IpAddr, &[u8]),
    plan: Option<usize>,
    (now, worker): (Instant, usize),
) -> Outcome {
    let view = view_of(req, client, path);
    let mut outcome = Outcome::default();
    let mut status = None;
    let mut charged = Vec::new();
    let mut rejected = false;
    for (index, rule) in location.rules.iter().enumerate() {
        let (zone, Some(settings)) = (&rule.zone, rule.zone.redis) else {
            continue;
        };
        let mut key = Vec::new();
        if !zone.template.render_append(&view, &mut key) {
            continue;
        }
        let params = Params {
            rate: zone.rate_for(plan),
            burst: rule.burst,
            delay: rule.delay,
            cost: location.cost,
            max: zone.max(),
        };
        let zone_now = zone.nanos(now);
        let decision = match zone.rejections.remaining(&key, zone_now) {
            Some(left) => Decision {
                verdict: Verdict::Reject { retry_after: left },
                remaining: 0,
                reset: left,
            },
            None => {
                let redis_key = redis_key(&zone.name, &key);
                let algorithm = zone.algorithm;
                match redis
                    .decide((now, worker), algorithm, &redis_key, &params)
                    .await
                {
                    Ok(decision) => {
                        match decision.verdict {
                            Verdict::Reject { retry_after } if retry_after > 0 => {
                                let until = zone_now.saturating_add(retry_after);
                                zone.rejections.remember(&key, until, zone_now);
                            }
                            Verdict::Reject { .. } => {}
                            _ => charged.push((algorithm, redis_key, params)),
                        }
                        decision
                    }
                    Err(failure) => {
                        if let Some(stats) = location.zone_stats.get(index) {
                            stats.redis_failed(worker, failure);
                        }
                        match settings.on_error {
                            OnError::Allow => Decision {
                                verdict: Verdict::Pass,
                                remaining: rule.burst,
                                reset: 0,
                            },
                            OnError::Deny => {
                                outcome.unavailable = !rule.dry_run;
                                Decision {
                                    verdict: Verdict::Reject {
                                        retry_after: NANOS_PER_SEC,
                                    },
                                    remaining: 0,
                                    reset: 0,
                                }
                            }
                            OnError::Local => {
                                let alone = Params {
                                    rate: settings.fallback_rate(params.rate),
                                    ..params
                                };
                                zone.decide_alone(&key, now, &alone)
                            }
                        }
                    }
                }
            }
        };
        apply(
            &mut outcome,
            &mut status,
            index,
            rule.dry_run,
            params.rate,
            decision,
        );
        if outcome.rejected_by.is_some() || outcome.unavailable {
            rejected = true;
            break;
        }
    }
    if !rejected && !shared.local.is_empty() {
        let local = decision::decide(&shared.local, &view, plan, location.cost, now);
        rejected = local.rejected();
        for applied in local.applied.iter() {
            let index = shared.local_index.get(applied.rule).copied().unwrap_or(0);
            apply(
                &mut outcome,
                &mut status,
                index,
                applied.dry_run,
                applied.rate,
                applied.decision,
            );
        }
        outcome.in_flight = local.in_flight;
    }
    if rejected && !charged.is_empty() {
        refund(redis, (now, worker), charged);
    }
    outcome.status = status;
    count(location, &outcome, &view, (now, worker));
    outcome
}

/// Adds one zone's decision to the request's outcome.
fn apply(
    outcome: &mut Outcome,
    status: &mut Option<Status>,
    index: usize,
    dry_run: bool,
    rate: Rate,
    decision: Decision,
) {
    *status = Some(
        status
            .map_or(Status::Passed, |s| s)
            .max(Status::of(decision.verdict, dry_run)),
    );
    match (decision.verdict, dry_run) {
        (Verdict::Delay(ns), false) => outcome.delay = outcome.delay.max(ns),
        (Verdict::Reject { retry_after }, false) => {
            outcome.retry_after = outcome.retry_after.max(retry_after);
            let first = outcome.rejected_by.map_or(index, |r| r.min(index));
            outcome.rejected_by = Some(first);
        }
        _ => {}
    }
    outcome.applied.push(Applied {
        rule: index,
        rate,
        decision,
        dry_run,
    });
}

/// Gives back the Redis charges of a request a later zone rejected, in the background:
/// the answer does not wait for it.
fn refund(
    redis: &Arc<Backend>,
    (now, worker): (Instant, usize),
    charged: Vec<(Algorithm, Vec<u8>, Params)>,
) {
    let redis = Arc::clone(redis);
    tokio::spawn(async move {
        for (algorithm, key, params) in charged {
            if let Err(failure) = redis.refund((now, worker), algorithm, &key, &params).await {
                tracing::debug!(failure = failure.label(), "Redis refund failed");
            }
        }
    });
}

/// The answer when Redis cannot decide and a zone says `on_error = "deny"`: 503, with
/// `Retry-After: 1` and a problem+json body.
pub(super) fn unavailable() -> Response<ResponseBody> {
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let mut body = Text::<256>::new();
    body.push(r#"{"type":""#)
        .push(REDUCED_CAPACITY)
        .push(r#"","title":"Service Unavailable","status":503,"detail":"the rate limiter cannot decide right now","retry_after":1}"#)
        .push("\n");
    let mut response = Response::new(ResponseBody::full(body.to_bytes()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

thread_local! {
    /// A rejected request's key, rendered again for the most-limited sketch.
    static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn metric_outcome(applied: &Applied) -> metrics::Outcome {
    use metrics::Outcome as O;
    match (applied.decision.verdict, applied.dry_run) {
        (Verdict::Pass, false) => O::Passed,
        (Verdict::Delay(_), false) => O::Delayed,
        (Verdict::Reject { .. }, false) => O::Rejected,
        (Verdict::Pass, true) => O::PassedDryRun,
        (Verdict::Delay(_), true) => O::DelayedDryRun,
        (Verdict::Reject { .. }, true) => O::RejectedDryRun,
    }
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
        Some((zone, _)) if zone.algorithm == Algorithm::Concurrency => {
            (&*zone.name, Detail::InFlight(zone.max()))
        }
        Some((zone, applied)) => (&*zone.name, Detail::Rate(applied.rate)),
        None => ("", Detail::Unknown),
    };
    let body = problem(status, detail, zone, retry_after);
    // Sized for every header it gets, so that adding them never regrows the map.
    let mut headers = HeaderMap::with_capacity(2 + style.count());
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    headers.insert(RETRY_AFTER, number_value(retry_after));
    add_headers(&mut headers, location, outcome, style);
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// What the rejecting zone enforces, as the problem's `detail` tells it.
enum Detail {
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
            push_rate(&mut body, rate);
            body.push(" exceeded");
        }
        Detail::Unknown => {
            body.push("rate limit exceeded");
        }
    }
    body.push(r#"","zone":""#)
        .push(zone)
        .push(r#"","retry_after":"#)
        .push_u64(retry_after)
        .push("}\n");
    body.to_bytes()
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

/// Adds the rate-limit headers for every enforcing zone that applied (dry-run zones
/// only observe, so they are not announced).
pub(super) fn add_headers(
    headers: &mut HeaderMap,
    location: &Location,
    outcome: &Outcome,
    style: HeaderStyle,
) {
    let announced = || {
        outcome
            .applied
            .iter()
            .filter(|a| !a.dry_run)
            .filter_map(|a| Some((&location.rules.get(a.rule)?.zone, a)))
    };
    if style.count() == 0 || announced().next().is_none() {
        return;
    }
    // An upstream response's map has room for the two draft headers (`upstream::h1`'s
    // decoder leaves it); when more are added, the map grows once, here, to fit them all.
    headers.reserve(style.count());
    if style.draft {
        let (mut policy, mut state) = (Text::<96>::new(), Text::<96>::new());
        for (zone, a) in announced() {
            if !policy.is_empty() {
                policy.push(", ");
                state.push(", ");
            }
            for text in [&mut policy, &mut state] {
                text.push("\"").push(&zone.name).push("\"");
            }
            if zone.algorithm == Algorithm::Concurrency {
                policy.push(";q=").push_u64(zone.max());
                state.push(";r=").push_u64(a.decision.remaining);
            } else {
                policy
                    .push(";q=")
                    .push_u64(a.rate.count.get())
                    .push(";w=")
                    .push_u64(a.rate.period.seconds());
                state
                    .push(";r=")
                    .push_u64(a.decision.remaining)
                    .push(";t=")
                    .push_u64(reset_secs(a));
            }
        }
        // Zone names and numbers are always valid values.
        if let (Some(policy), Some(state)) = (policy.to_value(), state.to_value()) {
            headers.insert(POLICY, policy);
            headers.insert(RATELIMIT, state);
        }
    }
    if style.legacy {
        // The most restrictive zone: the fewest requests left, then the longest wait.
        let fewest = announced()
            .min_by_key(|(_, a)| (a.decision.remaining, std::cmp::Reverse(a.decision.reset)));
        if let Some((zone, a)) = fewest {
            let limit = match zone.algorithm {
                Algorithm::Concurrency => zone.max(),
                _ => a.rate.count.get(),
            };
            headers.insert(X_LIMIT, number_value(limit));
            headers.insert(X_REMAINING, number_value(a.decision.remaining));
            headers.insert(X_RESET, number_value(reset_secs(a)));
        }
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

//! The limit phase: the request's plan and keys, the location's [`Policy`] asked once,
//! and each zone's answer counted for `/metrics` and `/status`.

use std::net::IpAddr;
use std::time::Instant;

use http::{HeaderMap, HeaderName, Request, Response};

use crate::access;
use crate::admission::penalty;
use crate::config::LimitAction;
use crate::limit::keys::Keys;
use crate::limit::outcome::{Applied, Banned, Outcome};
use crate::limit::{Arrival, Verdict};
use crate::metrics;
use crate::upstream::ResponseBody;
use crate::wire::body::ClientBody;
use crate::vars;

use super::tarpit::{self, Acted};
use super::{limit_response, logged, own, Conn, Location, Pipeline};

/// What a refused request gets ([`Pipeline::refused`]). Returned and taken apart at
/// once, never kept: boxing the answer would cost a 429 an allocation for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Refused {
    /// No answer: the connection closes (HTTP/1.x) or the stream is reset (HTTP/2).
    Unanswered,
    Answer(Response<ResponseBody>),
}

/// `[api_keys]`, ready to use: API key → plan id, and each plan's `priority`.
pub(crate) struct ApiKeys {
    pub header: HeaderName,
    pub plans: std::collections::HashMap<Box<[u8]>, usize>,
    /// By plan id; a plan not listed (and a request with no plan) has priority 0.
    pub priorities: Vec<u8>,
}

impl ApiKeys {
    pub(crate) fn plan<B>(&self, req: &Request<B>) -> Option<usize> {
        self.plan_of(req.headers())
    }

    fn plan_of(&self, headers: &http::HeaderMap) -> Option<usize> {
        let key = headers.get(&self.header)?;
        self.plans.get(key.as_bytes()).copied()
    }

    /// Who is shed last when an upstream's gate is full: the request's plan's priority.
    pub(crate) fn priority(&self, headers: &http::HeaderMap) -> u8 {
        self.plan_of(headers)
            .and_then(|plan| self.priorities.get(plan).copied())
            .unwrap_or(0)
    }
}

impl Pipeline {
    /// The request as the location's zones see it; `None` when none applies (no zone,
    /// or an exempt client). `path` is the normalized path, `now` the request's arrival.
    pub(super) fn arrival<'r, B>(
        &self,
        location: &'r Location,
        req: &'r mut Request<B>,
        client: IpAddr,
        path: &'r [u8],
        now: Instant,
        conn: &Conn,
    ) -> Option<Arrival> {
        if location.limits.is_empty() || access::listed(client, &self.exempt) {
            return None;
        }
        if location.check_first {
            super::auth::check_first(location, req, now);
        }
        let request = view_of(req, conn, client, path, location);
        Some(Arrival {
            keys: Keys::render(location.limits.rules(), &request, conn.key_buffer()),
            plan: self.api_keys.as_ref().and_then(|keys| keys.plan(req)),
            now,
            worker: conn.worker,
        })
    }

    /// Every zone of the location for `arrival`. A location whose zones are decided at
    /// once ([`Policy::at_once`]) goes through [`Pipeline::limit_at_once`] instead.
    ///
    /// [`Policy::at_once`]: crate::admission::Policy::at_once
    pub(super) async fn limit(&self, location: &Location, arrival: &Arrival) -> Outcome {
        let outcome = if location.limits.has_bans() {
            // Boxed: locations without `ban` keep the smaller future.
            Box::pin(penalty::decide(&location.limits, arrival)).await
        } else {
            location.limits.decide(arrival).await
        };
        count(location, &outcome, arrival);
        outcome
    }

    /// [`Pipeline::limit`] for a location whose zones are decided at once: no future,
    /// through which the outcome would be moved.
    pub(super) fn limit_at_once(&self, location: &Location, arrival: &Arrival) -> Outcome {
        let outcome = location.limits.decide_at_once(arrival);
        count(location, &outcome, arrival);
        outcome
    }

    /// What a request the limits refused gets (`None`: they did not): by `limit_action`,
    /// nothing (closed unanswered), or its refusal — at once, or after the tarpit's hold —
    /// with the location's own headers. `asked` is the request, its connection, client and
    /// path.
    pub(super) async fn refused(
        &self,
        location: &Location,
        limited: &mut Outcome,
        asked: (&mut Request<ClientBody>, &Conn, IpAddr, &[u8]),
        log: &logged::Pending<'_>,
    ) -> Option<Refused> {
        let (req, conn, client, path) = asked;
        let acted = match location.limit_action {
            LimitAction::Answer => Acted::Answer,
            _ => self.act(location, limited, conn).await,
        };
        if acted == Acted::Close {
            return Some(Refused::Unanswered);
        }
        // A rejection takes the request's header map for its own, unless its header
        // values read the request.
        let mut spare = HeaderMap::new();
        let scratch = match location.headers.own_per_request() {
            true => &mut spare,
            false => req.headers_mut(),
        };
        let mut refusal = self.refusal(location, limited, scratch)?;
        let asked = own::Asked::new(req, conn, client, path);
        own::add(own::Place::location(location), &mut refusal, &asked, log);
        if acted == Acted::Held {
            tarpit::closing(&mut refusal, req.version());
        }
        Some(Refused::Answer(refusal))
    }

    /// The answer when the limits refuse the request: 503 when Redis could not decide
    /// (`on_error = "deny"`), else the location's rejection, whose headers go in the
    /// request's map (`request_headers`, emptied: the request needs it no more).
    pub(super) fn refusal(
        &self,
        location: &Location,
        outcome: &Outcome,
        request_headers: &mut HeaderMap,
    ) -> Option<Response<ResponseBody>> {
        if let Some(banned) = &outcome.banned {
            return Some(limit_response::banned(location, banned));
        }
        if outcome.unavailable {
            return Some(limit_response::unavailable());
        }
        outcome.rejected().then(|| {
            let mut headers = std::mem::take(request_headers);
            headers.clear();
            limit_response::rejection(location, outcome, self.ratelimit_headers, headers)
        })
    }
}

/// The request as `location`'s key templates read it; its host only if one reads it
/// (`reads_host`): looking it up costs a header-map search.
fn view_of<'r, B>(
    req: &'r Request<B>,
    conn: &'r Conn,
    client: IpAddr,
    path: &'r [u8],
    location: &'r Location,
) -> vars::Request<'r> {
    let host = (location.limits.reads_host())
        .then(|| super::host_of(req))
        .flatten();
    super::vars_of(req, conn, client, path, host, &location.server_name)
}

/// Counts each zone's decision, each rejected key in the zone's sketch, and each Redis
/// failure, on the worker's own cells.
fn count(location: &Location, outcome: &Outcome, arrival: &Arrival) {
    let worker = arrival.worker;
    for &(rule, failure) in &outcome.redis_failures {
        if let Some(stats) = location.zone_stats.get(rule) {
            stats.redis_failed(worker, failure);
        }
    }
    if let Some(banned) = &outcome.banned {
        count_banned(location, banned, worker);
        return;
    }
    for applied in outcome.applied.iter() {
        let Some(stats) = location.zone_stats.get(applied.rule) else {
            continue;
        };
        stats.decisions.get(worker).add(metric_outcome(applied));
        if !applied.decision.admitted() {
            if let Some(key) = arrival.keys.get(applied.rule) {
                stats.limited(worker, arrival.now, key);
            }
        }
    }
}

/// A banned request counts once, as `banned` in the zone whose ban answered it.
fn count_banned(location: &Location, banned: &Banned, worker: usize) {
    if let Some(stats) = location.zone_stats.get(banned.rule) {
        stats.decisions.get(worker).add(metrics::Answer::Banned);
    }
}

fn metric_outcome(applied: &Applied) -> metrics::Answer {
    use metrics::Answer as O;
    if applied.soft {
        return O::Soft;
    }
    match (applied.decision.verdict, applied.dry_run) {
        (Verdict::Pass, false) => O::Passed,
        (Verdict::Delay(_), false) => O::Delayed,
        (Verdict::Reject { .. }, false) => O::Rejected,
        (Verdict::Pass, true) => O::PassedDryRun,
        (Verdict::Delay(_), true) => O::DelayedDryRun,
        (Verdict::Reject { .. }, true) => O::RejectedDryRun,
    }
}

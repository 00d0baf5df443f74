//! What deciding a request over a location's zones tells: each zone's answer, the
//! request's verdict over all of them, and the in-flight counts it holds.

use std::sync::Arc;
use std::time::Duration;

use super::bans::Ban;
use super::remote::Failure;
use super::settle::Pending;
use super::zone::Zone;
use super::{Decision, Rate, Verdict};

/// nginx's `$limit_req_status`, for the access log: the most telling outcome of the
/// request over its zones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Passed,
    /// Passed on a soft share (`soft`): over the limit, let through and marked.
    Soft,
    DelayedDryRun,
    RejectedDryRun,
    Delayed,
    Rejected,
    /// Answered by a ban (the penalty box) before any zone was asked.
    Banned,
}

impl Status {
    /// One zone's outcome for the log.
    pub fn of(verdict: Verdict, dry_run: bool) -> Status {
        match (verdict, dry_run) {
            (Verdict::Pass, _) => Status::Passed,
            (Verdict::Delay(_), false) => Status::Delayed,
            (Verdict::Delay(_), true) => Status::DelayedDryRun,
            (Verdict::Reject { .. }, false) => Status::Rejected,
            (Verdict::Reject { .. }, true) => Status::RejectedDryRun,
        }
    }

    /// One zone's outcome for the log, a soft admission included.
    pub fn of_applied(applied: &Applied) -> Status {
        match applied.soft {
            true => Status::Soft,
            false => Status::of(applied.decision.verdict, applied.dry_run),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::Soft => "SOFT",
            Status::Delayed => "DELAYED",
            Status::Rejected => "REJECTED",
            Status::DelayedDryRun => "DELAYED_DRY_RUN",
            Status::RejectedDryRun => "REJECTED_DRY_RUN",
            Status::Banned => "BANNED",
        }
    }
}

/// What one zone said about a request: what the rate-limit headers report.
#[derive(Clone, Copy, Debug)]
pub struct Applied {
    /// Index of the rule in the location's list.
    pub rule: usize,
    /// The rate this request was held to (its plan's, or the zone's).
    pub rate: Rate,
    pub decision: Decision,
    pub dry_run: bool,
    /// Admitted on the zone's soft lane (`soft`), its base limit having rejected it: the
    /// decision is a pass with nothing `remaining` (the header's `r=0`).
    pub soft: bool,
}

/// The zones' answers, in list order. The first is kept inline: most locations list one
/// zone, and then deciding allocates nothing.
#[derive(Clone, Default)]
pub struct AppliedList {
    first: Option<Applied>,
    rest: Vec<Applied>,
}

impl AppliedList {
    pub fn push(&mut self, applied: Applied) {
        match self.first {
            None => self.first = Some(applied),
            Some(_) => self.rest.push(applied),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Applied> + Clone {
        self.first.iter().chain(self.rest.iter())
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Applied> {
        self.first.iter_mut().chain(self.rest.iter_mut())
    }

    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

/// The decision over every zone of a location.
#[derive(Default)]
pub struct Outcome {
    /// `None` when no zone applied (every key empty).
    pub status: Option<Status>,
    /// Nanoseconds to wait before going on (the largest delay of the zones).
    pub delay: u64,
    /// When rejected: nanoseconds until every rejecting zone would admit it (0: unknown).
    pub retry_after: u64,
    /// The rule that rejected it (the first in the list).
    pub rejected_by: Option<usize>,
    /// Every zone whose key was not empty, in list order.
    pub applied: AppliedList,
    /// In-flight counts taken in `concurrency` zones; dropping them gives them back.
    pub in_flight: Vec<InFlight>,
    /// A Redis zone with `on_error = "deny"` could not decide: answer 503.
    pub unavailable: bool,
    /// Redis zones Redis did not answer for (rule index, why), for the error counts.
    pub redis_failures: Vec<(usize, Failure)>,
    /// Charges the answer settles (`count_status`, `cost_from`): see
    /// `admission::Policy::settle`.
    pub settle: Vec<Pending>,
    /// The key is banned (`admission::penalty`): answer with the ban, not the rejection.
    pub banned: Option<Banned>,
}

/// A banned key's answer: which item's ban, how long it has left, with what status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Banned {
    /// Index of the rule in the location's list.
    pub rule: usize,
    /// Nanoseconds the ban has left.
    pub left: u64,
    pub status: http::StatusCode,
}

impl Banned {
    /// The answer of item `rule`'s `ban` with `left` to run.
    pub fn of(rule: usize, ban: &Ban, left: Duration) -> Banned {
        Banned {
            rule,
            left: u64::try_from(left.as_nanos()).unwrap_or(u64::MAX),
            status: ban.status,
        }
    }
}

impl Outcome {
    pub fn rejected(&self) -> bool {
        matches!(self.status, Some(Status::Rejected | Status::Banned))
    }

    /// The outcome of a banned request: no zone was asked.
    pub fn banned(banned: Banned) -> Outcome {
        Outcome {
            status: Some(Status::Banned),
            retry_after: banned.left,
            banned: Some(banned),
            ..Outcome::default()
        }
    }

    /// Adds one zone's answer (rule `applied.rule` of the list): the status is the most
    /// telling so far, the delay and `retry_after` the longest, `rejected_by` the first
    /// rule in the list that rejected. Dry-run zones change only the status.
    pub fn add(&mut self, applied: Applied) {
        let status = Status::of_applied(&applied);
        self.status = Some(self.status.map_or(status, |s| s.max(status)));
        match (applied.decision.verdict, applied.dry_run) {
            (Verdict::Delay(ns), false) => self.delay = self.delay.max(ns),
            (Verdict::Reject { retry_after }, false) => {
                self.retry_after = self.retry_after.max(retry_after);
                let first = self
                    .rejected_by
                    .map_or(applied.rule, |r| r.min(applied.rule));
                self.rejected_by = Some(first);
            }
            _ => {}
        }
        self.applied.push(applied);
    }
}

/// A request in flight in a `concurrency` zone: released when dropped, which is when the
/// response body has ended or the client has gone away.
pub struct InFlight {
    pub(super) zone: Arc<Zone>,
    pub(super) hash: u64,
    pub(super) key: Box<[u8]>,
    pub(super) cost: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.zone.release(self.hash, &self.key, self.cost);
    }
}

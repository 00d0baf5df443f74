//! A Redis zone's soft lane (`soft` on a limit item, `limit::soft`): when Redis (or the
//! rejection memory) rejects a request of an item with a soft share, one more script
//! call decides it on the lane's own key (`redis::soft_key`), with the lane's params.
//! Only a would-be rejection pays for that call; a key over both its limit and its lane
//! is remembered, so a flood from it costs Redis nothing until either may pass.
//!
//! The call is made once the zone's own decision is over, so a lease fetch of the key
//! has ended and the requests waiting on it are not held up. A lane never leases, and
//! reads no ban: a banned key never gets here.

use super::ZoneCall;
use crate::limit::outcome::Outcome;
use crate::limit::remote::{Call, Failure};
use crate::limit::soft::{self, soft_pass, still_rejected, Share};
use crate::limit::{Arrival, Decision, Verdict};
use crate::shared::Reply;

/// What the lane said of a rejected request.
pub(super) enum Lane {
    /// It covered the request: this call charged it (a refund or a settlement uses it).
    Covered(Decision, Call),
    /// It did not: the rejection, with the sooner of the two retries.
    Rejected(Decision),
    /// Redis did not answer the lane's call: the zone's rejection stands.
    Failed(Decision, Failure),
}

impl Lane {
    /// The zone's decision and whether it is soft; a covering call joins `charged`, a
    /// failure the outcome's Redis failures.
    pub(super) fn into_outcome(
        self,
        outcome: &mut Outcome,
        charged: &mut Vec<(usize, Call)>,
        index: usize,
    ) -> (Decision, bool) {
        match self {
            Lane::Covered(decision, call) => {
                charged.push((index, call));
                (decision, true)
            }
            Lane::Rejected(decision) => (decision, false),
            Lane::Failed(decision, failure) => {
                outcome.redis_failures.push((index, failure));
                (decision, false)
            }
        }
    }
}

impl ZoneCall<'_> {
    /// Whether the zone's `decision` is a rejection its lane may cover: decided (by Redis
    /// or its memory), not a ban, not `on_error`'s.
    pub(super) fn lane_may_cover(&self, decision: &Decision, outcome: &Outcome) -> bool {
        !decision.admitted()
            && !self.rule.dry_run
            && outcome.banned.is_none()
            && !outcome.unavailable
            && !outcome.redis_failures.iter().any(|(r, _)| *r == self.index)
    }

    /// The lane's answer for a request the zone rejected (`rejected`).
    pub(super) async fn soft(
        &self,
        share: Share,
        arrival: &Arrival,
        rejected: Decision,
    ) -> Lane {
        let zone = &self.rule.zone;
        let zone_now = zone.nanos(arrival.now);
        let rejections = zone.lane_rejections();
        if let Some(left) = rejections.and_then(|r| r.remaining(self.key, zone_now)) {
            let lane = Decision {
                verdict: Verdict::Reject { retry_after: left },
                remaining: 0,
                reset: left,
            };
            return Lane::Rejected(still_rejected(&rejected, Some(lane)));
        }
        let params = soft::lane_params(&self.params, share, zone.algorithm);
        let call = self.remote.lane_call(self.key, params);
        let answer = self.remote.decide(&call, arrival.now, arrival.worker);
        match answer.await {
            Ok(Reply { decision, .. }) if decision.admitted() => {
                Lane::Covered(soft_pass(&rejected), call)
            }
            Ok(Reply { decision, .. }) => {
                if let (Verdict::Reject { retry_after }, Some(rejections)) =
                    (decision.verdict, rejections)
                {
                    if retry_after > 0 {
                        let until = zone_now.saturating_add(retry_after);
                        rejections.remember(self.key, until, zone_now);
                    }
                }
                Lane::Rejected(still_rejected(&rejected, Some(decision)))
            }
            Err(failure) => Lane::Failed(rejected, failure),
        }
    }
}

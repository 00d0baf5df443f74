//! A Redis zone's decision for an item with `ban` (`admission::penalty`): the script
//! reads the key's ban key in the same call, and a ban it tells of is held here for
//! [`RECHECK`].

use super::{ZoneCall, RECHECK};
use crate::limit::bans::Ban;
use crate::limit::outcome::{Banned, Outcome};
use crate::limit::remote::{Call, Failure};
use crate::limit::{Arrival, Decision, Verdict};
use crate::shared::BanOr;

/// [`RECHECK`] in nanoseconds.
const RECHECK_NS: u64 = RECHECK.as_nanos() as u64;

impl ZoneCall<'_> {
    /// The time left of a rejection Redis told of, that answers without asking Redis.
    /// For an item with a `ban`, only one told of within [`RECHECK`]: a ban imposed on
    /// another instance is then seen here within [`RECHECK`] too, not hidden behind a
    /// long remembered rejection (answered 429 and struck again here).
    pub(super) fn remembered(&self, zone_now: u64) -> Option<u64> {
        let rejections = &self.rule.zone.rejections;
        match self.rule.ban {
            Some(_) => rejections.remaining_within(self.key, zone_now, RECHECK_NS),
            None => rejections.remaining(self.key, zone_now),
        }
    }

    /// Redis's answer for `call`, ban first. A ban sets `outcome.banned` and comes back
    /// as a rejection with no `retry_after`, so that the rejection memory keeps nothing
    /// (the ban's copy in the zone's table answers instead, and is checked again after
    /// `RECHECK`). A "not banned" answer drops only a copy that was already due for a
    /// check when the call was issued (not one imposed meanwhile). When Redis cannot
    /// answer, a ban held here still holds, trusted for `RECHECK` from the failure.
    pub(super) async fn decide_banned(
        &self,
        call: &Call,
        ban: &Ban,
        arrival: &Arrival,
        outcome: &mut Outcome,
    ) -> Result<Decision, Failure> {
        let bans = &self.rule.zone.bans;
        let answer = self.remote.decide_banned(call, self.key, arrival.now, arrival.worker);
        let answer = answer.await;
        let left = match answer {
            Ok(BanOr::Decided(decision)) => {
                bans.unlearn(self.key, arrival.now);
                return Ok(decision);
            }
            Ok(BanOr::Banned(left)) => {
                let left = std::time::Duration::from_nanos(left);
                // Trusted from the answer: a slow one leaves the copy its whole while.
                bans.learn(self.key, self.remote.now(), left, RECHECK);
                left
            }
            Err(failure) => {
                let Some(entry) = bans.get(self.key, arrival.now) else {
                    return Err(failure);
                };
                // Answered alone again for a while, counted from the failure: the key's
                // next requests do not each wait for Redis's timeout, however long, nor
                // however many Redis zones before this one waited too.
                bans.trust_again(self.key, self.remote.now(), RECHECK);
                outcome.redis_failures.push((self.index, failure));
                entry.until - arrival.now
            }
        };
        outcome.banned = Some(Banned::of(self.index, ban, left));
        Ok(Decision {
            verdict: Verdict::Reject { retry_after: 0 },
            remaining: 0,
            reset: 0,
        })
    }
}

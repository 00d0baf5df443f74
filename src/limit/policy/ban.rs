//! A Redis zone's decision for an item with `ban` (`limit::penalty`): the script reads
//! the key's ban key in the same call, and a ban it tells of is held here for
//! `penalty::RECHECK`.

use super::super::bans::Ban;
use super::super::outcome::Outcome;
use super::super::penalty::{self, RECHECK};
use super::super::redis::{ban_key, Backend, BanOr, Call, Failure};
use super::super::{Arrival, Decision, Verdict};
use super::ZoneCall;

impl ZoneCall<'_> {
    /// Redis's answer for `call`, ban first. A ban sets `outcome.banned` and comes back
    /// as a rejection with no `retry_after`, so that the rejection memory keeps nothing
    /// (the ban's copy in the zone's table answers instead, and is checked again after
    /// `RECHECK`). When Redis cannot answer, a ban held here still holds.
    pub(super) async fn decide_banned(
        &self,
        backend: &Backend,
        call: &Call,
        ban: &Ban,
        arrival: &Arrival<'_>,
        outcome: &mut Outcome,
    ) -> Result<Decision, Failure> {
        let bans = &self.rule.zone.bans;
        let ban_key = ban_key(&self.rule.zone.name, self.key);
        let answer = backend
            .decide_banned(call, &ban_key, arrival.now, arrival.worker)
            .await;
        let left = match answer {
            Ok(BanOr::Decided(decision)) => {
                bans.unlearn(self.key);
                return Ok(decision);
            }
            Ok(BanOr::Banned(left)) => {
                let left = std::time::Duration::from_nanos(left);
                bans.learn(self.key, arrival.now, left, RECHECK);
                left
            }
            Err(failure) => {
                let Some(entry) = bans.get(self.key, arrival.now) else {
                    return Err(failure);
                };
                outcome.redis_failures.push((self.index, failure));
                entry.until - arrival.now
            }
        };
        outcome.banned = Some(penalty::of(self.index, ban, left));
        Ok(Decision {
            verdict: Verdict::Reject { retry_after: 0 },
            remaining: 0,
            reset: 0,
        })
    }
}

//! What a Redis zone decides when Redis could not answer in time (`on_error` in
//! docs/config.md): admit, refuse with a 503, or decide alone in the zone's local store
//! at the instance's share of the rate.

use std::time::Instant;

use crate::limit::decision::{self, LimitRule};
use crate::limit::outcome::Outcome;
use crate::limit::remote::{OnError, ZoneSettings};
use crate::limit::{Decision, Params, Verdict, NANOS_PER_SEC};

/// The item of a list whose Redis zone failed, and what the request asked of it.
pub(crate) struct Zone<'a> {
    /// Its index in the list.
    pub index: usize,
    pub rule: &'a LimitRule,
    /// The request's key in the zone.
    pub key: &'a [u8],
    pub params: Params,
}

/// The decision `settings.on_error` gives; `live` is the instances last counted in the
/// zone (`None` before any heartbeat answered). A refusal marks the outcome unavailable
/// (a 503) unless the item is a dry run; a local admission that its answer settles joins
/// the outcome's charges.
pub(crate) fn decide(
    zone: &Zone<'_>,
    settings: ZoneSettings,
    live: Option<u64>,
    now: Instant,
    outcome: &mut Outcome,
) -> Decision {
    let rule = zone.rule;
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
            let local = &rule.zone;
            let alone = Params {
                rate: settings.fallback_rate(zone.params.rate, local.algorithm, live),
                ..zone.params
            };
            let decision = local.decide_alone(zone.key, now, &alone);
            if decision.admitted() && rule.settles {
                let hash = local.hash(zone.key);
                let pending = decision::pending(zone.index, alone, hash, zone.key);
                outcome.settle.push(pending);
            }
            decision
        }
    }
}

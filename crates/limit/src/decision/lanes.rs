//! The soft lanes in a local decision (`soft` on a limit item, [`crate::soft`]):
//! what a would-be rejection does when the item that rejects has a soft share. Nothing
//! here runs for a request its zones admit, nor for a location without `soft`.
//!
//! One zone: its lane decides alone, after the zone's own decision (no lock held by
//! then). Several: when every enforced rejection is in a zone with a lane, the decision
//! is made again with the lanes' shards locked too, each right after its zone's in the
//! global order (zone id, then the zone's shard before the lane's). The request passes
//! when the lanes cover every rejection; it then charges the zones that admitted it and
//! the lanes that covered, and otherwise nothing (DESIGN §5.3: all or nothing).

use super::super::soft::{self, soft_pass, still_rejected, Share};
use super::super::zone::{Guard, LaneKey};
use super::super::{Decision, Params, Verdict};
use super::{
    charge_each, check_each, Applied, Held, Keyed, LimitRule, Outcome, Pending, Status, MAX_LIMITS,
};

/// A charge in a zone's lane that the answer settles.
fn pending_lane(rule: usize, params: Params, hash: u64, key: &[u8]) -> Pending {
    Pending {
        rule,
        params,
        held: Held::Lane {
            hash,
            key: key.into(),
        },
    }
}

/// [`super::decide_one`] after its zone rejected the request (`rejected`): the lane's
/// decision, charged there when it admits.
#[cold]
pub(super) fn decide_one(
    rule: &LimitRule,
    share: Share,
    key: &[u8],
    now: u64,
    params: &Params,
    rejected: Decision,
) -> Outcome {
    let zone = &rule.zone;
    let lane_params = soft::lane_params(params, share, zone.algorithm);
    let lane = zone.lane_key(key).and_then(|at| {
        let decision = zone.decide_lane(at, key, now, &lane_params)?;
        Some((at, decision))
    });
    let mut outcome = Outcome::default();
    let decision = match lane {
        Some((at, lane)) if lane.admitted() => {
            if rule.settles {
                outcome
                    .settle
                    .push(pending_lane(0, lane_params, at.hash, key));
            }
            outcome.status = Some(Status::Soft);
            soft_pass(&rejected)
        }
        lane => {
            let decision = still_rejected(&rejected, lane.map(|(_, d)| d));
            if let Verdict::Reject { retry_after } = decision.verdict {
                outcome.retry_after = retry_after;
            }
            outcome.rejected_by = Some(0);
            outcome.status = Some(Status::Rejected);
            decision
        }
    };
    outcome.applied.push(Applied {
        rule: 0,
        rate: params.rate,
        decision,
        dry_run: false,
        soft: outcome.status == Some(Status::Soft),
    });
    outcome
}

/// Whether the lanes might cover every enforced rejection of `outcome`: each is in an
/// item with `soft`.
pub(super) fn may_cover(rules: &[LimitRule], outcome: &Outcome) -> bool {
    outcome
        .applied
        .iter()
        .filter(|a| !a.decision.admitted() && !a.dry_run)
        .all(|a| rules.get(a.rule).is_some_and(|rule| rule.soft.is_some()))
}

/// The lane of one keyed item: where its key is there, and what it asks.
#[derive(Clone, Copy)]
struct LaneOf {
    at: LaneKey,
    params: Params,
}

/// [`super::decide_with`] again, with the lanes of the items with `soft` locked too.
#[cold]
pub(super) fn decide_each(
    rules: &[LimitRule],
    keyed: &[Option<Keyed>],
    keys: &[u8],
    cost: u64,
) -> Outcome {
    let mut lanes: [Option<LaneOf>; MAX_LIMITS] = Default::default();
    for (lane, k) in lanes.iter_mut().zip(keyed) {
        let Some(k) = k else { continue };
        let rule = &rules[k.rule];
        let (Some(share), false) = (rule.soft, rule.dry_run) else {
            continue;
        };
        *lane = rule.zone.lane_key(&keys[k.span.clone()]).map(|at| LaneOf {
            at,
            params: soft::lane_params(&k.params, share, rule.zone.algorithm),
        });
    }
    let (mut guards, mut lane_guards) = lock_all(rules, keyed, &lanes);
    let mut outcome = check_each(rules, keyed, &mut guards, keys);
    cover(keyed, &lanes, &mut lane_guards, keys, &mut outcome);
    charge_each(rules, keyed, &mut guards, keys, cost, &mut outcome);
    if outcome.rejected_by.is_none() {
        charge_lanes(rules, keyed, &lanes, &mut lane_guards, keys, &mut outcome);
    }
    drop(lane_guards);
    drop(guards);
    outcome
}

/// Asks the lane of each rejection that has one; marks the rejections it covers soft,
/// and sets the outcome's rejection anew from those left.
fn cover(
    keyed: &[Option<Keyed>],
    lanes: &[Option<LaneOf>; MAX_LIMITS],
    lane_guards: &mut [Option<Guard<'_>>; MAX_LIMITS],
    keys: &[u8],
    outcome: &mut Outcome,
) {
    outcome.retry_after = 0;
    outcome.rejected_by = None;
    let each = keyed.iter().zip(lanes).zip(lane_guards.iter_mut());
    for (((k, lane), guard), applied) in each.zip(outcome.applied.iter_mut()) {
        let Some(k) = k else { continue };
        if applied.decision.admitted() || applied.dry_run {
            continue;
        }
        let asked = match (lane, guard) {
            (Some(lane), Some(guard)) => {
                let key = &keys[k.span.clone()];
                Some(guard.check(lane.at.hash, key, k.now, &lane.params))
            }
            _ => None,
        };
        match asked {
            Some(lane) if lane.admitted() => {
                applied.decision = soft_pass(&applied.decision);
                applied.soft = true;
            }
            lane => {
                applied.decision = still_rejected(&applied.decision, lane);
                if let Verdict::Reject { retry_after } = applied.decision.verdict {
                    outcome.retry_after = outcome.retry_after.max(retry_after);
                }
                outcome.rejected_by.get_or_insert(applied.rule);
            }
        }
    }
}

/// Charges the lanes that covered an admitted request (and keeps their charges for
/// settling, as the zones' own).
fn charge_lanes(
    rules: &[LimitRule],
    keyed: &[Option<Keyed>],
    lanes: &[Option<LaneOf>; MAX_LIMITS],
    lane_guards: &mut [Option<Guard<'_>>; MAX_LIMITS],
    keys: &[u8],
    outcome: &mut Outcome,
) {
    let each = keyed.iter().zip(lanes).zip(lane_guards.iter_mut());
    for (((k, lane), guard), applied) in each.zip(outcome.applied.iter()) {
        let (Some(k), Some(lane), Some(guard), true) = (k, lane, guard, applied.soft) else {
            continue;
        };
        let rule = &rules[k.rule];
        let key = &keys[k.span.clone()];
        let idle = rule.zone.lane_idle();
        guard.charge(lane.at.hash, key, k.now, &lane.params, idle);
        if rule.settles {
            let pending = pending_lane(k.rule, lane.params, lane.at.hash, key);
            outcome.settle.push(pending);
        }
    }
}

/// Guards of the zones' shards and of the lanes' (`[i]` is `keyed[i]`'s), locked in the
/// one global order: zone id, then the zone's shard before its lane's.
fn lock_all<'z>(
    rules: &'z [LimitRule],
    keyed: &[Option<Keyed>],
    lanes: &[Option<LaneOf>; MAX_LIMITS],
) -> (
    [Option<Guard<'z>>; MAX_LIMITS],
    [Option<Guard<'z>>; MAX_LIMITS],
) {
    // (zone id, 0 for the zone or 1 for its lane, shard, index in `keyed`).
    let mut order = [(0u64, 0u8, 0usize, 0usize); 2 * MAX_LIMITS];
    let mut n = 0;
    for (i, k) in keyed.iter().enumerate() {
        let Some(k) = k else { continue };
        let id = rules[k.rule].zone.id;
        order[n] = (id, 0, k.shard, i);
        n += 1;
        if let Some(lane) = &lanes[i] {
            order[n] = (id, 1, lane.at.shard, i);
            n += 1;
        }
    }
    order[..n].sort_unstable();
    let mut guards: [Option<Guard<'_>>; MAX_LIMITS] = Default::default();
    let mut lane_guards: [Option<Guard<'_>>; MAX_LIMITS] = Default::default();
    for &(_, which, _, i) in &order[..n] {
        let Some(k) = &keyed[i] else { continue };
        let zone = &rules[k.rule].zone;
        match (which, &lanes[i]) {
            (0, _) => guards[i] = Some(zone.lock(k.hash)),
            (_, Some(lane)) => lane_guards[i] = zone.lock_lane(lane.at),
            (_, None) => {}
        }
    }
    (guards, lane_guards)
}

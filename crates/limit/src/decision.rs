//! [`decide`]: a location's `limit` list applied to one request with nginx's rules
//! ("How limits decide" in docs/config.md), in the zones' own stores.
//!
//! Every zone of the list is checked before any is charged, so a request rejected by
//! one zone costs no zone anything. The keys' shards are locked for the whole decision,
//! in one global order (zone id, then shard) so that two locations listing the same
//! zones in different orders cannot deadlock; with the locks held, check-then-charge is
//! atomic and no grant is lost or doubled between threads. A zone's soft lane (`soft`,
//! [`lanes`]) is locked right after its zone, so the order stays one total order.

use std::sync::Arc;
use std::time::Instant;

use super::keys::Keys;
use super::outcome::{Applied, InFlight, Outcome, Status};
use super::settle::{Held, Pending};
use super::zone::Guard;
use super::{Algorithm, Params, Verdict, NODELAY};
use crate::vars::Request;

// What a would-be rejection of an item with `soft` does: the cold path.
mod lanes;

pub use super::rule::{LimitRule, MAX_LIMITS};

/// One rule's key for this request.
struct Keyed {
    rule: usize,
    hash: u64,
    shard: usize,
    /// The key's bytes in the shared buffer.
    span: std::ops::Range<usize>,
    params: Params,
    now: u64,
}

/// Applies `rules` to a request at `now`, its keys rendered first ([`decide_keyed`],
/// for a caller that has no [`Keys`] yet).
pub fn decide(
    rules: &[LimitRule],
    req: &Request<'_>,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
) -> Outcome {
    let keys = Keys::render(rules, req, Vec::new());
    decide_keyed(rules, &keys, plan, cost, now)
}

/// Applies `rules` to a request whose keys are `keys`, at `now`. `plan` is the request's
/// plan id (from its API key), `cost` the location's. Zones whose key is empty are
/// skipped.
pub fn decide_keyed(
    rules: &[LimitRule],
    keys: &Keys,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
) -> Outcome {
    if let [rule] = rules {
        return decide_one(rule, keys, plan, cost, now);
    }
    // Fixed arrays, not vectors: a location lists at most MAX_LIMITS zones (config), and
    // deciding then allocates nothing but the outcome's list.
    let mut slots: [Option<Keyed>; MAX_LIMITS] = Default::default();
    let n = key_each(rules, keys, plan, cost, now, &mut slots);
    let keys = keys.bytes();
    let keyed = &slots[..n];
    if keyed.is_empty() {
        return Outcome::default();
    }
    let mut guards = lock_in_order(rules, keyed);
    let mut outcome = check_each(rules, keyed, &mut guards, keys);
    if outcome.rejected_by.is_some() && lanes::may_cover(rules, &outcome) {
        // Every rejection could pass on its zone's soft lane: decide again with the
        // lanes locked too (their locks come after their zones', so not while holding
        // these).
        drop(guards);
        return lanes::decide_each(rules, keyed, keys, cost);
    }
    charge_each(rules, keyed, &mut guards, keys, cost, &mut outcome);
    // Unlock before an in-flight count could be given back (its drop locks the shard).
    drop(guards);
    outcome
}

/// Fills `slots` with the rules whose key is not empty, in list order; how many.
#[inline]
fn key_each(
    rules: &[LimitRule],
    keys: &Keys,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
    slots: &mut [Option<Keyed>; MAX_LIMITS],
) -> usize {
    let mut n = 0;
    for (index, rule) in rules.iter().enumerate().take(MAX_LIMITS) {
        let Some(span) = keys.span(index) else {
            continue;
        };
        let zone = &rule.zone;
        let hash = zone.hash(&keys.bytes()[span.clone()]);
        slots[n] = Some(Keyed {
            rule: index,
            hash,
            shard: zone.shard_of(hash),
            span,
            params: rule.params(keys.plan(index).or(plan), cost),
            now: zone.nanos(now),
        });
        n += 1;
    }
    n
}

/// Locks every shard involved in the global order (zone, then shard); `guards[i]` is the
/// lock of `keyed[i]`.
#[inline]
fn lock_in_order<'z>(
    rules: &'z [LimitRule],
    keyed: &[Option<Keyed>],
) -> [Option<Guard<'z>>; MAX_LIMITS] {
    // One lock per shard: a location lists a zone at most once (config), so no shard is
    // locked twice, which would deadlock.
    debug_assert!(order_is_strict(rules, keyed));
    let n = keyed.len();
    let mut order = [0usize; MAX_LIMITS];
    for (i, slot) in order.iter_mut().enumerate().take(n) {
        *slot = i;
    }
    let sort_key = |i: &usize| keyed[*i].as_ref().map(|k| (rules[k.rule].zone.id, k.shard));
    order[..n].sort_unstable_by_key(sort_key);
    let mut guards: [Option<Guard<'_>>; MAX_LIMITS] = Default::default();
    for &i in &order[..n] {
        if let Some(k) = &keyed[i] {
            guards[i] = Some(rules[k.rule].zone.lock(k.hash));
        }
    }
    guards
}

/// Checks every keyed zone, charging none: each one's answer, in list order, and what an
/// enforcing rejection says.
#[inline]
fn check_each(
    rules: &[LimitRule],
    keyed: &[Option<Keyed>],
    guards: &mut [Option<Guard<'_>>; MAX_LIMITS],
    keys: &[u8],
) -> Outcome {
    let mut outcome = Outcome::default();
    for (k, guard) in keyed.iter().zip(guards.iter_mut()) {
        let (Some(k), Some(guard)) = (k, guard) else {
            continue;
        };
        let rule = &rules[k.rule];
        let decision = guard.check(k.hash, &keys[k.span.clone()], k.now, &k.params);
        if let Verdict::Reject { retry_after } = decision.verdict {
            if !rule.dry_run {
                outcome.retry_after = outcome.retry_after.max(retry_after);
                outcome.rejected_by.get_or_insert(k.rule);
            }
        }
        outcome.applied.push(Applied {
            rule: k.rule,
            rate: k.params.rate,
            decision,
            dry_run: rule.dry_run,
            soft: false,
        });
    }
    outcome
}

/// Charges every zone that admitted, unless an enforcing zone rejected (then none is
/// charged), and sets the request's status, delay and in-flight counts.
#[inline]
fn charge_each(
    rules: &[LimitRule],
    keyed: &[Option<Keyed>],
    guards: &mut [Option<Guard<'_>>; MAX_LIMITS],
    keys: &[u8],
    cost: u64,
    outcome: &mut Outcome,
) {
    let enforced_reject = outcome.rejected_by.is_some();
    let mut status = Status::Passed;
    for ((k, guard), applied) in keyed
        .iter()
        .zip(guards.iter_mut())
        .zip(outcome.applied.iter_mut())
    {
        let (Some(k), Some(guard)) = (k, guard) else {
            continue;
        };
        let rule = &rules[k.rule];
        status = status.max(Status::of_applied(applied));
        if !applied.decision.admitted() || applied.soft {
            // A soft admission is charged to its lane ([`lanes::decide_each`]).
            continue;
        }
        if enforced_reject {
            // Nothing is charged: this zone still has the room it reported.
            let d = &mut applied.decision;
            d.remaining = d.remaining.saturating_add(cost);
            continue;
        }
        let key = &keys[k.span.clone()];
        guard.charge(k.hash, key, k.now, &k.params, &rule.zone.idle);
        if rule.settles {
            outcome.settle.push(pending(k.rule, k.params, k.hash, key));
        }
        if let (Verdict::Delay(ns), false) = (applied.decision.verdict, rule.dry_run) {
            outcome.delay = outcome.delay.max(ns);
        }
        if rule.zone.algorithm == Algorithm::Concurrency {
            outcome.in_flight.push(InFlight {
                zone: Arc::clone(&rule.zone),
                hash: k.hash,
                key: key.into(),
                cost,
            });
        }
    }
    outcome.status = Some(status);
}

/// Whether no two keyed rules share a zone (and so could share a shard).
fn order_is_strict(rules: &[LimitRule], keyed: &[Option<Keyed>]) -> bool {
    let mut ids: Vec<u64> = keyed
        .iter()
        .flatten()
        .map(|k| rules[k.rule].zone.id)
        .collect();
    ids.sort_unstable();
    ids.windows(2).all(|pair| pair[0] != pair[1])
}

/// [`decide_keyed`] for a location with one rule, the usual case: one lookup (check and
/// charge on the same entry) and no list of keys or guards. The request is charged exactly
/// when its one zone admits it, dry run or not, as in the general case.
fn decide_one(
    rule: &LimitRule,
    keys: &Keys,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
) -> Outcome {
    let zone = &rule.zone;
    let Some(key) = keys.get(0) else {
        return Outcome::default();
    };
    let hash = zone.hash(key);
    let params = rule.params(keys.plan(0).or(plan), cost);
    let now = zone.nanos(now);
    let decision = zone.decide(hash, key, now, &params);
    if let (Verdict::Reject { .. }, Some(share), false) =
        (decision.verdict, rule.soft, rule.dry_run)
    {
        return lanes::decide_one(rule, share, key, now, &params, decision);
    }
    let mut outcome = Outcome::default();
    match (decision.verdict, rule.dry_run) {
        (Verdict::Delay(ns), false) => outcome.delay = ns,
        (Verdict::Reject { retry_after }, false) => {
            outcome.retry_after = retry_after;
            outcome.rejected_by = Some(0);
        }
        _ => {}
    }
    let status = Status::of(decision.verdict, rule.dry_run);
    if decision.admitted() && rule.settles {
        outcome.settle.push(pending(0, params, hash, key));
    }
    if decision.admitted() && zone.algorithm == Algorithm::Concurrency {
        outcome.in_flight.push(InFlight {
            zone: Arc::clone(zone),
            hash,
            key: key.into(),
            cost,
        });
    }
    outcome.applied.push(Applied {
        rule: 0,
        rate: params.rate,
        decision,
        dry_run: rule.dry_run,
        soft: false,
    });
    outcome.status = Some(status);
    outcome
}

/// A charge in a zone's own store that the answer settles.
pub fn pending(rule: usize, params: Params, hash: u64, key: &[u8]) -> Pending {
    Pending {
        rule,
        params,
        held: Held::Local {
            hash,
            key: key.into(),
        },
    }
}

/// `delay` of a rule from the config's `Option` (None = `nodelay`).
pub fn delay_of(delay: Option<u64>) -> u64 {
    delay.unwrap_or(NODELAY)
}

//! The penalty box at work ("Bans" in docs/config.md): [`decide`] answers a banned key
//! before any zone is asked or charged, asks the location's [`Policy`] otherwise, and
//! counts each enforced rejection of an item with a `ban` as a strike in its zone's
//! `limit::bans::Bans`.
//!
//! Only a location that lists a zone with `ban` looks at that zone's bans: a location
//! without one pays nothing (the pipeline does not call [`decide`] for it). Where it
//! looks, a zone without bans in force costs one to three atomic loads (see
//! `Bans::may_hold`), no key is rendered.
//!
//! A Redis zone's bans live in Redis (one key with a TTL, see `redis::ban_key`); the
//! table here holds a copy that answers alone for [`RECHECK`] at most, then the next
//! request's script call asks Redis again, so a ban lifted on another instance ends here
//! within [`RECHECK`]; a remembered rejection of the key hides a ban imposed elsewhere for
//! no longer either. Strikes are counted per instance: the first instance to count
//! `after` rejections bans the key everywhere (a second one learns that ban, see
//! `redis::share_ban`).

use super::policy::Policy;
use crate::limit::bans::{Entry, Standing, Struck};
use crate::limit::decision::LimitRule;
use crate::limit::outcome::{Banned, Outcome, Status};
use crate::limit::Arrival;
use crate::shared::RemoteZone;

pub use super::policy::RECHECK;

/// Applies the location's `policy` to one request, bans first: a banned key's outcome
/// names the ban; otherwise the policy's, with its enforced rejections struck.
pub(crate) async fn decide(policy: &Policy, arrival: &Arrival) -> Outcome {
    if let Some(banned) = banned(policy.rules(), arrival) {
        return Outcome::banned(banned);
    }
    let mut outcome = policy.decide(arrival).await;
    if outcome.banned.is_some() {
        // A Redis zone's script told of a ban.
        outcome.status = Some(Status::Banned);
        return outcome;
    }
    if outcome.rejected() && !outcome.unavailable {
        strike(policy, &outcome, arrival);
    }
    outcome
}

/// The first ban in force over the items with `ban`, in list order. A Redis zone's copy
/// due for a check is left to its script call (which tells of the ban again, or not):
/// the key's remembered rejection, if any, is forgotten so that the call is made.
fn banned(rules: &[LimitRule], arrival: &Arrival) -> Option<Banned> {
    rules.iter().enumerate().find_map(|(index, rule)| {
        let ban = rule.ban.as_ref()?;
        if !rule.zone.bans.may_hold(arrival.now) {
            return None;
        }
        let key = arrival.keys.get(index)?;
        match rule.zone.bans.standing(key, arrival.now) {
            Standing::Banned(left) => Some(Banned::of(index, ban, left)),
            Standing::Recheck(_) => {
                rule.zone.rejections.forget(key);
                None
            }
            Standing::Clear => None,
        }
    })
}

/// Counts a strike for each item with `ban` that rejected the request (enforced, and
/// decided: a Redis failure is no strike); a strike that bans is announced, and for a
/// Redis zone written to Redis; one that finds a table full is reported.
fn strike(policy: &Policy, outcome: &Outcome, arrival: &Arrival) {
    let rules = policy.rules();
    for applied in outcome.applied.iter() {
        if applied.decision.admitted() || applied.dry_run {
            continue;
        }
        let Some(rule) = rules.get(applied.rule) else {
            continue;
        };
        let Some(ban) = rule.ban.as_ref() else {
            continue;
        };
        if outcome
            .redis_failures
            .iter()
            .any(|(r, _)| *r == applied.rule)
        {
            continue;
        }
        let recheck = rule.zone.redis.map(|_| RECHECK);
        // A Redis zone's ban is trusted from the end of its decision's wait on Redis.
        let now = match (recheck, policy.backend()) {
            (Some(_), Some(backend)) => RemoteZone::new(backend, &rule.zone).now(),
            _ => arrival.now,
        };
        let Some(key) = arrival.keys.get(applied.rule) else {
            continue;
        };
        match rule.zone.bans.strike(key, now, ban, recheck) {
            Struck::Banned(entry) => imposed(policy, rule, key, &entry, arrival),
            Struck::Counted => {}
            full => no_room(rule, key, arrival, full),
        }
    }
}

/// A ban just imposed: logged (thinned: a client makes these lines, one per key it gets
/// banned), and shared through Redis for a Redis zone. The key is written quoted and
/// escaped, as every value a client chooses: `x strikes=1 for_ms=0` forges no field.
fn imposed(policy: &Policy, rule: &LimitRule, key: &[u8], entry: &Entry, arrival: &Arrival) {
    let zone = &rule.zone;
    if let Some(left_out) = zone.bans.log.banned.admit(arrival.now) {
        tracing::info!(
            zone = &*zone.name,
            key = ?zone.template.text_of(key),
            strikes = entry.strikes,
            within_ms = entry.within.as_millis() as u64,
            for_ms = (entry.until - entry.since).as_millis() as u64,
            left_out,
            "key banned"
        );
    }
    if let (Some(_), Some(backend)) = (zone.redis, policy.backend()) {
        RemoteZone::new(backend, zone).share_ban(key, entry, arrival);
    }
}

/// A strike that found the zone's ban table full ([`Struck::Refused`]), or, for a first
/// strike, its strike table ([`Struck::Uncounted`]): logged, thinned as [`imposed`] per
/// kind; the metrics count each.
fn no_room(rule: &LimitRule, key: &[u8], arrival: &Arrival, struck: Struck) {
    let zone = &rule.zone;
    let (lines, message) = if struck == Struck::Refused {
        (
            &zone.bans.log.refused,
            "ban refused: the zone's ban table is full (see ban.size)",
        )
    } else {
        (
            &zone.bans.log.uncounted,
            "strike not counted: the zone's strike table is full (see ban.size)",
        )
    };
    let Some(left_out) = lines.admit(arrival.now) else {
        return;
    };
    let key = zone.template.text_of(key);
    let size = zone.bans.size();
    tracing::warn!(zone = &*zone.name, key = ?key, size, left_out, "{message}");
}

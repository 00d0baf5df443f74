//! Charges that the answer settles ("Charging by the answer" in docs/config.md): a rule
//! with `count_status` counts only the answers whose status it lists, and a location
//! with `cost_from` takes each request's cost from the upstream's answer.
//!
//! A request is charged its static cost when it is admitted, as any other, so that
//! requests in flight at once cannot slip past the limit together (a brute-force client
//! sending its guesses in parallel would otherwise have every one checked against the
//! same empty bucket). Once the status and the declared cost are known, the difference
//! is given back or charged: an answer that does not count gives back everything, a
//! declared cost above the static one is charged on top, even past the limit (the key
//! owes it, and its next requests wait until it is paid off). A request whose answer
//! never comes (the client left first) keeps its charge.

use std::time::Instant;

use super::decision::LimitRule;
use super::redis::{Backend, Call, Mode};
use super::Params;

/// HTTP statuses 100 to 599, as a set (`count_status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusSet {
    bits: [u64; 8],
}

impl StatusSet {
    const FIRST: u16 = 100;
    const LAST: u16 = 599;

    /// Adds `first..=last`; statuses outside 100–599 are ignored (the config refuses them).
    pub fn insert_range(&mut self, first: u16, last: u16) {
        for status in first.max(Self::FIRST)..=last.min(Self::LAST) {
            let bit = usize::from(status - Self::FIRST);
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
    }

    pub fn contains(&self, status: u16) -> bool {
        if !(Self::FIRST..=Self::LAST).contains(&status) {
            return false;
        }
        let bit = usize::from(status - Self::FIRST);
        self.bits[bit / 64] & (1 << (bit % 64)) != 0
    }
}

/// A request's charge in one zone, made at admission, that its answer settles.
#[derive(Debug)]
pub struct Pending {
    /// The rule's index in the location's list.
    pub(super) rule: usize,
    /// What the request was charged with (`cost` is its static cost).
    pub(super) params: Params,
    pub(super) held: Held,
}

/// Where the charge was made.
#[derive(Debug)]
pub(super) enum Held {
    /// The zone's own store (a local zone, or a Redis zone deciding alone on `on_error`).
    Local { hash: u64, key: Box<[u8]> },
    /// The zone's soft lane (a soft admission, `limit::soft`); `hash` is the lane's.
    Lane { hash: u64, key: Box<[u8]> },
    /// Redis, by this call.
    Redis(Call),
}

/// What the answer says of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The cost the upstream declared (`cost_from`), if it did.
    pub declared: Option<u64>,
}

/// How a settled charge changes: units given back or charged on top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    Refund(u64),
    Charge(u64),
}

/// What a charge of `cost` units in `rule` becomes once `answer` is known; `None` when it
/// stands as it is.
pub(super) fn change(rule: &LimitRule, cost: u64, answer: Answer) -> Option<Change> {
    let counted = rule.count.is_none_or(|set| set.contains(answer.status));
    let owed = match (counted, answer.declared) {
        (false, _) => 0,
        (true, Some(declared)) => declared,
        (true, None) => cost,
    };
    match owed.cmp(&cost) {
        std::cmp::Ordering::Less => Some(Change::Refund(cost - owed)),
        std::cmp::Ordering::Greater => Some(Change::Charge(owed - cost)),
        std::cmp::Ordering::Equal => None,
    }
}

/// Settles `pending` (charges of a list of `rules`) by `answer` at `now`: local zones at
/// once, Redis ones in the background (the answer does not wait for Redis).
pub(super) fn settle(
    rules: &[LimitRule],
    pending: Vec<Pending>,
    answer: Answer,
    now: Instant,
    redis: Option<(&std::sync::Arc<Backend>, usize)>,
) {
    let mut calls = Vec::new();
    for charge in pending {
        let Some(rule) = rules.get(charge.rule) else {
            continue;
        };
        let Some(change) = change(rule, charge.params.cost, answer) else {
            continue;
        };
        let (mode, units) = match change {
            Change::Refund(units) => (Mode::Refund, units),
            Change::Charge(units) => (Mode::Charge, units),
        };
        let params = Params {
            cost: units,
            ..charge.params
        };
        match charge.held {
            Held::Local { hash, key } => {
                let zone = &rule.zone;
                zone.adjust(hash, &key, zone.nanos(now), &params, change);
            }
            Held::Lane { hash, key } => {
                let zone = &rule.zone;
                zone.adjust_lane(hash, &key, zone.nanos(now), &params, change);
            }
            Held::Redis(call) => calls.push((Call { params, ..call }, mode)),
        }
    }
    if let (false, Some((backend, worker))) = (calls.is_empty(), redis) {
        let backend = std::sync::Arc::clone(backend);
        tokio::spawn(async move {
            for (call, mode) in calls {
                if let Err(failure) = backend.call(&call, mode, now, worker).await {
                    tracing::debug!(failure = failure.label(), "Redis settlement failed");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::testing::ten_per_second;
    use crate::limit::{
        fixed_window::FixedWindow, leaky_bucket::LeakyBucket, sliding_log::SlidingLog,
        sliding_window::SlidingWindow, token_bucket::TokenBucket, Limiter, NANOS_PER_SEC,
    };

    #[test]
    fn status_sets_hold_single_statuses_and_ranges() {
        let mut set = StatusSet::default();
        set.insert_range(401, 401);
        set.insert_range(500, 599);
        assert!(set.contains(401) && set.contains(500) && set.contains(599));
        assert!(!set.contains(400) && !set.contains(200) && !set.contains(600));
        assert!(!set.contains(0) && !set.contains(u16::MAX));
    }

    /// Charging `cost` and giving it back at once leaves a key as fresh.
    fn refund_undoes_charge<A: Limiter>() {
        let p = Params {
            cost: 3,
            ..ten_per_second(5, 0)
        };
        let now = 7 * NANOS_PER_SEC + 123;
        let mut state = A::fresh(now);
        A::charge(&mut state, now, &p);
        assert!(!A::is_drained(&state, now, &p));
        A::refund(&mut state, now, &p);
        assert!(A::is_drained(&state, now, &p), "{state:?}");
        assert_eq!(A::check(&state, now, &p), A::check(&A::fresh(now), now, &p));
        A::refund(&mut state, now, &p);
        assert!(A::is_drained(&state, now, &p), "never below fresh");
    }

    #[test]
    fn a_refund_undoes_a_charge_in_every_algorithm() {
        refund_undoes_charge::<LeakyBucket>();
        refund_undoes_charge::<TokenBucket>();
        refund_undoes_charge::<FixedWindow>();
        refund_undoes_charge::<SlidingWindow>();
        refund_undoes_charge::<SlidingLog>();
    }

    /// A charge past the limit is a debt: the key is refused until it has drained.
    fn a_debt_is_waited_off<A: Limiter>() {
        let one = ten_per_second(0, crate::limit::NODELAY);
        let debt = Params { cost: 20, ..one };
        let now = 3 * NANOS_PER_SEC;
        let mut state = A::fresh(now);
        A::charge(&mut state, now, &debt);
        let verdict = A::check(&state, now, &one).verdict;
        let crate::limit::Verdict::Reject { retry_after } = verdict else {
            panic!("a key in debt is refused, got {verdict:?}");
        };
        assert!(retry_after > 0, "{retry_after}");
        let later = now + retry_after;
        assert!(A::check(&state, later, &one).admitted(), "paid off by then");
    }

    #[test]
    fn a_debt_is_waited_off_in_every_algorithm() {
        a_debt_is_waited_off::<LeakyBucket>();
        a_debt_is_waited_off::<TokenBucket>();
        a_debt_is_waited_off::<FixedWindow>();
        a_debt_is_waited_off::<SlidingWindow>();
        a_debt_is_waited_off::<SlidingLog>();
    }
}

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

use super::remote::Call;
use super::rule::LimitRule;
use super::Params;

pub use super::rule::StatusSet;
pub use super::zone::Change;

/// A request's charge in one zone, made at admission, that its answer settles.
#[derive(Debug)]
pub struct Pending {
    /// The rule's index in the location's list.
    pub rule: usize,
    /// What the request was charged with (`cost` is its static cost).
    pub params: Params,
    pub held: Held,
}

/// Where the charge was made.
#[derive(Debug)]
pub enum Held {
    /// The zone's own store (a local zone, or a Redis zone deciding alone on `on_error`).
    Local { hash: u64, key: Box<[u8]> },
    /// The zone's soft lane (a soft admission, `limit::soft`); `hash` is the lane's.
    Lane { hash: u64, key: Box<[u8]> },
    /// The zone's remote state (Redis), by this call.
    Remote(Call),
}

/// What the answer says of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The cost the upstream declared (`cost_from`), if it did.
    pub declared: Option<u64>,
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

/// Settles `pending` (charges of a list of `rules`) by `answer` at `now` in the zones'
/// own stores, and returns the changes due in remote state, each with the call that
/// makes it (the caller makes them in the background: the answer does not wait).
pub fn settle(
    rules: &[LimitRule],
    pending: Vec<Pending>,
    answer: Answer,
    now: Instant,
) -> Vec<(Call, Change)> {
    let mut remote = Vec::new();
    for charge in pending {
        let Some(rule) = rules.get(charge.rule) else {
            continue;
        };
        let Some(change) = change(rule, charge.params.cost, answer) else {
            continue;
        };
        let units = match change {
            Change::Refund(units) | Change::Charge(units) => units,
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
            Held::Remote(call) => remote.push((Call { params, ..call }, change)),
        }
    }
    remote
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ten_per_second;
    use crate::{
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
        let one = ten_per_second(0, crate::NODELAY);
        let debt = Params { cost: 20, ..one };
        let now = 3 * NANOS_PER_SEC;
        let mut state = A::fresh(now);
        A::charge(&mut state, now, &debt);
        let verdict = A::check(&state, now, &one).verdict;
        let crate::Verdict::Reject { retry_after } = verdict else {
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

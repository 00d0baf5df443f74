//! `concurrency`: requests in flight per key, at most `max` (nginx's `limit_conn`).
//! The state is the count of units in flight.
//!
//! Time plays no part: a unit leaves only when the pipeline calls [`release`] as the
//! request ends (from a guard's `Drop`, so every path out releases). `burst` and `delay`
//! mean nothing here and are ignored; nothing is ever delayed. An in-flight count has no
//! known release time, so a rejection says `retry_after: 0` ("unknown", not "never") and
//! the response layer prints `Retry-After: 1`. `reset` is 0 for the same reason.
//!
//! Every stored key has requests in flight (a count back at 0 is removed), so a full zone
//! evicts a key that is in use and that key's requests then count from 0: a zone of `size`
//! must hold the clients in flight at once (10m holds about 200,000). nginx rejects instead.

use super::{Decision, Limiter, Params, Verdict};

pub struct Concurrency;

/// Gives back the `cost` units an admitted request took, when it ends.
pub fn release(state: &mut u64, cost: u64) {
    *state = state.saturating_sub(cost);
}

impl Limiter for Concurrency {
    /// Units in flight.
    type State = u64;

    fn fresh(_now: u64) -> u64 {
        0
    }

    fn check(state: &u64, _now: u64, p: &Params) -> Decision {
        let after = state.saturating_add(p.cost);
        if after > p.max {
            return Decision {
                verdict: Verdict::Reject { retry_after: 0 },
                remaining: p.max.saturating_sub(*state),
                reset: 0,
            };
        }
        Decision {
            verdict: Verdict::Pass,
            remaining: p.max - after,
            reset: 0,
        }
    }

    fn charge(state: &mut u64, _now: u64, p: &Params) {
        *state = state.saturating_add(p.cost);
    }

    fn refund(state: &mut u64, _now: u64, p: &Params) {
        release(state, p.cost);
    }

    fn is_drained(state: &u64, _now: u64, _p: &Params) -> bool {
        *state == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Period, Rate, NODELAY};

    fn max(max: u64) -> Params {
        Params {
            max,
            ..Params::new(Rate::new(1, Period::Second).expect("non-zero"))
        }
    }

    /// Takes a request's units if admitted.
    fn enter(state: &mut u64, p: &Params) -> Verdict {
        let d = Concurrency::check(state, 0, p);
        if d.admitted() {
            Concurrency::charge(state, 0, p);
        }
        d.verdict
    }

    #[test]
    fn admits_up_to_max_in_flight_then_rejects_until_one_ends() {
        let p = max(3);
        let mut state = Concurrency::fresh(0);
        for _ in 0..3 {
            assert_eq!(enter(&mut state, &p), Verdict::Pass);
        }
        assert_eq!(enter(&mut state, &p), Verdict::Reject { retry_after: 0 });
        release(&mut state, 1);
        assert_eq!(enter(&mut state, &p), Verdict::Pass);
    }

    #[test]
    fn burst_and_delay_are_ignored() {
        let p = Params {
            burst: 10,
            delay: 0,
            ..max(1)
        };
        let mut state = Concurrency::fresh(0);
        assert_eq!(enter(&mut state, &p), Verdict::Pass);
        assert!(!Concurrency::check(
            &state,
            0,
            &Params {
                delay: NODELAY,
                ..p
            }
        )
        .admitted());
    }

    #[test]
    fn cost_takes_that_many_slots() {
        let p = Params { cost: 2, ..max(5) };
        let mut state = Concurrency::fresh(0);
        assert_eq!(enter(&mut state, &p), Verdict::Pass);
        assert_eq!(enter(&mut state, &p), Verdict::Pass);
        let d = Concurrency::check(&state, 0, &p);
        assert_eq!(
            (d.verdict, d.remaining),
            (Verdict::Reject { retry_after: 0 }, 1)
        );
    }

    #[test]
    fn release_never_goes_below_zero() {
        let mut state = 1;
        release(&mut state, 5);
        assert_eq!(state, 0);
    }

    #[test]
    fn a_key_is_drained_when_nothing_is_in_flight() {
        let p = max(2);
        let mut state = Concurrency::fresh(0);
        Concurrency::charge(&mut state, 0, &p);
        assert!(!Concurrency::is_drained(&state, u64::MAX, &p));
        release(&mut state, 1);
        assert!(Concurrency::is_drained(&state, 0, &p));
    }
}

//! `token_bucket`: GCRA, the generic cell rate algorithm (ITU-T I.371, as in `governor`):
//! a bucket of `burst + 1` requests refilled at `rate`, kept as one timestamp.
//!
//! A request is worth the emission interval `T = period / count` nanoseconds. The key keeps
//! its theoretical arrival time `tat`: the bucket's level at `now` is `tat − now` (0 once
//! `tat` has passed), and every admitted request of cost c moves `tat` to
//! `max(tat, now) + c·T`. A request is admitted while the level after it stays within
//! `(burst + 1)·T`. `T` is whole nanoseconds: the remainder below 1 ns per request is the
//! only rounding (`7r/s` is `T = 142 857 142 ns`, 7.00000004 r/s), and a rate above
//! 10⁹ r/s counts as 10⁹ r/s.
//!
//! Without `nodelay` an admitted request waits until it conforms: until the level, this
//! request included, has drained to `(delay + 1)·T`. For `delay = 0` that is leaky_bucket's
//! grid (at 10r/s the second of two simultaneous requests waits 100 ms), but in
//! nanoseconds rather than whole milliseconds.
//!
//! A fresh key has `tat = now`, an empty bucket; a key whose `tat` has passed is the same.

use super::{Decision, Limiter, Params, Rate, Verdict, NODELAY};

pub struct TokenBucket;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// Theoretical arrival time in ns since the zone's epoch: when the bucket is empty.
    tat: u64,
}

/// The emission interval `T` in ns: what one request adds to the level, and how long the
/// bucket takes to drain it. At least 1 ns.
#[inline]
fn interval(rate: Rate) -> u64 {
    (rate.period.nanos() / rate.count.get()).max(1)
}

impl Limiter for TokenBucket {
    type State = State;

    fn fresh(now: u64) -> State {
        State { tat: now }
    }

    fn check(state: &State, now: u64, p: &Params) -> Decision {
        let t = interval(p.rate);
        let level = state.tat.saturating_sub(now);
        let cost = p.cost.saturating_mul(t);
        let after = level.saturating_add(cost);
        let cap = p.burst.saturating_add(1).saturating_mul(t);
        if after > cap {
            // The level drains one ns per ns, so `after − cap` is exact; a cost above the
            // whole bucket never fits.
            let retry_after = if cost > cap { 0 } else { after - cap };
            return Decision {
                verdict: Verdict::Reject { retry_after },
                remaining: cap.saturating_sub(level) / t,
                reset: level,
            };
        }
        let free = if p.delay == NODELAY {
            u64::MAX
        } else {
            p.delay.saturating_add(1).saturating_mul(t)
        };
        let verdict = if after > free {
            Verdict::Delay(after - free)
        } else {
            Verdict::Pass
        };
        Decision {
            verdict,
            remaining: (cap - after) / t,
            reset: after,
        }
    }

    fn charge(state: &mut State, now: u64, p: &Params) {
        let cost = p.cost.saturating_mul(interval(p.rate));
        state.tat = state.tat.max(now).saturating_add(cost);
    }

    fn refund(state: &mut State, now: u64, p: &Params) {
        let cost = p.cost.saturating_mul(interval(p.rate));
        state.tat = state.tat.saturating_sub(cost).max(now.min(state.tat));
    }

    fn is_drained(state: &State, now: u64, _p: &Params) -> bool {
        state.tat <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Period, NANOS_PER_MS};

    use crate::testing::{rate, ten_per_second};

    type Key = crate::testing::Key<TokenBucket>;

    const MS: u64 = NANOS_PER_MS;

    #[test]
    fn burst_with_nodelay_admits_burst_plus_one_then_rejects() {
        let mut key = Key::new(ten_per_second(5, NODELAY));
        for _ in 0..6 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
        assert!(matches!(key.at(100 * MS - 1), Verdict::Reject { .. }));
        assert_eq!(key.at(100 * MS), Verdict::Pass);
    }

    #[test]
    fn burst_without_nodelay_delays_on_leaky_buckets_grid() {
        let mut key = Key::new(ten_per_second(5, 0));
        assert_eq!(key.at(0), Verdict::Pass);
        for k in 1..=5 {
            assert_eq!(key.at(0), Verdict::Delay(100 * MS * k), "request {}", k + 1);
        }
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
    }

    #[test]
    fn delay_n_lets_the_first_excess_through_and_delays_the_rest() {
        let mut key = Key::new(ten_per_second(8, 3));
        for _ in 0..4 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        for k in 1..=5 {
            assert_eq!(key.at(0), Verdict::Delay(100 * MS * k));
        }
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
    }

    #[test]
    fn a_stream_at_the_rate_always_passes() {
        let mut key = Key::new(ten_per_second(0, 0));
        for i in 0..50 {
            assert_eq!(key.at(i * 100 * MS), Verdict::Pass, "request {i}");
        }
        assert!(matches!(key.at(4_999 * MS), Verdict::Reject { .. }));
    }

    #[test]
    fn retry_after_is_exact_to_the_nanosecond() {
        let p = ten_per_second(1, NODELAY);
        let mut state = TokenBucket::fresh(0);
        TokenBucket::charge(&mut state, 0, &p);
        TokenBucket::charge(&mut state, 0, &p);
        let now = 30 * MS + 7;
        let d = TokenBucket::check(&state, now, &p);
        assert_eq!(
            d.verdict,
            Verdict::Reject {
                retry_after: 70 * MS - 7
            }
        );
        assert!(TokenBucket::check(&state, 100 * MS, &p).admitted());
        assert!(!TokenBucket::check(&state, 100 * MS - 1, &p).admitted());
    }

    #[test]
    fn a_cost_above_the_whole_bucket_is_never_admitted() {
        let p = Params {
            cost: 3,
            ..ten_per_second(1, NODELAY)
        };
        let d = TokenBucket::check(&TokenBucket::fresh(0), 0, &p);
        assert_eq!(d.verdict, Verdict::Reject { retry_after: 0 });
    }

    #[test]
    fn per_minute_interval_keeps_whole_nanoseconds() {
        // 7r/m: T = 60 s / 7 = 8 571 428 571 ns (0.43 ns lost per request).
        let p = Params {
            delay: NODELAY,
            ..Params::new(rate(7, Period::Minute))
        };
        let mut key = Key::new(p);
        assert_eq!(key.at(0), Verdict::Pass);
        assert!(matches!(key.at(8_571_428_570), Verdict::Reject { .. }));
        assert_eq!(key.at(8_571_428_571), Verdict::Pass);
    }

    #[test]
    fn remaining_and_reset_describe_the_bucket() {
        let p = ten_per_second(5, NODELAY);
        let mut state = TokenBucket::fresh(0);
        let d = TokenBucket::check(&state, 0, &p);
        assert_eq!((d.remaining, d.reset), (5, 100 * MS));
        TokenBucket::charge(&mut state, 0, &p);
        let d = TokenBucket::check(&state, 50 * MS, &p);
        assert_eq!((d.remaining, d.reset), (4, 150 * MS));
    }

    #[test]
    fn a_key_is_drained_when_its_tat_has_passed() {
        let p = ten_per_second(5, NODELAY);
        let mut state = TokenBucket::fresh(0);
        TokenBucket::charge(&mut state, 0, &p);
        TokenBucket::charge(&mut state, 0, &p);
        assert!(!TokenBucket::is_drained(&state, 200 * MS - 1, &p));
        assert!(TokenBucket::is_drained(&state, 200 * MS, &p));
        assert_eq!(
            TokenBucket::check(&state, 250 * MS, &p),
            TokenBucket::check(&TokenBucket::fresh(250 * MS), 250 * MS, &p)
        );
    }
}

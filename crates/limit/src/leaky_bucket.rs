//! `leaky_bucket`, the default: nginx's `limit_req`, decision for decision
//! (nginx's limit_req: `burst`, `nodelay`, `delay`).
//!
//! nginx keeps `excess` in milli-requests and drains `rate × elapsed ms / 1000` of it, so
//! a rate in r/m loses a fraction on every update. Here a request is [`UNIT`] units and a
//! key drains `count × UNIT / period_ms` units per millisecond, an integer for every
//! period, so every rate is exact; for r/s rates each quantity is nginx's times 86 400
//! and every comparison and every floored delay comes out the same.
//!
//! The state keeps `fill` = nginx's `excess` + one request. A key drains to `fill = 0`,
//! which is the state of a key never seen: its first request costs nothing (nginx creates
//! the node with excess 0). Time is whole milliseconds, as nginx's cached clock.

use super::{div_ceil, Decision, Limiter, Params, Rate, Verdict, NANOS_PER_MS, NODELAY};

/// Units per request: the milliseconds in a day, divisible by every period's length.
pub const UNIT: u64 = 86_400_000;

pub struct LeakyBucket;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// nginx's `excess` plus one request, in units; 0 = fully drained.
    fill: u64,
    /// The millisecond of the last accepted request (nginx's `last`).
    last_ms: u64,
}

/// Units drained per millisecond.
#[inline]
fn drain_per_ms(rate: Rate) -> u64 {
    rate.count.get().saturating_mul(UNIT / rate.period.millis())
}

impl State {
    /// The fill at `now_ms`: what is left after draining since the last update. A clock
    /// that appears to go backwards (another thread read it a moment earlier) counts as
    /// no time passed, as nginx's `ms < 0 → 0`.
    #[inline]
    fn level(&self, now_ms: u64, per_ms: u64) -> u64 {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.fill.saturating_sub(per_ms.saturating_mul(elapsed))
    }
}

impl Limiter for LeakyBucket {
    type State = State;

    fn fresh(now: u64) -> State {
        State {
            fill: 0,
            last_ms: now / NANOS_PER_MS,
        }
    }

    fn check(state: &State, now: u64, p: &Params) -> Decision {
        let now_ms = now / NANOS_PER_MS;
        let per_ms = drain_per_ms(p.rate);
        let level = state.level(now_ms, per_ms);
        let after = level.saturating_add(p.cost.saturating_mul(UNIT));
        // nginx admits while excess ≤ burst, i.e. fill ≤ (burst + 1) requests.
        let cap = p.burst.saturating_add(1).saturating_mul(UNIT);
        if after > cap {
            let verdict = if p.cost.saturating_mul(UNIT) > cap {
                Verdict::Reject { retry_after: 0 }
            } else {
                // The first whole millisecond at which enough has drained.
                let wait_ms = div_ceil(after - cap, per_ms);
                let at = now_ms.saturating_add(wait_ms).saturating_mul(NANOS_PER_MS);
                Verdict::Reject {
                    retry_after: at.saturating_sub(now),
                }
            };
            return Decision {
                verdict,
                remaining: (cap - level.min(cap)) / UNIT,
                reset: ms_to_ns(div_ceil(level, per_ms)),
            };
        }
        let free = if p.delay == NODELAY {
            u64::MAX
        } else {
            p.delay.saturating_add(1).saturating_mul(UNIT)
        };
        // Fixed at arrival and floored to whole ms, as nginx; a wait that floors to 0 ms
        // passes (nginx's `if (!delay)`: PASSED, not DELAYED).
        let wait_ms = after.saturating_sub(free) / per_ms;
        let verdict = if wait_ms > 0 {
            Verdict::Delay(ms_to_ns(wait_ms))
        } else {
            Verdict::Pass
        };
        Decision {
            verdict,
            remaining: (cap - after) / UNIT,
            reset: ms_to_ns(div_ceil(after, per_ms)),
        }
    }

    fn charge(state: &mut State, now: u64, p: &Params) {
        let now_ms = now / NANOS_PER_MS;
        let level = state.level(now_ms, drain_per_ms(p.rate));
        state.fill = level.saturating_add(p.cost.saturating_mul(UNIT));
        state.last_ms = state.last_ms.max(now_ms);
    }

    fn refund(state: &mut State, now: u64, p: &Params) {
        let now_ms = now / NANOS_PER_MS;
        let level = state.level(now_ms, drain_per_ms(p.rate));
        state.fill = level.saturating_sub(p.cost.saturating_mul(UNIT));
        state.last_ms = state.last_ms.max(now_ms);
    }

    fn is_drained(state: &State, now: u64, p: &Params) -> bool {
        state.level(now / NANOS_PER_MS, drain_per_ms(p.rate)) == 0
    }
}

#[inline]
fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(NANOS_PER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Period;

    use crate::testing::{rate, ten_per_second};

    type Key = crate::testing::Key<LeakyBucket, NANOS_PER_MS>;

    fn delay_ms(ms: u64) -> Verdict {
        Verdict::Delay(ms * NANOS_PER_MS)
    }

    #[test]
    fn burst_without_nodelay_delays_on_a_grid_then_rejects() {
        // nginx's own example: 20 at once, burst=5, 10r/s.
        let mut key = Key::new(ten_per_second(5, 0));
        assert_eq!(key.at(0), Verdict::Pass);
        for k in 1..=5 {
            assert_eq!(key.at(0), delay_ms(100 * k), "request {}", k + 1);
        }
        for _ in 7..=20 {
            assert!(matches!(key.at(0), Verdict::Reject { .. }));
        }
    }

    #[test]
    fn burst_with_nodelay_admits_burst_then_rejects() {
        let mut key = Key::new(ten_per_second(5, NODELAY));
        for _ in 0..6 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
        // One slot frees after 100 ms: at 99 ms still rejected, at 100 ms admitted.
        assert!(matches!(key.at(99), Verdict::Reject { .. }));
        assert_eq!(key.at(100), Verdict::Pass);
    }

    #[test]
    fn delay_n_lets_the_first_excess_through_and_delays_the_rest() {
        // burst=8 delay=3, 12 at once.
        let mut key = Key::new(ten_per_second(8, 3));
        for _ in 0..4 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        for k in 1..=5 {
            assert_eq!(key.at(0), delay_ms(100 * k));
        }
        for _ in 0..3 {
            assert!(matches!(key.at(0), Verdict::Reject { .. }));
        }
    }

    #[test]
    fn recovery_after_partial_drain_matches_nginx() {
        // 5r/s, burst=5 nodelay: 10 at t=0 → 6 pass; at t=730, 3 pass; at t=3000, 6 pass.
        let p = Params {
            burst: 5,
            delay: NODELAY,
            ..Params::new(rate(5, Period::Second))
        };
        let mut key = Key::new(p);
        let passes = |key: &mut Key, ms| (0..10).filter(|_| key.at(ms) == Verdict::Pass).count();
        assert_eq!(passes(&mut key, 0), 6);
        assert_eq!(passes(&mut key, 730), 3);
        assert_eq!(passes(&mut key, 3000), 6);
    }

    #[test]
    fn a_wait_that_floors_to_zero_ms_passes_as_in_nginx() {
        // 11r/s, 90 ms after the first: excess 1000 − 990 = 10, a wait of 10/11 ms → 0.
        let p = Params {
            burst: 1,
            ..Params::new(rate(11, Period::Second))
        };
        let mut key = Key::new(p);
        assert_eq!(key.at(0), Verdict::Pass);
        assert_eq!(key.at(90), Verdict::Pass);
    }

    #[test]
    fn sustained_stream_above_rate_rejects_about_one_in_six() {
        // 10r/s, burst=3 nodelay, one request every 83 ms.
        let mut key = Key::new(ten_per_second(3, NODELAY));
        let verdicts: Vec<_> = (0..120).map(|i| key.at(i * 83)).collect();
        let first_reject = verdicts
            .iter()
            .position(|v| matches!(v, Verdict::Reject { .. }))
            .expect("some rejection");
        assert!((17..=20).contains(&first_reject), "{first_reject}");
        let rejected = verdicts[first_reject..]
            .iter()
            .filter(|v| matches!(v, Verdict::Reject { .. }))
            .count();
        let share = rejected as f64 / (verdicts.len() - first_reject) as f64;
        assert!((0.14..=0.20).contains(&share), "{share}");
    }

    #[test]
    fn per_minute_rate_is_exact_where_nginx_truncates() {
        // 30r/m burst=2 nodelay: nginx's worked example (exact for 30r/m).
        let p = Params {
            burst: 2,
            delay: NODELAY,
            ..Params::new(rate(30, Period::Minute))
        };
        let mut key = Key::new(p);
        for _ in 0..3 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
        assert!(matches!(key.at(1000), Verdict::Reject { .. }));
        assert_eq!(key.at(2100), Verdict::Pass);
        // 1r/m frees a slot after exactly 60 s (nginx: 62.5 s).
        let p = Params {
            delay: NODELAY,
            ..Params::new(rate(1, Period::Minute))
        };
        let mut key = Key::new(p);
        assert_eq!(key.at(0), Verdict::Pass);
        assert!(matches!(key.at(59_999), Verdict::Reject { .. }));
        assert_eq!(key.at(60_000), Verdict::Pass);
    }

    #[test]
    fn a_rejected_request_changes_nothing() {
        let p = ten_per_second(0, NODELAY);
        let now = 0;
        let mut state = LeakyBucket::fresh(now);
        LeakyBucket::charge(&mut state, now, &p);
        let before = state;
        let d = LeakyBucket::check(&state, 50 * NANOS_PER_MS, &p);
        assert_eq!(
            d.verdict,
            Verdict::Reject {
                retry_after: 50 * NANOS_PER_MS
            }
        );
        assert_eq!(state, before);
    }

    #[test]
    fn retry_after_lands_on_the_first_admitting_millisecond() {
        let p = ten_per_second(0, NODELAY);
        let mut state = LeakyBucket::fresh(0);
        LeakyBucket::charge(&mut state, 0, &p);
        // 30.5 ms in: admitted at 100 ms, so 69.5 ms to wait.
        let now = 30 * NANOS_PER_MS + 500_000;
        let Verdict::Reject { retry_after } = LeakyBucket::check(&state, now, &p).verdict else {
            panic!("expected a rejection");
        };
        assert_eq!(retry_after, 69_500_000);
        assert!(LeakyBucket::check(&state, now + retry_after, &p).admitted());
        assert!(!LeakyBucket::check(&state, now + retry_after - 1, &p).admitted());
    }

    #[test]
    fn cost_takes_that_many_requests_and_the_first_unit_is_free() {
        let p = Params {
            burst: 4,
            delay: NODELAY,
            cost: 3,
            ..Params::new(rate(10, Period::Second))
        };
        let mut key = Key::new(p);
        // Fresh: excess 2 after the first (one unit free); 5 after the second; rejected.
        assert_eq!(key.at(0), Verdict::Pass);
        assert!(matches!(key.at(0), Verdict::Reject { .. }));
        // 100 ms drains one request: excess 1 + 3 = 4 ≤ 4.
        assert_eq!(key.at(100), Verdict::Pass);
    }

    #[test]
    fn remaining_and_reset_describe_the_bucket() {
        let p = ten_per_second(5, NODELAY);
        let mut state = LeakyBucket::fresh(0);
        let d = LeakyBucket::check(&state, 0, &p);
        assert_eq!((d.remaining, d.reset), (5, 100 * NANOS_PER_MS));
        LeakyBucket::charge(&mut state, 0, &p);
        let d = LeakyBucket::check(&state, 0, &p);
        assert_eq!((d.remaining, d.reset), (4, 200 * NANOS_PER_MS));
    }

    #[test]
    fn a_key_is_drained_when_it_equals_a_fresh_one() {
        let p = ten_per_second(5, NODELAY);
        let mut state = LeakyBucket::fresh(0);
        LeakyBucket::charge(&mut state, 0, &p);
        LeakyBucket::charge(&mut state, 0, &p);
        assert!(!LeakyBucket::is_drained(&state, 199 * NANOS_PER_MS, &p));
        assert!(LeakyBucket::is_drained(&state, 200 * NANOS_PER_MS, &p));
    }
}

//! `fixed_window`: a count per window of one rate unit (a second for r/s, a day for r/d),
//! windows aligned to `now = 0`; each window admits `count + burst` units. The zone puts
//! `now = 0` on a midnight UTC, so windows start on the wall clock's second, minute, hour
//! and day.
//!
//! The cheapest algorithm and the easiest to explain to an API client ("100 per hour, the
//! hour starting on the hour"), at the price of the classic edge: a client may spend one
//! window's limit at its end and the next one's at its start.
//!
//! Delay (without `nodelay`): a request whose last unit is the `k`-th of its window, with
//! `k > count + delay`, is admitted and waits until the start of the window in which it
//! would have conformed had the units above `delay` been spread at `count` per window:
//! `ceil((k − delay) / count) − 1` windows after the current one. At 10r/s with burst=20,
//! units 11 to 20 of a second wait for the next second and 21 to 30 for the one after.
//! Rejected: retry at the next window's start (never, 0, for a cost above the limit).
//! `reset` is the current window's end when it holds anything.

use super::{div_ceil, Decision, Limiter, Params, Verdict, NODELAY};

pub struct FixedWindow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// The window `used` counts in, as `now / period`.
    window: u64,
    /// Units admitted in that window.
    used: u64,
}

impl State {
    /// The window and its count at `now`. A clock that appears to go backwards into an
    /// earlier window (another thread read it a moment earlier) counts as the stored one.
    #[inline]
    fn at(&self, now: u64, len: u64) -> (u64, u64) {
        let current = now / len;
        if current <= self.window {
            (self.window, self.used)
        } else {
            (current, 0)
        }
    }
}

/// Windows after the current one whose start a request must wait for (0: none).
#[inline]
fn windows_to_wait(after: u64, p: &Params) -> u64 {
    let count = p.rate.count.get();
    if p.delay == NODELAY || after <= count.saturating_add(p.delay) {
        return 0;
    }
    div_ceil(after - p.delay, count) - 1
}

impl Limiter for FixedWindow {
    type State = State;

    /// Nothing used; the window index is irrelevant while `used` is 0 (it needs the rate).
    fn fresh(_now: u64) -> State {
        State { window: 0, used: 0 }
    }

    fn check(state: &State, now: u64, p: &Params) -> Decision {
        let len = p.rate.period.nanos();
        let (window, used) = state.at(now, len);
        let end = window.saturating_add(1).saturating_mul(len) - now;
        let limit = p.rate.count.get().saturating_add(p.burst);
        let after = used.saturating_add(p.cost);
        if after > limit {
            let retry_after = if p.cost > limit { 0 } else { end };
            return Decision {
                verdict: Verdict::Reject { retry_after },
                remaining: limit.saturating_sub(used),
                reset: if used > 0 { end } else { 0 },
            };
        }
        let verdict = match windows_to_wait(after, p) {
            0 => Verdict::Pass,
            n => Verdict::Delay(end.saturating_add((n - 1).saturating_mul(len))),
        };
        Decision {
            verdict,
            remaining: limit - after,
            reset: end,
        }
    }

    fn charge(state: &mut State, now: u64, p: &Params) {
        let (window, used) = state.at(now, p.rate.period.nanos());
        state.window = window;
        state.used = used.saturating_add(p.cost);
    }

    /// Only the current window's units come back: a window that has ended is forgotten.
    fn refund(state: &mut State, now: u64, p: &Params) {
        let (window, used) = state.at(now, p.rate.period.nanos());
        state.window = window;
        state.used = used.saturating_sub(p.cost);
    }

    fn is_drained(state: &State, now: u64, p: &Params) -> bool {
        state.used == 0 || state.window < now / p.rate.period.nanos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Period, NANOS_PER_MS};

    const MS: u64 = NANOS_PER_MS;

    use crate::testing::{rate, ten_per_second};

    type Key = crate::testing::Key<FixedWindow>;

    #[test]
    fn a_window_admits_count_plus_burst_then_rejects_until_the_next() {
        let mut key = Key::new(ten_per_second(2, NODELAY));
        for _ in 0..12 {
            assert_eq!(key.at(300 * MS), Verdict::Pass);
        }
        assert_eq!(
            key.at(400 * MS),
            Verdict::Reject {
                retry_after: 600 * MS
            }
        );
        assert!(matches!(key.at(1_000 * MS - 1), Verdict::Reject { .. }));
        assert_eq!(key.at(1_000 * MS), Verdict::Pass);
    }

    #[test]
    fn windows_are_aligned_to_the_zone_epoch_not_the_first_request() {
        let mut key = Key::new(ten_per_second(0, NODELAY));
        for _ in 0..10 {
            assert_eq!(key.at(999 * MS), Verdict::Pass);
        }
        // One millisecond later is a new second.
        for _ in 0..10 {
            assert_eq!(key.at(1_000 * MS), Verdict::Pass);
        }
        assert!(matches!(key.at(1_000 * MS), Verdict::Reject { .. }));
    }

    #[test]
    fn excess_waits_for_the_window_it_would_have_conformed_in() {
        let mut key = Key::new(ten_per_second(20, 0));
        let now = 250 * MS;
        for _ in 0..10 {
            assert_eq!(key.at(now), Verdict::Pass);
        }
        for _ in 11..=20 {
            assert_eq!(key.at(now), Verdict::Delay(750 * MS));
        }
        for _ in 21..=30 {
            assert_eq!(key.at(now), Verdict::Delay(1_750 * MS));
        }
        assert!(matches!(key.at(now), Verdict::Reject { .. }));
    }

    #[test]
    fn delay_n_lets_the_first_excess_through_and_delays_the_rest() {
        let mut key = Key::new(ten_per_second(20, 5));
        for _ in 0..15 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        for _ in 16..=25 {
            assert_eq!(key.at(0), Verdict::Delay(1_000 * MS));
        }
        for _ in 26..=30 {
            assert_eq!(key.at(0), Verdict::Delay(2_000 * MS));
        }
    }

    #[test]
    fn a_cost_above_the_limit_is_never_admitted() {
        let p = Params {
            cost: 13,
            ..ten_per_second(2, NODELAY)
        };
        let d = FixedWindow::check(&FixedWindow::fresh(0), 0, &p);
        assert_eq!(d.verdict, Verdict::Reject { retry_after: 0 });
        assert_eq!((d.remaining, d.reset), (12, 0));
    }

    #[test]
    fn per_day_quota_resets_at_the_day_boundary() {
        let p = Params {
            delay: NODELAY,
            ..Params::new(rate(2, Period::Day))
        };
        let day = Period::Day.nanos();
        let mut key = Key::new(p);
        assert_eq!(key.at(day + 5), Verdict::Pass);
        assert_eq!(key.at(2 * day - 5), Verdict::Pass);
        assert_eq!(key.at(2 * day - 5), Verdict::Reject { retry_after: 5 });
        assert_eq!(key.at(2 * day), Verdict::Pass);
    }

    #[test]
    fn remaining_and_reset_describe_the_window() {
        let p = ten_per_second(5, NODELAY);
        let mut state = FixedWindow::fresh(0);
        let d = FixedWindow::check(&state, 100 * MS, &p);
        assert_eq!((d.remaining, d.reset), (14, 900 * MS));
        FixedWindow::charge(&mut state, 100 * MS, &p);
        let d = FixedWindow::check(&state, 400 * MS, &p);
        assert_eq!((d.remaining, d.reset), (13, 600 * MS));
    }

    #[test]
    fn a_key_is_drained_when_its_window_is_over() {
        let p = ten_per_second(5, NODELAY);
        let mut state = FixedWindow::fresh(0);
        assert!(FixedWindow::is_drained(&state, 0, &p));
        FixedWindow::charge(&mut state, 1_500 * MS, &p);
        assert!(!FixedWindow::is_drained(&state, 2_000 * MS - 1, &p));
        assert!(FixedWindow::is_drained(&state, 2_000 * MS, &p));
    }
}

//! `sliding_window`: Cloudflare's approximation of a sliding window ("How we built rate
//! limiting capable of scaling to millions of domains", 2017) in two counts.
//!
//! Windows of one rate unit are aligned to the zone's epoch. At `e` ns into the current
//! window the key is estimated to hold `prev·(period − e)/period + curr`: the previous
//! window's count weighted by how much of it the sliding window still overlaps, plus the
//! current count. A request is admitted while the estimate after it stays within
//! `count + burst`. The estimate is compared as an exact fraction in integers (all sides
//! times `period`), never rounded, and it only falls as time passes (it is continuous across
//! a window boundary), so every wait below is the first nanosecond at which it holds.
//!
//! Delay (without `nodelay`): a request whose estimate, itself included, is above
//! `count + delay` waits until that estimate has fallen to `count + delay` — time until
//! conforming, as token_bucket's. Rejected: `retry_after` is the first nanosecond at which
//! the estimate leaves room for the request (0 for a cost above the limit). `reset` is when
//! both counts have left the sliding window: the end of the next window while the current
//! one holds anything, else the end of the current one while the previous one does.
//!
//! Counts are `u32` and saturate (4 294 967 295 units per window is far above any limit
//! this makes sense for), so a key is 16 bytes.

use super::{Decision, Limiter, Params, Verdict, NODELAY};

pub struct SlidingWindow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// The window `curr` counts in, as `now / period`.
    window: u64,
    /// Units admitted in the window before it.
    prev: u32,
    /// Units admitted in it.
    curr: u32,
}

/// The state as seen at `now`: the current window's start and how far into it `now` is.
#[derive(Clone, Copy)]
struct View {
    window: u64,
    start: u64,
    elapsed: u64,
    prev: u64,
    curr: u64,
}

impl State {
    /// The counts at `now`, rolled forward over the windows that have begun since. A clock
    /// that appears to go backwards (another thread read it a moment earlier) counts as the
    /// start of the stored window.
    fn at(&self, now: u64, len: u64) -> View {
        let current = now / len;
        let (window, prev, curr) = if current <= self.window {
            (self.window, self.prev, self.curr)
        } else if current == self.window + 1 {
            (current, self.curr, 0)
        } else {
            (current, 0, 0)
        };
        let start = window.saturating_mul(len);
        View {
            window,
            start,
            elapsed: now.saturating_sub(start),
            prev: u64::from(prev),
            curr: u64::from(curr),
        }
    }
}

/// `prev·(len − elapsed) + curr·len`: the estimate times `len`, exactly.
#[inline]
fn weighted(prev: u64, curr: u64, elapsed: u64, len: u64) -> u128 {
    u128::from(prev) * u128::from(len - elapsed.min(len)) + u128::from(curr) * u128::from(len)
}

/// The first `e` into a window at which `weight·(len − e) ≤ room·len`.
#[inline]
fn first_fit(weight: u64, room: u64, len: u64) -> u64 {
    if weight == 0 {
        return 0;
    }
    let fits = u128::from(room) * u128::from(len) / u128::from(weight);
    len - fits.min(u128::from(len)) as u64
}

/// Nanoseconds from `now` until counts `prev` and `curr`, seen in `v`'s window, estimate
/// at most `budget`, nothing more being charged. At most the end of the next window, when
/// both have left.
fn wait_until_within(v: &View, prev: u64, curr: u64, budget: u64, len: u64, now: u64) -> u64 {
    if curr <= budget {
        let e = first_fit(prev, budget - curr, len);
        if e < len {
            return v.start.saturating_add(e).saturating_sub(now);
        }
    }
    // In the next window `curr` is the previous count and nothing is current.
    let e = first_fit(curr, budget, len);
    v.start
        .saturating_add(len)
        .saturating_add(e)
        .saturating_sub(now)
}

impl Limiter for SlidingWindow {
    type State = State;

    /// Both counts 0; the window index is irrelevant then (it needs the rate).
    fn fresh(_now: u64) -> State {
        State {
            window: 0,
            prev: 0,
            curr: 0,
        }
    }

    fn check(state: &State, now: u64, p: &Params) -> Decision {
        let len = p.rate.period.nanos();
        let v = state.at(now, len);
        let limit = p.rate.count.get().saturating_add(p.burst);
        let after = v.curr.saturating_add(p.cost);
        // Whole cost-1 requests that fit beside `prev`'s weight.
        let room = (u128::from(limit) * u128::from(len))
            .saturating_sub(weighted(v.prev, 0, v.elapsed, len))
            / u128::from(len);
        let room = u64::try_from(room).unwrap_or(u64::MAX);
        if after > room {
            let retry_after = if p.cost > limit {
                0
            } else {
                wait_until_within(&v, v.prev, v.curr, limit - p.cost, len, now)
            };
            return Decision {
                verdict: Verdict::Reject { retry_after },
                remaining: room.saturating_sub(v.curr),
                reset: reset(&v, v.curr, len, now),
            };
        }
        let free = p.rate.count.get().saturating_add(p.delay);
        let verdict = if p.delay != NODELAY
            && weighted(v.prev, after, v.elapsed, len) > u128::from(free) * u128::from(len)
        {
            Verdict::Delay(wait_until_within(&v, v.prev, after, free, len, now))
        } else {
            Verdict::Pass
        };
        Decision {
            verdict,
            remaining: room - after,
            reset: reset(&v, after, len, now),
        }
    }

    fn charge(state: &mut State, now: u64, p: &Params) {
        let v = state.at(now, p.rate.period.nanos());
        let cost = u32::try_from(p.cost).unwrap_or(u32::MAX);
        state.window = v.window;
        state.prev = u32::try_from(v.prev).unwrap_or(u32::MAX);
        state.curr = u32::try_from(v.curr)
            .unwrap_or(u32::MAX)
            .saturating_add(cost);
    }

    /// From the current window's count first, then from the previous one's (the units
    /// were charged before the window turned).
    fn refund(state: &mut State, now: u64, p: &Params) {
        let v = state.at(now, p.rate.period.nanos());
        let from_curr = v.curr.min(p.cost);
        let from_prev = v.prev.min(p.cost - from_curr);
        state.window = v.window;
        state.prev = u32::try_from(v.prev - from_prev).unwrap_or(u32::MAX);
        state.curr = u32::try_from(v.curr - from_curr).unwrap_or(u32::MAX);
    }

    fn is_drained(state: &State, now: u64, p: &Params) -> bool {
        let v = state.at(now, p.rate.period.nanos());
        v.prev == 0 && v.curr == 0
    }
}

/// Nanoseconds until neither count is inside the sliding window any more.
#[inline]
fn reset(v: &View, curr: u64, len: u64, now: u64) -> u64 {
    let windows = if curr > 0 {
        2
    } else if v.prev > 0 {
        1
    } else {
        return 0;
    };
    v.start.saturating_add(windows * len).saturating_sub(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Period, NANOS_PER_MS};

    const MS: u64 = NANOS_PER_MS;

    use crate::testing::{rate, rejected, ten_per_second};

    type Key = crate::testing::Key<SlidingWindow>;

    #[test]
    fn a_full_window_still_weighs_on_the_next_one() {
        let mut key = Key::new(ten_per_second(0, NODELAY));
        for _ in 0..10 {
            assert_eq!(key.at(900 * MS), Verdict::Pass);
        }
        assert!(rejected(key.at(900 * MS)));
        // At 1.25 s the previous second weighs 10 × 0.75 = 7.5: two more fit, not three.
        assert_eq!(key.at(1_250 * MS), Verdict::Pass);
        assert_eq!(key.at(1_250 * MS), Verdict::Pass);
        assert!(rejected(key.at(1_250 * MS)));
    }

    #[test]
    fn retry_after_is_the_first_nanosecond_the_estimate_leaves_room() {
        let p = ten_per_second(0, NODELAY);
        let mut state = SlidingWindow::fresh(0);
        for _ in 0..10 {
            SlidingWindow::charge(&mut state, 900 * MS, &p);
        }
        // 10·(1 − e) + 0 + 1 ≤ 10 from e = 0.1 s into the next second.
        let now = 950 * MS;
        let Verdict::Reject { retry_after } = SlidingWindow::check(&state, now, &p).verdict else {
            panic!("expected a rejection");
        };
        assert_eq!(now + retry_after, 1_100 * MS);
        assert!(SlidingWindow::check(&state, now + retry_after, &p).admitted());
        assert!(!SlidingWindow::check(&state, now + retry_after - 1, &p).admitted());
    }

    #[test]
    fn retry_after_rounds_up_to_a_whole_nanosecond() {
        // 3 in the previous second, limit 3: room for 1 needs 3·(1 − e) ≤ 2, e ≥ 1/3 s.
        let p = Params {
            delay: NODELAY,
            ..Params::new(rate(3, Period::Second))
        };
        let mut state = SlidingWindow::fresh(0);
        for _ in 0..3 {
            SlidingWindow::charge(&mut state, 0, &p);
        }
        let now = Period::Second.nanos();
        let Verdict::Reject { retry_after } = SlidingWindow::check(&state, now, &p).verdict else {
            panic!("expected a rejection");
        };
        assert_eq!(retry_after, 333_333_334);
    }

    #[test]
    fn excess_waits_until_the_estimate_falls_to_count_plus_delay() {
        let mut key = Key::new(ten_per_second(10, 0));
        for _ in 0..10 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        // The 11th makes 11 in the current second: it conforms when 11·(1 − e) ≤ 10 in
        // the next, e = 1/11 s.
        assert_eq!(key.at(0), Verdict::Delay(1_000 * MS + 90_909_091));
        let Verdict::Delay(twelfth) = key.at(0) else {
            panic!("expected a delay");
        };
        assert_eq!(twelfth, 1_000 * MS + 166_666_667);
    }

    #[test]
    fn nodelay_never_delays() {
        let mut key = Key::new(ten_per_second(10, NODELAY));
        for _ in 0..20 {
            assert_eq!(key.at(0), Verdict::Pass);
        }
        assert!(rejected(key.at(0)));
    }

    #[test]
    fn a_cost_above_the_limit_is_never_admitted() {
        let p = Params {
            cost: 11,
            ..ten_per_second(0, NODELAY)
        };
        let d = SlidingWindow::check(&SlidingWindow::fresh(0), 0, &p);
        assert_eq!(d.verdict, Verdict::Reject { retry_after: 0 });
    }

    #[test]
    fn remaining_and_reset_describe_both_windows() {
        let p = ten_per_second(0, NODELAY);
        let mut state = SlidingWindow::fresh(0);
        for _ in 0..4 {
            SlidingWindow::charge(&mut state, 200 * MS, &p);
        }
        let d = SlidingWindow::check(&state, 500 * MS, &p);
        assert_eq!((d.remaining, d.reset), (5, 1_500 * MS));
        // At 1.5 s the four weigh 2: seven more fit beside this one, which leaves at 3 s.
        let d = SlidingWindow::check(&state, 1_500 * MS, &p);
        assert_eq!((d.remaining, d.reset), (7, 1_500 * MS));
        state = SlidingWindow::fresh(0);
        SlidingWindow::charge(&mut state, 200 * MS, &p);
        let d = SlidingWindow::check(&state, 1_500 * MS, &Params { cost: 10, ..p });
        assert_eq!((d.remaining, d.reset), (9, 500 * MS));
    }

    #[test]
    fn a_key_is_drained_when_both_counts_have_left() {
        let p = ten_per_second(0, NODELAY);
        let mut state = SlidingWindow::fresh(0);
        SlidingWindow::charge(&mut state, 500 * MS, &p);
        assert!(!SlidingWindow::is_drained(&state, 1_999_999_999, &p));
        assert!(SlidingWindow::is_drained(&state, 2_000 * MS, &p));
    }
}

//! `sliding_log`: the exact sliding window. The key keeps the time of every unit admitted
//! in the last period and admits a request while the units in `(now − period, now]` plus
//! its cost stay within `count + burst`.
//!
//! A request is one entry, its time and its cost (requests that share a nanosecond share
//! an entry), so a key holds at most `count + burst` entries, each 16 bytes on the heap:
//! exactness costs memory, `period`-long memory, which is why the zone accounts it
//! ([`heap_bytes`](Limiter::heap_bytes)). Entries that have left the window are dropped
//! on every charge, and a buffer that a burst grew is given back once a quarter full.
//!
//! Delay (without `nodelay`): a request that takes the window above `count + delay` units,
//! itself included, waits until enough of the oldest units (its own last) have left for the
//! window to hold `count + delay` again. Rejected: `retry_after` is when enough of the
//! oldest units have left for it to fit (0 for a cost above the limit). `reset` is when
//! the newest entry leaves the window.

use std::collections::VecDeque;
use std::iter;

use super::{Decision, Limiter, Params, Verdict, NODELAY};

pub struct SlidingLog;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Oldest first; times never decrease.
    entries: VecDeque<Entry>,
    /// The units of all `entries`, so that a check need not add up the whole log (only
    /// the few entries that have left the window since the last charge).
    total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Nanoseconds since the zone's epoch.
    at: u64,
    units: u64,
}

impl State {
    /// Index of the first entry still inside the window at `now`, the window being
    /// `(now − len, now]`.
    #[inline]
    fn first_live(&self, now: u64, len: u64) -> usize {
        self.entries
            .partition_point(|e| e.at.saturating_add(len) <= now)
    }

    /// When a request at `now` is written: `now`, or the newest entry's time if the clock
    /// appears to have gone backwards (another thread read it a moment earlier), so that
    /// times never decrease.
    #[inline]
    fn stamp(&self, now: u64) -> u64 {
        self.entries.back().map_or(now, |e| e.at.max(now))
    }
}

/// The time of the entry with which, oldest first, `units` units have been counted: when
/// it leaves the window, so have they.
fn entry_completing<'a>(entries: impl Iterator<Item = &'a Entry>, units: u64) -> Option<u64> {
    let mut counted = 0u64;
    for e in entries {
        counted = counted.saturating_add(e.units);
        if counted >= units {
            return Some(e.at);
        }
    }
    None
}

impl Limiter for SlidingLog {
    type State = State;

    fn fresh(_now: u64) -> State {
        State::default()
    }

    fn check(state: &State, now: u64, p: &Params) -> Decision {
        let len = p.rate.period.nanos();
        let first = state.first_live(now, len);
        let live = state.entries.range(first..);
        let expired = state
            .entries
            .range(..first)
            .fold(0u64, |n, e| n.saturating_add(e.units));
        let used = state.total.saturating_sub(expired);
        let limit = p.rate.count.get().saturating_add(p.burst);
        let after = used.saturating_add(p.cost);
        // Nanoseconds until an entry at `at` leaves the window.
        let leaves = |at: u64| at.saturating_add(len).saturating_sub(now);
        if after > limit {
            let retry_after = if p.cost > limit {
                0
            } else {
                entry_completing(live.clone(), after - limit).map_or(0, leaves)
            };
            return Decision {
                verdict: Verdict::Reject { retry_after },
                remaining: limit.saturating_sub(used),
                reset: live.last().map_or(0, |e| leaves(e.at)),
            };
        }
        let stamp = state.stamp(now);
        let free = p.rate.count.get().saturating_add(p.delay);
        let verdict = if p.delay != NODELAY && after > free {
            let this = Entry {
                at: stamp,
                units: p.cost,
            };
            let at = entry_completing(live.chain(iter::once(&this)), after - free);
            Verdict::Delay(leaves(at.unwrap_or(stamp)))
        } else {
            Verdict::Pass
        };
        Decision {
            verdict,
            remaining: limit - after,
            reset: leaves(stamp),
        }
    }

    fn charge(state: &mut State, now: u64, p: &Params) {
        let first = state.first_live(now, p.rate.period.nanos());
        for gone in state.entries.drain(..first) {
            state.total = state.total.saturating_sub(gone.units);
        }
        state.total = state.total.saturating_add(p.cost);
        let stamp = state.stamp(now);
        match state.entries.back_mut() {
            Some(newest) if newest.at == stamp => {
                newest.units = newest.units.saturating_add(p.cost);
            }
            _ => state.entries.push_back(Entry {
                at: stamp,
                units: p.cost,
            }),
        }
        let len = state.entries.len();
        if state.entries.capacity() > 4 * len.max(4) {
            state.entries.shrink_to(2 * len);
        }
    }

    /// From the newest entries back: the units most recently charged.
    fn refund(state: &mut State, _now: u64, p: &Params) {
        let mut left = p.cost;
        while left > 0 {
            let Some(newest) = state.entries.back_mut() else {
                break;
            };
            let taken = newest.units.min(left);
            newest.units -= taken;
            state.total = state.total.saturating_sub(taken);
            left -= taken;
            if newest.units == 0 {
                state.entries.pop_back();
            }
        }
    }

    fn is_drained(state: &State, now: u64, p: &Params) -> bool {
        let len = p.rate.period.nanos();
        state
            .entries
            .back()
            .is_none_or(|e| e.at.saturating_add(len) <= now)
    }

    fn heap_bytes(state: &State) -> usize {
        state.entries.capacity() * size_of::<Entry>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Period, NANOS_PER_MS};

    const MS: u64 = NANOS_PER_MS;

    use crate::testing::{rate, rejected, ten_per_second};

    type Key = crate::testing::Key<SlidingLog>;

    #[test]
    fn any_period_holds_at_most_the_limit() {
        let mut key = Key::new(ten_per_second(0, NODELAY));
        for i in 0..10 {
            assert_eq!(key.at(i * 50 * MS), Verdict::Pass);
        }
        assert!(rejected(key.at(999 * MS)));
        // The first unit leaves exactly one period after it came in, the second 50 ms later.
        assert_eq!(key.at(1_000 * MS), Verdict::Pass);
        assert!(rejected(key.at(1_049 * MS)));
        assert_eq!(key.at(1_050 * MS), Verdict::Pass);
    }

    #[test]
    fn retry_after_waits_for_enough_of_the_oldest_units_to_leave() {
        let one = ten_per_second(0, NODELAY);
        let mut state = SlidingLog::fresh(0);
        for i in 0..9 {
            SlidingLog::charge(&mut state, i * 100 * MS, &one);
        }
        // 9 units at 0, 100, …, 800 ms: a cost of 3 needs two to leave, the second at 1.1 s.
        let p = Params { cost: 3, ..one };
        let now = 900 * MS;
        let d = SlidingLog::check(&state, now, &p);
        assert_eq!(
            d.verdict,
            Verdict::Reject {
                retry_after: 200 * MS
            }
        );
        assert!(SlidingLog::check(&state, 1_100 * MS, &p).admitted());
        assert!(!SlidingLog::check(&state, 1_100 * MS - 1, &p).admitted());
    }

    #[test]
    fn excess_waits_until_the_window_holds_count_plus_delay() {
        let mut key = Key::new(ten_per_second(10, 2));
        for i in 0..12 {
            assert_eq!(key.at(i * 10 * MS), Verdict::Pass, "request {i}");
        }
        // The 13th needs the oldest unit (at 0) to leave; the 14th, the one at 10 ms.
        assert_eq!(key.at(200 * MS), Verdict::Delay(800 * MS));
        assert_eq!(key.at(200 * MS), Verdict::Delay(810 * MS));
    }

    #[test]
    fn a_cost_above_count_plus_delay_waits_for_itself_to_leave() {
        let mut key = Key::new(Params {
            cost: 12,
            ..ten_per_second(5, 0)
        });
        assert_eq!(key.at(300 * MS), Verdict::Delay(1_000 * MS));
    }

    #[test]
    fn a_cost_above_the_limit_is_never_admitted() {
        let p = Params {
            cost: 11,
            ..ten_per_second(0, NODELAY)
        };
        let d = SlidingLog::check(&SlidingLog::fresh(0), 0, &p);
        assert_eq!(d.verdict, Verdict::Reject { retry_after: 0 });
    }

    #[test]
    fn heap_bytes_follow_the_buffer_and_shrink_after_a_burst() {
        let p = Params {
            rate: rate(1_000, Period::Second),
            ..ten_per_second(0, NODELAY)
        };
        let mut state = SlidingLog::fresh(0);
        assert_eq!(SlidingLog::heap_bytes(&state), 0);
        for i in 0..500 {
            SlidingLog::charge(&mut state, i, &p);
        }
        assert_eq!(state.entries.len(), 500);
        assert!(SlidingLog::heap_bytes(&state) >= 500 * 16);
        SlidingLog::charge(&mut state, 2_000 * MS, &p);
        assert_eq!(state.entries.len(), 1);
        assert!(SlidingLog::heap_bytes(&state) <= 4 * 16, "{state:?}");
    }

    #[test]
    fn requests_in_the_same_nanosecond_share_an_entry() {
        let p = ten_per_second(0, NODELAY);
        let mut state = SlidingLog::fresh(0);
        for _ in 0..5 {
            SlidingLog::charge(&mut state, 7, &p);
        }
        assert_eq!(state.entries.len(), 1);
        assert_eq!(SlidingLog::check(&state, 7, &p).remaining, 4);
    }

    #[test]
    fn remaining_and_reset_describe_the_log() {
        let p = ten_per_second(5, NODELAY);
        let mut state = SlidingLog::fresh(0);
        SlidingLog::charge(&mut state, 100 * MS, &p);
        let d = SlidingLog::check(&state, 400 * MS, &p);
        assert_eq!((d.remaining, d.reset), (13, 1_000 * MS));
    }

    #[test]
    fn a_key_is_drained_when_no_entry_is_inside_the_window() {
        let p = ten_per_second(5, NODELAY);
        let mut state = SlidingLog::fresh(0);
        assert!(SlidingLog::is_drained(&state, 0, &p));
        SlidingLog::charge(&mut state, 100 * MS, &p);
        assert!(!SlidingLog::is_drained(&state, 1_100 * MS - 1, &p));
        assert!(SlidingLog::is_drained(&state, 1_100 * MS, &p));
    }
}

//! Soft limits (`soft = "10%"` on a limit item, "Soft limits" in docs/config.md): the
//! arithmetic of a key's second, smaller budget, its *lane*.
//!
//! The lane is the item's limit scaled by the share: rate `rate × share`, and room for
//! `ceil((burst + 1) × share)` requests at once (for the window algorithms, a window of
//! `ceil((count + burst) × share)`). It is asked only when the base limit rejects a
//! request. If it admits, the request passes at once (never delayed), is charged to the
//! lane only, and is marked soft; if it rejects too, the request is rejected. A client far
//! over its limit so gets at most `rate × (1 + share)` through, and what passes above the
//! base is exactly what is marked.
//!
//! The lane's keys live beside the zone's (`zone/lane.rs`, or Redis for a Redis zone);
//! this file is only numbers.

use std::num::NonZeroU16;

use super::{Algorithm, Decision, Params, Period, Rate, Verdict, NODELAY};

/// A soft share of a limit, in thousandths: `"10%"` is 100, `"0.5%"` is 5. From 1 (0.1 %)
/// to 1000 (100 %).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Share(NonZeroU16);

impl Share {
    /// The most a share can be: 100 %.
    pub const MAX_PERMILLE: u16 = 1000;

    /// `permille` thousandths, if from 1 to 1000.
    pub fn from_permille(permille: u16) -> Option<Share> {
        (permille <= Share::MAX_PERMILLE)
            .then(|| NonZeroU16::new(permille).map(Share))
            .flatten()
    }

    pub fn permille(self) -> u16 {
        self.0.get()
    }

    /// `ceil(units × share)`: at least 1 for any `units` above 0.
    fn of_units(self, units: u64) -> u64 {
        let scaled = u128::from(units) * u128::from(self.permille());
        u64::try_from(scaled.div_ceil(1000)).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, tenth) = (self.permille() / 10, self.permille() % 10);
        match tenth {
            0 => write!(f, "{whole}%"),
            _ => write!(f, "{whole}.{tenth}%"),
        }
    }
}

/// What the lane asks of a request whose base limit asks `base`, in a zone running
/// `algorithm`: the share of the limit, never delayed, the same cost.
pub fn lane_params(base: &Params, share: Share, algorithm: Algorithm) -> Params {
    if algorithm.is_window() {
        // A window admits `count + burst`; the lane's window admits its share.
        let window = base.rate.count.get().saturating_add(base.burst);
        let count = share.of_units(window);
        return Params {
            rate: Rate::new(count, base.rate.period).unwrap_or(base.rate),
            burst: 0,
            delay: NODELAY,
            ..*base
        };
    }
    // A bucket admits `burst + 1` at once (nginx: the first request of an empty bucket
    // is free, then `burst` more).
    let room = share.of_units(base.burst.saturating_add(1));
    Params {
        rate: lane_rate(base.rate, share),
        burst: room - 1,
        delay: NODELAY,
        ..*base
    }
}

/// `rate × share`, rounded down (the lane never refills faster than its share), in the
/// shortest unit that keeps at least 100 requests per unit (so the rounding costs under
/// 1 %), up to a day. Never below one request a day: the config refuses a share that
/// would be ([`lane_rate_is_exact`]).
pub fn lane_rate(rate: Rate, share: Share) -> Rate {
    let mut thousandths = u128::from(rate.count.get()) * u128::from(share.permille());
    let mut period = rate.period;
    while thousandths < 100_000 {
        let (longer, times) = match period {
            Period::Second => (Period::Minute, 60),
            Period::Minute => (Period::Hour, 60),
            Period::Hour => (Period::Day, 24),
            Period::Day => break,
        };
        thousandths *= times;
        period = longer;
    }
    let count = u64::try_from(thousandths / 1000).unwrap_or(u64::MAX);
    Rate::new(count.max(1), period).unwrap_or(rate)
}

/// Whether `rate × share` is at least one request a day, so that [`lane_rate`] is the
/// share and not more.
pub fn lane_rate_is_exact(rate: Rate, share: Share) -> bool {
    let per_day = u128::from(rate.count.get())
        * u128::from(Period::Day.seconds() / rate.period.seconds())
        * u128::from(share.permille());
    per_day >= 1000
}

/// The `retry_after` of a request both the base limit and the lane rejected: the sooner
/// of the two (either admits it then), where 0 means "never" for one of them.
pub fn sooner(base: u64, lane: u64) -> u64 {
    match (base, lane) {
        (0, other) | (other, 0) => other,
        (base, lane) => base.min(lane),
    }
}

/// A soft admission's answer, for the headers: a pass with nothing left (the draft's
/// `r=0`), and the reset of the base state, which `rejected` (the base decision) tells.
pub fn soft_pass(rejected: &Decision) -> Decision {
    Decision {
        verdict: Verdict::Pass,
        remaining: 0,
        reset: rejected.reset,
    }
}

/// The base decision `rejected` when the lane did not cover it (`lane`: its answer, if it
/// was asked): it may pass as soon as either admits it.
pub fn still_rejected(rejected: &Decision, lane: Option<Decision>) -> Decision {
    let base = match rejected.verdict {
        Verdict::Reject { retry_after } => retry_after,
        Verdict::Pass | Verdict::Delay(_) => 0,
    };
    let retry_after = match lane.map(|d| d.verdict) {
        Some(Verdict::Reject { retry_after }) => sooner(base, retry_after),
        _ => base,
    };
    Decision {
        verdict: Verdict::Reject { retry_after },
        ..*rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rate;

    fn share(permille: u16) -> Share {
        Share::from_permille(permille).expect("1 to 1000")
    }

    #[test]
    fn shares_run_from_a_tenth_of_a_percent_to_a_hundred() {
        assert_eq!(Share::from_permille(0), None);
        assert_eq!(Share::from_permille(1001), None);
        assert_eq!(share(1).to_string(), "0.1%");
        assert_eq!(share(100).to_string(), "10%");
        assert_eq!(share(1000).to_string(), "100%");
    }

    #[test]
    fn a_bucket_lane_holds_the_ceiling_of_its_share_of_burst_plus_one() {
        let base = Params {
            burst: 9,
            delay: 3,
            cost: 1,
            ..Params::new(rate(1, Period::Hour))
        };
        let lane = lane_params(&base, share(200), Algorithm::TokenBucket);
        assert_eq!(lane.burst, 1, "ceil(10 × 20 %) = 2 at once");
        assert_eq!(lane.delay, NODELAY, "never delayed");
        assert_eq!(lane.rate, rate(4, Period::Day), "4.8 a day, rounded down");
        let small = lane_params(
            &Params::new(rate(10, Period::Second)),
            share(1),
            Algorithm::LeakyBucket,
        );
        assert_eq!(small.burst, 0, "one request at least");
    }

    #[test]
    fn a_window_lane_admits_its_share_of_the_window() {
        let base = Params {
            burst: 5,
            ..Params::new(rate(100, Period::Minute))
        };
        let lane = lane_params(&base, share(100), Algorithm::FixedWindow);
        assert_eq!((lane.rate, lane.burst), (rate(11, Period::Minute), 0));
        let lane = lane_params(&base, share(5), Algorithm::SlidingLog);
        assert_eq!(lane.rate, rate(1, Period::Minute), "ceil(0.525)");
    }

    #[test]
    fn lane_rates_keep_their_unit_when_precise_and_never_exceed_the_share() {
        assert_eq!(
            lane_rate(rate(1000, Period::Second), share(100)),
            rate(100, Period::Second)
        );
        assert_eq!(
            lane_rate(rate(10, Period::Second), share(100)),
            rate(3600, Period::Hour)
        );
        assert_eq!(
            lane_rate(rate(7, Period::Minute), share(333)),
            rate(139, Period::Hour)
        );
        for (count, period) in [(1, Period::Second), (3, Period::Minute), (17, Period::Hour)] {
            for permille in [1, 7, 100, 333, 999, 1000] {
                let (base, s) = (rate(count, period), share(permille));
                let lane = lane_rate(base, s);
                let wanted = base.per_second() * f64::from(permille) / 1000.0;
                if lane_rate_is_exact(base, s) {
                    assert!(
                        lane.per_second() <= wanted * (1.0 + 1e-9),
                        "{base} {s}: {lane}"
                    );
                    assert!(lane.per_second() >= wanted * 0.99 || lane.period == Period::Day);
                }
            }
        }
        assert!(!lane_rate_is_exact(rate(1, Period::Day), share(100)));
        assert!(lane_rate_is_exact(rate(10, Period::Day), share(100)));
    }

    #[test]
    fn the_sooner_retry_wins_and_never_yields_to_the_other() {
        assert_eq!(sooner(5, 3), 3);
        assert_eq!(sooner(0, 3), 3);
        assert_eq!(sooner(5, 0), 5);
        assert_eq!(sooner(0, 0), 0);
    }
}

//! Pure limiting (docs/config.md, `[zones.NAME]`): one file per algorithm, each a set of
//! functions over `(state, now, params)`; [`key`] turns a request into a zone key;
//! [`store`] keeps per-key state in bounded memory; [`zone`] ties them together;
//! [`decision`] decides local zones together; [`remote`] is what a zone kept in Redis
//! means here, as values. Deciding across local and Redis zones, waiting, spawning and
//! Redis itself are the application's (`admission`, `shared`): this crate never does I/O.
//!
//! Time is `now`: nanoseconds since the zone's epoch, read once per request by the
//! shell and passed down. Nothing here reads a clock or sleeps.

#![deny(unsafe_code)]
// clippy.toml's clock reads (found from the workspace root): the caller passes the time.
#![deny(clippy::disallowed_methods)]

// The one variable language, below this crate: a key template is a `vars::VarText`.
use tollgate_vars as vars;

pub mod adaptive;
pub mod bans;
pub mod concurrency;
pub mod decision;
pub mod fixed_window;
pub mod key;
pub mod keys;
pub mod leaky_bucket;
pub mod outcome;
pub mod remote;
pub mod rule;
pub mod settle;
pub mod sliding_log;
pub mod sliding_window;
pub mod soft;
// The one module with `unsafe`: memory a lock-free lookup reads (see its docs).
#[allow(unsafe_code)]
pub mod store;
pub mod token_bucket;
pub mod zone;

use std::num::NonZeroU64;
use std::time::Instant;

/// Nanoseconds in a millisecond; nginx's limiters count whole milliseconds.
pub const NANOS_PER_MS: u64 = 1_000_000;
/// Nanoseconds in a second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A request as the limiter sees it: its key in each zone of its location's list
/// (rendered once, when it arrived), its plan, and when and on which worker it arrived.
pub struct Arrival {
    pub keys: keys::Keys,
    /// The plan of its API key (`[api_keys]`), if it has one.
    pub plan: Option<usize>,
    /// When it arrived: every zone decides it at this instant.
    pub now: Instant,
    /// The worker thread serving it (Redis zones use that worker's connection).
    pub worker: usize,
}

/// A rate: `count` requests per `period`. Kept as written, never truncated to a per-second
/// integer as nginx does (its `1r/m` is one request per 62.5 s; ours is per 60 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rate {
    pub count: NonZeroU64,
    pub period: Period,
}

/// The unit a rate is written in (`r/s`, `r/m`, `r/h`, `r/d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Period {
    Second,
    Minute,
    Hour,
    Day,
}

impl Period {
    pub const fn millis(self) -> u64 {
        match self {
            Period::Second => 1_000,
            Period::Minute => 60_000,
            Period::Hour => 3_600_000,
            Period::Day => 86_400_000,
        }
    }

    pub const fn nanos(self) -> u64 {
        self.millis() * NANOS_PER_MS
    }

    pub const fn seconds(self) -> u64 {
        self.millis() / 1_000
    }
}

impl Rate {
    pub fn new(count: u64, period: Period) -> Option<Rate> {
        Some(Rate {
            count: NonZeroU64::new(count)?,
            period,
        })
    }

    /// Requests per second as a float, for comparing rates only (never for deciding).
    pub fn per_second(self) -> f64 {
        self.count.get() as f64 / self.period.seconds() as f64
    }

    /// This rate times `permille`/1000 (an adaptive zone's factor), rounded, at least 1.
    /// The period is kept, except that with `promote` (the buckets, whose period is only
    /// a unit) a count that would scale to under 10 first moves to the next longer
    /// period, so small rates scale smoothly: `1r/s` at 0.25 is `15r/m`, not `1r/s`. The
    /// window algorithms keep their period, because their windows align to it.
    pub fn scaled(self, permille: u32, promote: bool) -> Rate {
        let permille = u64::from(permille.min(1000));
        if permille == 1000 {
            return self;
        }
        let (mut count, mut period) = (self.count.get(), self.period);
        while promote && count.saturating_mul(permille) < 10_000 {
            let (factor, longer) = match period {
                Period::Second => (60, Period::Minute),
                Period::Minute => (60, Period::Hour),
                Period::Hour => (24, Period::Day),
                Period::Day => break,
            };
            (count, period) = (count.saturating_mul(factor), longer);
        }
        let scaled = (count.saturating_mul(permille) + 500) / 1000;
        Rate::new(scaled.max(1), period).unwrap_or(self)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.period {
            Period::Second => "s",
            Period::Minute => "m",
            Period::Hour => "h",
            Period::Day => "d",
        };
        write!(f, "{}r/{unit}", self.count)
    }
}

/// What one limit rule asks of one request in one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The key's rate: the zone's own, or its plan's.
    pub rate: Rate,
    /// Requests allowed above the rate (nginx `burst`). For the window algorithms the
    /// window admits `rate.count + burst`.
    pub burst: u64,
    /// Requests above the rate let through at once (nginx `delay=N`); the rest of the
    /// burst waits. 0 delays every excess request (nginx's default); [`NODELAY`] never delays.
    pub delay: u64,
    /// Units this request takes (the location's `cost`); at least 1.
    pub cost: u64,
    /// In-flight requests allowed per key (`concurrency` only).
    pub max: u64,
}

/// `delay` for `nodelay`: no request is ever delayed.
pub const NODELAY: u64 = u64::MAX;

impl Params {
    /// `rate` with no burst, nginx's default (every excess delayed), cost 1.
    pub fn new(rate: Rate) -> Params {
        Params {
            rate,
            burst: 0,
            delay: 0,
            cost: 1,
            max: 0,
        }
    }
}

/// The answer of one zone for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// Requests of cost 1 that would still be admitted right now after this one
    /// (burst included): the draft header's `r`.
    pub remaining: u64,
    /// Nanoseconds until the key's state has fully drained, this request included when
    /// admitted: the draft header's `t` and legacy `X-RateLimit-Reset`.
    pub reset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted now.
    Pass,
    /// Admitted after this many nanoseconds, fixed at arrival.
    Delay(u64),
    /// Not admitted; the same request would be admitted after this many nanoseconds at
    /// the earliest (0 when it never would, e.g. a cost above the whole burst).
    Reject { retry_after: u64 },
}

impl Decision {
    pub fn admitted(&self) -> bool {
        !matches!(self.verdict, Verdict::Reject { .. })
    }
}

/// Which algorithm a zone runs (`algorithm` in docs/config.md): the one name the
/// configuration, the zones, Redis and the admin API share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// nginx's `limit_req`, decision for decision.
    LeakyBucket,
    /// GCRA.
    TokenBucket,
    FixedWindow,
    SlidingWindow,
    SlidingLog,
    /// Requests in flight per key (nginx's `limit_conn`, per request).
    Concurrency,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::LeakyBucket,
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::Concurrency,
    ];

    /// The name the configuration writes it with.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::Concurrency => "concurrency",
        }
    }

    /// Whether windows follow the wall clock (a `r/d` window starts at midnight UTC).
    pub fn is_window(self) -> bool {
        matches!(
            self,
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog
        )
    }

    /// Whether a zone of it may keep its state in Redis (`concurrency` may not: an
    /// in-flight count is given back when a response ends, which a crashed instance
    /// never does).
    pub fn can_use_redis(self) -> bool {
        self != Algorithm::Concurrency
    }
}

/// One algorithm's arithmetic: how a key's state decides a request and is charged for it.
///
/// The pipeline calls [`check`](Limiter::check) for every zone of a location first and
/// [`charge`](Limiter::charge) only when every zone admitted (nginx: a rejected request
/// charges no zone), both at the same `now` under the key's lock.
pub trait Limiter {
    type State: Send + std::fmt::Debug + 'static;
    /// The state of a key seen for the first time at `now`.
    fn fresh(now: u64) -> Self::State;
    /// The decision for a request at `now`, changing nothing.
    fn check(state: &Self::State, now: u64, p: &Params) -> Decision;
    /// Takes an admitted request's units from the state.
    fn charge(state: &mut Self::State, now: u64, p: &Params);
    /// Gives back `p.cost` units charged earlier, as far as the state still holds them:
    /// units a settled request does not owe after all (see [`settle`]). Never below
    /// [`fresh`](Limiter::fresh).
    fn refund(state: &mut Self::State, now: u64, p: &Params);
    /// Whether the state carries no information any more: dropping it now would change
    /// no later decision (it equals [`fresh`](Limiter::fresh)).
    fn is_drained(state: &Self::State, now: u64, p: &Params) -> bool;
    /// Heap bytes the state owns beyond its own size (the store accounts them).
    fn heap_bytes(_state: &Self::State) -> usize {
        0
    }
}

/// `ceil(a / b)` for `b > 0`.
#[inline]
pub(crate) const fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

#[cfg(test)]
mod rate_tests {
    use super::{Period, Rate};

    fn rate(count: u64, period: Period) -> Rate {
        Rate::new(count, period).expect("non-zero")
    }

    #[test]
    fn scaled_rate_keeps_period_rounds_and_promotes_small_rates() {
        let fifty = rate(50, Period::Second);
        assert_eq!(fifty.scaled(1000, true), fifty);
        assert_eq!(fifty.scaled(250, true), rate(13, Period::Second)); // 12.5 rounds up
        assert_eq!(fifty.scaled(562, false), rate(28, Period::Second));
        // Small rates move to a longer period first (buckets only).
        assert_eq!(
            rate(1, Period::Second).scaled(250, true),
            rate(15, Period::Minute)
        );
        assert_eq!(
            rate(10, Period::Hour).scaled(500, true),
            rate(120, Period::Day)
        );
        assert_eq!(
            rate(1, Period::Second).scaled(250, false),
            rate(1, Period::Second)
        );
        assert_eq!(rate(3, Period::Day).scaled(10, true), rate(1, Period::Day));
    }
}

/// What the algorithms' unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Limiter, Params, Period, Rate, Verdict};

    pub fn rate(count: u64, period: Period) -> Rate {
        Rate::new(count, period).expect("non-zero")
    }

    /// `10r/s` with `burst` and `delay` (the rate most unit tests use).
    pub fn ten_per_second(burst: u64, delay: u64) -> Params {
        Params {
            burst,
            delay,
            ..Params::new(rate(10, Period::Second))
        }
    }

    pub fn rejected(v: Verdict) -> bool {
        matches!(v, Verdict::Reject { .. })
    }

    /// One key of one zone, driven request by request at times counted in `UNIT`
    /// nanoseconds: each request is checked, and charged when admitted.
    pub struct Key<A: Limiter, const UNIT: u64 = 1> {
        state: Option<A::State>,
        p: Params,
    }

    impl<A: Limiter, const UNIT: u64> Key<A, UNIT> {
        pub fn new(p: Params) -> Self {
            Key { state: None, p }
        }

        pub fn at(&mut self, t: u64) -> Verdict {
            let now = t * UNIT;
            let state = self.state.get_or_insert_with(|| A::fresh(now));
            let d = A::check(state, now, &self.p);
            if d.admitted() {
                A::charge(state, now, &self.p);
            }
            d.verdict
        }
    }
}

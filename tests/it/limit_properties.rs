//! Every limiter algorithm against a slow, obviously-right model over random schedules
//!, and the contract of `limit::Limiter` that every one keeps: a
//! rejected request changes nothing, `retry_after` is never early, `remaining` and `reset`
//! mean what they say, and a drained key decides as a fresh one.
//!
//! leaky_bucket's model is nginx's own arithmetic (docs/config.md, `leaky_bucket`), so for r/s rates
//! its verdicts and delays must be nginx's to the millisecond.

use crate::support;

use std::collections::HashMap;
use std::fmt::Debug;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tollgate::limit::concurrency::{self, Concurrency};
use tollgate::limit::fixed_window::FixedWindow;
use tollgate::limit::leaky_bucket::LeakyBucket;
use tollgate::limit::sliding_log::SlidingLog;
use tollgate::limit::sliding_window::SlidingWindow;
use tollgate::limit::token_bucket::TokenBucket;
use tollgate::limit::{Decision, Limiter, Params, Period, Rate, Verdict, NANOS_PER_MS, NODELAY};

/// What a model says of one request.
#[derive(Debug)]
struct Expect {
    verdict: Verdict,
    /// `remaining` and `reset`, for models that define them. Without them (nginx, which has
    /// no retry time either) only the verdict's kind and a delay are compared.
    detail: Option<(u64, u64)>,
}

impl Expect {
    fn verdict(verdict: Verdict) -> Expect {
        Expect {
            verdict,
            detail: None,
        }
    }

    fn agrees(&self, d: &Decision) -> bool {
        match (self.detail, self.verdict, d.verdict) {
            (Some(detail), _, _) => {
                (d.verdict, d.remaining, d.reset) == (self.verdict, detail.0, detail.1)
            }
            (None, Verdict::Reject { .. }, Verdict::Reject { .. }) => true,
            (None, want, got) => want == got,
        }
    }
}

trait Model {
    /// Decides a request at `now` and records it when admitted.
    fn decide(&mut self, now: u64, p: &Params) -> Expect;
}

/// One request of a schedule.
#[derive(Clone, Copy, Debug)]
struct Step {
    /// Time since the previous request, in millionths of the rate's period…
    advance: u64,
    /// …plus this many nanoseconds.
    jitter: u64,
    cost: u64,
}

#[derive(Clone, Debug)]
struct Case {
    /// `cost` is each step's.
    p: Params,
    /// The first request's time, in millionths of the period.
    start: u64,
    steps: Vec<Step>,
    /// Drop a key's state once drained, as the store may.
    drop_drained: bool,
}

fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![Just(NODELAY), Just(0u64), 0..=10u64]
}

fn case(periods: &[Period], max_count: u64, max_cost: u64) -> impl Strategy<Value = Case> {
    let step = (
        prop_oneof![
            2 => Just(0u64),
            3 => 0..30_000u64,
            2 => 0..400_000u64,
            1 => 0..3_000_000u64,
        ],
        0..1_000u64,
        prop_oneof![3 => Just(1u64), 1 => 1..=max_cost],
    )
        .prop_map(|(advance, jitter, cost)| Step {
            advance,
            jitter,
            cost,
        });
    (
        prop::sample::select(periods.to_vec()),
        1..=max_count,
        0..=20u64,
        delay(),
        0..5_000_000u64,
        prop::collection::vec(step, 1..60),
        any::<bool>(),
    )
        .prop_map(
            |(period, count, burst, delay, start, steps, drop_drained)| Case {
                p: Params {
                    burst,
                    delay,
                    ..Params::new(Rate::new(count, period).expect("count ≥ 1"))
                },
                start,
                steps,
                drop_drained,
            },
        )
}

/// Runs `case` through `A` and `model` side by side, checking the contract at every step.
/// `tight_reset`: `reset` is exact, not only never early.
fn drive<A: Limiter>(
    case: &Case,
    mut model: impl Model,
    tight_reset: bool,
) -> Result<(), TestCaseError>
where
    A::State: Clone + PartialEq + Debug,
{
    let unit = case.p.rate.period.nanos() / 1_000_000;
    let mut now = case.start * unit;
    let mut state: Option<A::State> = None;
    for (i, step) in case.steps.iter().enumerate() {
        now += step.advance * unit + step.jitter;
        let p = Params {
            cost: step.cost,
            ..case.p
        };
        if case.drop_drained && state.as_ref().is_some_and(|s| A::is_drained(s, now, &p)) {
            state = None;
        }
        let s = state.get_or_insert_with(|| A::fresh(now));
        let before = s.clone();
        let d = A::check(s, now, &p);
        let want = model.decide(now, &p);
        prop_assert!(
            want.agrees(&d),
            "step {i} at {now} ns: got {d:?}, model says {want:?}"
        );
        contract::<A>(s, now, &p, &d, tight_reset)?;
        if d.admitted() {
            A::charge(s, now, &p);
        } else {
            prop_assert_eq!(&*s, &before, "a rejected request changed the state");
        }
    }
    Ok(())
}

/// What every algorithm promises about one decision `d` of `state` at `now`.
fn contract<A: Limiter>(
    state: &A::State,
    now: u64,
    p: &Params,
    d: &Decision,
    tight_reset: bool,
) -> Result<(), TestCaseError>
where
    A::State: Clone + PartialEq + Debug,
{
    prop_assert_eq!(A::check(state, now, p), *d, "check is not pure");
    match d.verdict {
        Verdict::Pass => {}
        Verdict::Delay(wait) => prop_assert!(wait > 0 && p.delay != NODELAY, "{d:?}"),
        Verdict::Reject { retry_after: 0 } => {
            // Never: not even once everything has drained.
            let later = now + (p.burst + 3) * p.rate.period.nanos();
            prop_assert!(
                !A::check(state, later, p).admitted(),
                "retry_after 0, admitted later"
            );
        }
        Verdict::Reject { retry_after } => {
            prop_assert!(
                A::check(state, now + retry_after, p).admitted(),
                "retry_after late or wrong"
            );
            prop_assert!(
                !A::check(state, now + retry_after - 1, p).admitted(),
                "retry_after not the first"
            );
        }
    }
    let mut after = state.clone();
    if d.admitted() {
        A::charge(&mut after, now, p);
    }
    prop_assert!(
        A::is_drained(&after, now + d.reset, p),
        "not drained at reset {}",
        d.reset
    );
    if tight_reset && d.reset > 0 {
        prop_assert!(
            !A::is_drained(&after, now + d.reset - 1, p),
            "drained before reset"
        );
    }
    if d.remaining <= 300 {
        let one = Params { cost: 1, ..*p };
        for k in 0..d.remaining {
            prop_assert!(
                A::check(&after, now, &one).admitted(),
                "only {k} of {} remaining",
                d.remaining
            );
            A::charge(&mut after, now, &one);
        }
        prop_assert!(
            !A::check(&after, now, &one).admitted(),
            "more than {} remaining",
            d.remaining
        );
    }
    if A::is_drained(state, now, p) {
        prop_assert_eq!(
            A::check(state, now, p),
            A::check(&A::fresh(now), now, p),
            "drained ≠ fresh"
        );
    }
    Ok(())
}

/// The first `t` in `lo..=hi` at which `holds`; once true it must stay true.
fn first_time(mut lo: u64, mut hi: u64, holds: impl Fn(u64) -> bool) -> u64 {
    assert!(holds(hi), "the model's search range is too short");
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn limit(p: &Params) -> u64 {
    p.rate.count.get() + p.burst
}

/// nginx's `ngx_http_limit_req_handler` arithmetic, literally: `excess` in milli-requests,
/// whole milliseconds, the rate in milli-requests per second (r/s rates only, cost 1).
#[derive(Default)]
struct Nginx {
    /// `(excess, last)`.
    node: Option<(u64, u64)>,
}

impl Model for Nginx {
    fn decide(&mut self, now: u64, p: &Params) -> Expect {
        assert_eq!((p.rate.period, p.cost), (Period::Second, 1));
        let rate = (p.rate.count.get() * 1000) as i64;
        let burst = p.burst * 1000;
        let delay = if p.delay == NODELAY {
            u64::MAX
        } else {
            p.delay * 1000
        };
        let now_ms = now / NANOS_PER_MS;
        let Some((excess, last)) = self.node else {
            self.node = Some((0, now_ms));
            return Expect::verdict(Verdict::Pass);
        };
        let ms = now_ms.saturating_sub(last) as i64;
        let e = (excess as i64 - rate * ms / 1000 + 1000).max(0) as u64;
        if e > burst {
            return Expect::verdict(Verdict::Reject { retry_after: 0 });
        }
        self.node = Some((e, if ms != 0 { now_ms } else { last }));
        // ngx_http_limit_req_account: no delay unless above `delay`; then the handler's
        // `if (!delay)` passes a wait that floors to 0 ms (status PASSED, not DELAYED).
        let wait_ms = if e > delay {
            (e - delay) * 1000 / rate as u64
        } else {
            0
        };
        if wait_ms == 0 {
            Expect::verdict(Verdict::Pass)
        } else {
            Expect::verdict(Verdict::Delay(wait_ms * NANOS_PER_MS))
        }
    }
}

/// A token bucket as usually drawn: tokens (in nanoseconds of refill, one request being
/// `period / count` of them) that fill one per nanosecond up to `burst + 1` requests.
#[derive(Default)]
struct Tokens {
    /// `(tokens, last)`; a key never seen has a full bucket.
    bucket: Option<(u64, u64)>,
}

impl Model for Tokens {
    fn decide(&mut self, now: u64, p: &Params) -> Expect {
        let per_request = (p.rate.period.nanos() / p.rate.count.get()).max(1);
        let full = (p.burst + 1) * per_request;
        let (tokens, last) = self.bucket.unwrap_or((full, now));
        let tokens = full.min(tokens + (now - last));
        let need = p.cost * per_request;
        if need > tokens {
            self.bucket = Some((tokens, now));
            let retry_after = if need > full { 0 } else { need - tokens };
            return Expect {
                verdict: Verdict::Reject { retry_after },
                detail: Some((tokens / per_request, full - tokens)),
            };
        }
        let left = tokens - need;
        self.bucket = Some((left, now));
        let missing = full - left;
        let verdict = match p.delay {
            NODELAY => Verdict::Pass,
            d if missing > (d + 1) * per_request => Verdict::Delay(missing - (d + 1) * per_request),
            _ => Verdict::Pass,
        };
        Expect {
            verdict,
            detail: Some((left / per_request, missing)),
        }
    }
}

/// A count per window index, kept for ever.
#[derive(Default)]
struct Windows {
    counts: HashMap<u64, u64>,
}

impl Windows {
    fn count(&self, window: u64) -> u64 {
        self.counts.get(&window).copied().unwrap_or(0)
    }
}

/// fixed_window's model: windows counted one by one; the excess above `delay` is spread
/// over later windows at `count` each.
struct Fixed(Windows);

impl Model for Fixed {
    fn decide(&mut self, now: u64, p: &Params) -> Expect {
        let len = p.rate.period.nanos();
        let window = now / len;
        let end = (window + 1) * len - now;
        let used = self.0.count(window);
        if used + p.cost > limit(p) {
            let retry_after = if p.cost > limit(p) { 0 } else { end };
            let reset = if used > 0 { end } else { 0 };
            return Expect {
                verdict: Verdict::Reject { retry_after },
                detail: Some((limit(p) - used, reset)),
            };
        }
        let last_unit = used + p.cost;
        self.0.counts.insert(window, last_unit);
        let count = p.rate.count.get();
        let verdict = if p.delay != NODELAY && last_unit > count + p.delay {
            // The unit's place among the excess above `delay`, 0-based, in windows of `count`.
            let later = (last_unit - p.delay - 1) / count;
            Verdict::Delay((window + later) * len - now)
        } else {
            Verdict::Pass
        };
        Expect {
            verdict,
            detail: Some((limit(p) - last_unit, end)),
        }
    }
}

/// sliding_window's model: counts per window for ever, the estimate recomputed from
/// scratch, every wait found by searching time.
struct Sliding(Windows);

impl Sliding {
    /// The estimate at `t`, times the period.
    fn weighted(&self, t: u64, len: u64) -> u128 {
        let window = t / len;
        let prev = if window > 0 {
            self.0.count(window - 1)
        } else {
            0
        };
        let into = t % len;
        prev as u128 * (len - into) as u128 + self.0.count(window) as u128 * len as u128
    }

    fn fits(&self, t: u64, units: u64, p: &Params) -> bool {
        let len = p.rate.period.nanos();
        self.weighted(t, len) + (units as u128) * len as u128 <= (limit(p) as u128) * len as u128
    }

    /// Requests of cost 1 that fit at `t`.
    fn room(&self, t: u64, p: &Params) -> u64 {
        (1..).take_while(|&k| self.fits(t, k, p)).count() as u64
    }

    /// When the newest window holding anything has left the sliding window.
    fn reset(&self, now: u64, len: u64) -> u64 {
        let newest = self
            .0
            .counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&w, _)| w)
            .max();
        match newest {
            Some(w) if (w + 2) * len > now => (w + 2) * len - now,
            _ => 0,
        }
    }
}

impl Model for Sliding {
    fn decide(&mut self, now: u64, p: &Params) -> Expect {
        let len = p.rate.period.nanos();
        if !self.fits(now, p.cost, p) {
            let retry_after = if p.cost > limit(p) {
                0
            } else {
                first_time(now, now + 3 * len, |t| self.fits(t, p.cost, p)) - now
            };
            return Expect {
                verdict: Verdict::Reject { retry_after },
                detail: Some((self.room(now, p), self.reset(now, len))),
            };
        }
        *self.0.counts.entry(now / len).or_default() += p.cost;
        let conforming = (p.rate.count.get().saturating_add(p.delay) as u128) * len as u128;
        let verdict = if p.delay != NODELAY && self.weighted(now, len) > conforming {
            Verdict::Delay(
                first_time(now, now + 3 * len, |t| self.weighted(t, len) <= conforming) - now,
            )
        } else {
            Verdict::Pass
        };
        Expect {
            verdict,
            detail: Some((self.room(now, p), self.reset(now, len))),
        }
    }
}

/// sliding_log's model: every admitted unit's time, for ever.
#[derive(Default)]
struct Log {
    times: Vec<u64>,
}

impl Log {
    /// Units inside `(t − period, t]`.
    fn inside(&self, t: u64, len: u64) -> u64 {
        self.times.iter().filter(|&&s| s + len > t).count() as u64
    }

    fn reset(&self, now: u64, len: u64) -> u64 {
        self.times
            .iter()
            .max()
            .map_or(0, |&s| (s + len).saturating_sub(now))
    }
}

impl Model for Log {
    fn decide(&mut self, now: u64, p: &Params) -> Expect {
        let len = p.rate.period.nanos();
        let used = self.inside(now, len);
        if used + p.cost > limit(p) {
            let retry_after = if p.cost > limit(p) {
                0
            } else {
                first_time(now, now + len, |t| self.inside(t, len) + p.cost <= limit(p)) - now
            };
            return Expect {
                verdict: Verdict::Reject { retry_after },
                detail: Some((limit(p) - used, self.reset(now, len))),
            };
        }
        self.times.extend((0..p.cost).map(|_| now));
        let conforming = p.rate.count.get().saturating_add(p.delay);
        let verdict = if p.delay != NODELAY && self.inside(now, len) > conforming {
            Verdict::Delay(first_time(now, now + len, |t| self.inside(t, len) <= conforming) - now)
        } else {
            Verdict::Pass
        };
        Expect {
            verdict,
            detail: Some((limit(p) - used - p.cost, self.reset(now, len))),
        }
    }
}

const ALL_PERIODS: &[Period] = &[Period::Second, Period::Minute, Period::Hour];
const SHORT_PERIODS: &[Period] = &[Period::Second, Period::Minute];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn leaky_bucket_decides_and_delays_as_nginx(mut case in case(&[Period::Second], 50, 1)) {
        let _shared = support::shared();
        case.p.burst %= 11;
        drive::<LeakyBucket>(&case, Nginx::default(), false)?;
    }

    #[test]
    fn token_bucket_matches_a_bucket_of_tokens(case in case(ALL_PERIODS, 1_000, 25)) {
        let _shared = support::shared();
        drive::<TokenBucket>(&case, Tokens::default(), true)?;
    }

    #[test]
    fn fixed_window_matches_counts_per_window(case in case(SHORT_PERIODS, 30, 8)) {
        let _shared = support::shared();
        drive::<FixedWindow>(&case, Fixed(Windows::default()), true)?;
    }

    #[test]
    fn sliding_window_matches_the_weighted_estimate(case in case(SHORT_PERIODS, 30, 8)) {
        let _shared = support::shared();
        drive::<SlidingWindow>(&case, Sliding(Windows::default()), true)?;
    }

    #[test]
    fn sliding_log_matches_a_list_of_every_admitted_time(case in case(SHORT_PERIODS, 30, 8)) {
        let _shared = support::shared();
        drive::<SlidingLog>(&case, Log::default(), true)?;
    }

    #[test]
    fn concurrency_matches_a_list_of_requests_in_flight(
        max in 0..12u64,
        ops in prop::collection::vec((any::<bool>(), 1..4u64, any::<usize>()), 1..80),
    ) {
        let _shared = support::shared();
        let p = Params {
            max,
            ..Params::new(Rate::new(1, Period::Second).expect("non-zero"))
        };
        let mut state = Concurrency::fresh(0);
        let mut in_flight: Vec<u64> = Vec::new();
        for (enter, cost, which) in ops {
            if !enter && !in_flight.is_empty() {
                let cost = in_flight.swap_remove(which % in_flight.len());
                concurrency::release(&mut state, cost);
            } else {
                let p = Params { cost, ..p };
                let d = Concurrency::check(&state, 0, &p);
                let busy: u64 = in_flight.iter().sum();
                let want = if busy + cost <= max {
                    Decision { verdict: Verdict::Pass, remaining: max - busy - cost, reset: 0 }
                } else {
                    Decision { verdict: Verdict::Reject { retry_after: 0 }, remaining: max - busy, reset: 0 }
                };
                prop_assert_eq!(d, want);
                if d.admitted() {
                    Concurrency::charge(&mut state, 0, &p);
                    in_flight.push(cost);
                }
            }
            prop_assert_eq!(state, in_flight.iter().sum::<u64>());
            prop_assert_eq!(Concurrency::is_drained(&state, 0, &p), in_flight.is_empty());
        }
    }
}

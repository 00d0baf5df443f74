//! `leaky_bucket` on Redis decides as the local `leaky_bucket` does, `fixed_window` as the
//! local `fixed_window`, `token_bucket` as the local `token_bucket` (for rates whose
//! interval is a whole microsecond, Redis's grain), `sliding_log` as the local one, and
//! `sliding_window` as the local one (the same verdicts and counts; its waits, in µs,
//! within 1 µs of the local ns): the same schedules of arrivals (burst, delay, nodelay, cost, several rates) go
//! through the Lua script on a real redis-server and through the local algorithm, and
//! every decision must match. Then what Redis holds: one key per client, `tollgate:<zone>:<key>`, with the drain time as
//! its TTL; two connections (two instances) sharing one limit; the script loaded again
//! after `SCRIPT FLUSH`.

use crate::support;

use tollgate::limit::fixed_window::FixedWindow;
use tollgate::limit::leaky_bucket::LeakyBucket;
use tollgate::limit::sliding_log::SlidingLog;
use tollgate::limit::sliding_window::SlidingWindow;
use tollgate::limit::token_bucket::TokenBucket;
use tollgate::limit::{Algorithm, Decision, Limiter, Params, Period, Rate, Verdict, NODELAY};
use tollgate::shared::{redis_key, Mode, Scripts, TimeSource};

use support::redis::{self as server, Redis};

async fn connect(redis: &Redis) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

fn params(count: u64, period: Period, burst: u64, delay: u64, cost: u64) -> Params {
    Params {
        rate: Rate::new(count, period).unwrap(),
        burst,
        delay,
        cost,
        max: 0,
    }
}

/// Arrival gaps in microseconds from a fixed-seed generator: bursts of back-to-back
/// requests, then pauses long and short.
fn gaps(seed: u64, n: usize, scale_us: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            match (x >> 33) % 4 {
                0 => 0,
                1 => (x >> 40) % 1_000,
                _ => (x >> 40) % scale_us,
            }
        })
        .collect()
}

/// One schedule per case, each on a key of its own: arrivals whose gaps come from a fixed
/// seed go through `algorithm`'s script (at injected times) and through the local `A`, and
/// every decision must be `same`. Each case must admit and reject some requests, and delay
/// some when its `delay` leaves room for it. Each case runs twice: as it is, and with
/// some admitted requests settled after they are answered (see [`settlement`]).
async fn replay<A: Limiter>(
    algorithm: Algorithm,
    cases: &[(&str, Params, u64)],
    (seed, start_us): (u64, u64),
    same: fn(&Decision, &Decision) -> bool,
) {
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let conn = &mut connect(&redis).await;
    let scripts = Scripts::default();
    for settling in [false, true] {
        for (i, case) in cases.iter().enumerate() {
            let schedule = gaps(seed + i as u64, 300, case.2);
            for attempt in 1.. {
                let key = redis_key(
                    "conformance",
                    format!("{algorithm:?}-{i}-{settling}-{attempt}").as_bytes(),
                );
                let run = Run {
                    algorithm,
                    scripts: &scripts,
                    key: &key,
                    settling,
                    same,
                };
                // The fifth time, a difference fails the test whatever came before it.
                let last = attempt == 5;
                if run.case::<A>(conn, case, &schedule, start_us, last).await {
                    break;
                }
                eprintln!(
                    "{} (settling: {settling}): Redis's clock may have dropped the key; again",
                    case.0
                );
            }
        }
    }
}

/// Takes the key's expiry away, so that Redis's own clock cannot drop it; false when the
/// key is not there (dropped already, or deleted by the call just made). The replay's clock
/// is not Redis's: a key whose drain time is short in replay time would expire by Redis's
/// clock whenever a busy machine paused between two calls close in replay time.
async fn keep(conn: &mut redis::aio::MultiplexedConnection, key: &[u8]) -> bool {
    let (there, _): (bool, bool) = redis::pipe()
        .atomic()
        .cmd("EXISTS")
        .arg(key)
        .cmd("PERSIST")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    there
}

/// One case of [`replay`] on one key.
struct Run<'a> {
    algorithm: Algorithm,
    scripts: &'a Scripts,
    key: &'a [u8],
    settling: bool,
    same: fn(&Decision, &Decision) -> bool,
}

impl Run<'_> {
    /// Replays `schedule`; false when a decision differed after Redis's clock may have
    /// dropped the key (the case is then run again on another key), unless `last`.
    async fn case<A: Limiter>(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
        (name, p, _): &(&str, Params, u64),
        schedule: &[u64],
        start_us: u64,
        last: bool,
    ) -> bool {
        let mut local = A::fresh(start_us * 1_000);
        let mut t = start_us;
        let (mut admitted, mut delayed, mut rejected) = (0, 0, 0);
        // Whether the key was missing after a call: Redis's clock may have dropped it.
        let mut dropped = false;
        for (n, gap) in schedule.iter().enumerate() {
            t += gap;
            let now = t * 1_000;
            let want = A::check(&local, now, p);
            if want.admitted() {
                A::charge(&mut local, now, p);
            }
            let got = self
                .scripts
                .decide(self.algorithm, conn, self.key, p, TimeSource::At(t))
                .await
                .unwrap();
            if !(self.same)(&got, &want) && dropped && !last {
                return false;
            }
            dropped |= !keep(conn, self.key).await;
            assert!(
                (self.same)(&got, &want),
                "{name} (settling: {}): request {n} at +{} µs: Redis {got:?}, local {want:?}",
                self.settling,
                t - start_us
            );
            match want.verdict {
                Verdict::Pass => admitted += 1,
                Verdict::Delay(_) => delayed += 1,
                Verdict::Reject { .. } => rejected += 1,
            }
            let settled = settlement(n, p.cost).filter(|_| self.settling && want.admitted());
            if let Some((mode, units)) = settled {
                // Settled a little later, when the answer comes.
                t += 300;
                let q = Params { cost: units, ..*p };
                match mode {
                    Mode::Refund => A::refund(&mut local, t * 1_000, &q),
                    _ => A::charge(&mut local, t * 1_000, &q),
                }
                let at = TimeSource::At(t);
                let run = (self.scripts).run(self.algorithm, conn, self.key, &q, 0, at, mode);
                run.await.unwrap();
                dropped |= !keep(conn, self.key).await;
            }
        }
        assert!(
            admitted > 0 && rejected > 0,
            "{name}: {admitted}/{delayed}/{rejected}"
        );
        if p.delay != NODELAY && p.burst > p.delay {
            assert!(delayed > 0, "{name}: no request was delayed");
        }
        true
    }
}

/// How request `n` (admitted at `cost`) is settled: every third answer does not count
/// (its cost comes back), every fifth declares 3 units more.
fn settlement(n: usize, cost: u64) -> Option<(Mode, u64)> {
    if n.is_multiple_of(3) {
        Some((Mode::Refund, cost))
    } else if n.is_multiple_of(5) {
        Some((Mode::Charge, 3))
    } else {
        None
    }
}

fn exactly(got: &Decision, want: &Decision) -> bool {
    got == want
}

/// `got` is `want` with every time within 1 µs (Redis counts microseconds).
fn within_a_microsecond(got: &Decision, want: &Decision) -> bool {
    use tollgate::limit::Verdict::*;
    let close = |a: u64, b: u64| a.abs_diff(b) < 1_000;
    let verdicts = match (got.verdict, want.verdict) {
        (Pass, Pass) => true,
        (Delay(a), Delay(b)) => close(a, b),
        (Reject { retry_after: a }, Reject { retry_after: b }) => close(a, b),
        _ => false,
    };
    verdicts && got.remaining == want.remaining && close(got.reset, want.reset)
}

#[tokio::test]
async fn every_decision_matches_the_local_leaky_bucket() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let mut conn = connect(&redis).await;
    let cases = [
        (
            "10r/s burst 5",
            params(10, Period::Second, 5, 0, 1),
            200_000,
        ),
        (
            "10r/s burst 5 nodelay",
            params(10, Period::Second, 5, NODELAY, 1),
            200_000,
        ),
        (
            "10r/s burst 8 delay 3",
            params(10, Period::Second, 8, 3, 1),
            200_000,
        ),
        (
            "2r/s burst 10 nodelay cost 3",
            params(2, Period::Second, 10, NODELAY, 3),
            1_000_000,
        ),
        (
            "1r/m burst 2 nodelay",
            params(1, Period::Minute, 2, NODELAY, 1),
            40_000_000,
        ),
        (
            "7r/m burst 0",
            params(7, Period::Minute, 0, 0, 1),
            10_000_000,
        ),
        (
            "7r/s burst 10",
            params(7, Period::Second, 10, 0, 1),
            300_000,
        ),
        (
            "3r/m burst 4 delay 1",
            params(3, Period::Minute, 4, 1, 1),
            30_000_000,
        ),
        (
            "1000r/s burst 50 delay 10",
            params(1000, Period::Second, 50, 10, 1),
            1_000,
        ),
        (
            "100r/h burst 6 nodelay cost 5",
            params(100, Period::Hour, 6, NODELAY, 5),
            60_000_000,
        ),
    ];
    let start = (1, 1_763_000_000_000_000);
    replay::<LeakyBucket>(Algorithm::LeakyBucket, &cases, start, exactly).await;
    // A cost above the whole burst is never admitted, and says so (retry_after 0).
    let p = params(2, Period::Second, 1, NODELAY, 3);
    let key = redis_key("conformance", b"too-costly");
    let want = LeakyBucket::check(&LeakyBucket::fresh(start.1 * 1_000), start.1 * 1_000, &p);
    let got = Scripts::default()
        .decide(
            Algorithm::LeakyBucket,
            &mut conn,
            &key,
            &p,
            TimeSource::At(start.1),
        )
        .await
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(
        got.verdict,
        tollgate::limit::Verdict::Reject { retry_after: 0 }
    );
}

#[tokio::test]
async fn every_decision_matches_the_local_token_bucket() {
    let _shared = support::shared();
    let cases = [
        (
            "10r/s burst 5",
            params(10, Period::Second, 5, 0, 1),
            200_000,
        ),
        (
            "4r/s burst 6 nodelay",
            params(4, Period::Second, 6, NODELAY, 1),
            400_000,
        ),
        (
            "10r/s burst 8 delay 3",
            params(10, Period::Second, 8, 3, 1),
            200_000,
        ),
        (
            "5r/m burst 2 nodelay cost 2",
            params(5, Period::Minute, 2, NODELAY, 2),
            20_000_000,
        ),
        (
            "1000r/s burst 50 delay 10",
            params(1000, Period::Second, 50, 10, 1),
            1_000,
        ),
        (
            "3r/h burst 1 nodelay",
            params(3, Period::Hour, 1, NODELAY, 1),
            1_500_000_000,
        ),
    ];
    let start = (11, 1_763_000_000_000_000);
    replay::<TokenBucket>(Algorithm::TokenBucket, &cases, start, exactly).await;
}

#[tokio::test]
async fn every_decision_matches_the_local_fixed_window() {
    let _shared = support::shared();
    let cases = [
        (
            "10r/s burst 5 nodelay",
            params(10, Period::Second, 5, NODELAY, 1),
            60_000,
        ),
        (
            "10r/s burst 20 delay 0",
            params(10, Period::Second, 20, 0, 1),
            30_000,
        ),
        (
            "5r/s burst 10 delay 3",
            params(5, Period::Second, 10, 3, 1),
            60_000,
        ),
        (
            "3r/m burst 1 nodelay cost 2",
            params(3, Period::Minute, 1, NODELAY, 2),
            9_000_000,
        ),
        (
            "100r/h burst 0 nodelay",
            params(100, Period::Hour, 0, NODELAY, 1),
            30_000_000,
        ),
    ];
    let start = (21, 1_763_000_000_123_456);
    replay::<FixedWindow>(Algorithm::FixedWindow, &cases, start, exactly).await;
}

#[tokio::test]
async fn every_decision_matches_the_local_sliding_window() {
    let _shared = support::shared();
    let cases = [
        (
            "10r/s burst 0 nodelay",
            params(10, Period::Second, 0, NODELAY, 1),
            60_000,
        ),
        (
            "3r/s burst 2 nodelay",
            params(3, Period::Second, 2, NODELAY, 1),
            200_000,
        ),
        (
            "10r/s burst 10 delay 2",
            params(10, Period::Second, 10, 2, 1),
            40_000,
        ),
        (
            "7r/m burst 3 delay 0 cost 2",
            params(7, Period::Minute, 3, 0, 2),
            6_000_000,
        ),
        (
            "50r/h burst 5 nodelay",
            params(50, Period::Hour, 5, NODELAY, 1),
            40_000_000,
        ),
    ];
    let start = (31, 1_763_000_000_654_321);
    replay::<SlidingWindow>(
        Algorithm::SlidingWindow,
        &cases,
        start,
        within_a_microsecond,
    )
    .await;
}

#[tokio::test]
async fn every_decision_matches_the_local_sliding_log() {
    let _shared = support::shared();
    let cases = [
        (
            "10r/s burst 0 nodelay",
            params(10, Period::Second, 0, NODELAY, 1),
            60_000,
        ),
        (
            "4r/s burst 4 delay 1",
            params(4, Period::Second, 4, 1, 1),
            100_000,
        ),
        (
            "6r/m burst 2 delay 0 cost 2",
            params(6, Period::Minute, 2, 0, 2),
            5_000_000,
        ),
        (
            "20r/h burst 5 nodelay cost 3",
            params(20, Period::Hour, 5, NODELAY, 3),
            60_000_000,
        ),
    ];
    let start = (41, 1_763_000_000_000_007);
    replay::<SlidingLog>(Algorithm::SlidingLog, &cases, start, exactly).await;
}

#[tokio::test]
async fn one_key_per_client_with_the_drain_time_as_ttl_shared_by_every_connection() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let (mut a, mut b) = (connect(&redis).await, connect(&redis).await);
    let scripts = Scripts::default();
    // 1r/m, burst 4, nodelay: five pass, shared between two instances, on Redis's clock.
    let p = params(1, Period::Minute, 4, NODELAY, 1);
    let key = redis_key("login", &[192, 0, 2, 7]);
    let mut passed = 0;
    for i in 0..10 {
        let conn = if i % 2 == 0 { &mut a } else { &mut b };
        let d = scripts
            .decide(Algorithm::LeakyBucket, conn, &key, &p, TimeSource::Redis)
            .await
            .unwrap();
        passed += usize::from(d.admitted());
    }
    assert_eq!(passed, 5);

    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("tollgate:*")
        .query_async(&mut a)
        .await
        .unwrap();
    assert_eq!(keys, [b"tollgate:login:\xc0\x00\x02\x07".to_vec()]);
    // Five requests of a minute each: the state drains in five minutes.
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut a)
        .await
        .unwrap();
    assert!((299_000..=300_000).contains(&ttl), "PTTL {ttl}");

    // After SCRIPT FLUSH (as after a Redis restart) the script is loaded again.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut a)
        .await
        .unwrap();
    let d = scripts
        .decide(Algorithm::LeakyBucket, &mut b, &key, &p, TimeSource::Redis)
        .await
        .unwrap();
    assert!(!d.admitted());
}

//! The Lua scripts that decide in Redis, one per algorithm, and their replies.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

use crate::limit::leaky_bucket::UNIT;
use crate::limit::remote::MAX_EXACT;
use crate::limit::{Algorithm, Decision, Params, Verdict, NANOS_PER_MS, NODELAY};

/// A script as Redis runs it: the shared clock prelude `now.lua`, the penalty box's
/// `ban.lua`, then `NAME.lua` (all beside this file).
macro_rules! script {
    ($name:literal) => {
        concat!(
            include_str!("lua/now.lua"),
            include_str!("lua/ban.lua"),
            include_str!(concat!("lua/", $name, ".lua"))
        )
    };
}

/// The leaky bucket's script (nginx's `limit_req`).
pub(super) const LEAKY_BUCKET: &str = script!("leaky_bucket");
/// The token bucket's script (GCRA), in microseconds.
pub(super) const TOKEN_BUCKET: &str = script!("token_bucket");
/// The fixed window's script, in microseconds.
pub(super) const FIXED_WINDOW: &str = script!("fixed_window");
/// The sliding window's script, in microseconds.
pub(super) const SLIDING_WINDOW: &str = script!("sliding_window");
/// The sliding log's script, in microseconds.
pub(super) const SLIDING_LOG: &str = script!("sliding_log");

/// The scripts, each with its SHA computed once.
pub struct Scripts {
    leaky_bucket: Script,
    token_bucket: Script,
    fixed_window: Script,
    sliding_window: Script,
    sliding_log: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            leaky_bucket: Script::new(LEAKY_BUCKET),
            token_bucket: Script::new(TOKEN_BUCKET),
            fixed_window: Script::new(FIXED_WINDOW),
            sliding_window: Script::new(SLIDING_WINDOW),
            sliding_log: Script::new(SLIDING_LOG),
        }
    }
}

/// Where a decision's time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// Redis's `TIME`: what instances use, so that their own clocks do not matter.
    Redis,
    /// This many microseconds: the tests replay a schedule with it
    /// (tests/it/redis_scripts.rs); the gateway always takes Redis's.
    #[cfg(feature = "testing")]
    At(u64),
}

impl TimeSource {
    /// The scripts' time argument: empty for Redis's `TIME`.
    fn arg(self) -> String {
        match self {
            TimeSource::Redis => String::new(),
            #[cfg(feature = "testing")]
            TimeSource::At(us) => us.to_string(),
        }
    }
}

impl Scripts {
    /// Decides and (when admitted) charges one request of a zone of `algorithm` at
    /// `redis_key`, in one round trip. Only the tests call a script this way
    /// (tests/it/redis_scripts.rs); the gateway goes through [`Scripts::run`].
    #[cfg(feature = "testing")]
    pub async fn decide<C: ConnectionLike>(
        &self,
        algorithm: Algorithm,
        conn: &mut C,
        redis_key: &[u8],
        p: &Params,
        time: TimeSource,
    ) -> RedisResult<Decision> {
        let run = self.run(algorithm, conn, redis_key, p, 0, time, Mode::Decide);
        Ok(run.await?.decision)
    }

    /// Decides a request (and charges it when admitted), or gives back what an earlier
    /// call charged for a request that a later zone rejected. A decision with `want`
    /// above the request's cost (a lease of `want` requests' units) also takes up to
    /// `want - cost` more units when the request is admitted without delay and they fit
    /// now without delay: [`Reply::granted`].
    #[allow(clippy::too_many_arguments)]
    pub async fn run<C: ConnectionLike>(
        &self,
        algorithm: Algorithm,
        conn: &mut C,
        redis_key: &[u8],
        p: &Params,
        want: u64,
        time: TimeSource,
        mode: Mode,
    ) -> RedisResult<Reply> {
        let now = time.arg();
        let mode = match mode {
            Mode::Decide => "",
            Mode::Refund => "refund",
            Mode::Charge => "charge",
        };
        // Each script's own arguments, `want`, then the time and the mode.
        let (script, args, units) = self.arguments(algorithm, p, want)?;
        let mut call = script.prepare_invoke();
        call.key(redis_key);
        for arg in args {
            call.arg(arg);
        }
        call.arg(now).arg(mode);
        let reply: Vec<i64> = call.invoke_async(conn).await?;
        let granted = reply.get(4).map_or(0, |&n| u64::try_from(n).unwrap_or(0));
        let decision = decision(&reply, units).map(|decision| Reply { decision, granted });
        decision.ok_or_else(|| {
            let detail = format!("{reply:?}");
            (redis::ErrorKind::Parse, "unexpected script reply", detail).into()
        })
    }

    /// The script of `algorithm`, its own arguments for a request asking `p` that
    /// `want`s that many requests' units (0: no lease), and the units of its reply.
    fn arguments(
        &self,
        algorithm: Algorithm,
        p: &Params,
        want: u64,
    ) -> RedisResult<(&Script, Vec<i64>, Units)> {
        let free = |unit: u64| match p.delay {
            NODELAY => -1,
            delay => exact(delay.saturating_add(1).saturating_mul(unit)) as i64,
        };
        let found = match algorithm {
            Algorithm::LeakyBucket => {
                let per_ms = p
                    .rate
                    .count
                    .get()
                    .saturating_mul(UNIT / p.rate.period.millis());
                let cap = p.burst.saturating_add(1).saturating_mul(UNIT);
                let cost = p.cost.saturating_mul(UNIT);
                let args = vec![
                    exact(per_ms) as i64,
                    exact(cost) as i64,
                    exact(cap) as i64,
                    free(UNIT),
                    UNIT as i64,
                    exact(want.saturating_mul(UNIT)) as i64,
                ];
                (&self.leaky_bucket, args, Units::LEAKY_BUCKET)
            }
            Algorithm::TokenBucket => {
                let t = (p.rate.period.millis().saturating_mul(1_000) / p.rate.count.get()).max(1);
                let cap = p.burst.saturating_add(1).saturating_mul(t);
                let cost = p.cost.saturating_mul(t);
                let args = vec![
                    exact(t) as i64,
                    exact(cost) as i64,
                    exact(cap) as i64,
                    free(t),
                    exact(want.saturating_mul(t)) as i64,
                ];
                (&self.token_bucket, args, Units::MICROS)
            }
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                let script = match algorithm {
                    Algorithm::FixedWindow => &self.fixed_window,
                    Algorithm::SlidingWindow => &self.sliding_window,
                    _ => &self.sliding_log,
                };
                let len = p.rate.period.millis().saturating_mul(1_000);
                let count = p.rate.count.get();
                let delay = match p.delay {
                    NODELAY => -1,
                    delay => exact(delay) as i64,
                };
                let limit = count.saturating_add(p.burst);
                let args = vec![
                    len as i64,
                    exact(count) as i64,
                    exact(limit) as i64,
                    delay,
                    exact(p.cost) as i64,
                    exact(want) as i64,
                ];
                (script, args, Units::MICROS)
            }
            // The configuration refuses it (see `Algorithm::can_use_redis`).
            Algorithm::Concurrency => {
                let detail = "concurrency zones are not kept in Redis";
                return Err((
                    redis::ErrorKind::InvalidClientConfig,
                    "no script",
                    detail.into(),
                )
                    .into());
            }
        };
        Ok(found)
    }
}

/// What a decide call that names a ban key tells: a ban, or the zone's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BanOr {
    /// The key is banned; this many nanoseconds are left.
    Banned(u64),
    Decided(Decision),
}

impl Scripts {
    /// [`Scripts::run`] in decide mode with `ban_key` as `KEYS[2]`: `ban.lua` answers
    /// for a banned key before the algorithm runs (one round trip either way).
    pub(crate) async fn run_banned<C: ConnectionLike>(
        &self,
        algorithm: Algorithm,
        conn: &mut C,
        keys: [&[u8]; 2],
        p: &Params,
        time: TimeSource,
    ) -> RedisResult<BanOr> {
        let now = time.arg();
        // No lease: an item with `ban` takes none.
        let (script, args, units) = self.arguments(algorithm, p, 0)?;
        let mut call = script.prepare_invoke();
        call.key(keys[0]).key(keys[1]);
        for arg in args {
            call.arg(arg);
        }
        call.arg(now).arg("");
        let reply: Vec<i64> = call.invoke_async(conn).await?;
        if let [0, left_us, _, _, _, 1] = reply[..] {
            let left = u64::try_from(left_us).unwrap_or(0).saturating_mul(1_000);
            return Ok(BanOr::Banned(left));
        }
        decision(&reply, units).map(BanOr::Decided).ok_or_else(|| {
            let detail = format!("{reply:?}");
            (redis::ErrorKind::Parse, "unexpected script reply", detail).into()
        })
    }
}

/// What a script call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Decide, and charge an admitted request.
    Decide,
    /// Give back a charge (its reply means nothing).
    Refund,
    /// Charge `cost` whatever the state, even past the limit: what a request owes once
    /// its answer is known (see `limit::settle`; its reply means nothing).
    Charge,
}

/// Nanoseconds per unit of a script's reply: of the delay, of `retry_after`, of `reset`.
#[derive(Clone, Copy, Debug)]
struct Units {
    delay: u64,
    retry_after: u64,
    reset: u64,
}

impl Units {
    /// Whole milliseconds (nginx's grain), and `retry_after` in µs.
    const LEAKY_BUCKET: Units = Units {
        delay: NANOS_PER_MS,
        retry_after: 1_000,
        reset: NANOS_PER_MS,
    };
    /// Microseconds throughout.
    const MICROS: Units = Units {
        delay: 1_000,
        retry_after: 1_000,
        reset: 1_000,
    };
}

fn exact(n: u64) -> u64 {
    n.min(MAX_EXACT)
}

/// What a script call answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub decision: Decision,
    /// Requests' units taken beyond the request's cost for a lease (reply index 5): 0
    /// without one.
    pub granted: u64,
}

/// A script's reply: `{1, delay, remaining, reset}` or
/// `{0, retry_after, remaining, reset}` (`retry_after` `-1`: never), in `units`, maybe
/// followed by `granted` (index 5) and `banned` (index 6).
fn decision(reply: &[i64], units: Units) -> Option<Decision> {
    // 4 elements, or 5 (`granted`) or 6 (`banned`, read by `run_banned`).
    let &[admitted, wait, remaining, reset, ..] = reply else {
        return None;
    };
    if reply.len() > 6 {
        return None;
    }
    let nonnegative = |n: i64| u64::try_from(n).unwrap_or(0);
    let verdict = match (admitted, wait) {
        (1, 0) => Verdict::Pass,
        (1, delay) => Verdict::Delay(nonnegative(delay).saturating_mul(units.delay)),
        (0, retry) => Verdict::Reject {
            retry_after: nonnegative(retry).saturating_mul(units.retry_after),
        },
        _ => return None,
    };
    Some(Decision {
        verdict,
        remaining: nonnegative(remaining),
        reset: nonnegative(reset).saturating_mul(units.reset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_to_decisions() {
        assert_eq!(
            decision(&[1, 0, 4, 100], Units::LEAKY_BUCKET),
            Some(Decision {
                verdict: Verdict::Pass,
                remaining: 4,
                reset: 100 * NANOS_PER_MS
            })
        );
        assert_eq!(
            decision(&[1, 250, 0, 300], Units::LEAKY_BUCKET).map(|d| d.verdict),
            Some(Verdict::Delay(250 * NANOS_PER_MS))
        );
        assert_eq!(
            decision(&[0, 1_500, 0, 300], Units::LEAKY_BUCKET).map(|d| d.verdict),
            Some(Verdict::Reject {
                retry_after: 1_500_000
            })
        );
        assert_eq!(
            decision(&[0, -1, 0, 0], Units::LEAKY_BUCKET).map(|d| d.verdict),
            Some(Verdict::Reject { retry_after: 0 })
        );
        assert_eq!(decision(&[2, 0, 0, 0], Units::MICROS), None);
        assert_eq!(decision(&[1, 0], Units::MICROS), None);
        assert_eq!(
            decision(&[1, 0, 4, 100, 9], Units::MICROS).map(|d| d.remaining),
            Some(4),
            "a lease's grant follows"
        );
        assert!(decision(&[1, 0, 4, 100, 9, 0], Units::MICROS).is_some());
        assert_eq!(decision(&[1, 0, 4, 100, 9, 0, 0], Units::MICROS), None);
    }
}

//! Zones kept in Redis (DESIGN §6), so that every instance pointing at one Redis shares
//! one limit. This is the only limiter code that does I/O.
//!
//! A decision is one atomic Lua script on one Redis key, `tollgate:<zone>:<key>`: it
//! reads the key's state, decides with the same integer arithmetic as the local
//! algorithm, charges an admitted request, and sets a TTL equal to the time the state
//! needs to drain. Its clock is Redis's own `TIME`, so instances whose clocks disagree
//! still agree. The script is sent by SHA (`EVALSHA`) and loaded again when Redis
//! answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).

use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

use super::leaky_bucket::UNIT;
use super::{Decision, Params, Verdict, NANOS_PER_MS, NODELAY};

/// The leaky bucket's script (nginx's `limit_req`).
pub const LEAKY_BUCKET: &str = include_str!("redis/leaky_bucket.lua");

/// Lua numbers are doubles: integers above this lose precision. Arguments are capped
/// to it (a bucket that large never fills in practice).
const MAX_EXACT: u64 = 1 << 53;

/// The scripts, each with its SHA computed once.
pub struct Scripts {
    leaky_bucket: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            leaky_bucket: Script::new(LEAKY_BUCKET),
        }
    }
}

/// Where a decision's time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Redis's `TIME`: what instances use, so that their own clocks do not matter.
    Redis,
    /// This many microseconds (tests replay a schedule with it).
    At(u64),
}

/// The Redis key of `key` in zone `zone`: `tollgate:<zone>:<key>`, the key's bytes as
/// they are (no hash tag: a cluster spreads a zone's keys over every shard).
pub fn redis_key(zone: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + zone.len() + key.len());
    out.extend_from_slice(b"tollgate:");
    out.extend_from_slice(zone.as_bytes());
    out.push(b':');
    out.extend_from_slice(key);
    out
}

impl Scripts {
    /// Decides and (when admitted) charges one request of a `leaky_bucket` zone at
    /// `redis_key`, in one round trip.
    pub async fn leaky_bucket<C: ConnectionLike>(
        &self,
        conn: &mut C,
        redis_key: &[u8],
        p: &Params,
        clock: Clock,
    ) -> RedisResult<Decision> {
        let per_ms = p
            .rate
            .count
            .get()
            .saturating_mul(UNIT / p.rate.period.millis());
        let cap = p.burst.saturating_add(1).saturating_mul(UNIT);
        let free = match p.delay {
            NODELAY => -1,
            delay => exact(delay.saturating_add(1).saturating_mul(UNIT)) as i64,
        };
        let now = match clock {
            Clock::Redis => String::new(),
            Clock::At(us) => us.to_string(),
        };
        let reply: Vec<i64> = self
            .leaky_bucket
            .key(redis_key)
            .arg(exact(per_ms))
            .arg(exact(p.cost.saturating_mul(UNIT)))
            .arg(exact(cap))
            .arg(free)
            .arg(UNIT)
            .arg(now)
            .invoke_async(conn)
            .await?;
        decision(&reply).ok_or_else(|| {
            let detail = format!("{reply:?}");
            (redis::ErrorKind::Parse, "unexpected script reply", detail).into()
        })
    }
}

fn exact(n: u64) -> u64 {
    n.min(MAX_EXACT)
}

/// The script's reply: `{1, delay_ms, remaining, reset_ms}` or
/// `{0, retry_after_us, remaining, reset_ms}` (`-1`: never).
fn decision(reply: &[i64]) -> Option<Decision> {
    let &[admitted, wait, remaining, reset_ms] = reply else {
        return None;
    };
    let nonnegative = |n: i64| u64::try_from(n).unwrap_or(0);
    let verdict = match (admitted, wait) {
        (1, 0) => Verdict::Pass,
        (1, ms) => Verdict::Delay(nonnegative(ms).saturating_mul(NANOS_PER_MS)),
        (0, us) => Verdict::Reject {
            retry_after: nonnegative(us).saturating_mul(1_000),
        },
        _ => return None,
    };
    Some(Decision {
        verdict,
        remaining: nonnegative(remaining),
        reset: nonnegative(reset_ms).saturating_mul(NANOS_PER_MS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_with_the_zone_and_keep_their_bytes() {
        assert_eq!(
            redis_key("per_ip", &[10, 0, 0, 1]),
            b"tollgate:per_ip:\x0a\x00\x00\x01"
        );
        assert_eq!(redis_key("api", b"k:1"), b"tollgate:api:k:1");
    }

    #[test]
    fn replies_map_to_decisions() {
        assert_eq!(
            decision(&[1, 0, 4, 100]),
            Some(Decision {
                verdict: Verdict::Pass,
                remaining: 4,
                reset: 100 * NANOS_PER_MS
            })
        );
        assert_eq!(
            decision(&[1, 250, 0, 300]).map(|d| d.verdict),
            Some(Verdict::Delay(250 * NANOS_PER_MS))
        );
        assert_eq!(
            decision(&[0, 1_500, 0, 300]).map(|d| d.verdict),
            Some(Verdict::Reject {
                retry_after: 1_500_000
            })
        );
        assert_eq!(
            decision(&[0, -1, 0, 0]).map(|d| d.verdict),
            Some(Verdict::Reject { retry_after: 0 })
        );
        assert_eq!(decision(&[2, 0, 0, 0]), None);
        assert_eq!(decision(&[1, 0]), None);
    }
}

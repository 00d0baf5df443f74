//! Zones kept in Redis ("Zones in Redis" in docs/config.md), so that every instance pointing at one Redis shares
//! one limit. This is the only limiter code that does I/O.
//!
//! A decision is one atomic Lua script on one Redis key, `tollgate:<zone>:<key>`: it
//! reads the key's state, decides with the same integer arithmetic as the local
//! algorithm, charges an admitted request, and sets a TTL equal to the time the state
//! needs to drain. Its clock is Redis's own `TIME`, so instances whose clocks disagree
//! still agree. The script is sent by SHA (`EVALSHA`) and loaded again when Redis
//! answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).

mod backend;
mod bans;
mod rejections;
mod scripts;

pub use backend::{Backend, Call, Failure, SetBan, Settings, StoredBan, StoredBans};
pub use bans::{
    ban_key, ban_key_of, parse_ban_key, share_ban, zone_ban_prefix, BAN_PREFIX, MIN_TOMBSTONE,
};
pub use rejections::Rejections;
pub use scripts::{
    BanOr, Mode, Scripts, TimeSource, FIXED_WINDOW, LEAKY_BUCKET, MAX_EXACT, SLIDING_LOG,
    SLIDING_WINDOW, TOKEN_BUCKET,
};

use super::{Period, Rate};

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

/// What a Redis zone does while Redis is slow or down (`on_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Fail open: the zone admits.
    Allow,
    /// Fail closed: 503 with `Retry-After: 1`.
    Deny,
    /// The instance's own limiter at the zone's rate divided by the instances.
    Local,
}

/// A zone's `backend = "redis"` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneSettings {
    pub on_error: OnError,
    /// Instances sharing the zone (for [`OnError::Local`]).
    pub instances: u64,
}

impl ZoneSettings {
    /// The rate one instance of `instances` enforces alone when Redis fails: the zone's
    /// rate divided by the instances, counted per day so that the division is nearly
    /// exact (`5r/m` over 3 instances is `2400r/d`), and at least one a day.
    pub fn fallback_rate(&self, rate: Rate) -> Rate {
        if self.instances <= 1 {
            return rate;
        }
        let per_day = rate
            .count
            .get()
            .saturating_mul(Period::Day.millis() / rate.period.millis());
        Rate::new((per_day / self.instances).max(1), Period::Day).unwrap_or(rate)
    }
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
    fn the_fallback_rate_divides_the_zones_rate_by_the_instances() {
        let shared = |instances| ZoneSettings {
            on_error: OnError::Local,
            instances,
        };
        let rate = Rate::new(5, Period::Minute).unwrap();
        assert_eq!(shared(1).fallback_rate(rate), rate);
        assert_eq!(
            shared(3).fallback_rate(rate),
            Rate::new(2_400, Period::Day).unwrap()
        );
        let slow = Rate::new(1, Period::Day).unwrap();
        assert_eq!(shared(4).fallback_rate(slow), slow);
    }
}

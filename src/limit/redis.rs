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
pub mod heartbeat;
mod lease;
mod rejections;
mod scripts;

pub use backend::{Backend, Call, Failure, SetBan, Settings, StoredBan, StoredBans};
pub use bans::{
    ban_key, ban_key_of, parse_ban_key, share_ban, zone_ban_prefix, BAN_PREFIX, MIN_TOMBSTONE,
};
pub use heartbeat::{Announcement, Fleet};
pub use lease::{Fetch, First, Leases};
// `Instances` is below, beside `ZoneSettings`.
pub use rejections::Rejections;
pub use scripts::{
    BanOr, Mode, Reply, Scripts, TimeSource, FIXED_WINDOW, LEAKY_BUCKET, MAX_EXACT, SLIDING_LOG,
    SLIDING_WINDOW, TOKEN_BUCKET,
};

use super::{Algorithm, Period, Rate};

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

/// What every soft lane key starts with: a prefix no zone key (`tollgate:`) or ban key
/// (`tollgate-ban:`) has, so no client's key, whatever its bytes, names another's lane.
pub const SOFT_PREFIX: &[u8] = b"tollgate-soft:";

/// The Redis key of `key`'s soft lane in zone `zone` (`soft`, `limit::soft`):
/// `tollgate-soft:<zone>:<key>`. A lane call touches this one key (it reads no ban), so
/// it needs no hash tag: it goes wherever its bytes hash, as a zone key does.
pub fn soft_key(zone: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SOFT_PREFIX.len() + zone.len() + 1 + key.len());
    out.extend_from_slice(SOFT_PREFIX);
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
    /// `instances` as written: instances sharing the zone, for [`OnError::Local`]. When
    /// left out, the instances are counted ([`heartbeat`]).
    pub instances: Option<u64>,
    /// `lease`: units a decision takes from Redis at once, spent here ([`Leases`]).
    pub lease: Option<u64>,
}

/// Where the number of instances [`OnError::Local`] divides by comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instances {
    /// `instances` as written: it overrides the count.
    Configured(u64),
    /// Counted by the heartbeat, as last seen.
    Counted(u64),
    /// Neither written nor counted yet (no heartbeat answered): 1.
    Unknown,
}

impl Instances {
    pub fn count(self) -> u64 {
        match self {
            Instances::Configured(n) | Instances::Counted(n) => n.max(1),
            Instances::Unknown => 1,
        }
    }

    /// How `/status` names it.
    pub fn source(self) -> &'static str {
        match self {
            Instances::Configured(_) => "configured",
            Instances::Counted(_) => "counted",
            Instances::Unknown => "unknown",
        }
    }
}

impl ZoneSettings {
    /// The instances to divide by when `live` were last counted (`None`: no heartbeat
    /// answered yet): `instances` when written, else the count, else 1.
    pub fn instances(&self, live: Option<u64>) -> Instances {
        match (self.instances, live) {
            (Some(n), _) => Instances::Configured(n),
            (None, Some(n)) => Instances::Counted(n),
            (None, None) => Instances::Unknown,
        }
    }

    /// The rate one instance enforces alone when Redis fails: the zone's `rate` divided
    /// by the instances (see [`ZoneSettings::instances`]), as [`share`] divides it.
    pub fn fallback_rate(&self, rate: Rate, algorithm: Algorithm, live: Option<u64>) -> Rate {
        share(rate, self.instances(live).count(), algorithm.is_window())
    }
}

/// One instance's share of `rate` among `instances`, never below one request per
/// window of the rate (a share rounded down to nothing would reject everything, as
/// Envoy found). A window algorithm (`windowed`) keeps the rate's window, whose length
/// is its meaning, and rounds the count down (`5r/m` over 2 is `2r/m`); the others count
/// per day so that the division is nearly exact (`5r/m` over 3 is `2400r/d`).
pub fn share(rate: Rate, instances: u64, windowed: bool) -> Rate {
    if instances <= 1 {
        return rate;
    }
    if windowed {
        let count = (rate.count.get() / instances).max(1);
        return Rate::new(count, rate.period).unwrap_or(rate);
    }
    let windows_a_day = Period::Day.millis() / rate.period.millis();
    let per_day = rate.count.get().saturating_mul(windows_a_day);
    Rate::new((per_day / instances).max(windows_a_day), Period::Day).unwrap_or(rate)
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
    fn a_lane_key_can_never_be_a_zone_key() {
        assert_eq!(soft_key("api", b"k"), b"tollgate-soft:api:k");
        // A client whose key ends in what a lane key adds still names its own key.
        assert_ne!(redis_key("api", b"k:soft"), soft_key("api", b"k"));
        assert!(!soft_key("api", b"k").starts_with(b"tollgate:"));
    }

    #[test]
    fn the_fallback_rate_divides_the_zones_rate_by_the_instances() {
        let rate = Rate::new(5, Period::Minute).unwrap();
        assert_eq!(share(rate, 1, false), rate);
        assert_eq!(
            share(rate, 3, false),
            Rate::new(2_400, Period::Day).unwrap()
        );
        assert_eq!(share(rate, 2, true), Rate::new(2, Period::Minute).unwrap());
        let per_second = Rate::new(10, Period::Second).unwrap();
        assert_eq!(
            share(per_second, 4, false),
            Rate::new(216_000, Period::Day).unwrap(),
            "2.5r/s"
        );
    }

    #[test]
    fn a_share_is_never_below_one_request_per_window() {
        // 1r/s over 1000 instances: one per second each, not 86 a day (one per 1000 s).
        let one_a_second = Rate::new(1, Period::Second).unwrap();
        let floor = share(one_a_second, 1_000, false);
        assert_eq!(floor, Rate::new(86_400, Period::Day).unwrap());
        assert_eq!(floor.per_second(), 1.0);
        assert_eq!(share(one_a_second, 1_000, true), one_a_second);
        // 5r/m over 10: half a request a minute would round to nothing; one a minute.
        let rate = Rate::new(5, Period::Minute).unwrap();
        assert_eq!(
            share(rate, 10, false),
            Rate::new(1_440, Period::Day).unwrap()
        );
        assert_eq!(share(rate, 10, true), Rate::new(1, Period::Minute).unwrap());
        let slow = Rate::new(1, Period::Day).unwrap();
        assert_eq!(share(slow, 4, false), slow);
        assert_eq!(share(slow, 4, true), slow);
    }

    #[test]
    fn written_instances_override_the_count_and_one_stands_in_for_none() {
        let zone = |instances| ZoneSettings {
            on_error: OnError::Local,
            instances,
            lease: None,
        };
        let rate = Rate::new(10, Period::Second).unwrap();
        let algorithm = Algorithm::LeakyBucket;
        assert_eq!(zone(None).instances(None), Instances::Unknown);
        assert_eq!(zone(None).fallback_rate(rate, algorithm, None), rate);
        assert_eq!(zone(None).instances(Some(2)), Instances::Counted(2));
        assert_eq!(
            zone(None).fallback_rate(rate, algorithm, Some(2)),
            Rate::new(432_000, Period::Day).unwrap()
        );
        assert_eq!(zone(Some(5)).instances(Some(2)), Instances::Configured(5));
        assert_eq!(
            zone(Some(5)).fallback_rate(rate, Algorithm::FixedWindow, Some(2)),
            Rate::new(2, Period::Second).unwrap()
        );
        assert_eq!(Instances::Counted(3).source(), "counted");
    }
}

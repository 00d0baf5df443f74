//! What a zone kept elsewhere (`backend = "redis"`, "Zones in Redis" in docs/config.md)
//! means to the limiter, as values: its settings (`on_error`, `instances`, `lease`), the
//! share of the rate one instance enforces alone, the charge a call on its remote state
//! makes ([`Call`]), why such a call failed ([`Failure`]), and the rejections an instance
//! remembers so that a flood from one key costs the remote store nothing ([`Rejections`]).
//! The calls themselves are made by the application's `shared` module.

mod rejections;

pub use rejections::Rejections;

use super::{Algorithm, Params, Period, Rate};

/// Lua numbers are doubles: integers above this lose precision. What a remote store's
/// scripts are given is capped to it (a bucket that large never fills in practice), and
/// the config refuses a `burst` above it in a Redis zone.
pub const MAX_EXACT: u64 = 1 << 53;

/// What a Redis zone does while Redis is slow or down (`on_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
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
    /// left out, the instances are counted (`shared::heartbeat`).
    pub instances: Option<u64>,
    /// `lease`: units a decision takes from Redis at once, spent here (`shared::Leases`).
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

/// Why a Redis decision did not come back (the `kind` of `tollgate_redis_errors_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within `timeout`.
    Timeout,
    /// Not connected: refused, reset, or still connecting.
    Connection,
    /// Redis answered with an error.
    Reply,
}

impl Failure {
    pub const ALL: [Failure; 3] = [Failure::Timeout, Failure::Connection, Failure::Reply];

    pub fn label(self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Connection => "connection",
            Failure::Reply => "reply",
        }
    }
}

/// One call on a zone's remote state: the zone's algorithm, the key in the remote store, and what
/// the request asks.
#[derive(Clone, Debug)]
pub struct Call {
    pub algorithm: Algorithm,
    pub key: Vec<u8>,
    pub params: Params,
    /// A decision's lease: the requests' units to take at once, this request's
    /// included (`lease`); 0 for none.
    pub want: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

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

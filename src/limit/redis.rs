//! Zones kept in Redis ("Zones in Redis" in docs/config.md), so that every instance pointing at one Redis shares
//! one limit. This is the only limiter code that does I/O.
//!
//! A decision is one atomic Lua script on one Redis key, `tollgate:<zone>:<key>`: it
//! reads the key's state, decides with the same integer arithmetic as the local
//! algorithm, charges an admitted request, and sets a TTL equal to the time the state
//! needs to drain. Its clock is Redis's own `TIME`, so instances whose clocks disagree
//! still agree. The script is sent by SHA (`EVALSHA`) and loaded again when Redis
//! answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{RedisResult, Script, TlsCertificates};

use super::leaky_bucket::UNIT;
use super::{Algorithm, Decision, Params, Period, Rate, Verdict, NANOS_PER_MS, NODELAY};

/// A script as Redis runs it: the shared clock prelude, then `redis/NAME.lua`.
macro_rules! script {
    ($name:literal) => {
        concat!(
            include_str!("redis/now.lua"),
            include_str!(concat!("redis/", $name, ".lua"))
        )
    };
}

/// The leaky bucket's script (nginx's `limit_req`).
pub const LEAKY_BUCKET: &str = script!("leaky_bucket");
/// The token bucket's script (GCRA), in microseconds.
pub const TOKEN_BUCKET: &str = script!("token_bucket");
/// The fixed window's script, in microseconds.
pub const FIXED_WINDOW: &str = script!("fixed_window");
/// The sliding window's script, in microseconds.
pub const SLIDING_WINDOW: &str = script!("sliding_window");
/// The sliding log's script, in microseconds.
pub const SLIDING_LOG: &str = script!("sliding_log");

/// Lua numbers are doubles: integers above this lose precision. Arguments are capped
/// to it (a bucket that large never fills in practice).
pub const MAX_EXACT: u64 = 1 << 53;

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
    /// Decides and (when admitted) charges one request of a zone of `algorithm` at
    /// `redis_key`, in one round trip.
    pub async fn decide<C: ConnectionLike>(
        &self,
        algorithm: Algorithm,
        conn: &mut C,
        redis_key: &[u8],
        p: &Params,
        clock: Clock,
    ) -> RedisResult<Decision> {
        self.run(algorithm, conn, redis_key, p, clock, Mode::Decide)
            .await
    }

    /// Decides a request (and charges it when admitted), or gives back what an earlier
    /// call charged for a request that a later zone rejected.
    pub async fn run<C: ConnectionLike>(
        &self,
        algorithm: Algorithm,
        conn: &mut C,
        redis_key: &[u8],
        p: &Params,
        clock: Clock,
        mode: Mode,
    ) -> RedisResult<Decision> {
        let now = match clock {
            Clock::Redis => String::new(),
            Clock::At(us) => us.to_string(),
        };
        let mode = match mode {
            Mode::Decide => "",
            Mode::Refund => "refund",
        };
        // Each script's own arguments, then the time and the mode.
        let free = |unit: u64| match p.delay {
            NODELAY => -1,
            delay => exact(delay.saturating_add(1).saturating_mul(unit)) as i64,
        };
        let (script, args, units) = match algorithm {
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
        let mut call = script.prepare_invoke();
        call.key(redis_key);
        for arg in args {
            call.arg(arg);
        }
        call.arg(now).arg(mode);
        let reply: Vec<i64> = call.invoke_async(conn).await?;
        decision(&reply, units).ok_or_else(|| {
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

    fn of(err: &redis::RedisError) -> Failure {
        if err.is_timeout() {
            Failure::Timeout
        } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            Failure::Connection
        } else {
            Failure::Reply
        }
    }
}

/// How long a worker waits before connecting again after a failed attempt; requests in
/// that time follow `on_error` at once.
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);

/// One Redis server and a connection per worker, each made on its worker's runtime by
/// the first request that needs it (within that request's `timeout`). A broken
/// connection is made again by the connection manager in the background; a worker whose
/// attempt failed tries again after [`RECONNECT_PAUSE`]. Whatever happens, a call takes
/// at most `timeout`.
pub struct Backend {
    target: Target,
    /// What this serves (a reload keeps a backend that serves the same).
    settings: Settings,
    scripts: Scripts,
    links: Box<[tokio::sync::Mutex<Link>]>,
}

/// Where Redis is, and how long a decision may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `redis://` URLs: one server, or some nodes of a cluster.
    pub urls: Vec<String>,
    pub cluster: bool,
    pub timeout: Duration,
    /// PEM certificates `rediss://` trusts; `None`: the system's trust store.
    pub ca: Option<Vec<u8>>,
}

/// One server, or a Redis Cluster.
enum Target {
    // Boxed: both clients are hundreds of bytes, and one of them sits here unused.
    Single(Box<redis::Client>),
    Cluster(Box<ClusterClient>),
}

enum Link {
    Idle,
    /// No attempt before this instant.
    Paused(Instant),
    Up(Connection),
}

/// A worker's connection: to one server (reconnected by the connection manager), or to
/// every node of a cluster (each command sent to the node holding its key).
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Connection::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

impl Backend {
    pub fn new(settings: Settings, workers: usize) -> RedisResult<Backend> {
        let certificates = || TlsCertificates {
            client_tls: None,
            root_cert: settings.ca.clone(),
        };
        let target = if settings.cluster {
            let nodes = settings.urls.iter().map(String::as_str);
            let mut builder = ClusterClient::builder(nodes);
            if settings.ca.is_some() {
                builder = builder.certs(certificates());
            }
            Target::Cluster(Box::new(builder.build()?))
        } else {
            let url = settings.urls.first().map_or("", String::as_str);
            let client = match settings.ca {
                Some(_) if url.starts_with("rediss://") => {
                    redis::Client::build_with_tls(url, certificates())?
                }
                _ => redis::Client::open(url)?,
            };
            Target::Single(Box::new(client))
        };
        Ok(Backend {
            target,
            settings,
            scripts: Scripts::default(),
            links: (0..workers.max(1))
                .map(|_| tokio::sync::Mutex::new(Link::Idle))
                .collect(),
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Decides (and charges) a request on Redis's clock, within `timeout`.
    pub async fn decide(
        &self,
        (now, worker): (Instant, usize),
        algorithm: Algorithm,
        redis_key: &[u8],
        p: &Params,
    ) -> Result<Decision, Failure> {
        self.call((now, worker), algorithm, redis_key, p, Mode::Decide)
            .await
    }

    /// Gives back a charge for a request a later zone rejected, within `timeout`.
    pub async fn refund(
        &self,
        (now, worker): (Instant, usize),
        algorithm: Algorithm,
        redis_key: &[u8],
        p: &Params,
    ) -> Result<(), Failure> {
        self.call((now, worker), algorithm, redis_key, p, Mode::Refund)
            .await
            .map(drop)
    }

    async fn call(
        &self,
        (now, worker): (Instant, usize),
        algorithm: Algorithm,
        redis_key: &[u8],
        p: &Params,
        mode: Mode,
    ) -> Result<Decision, Failure> {
        self.within_timeout(async {
            let mut conn = self.connection(worker, now).await?;
            let call = self
                .scripts
                .run(algorithm, &mut conn, redis_key, p, Clock::Redis, mode);
            call.await.map_err(|err| Failure::of(&err))
        })
        .await
    }

    async fn within_timeout<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.settings.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// This worker's connection, made now if there is none (and no pause that started
    /// before `now` is on).
    async fn connection(&self, worker: usize, now: Instant) -> Result<Connection, Failure> {
        let mut link = self.links[worker % self.links.len()].lock().await;
        match &*link {
            Link::Up(conn) => return Ok(conn.clone()),
            Link::Paused(until) if now < *until => return Err(Failure::Connection),
            Link::Idle | Link::Paused(_) => {}
        }
        // Stands if this attempt is cut short by the caller's timeout.
        *link = Link::Paused(now + RECONNECT_PAUSE);
        let made = match &self.target {
            Target::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_max_delay(Duration::from_millis(500))
                    .set_number_of_retries(1);
                ConnectionManager::new_with_config(redis::Client::clone(client), config)
                    .await
                    .map(Connection::Single)
            }
            Target::Cluster(client) => client.get_async_connection().await.map(Connection::Cluster),
        };
        match made {
            Ok(conn) => {
                *link = Link::Up(conn.clone());
                Ok(conn)
            }
            Err(err) => {
                tracing::warn!(urls = ?self.settings.urls, error = %err, "cannot connect to Redis");
                Err(Failure::Connection)
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Rejections an instance remembers, so that a flood from one key costs Redis nothing
/// after its first rejection: key → the zone-clock nanosecond it may conform again.
/// Bounded: when full, expired entries go, and if none has expired, all of them.
#[derive(Default)]
pub struct Rejections {
    until: Mutex<HashMap<Box<[u8]>, u64>>,
}

/// Keys a zone remembers rejections for.
const REMEMBERED: usize = 64 * 1024;

impl Rejections {
    /// When `key` was rejected before and may not pass yet at `now`: the nanoseconds
    /// left.
    pub fn remaining(&self, key: &[u8], now: u64) -> Option<u64> {
        let mut until = lock(&self.until);
        match until.get(key) {
            Some(&at) if at > now => Some(at - now),
            Some(_) => {
                until.remove(key);
                None
            }
            None => None,
        }
    }

    pub fn remember(&self, key: &[u8], until_ns: u64, now: u64) {
        let mut until = lock(&self.until);
        if until.len() >= REMEMBERED {
            until.retain(|_, at| *at > now);
            if until.len() >= REMEMBERED {
                until.clear();
            }
        }
        until.insert(key.into(), until_ns);
    }
}

fn exact(n: u64) -> u64 {
    n.min(MAX_EXACT)
}

/// A script's reply: `{1, delay, remaining, reset}` or
/// `{0, retry_after, remaining, reset}` (`retry_after` `-1`: never), in `units`.
fn decision(reply: &[i64], units: Units) -> Option<Decision> {
    let &[admitted, wait, remaining, reset] = reply else {
        return None;
    };
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

    #[test]
    fn rejections_are_remembered_until_they_expire_and_bounded() {
        let r = Rejections::default();
        r.remember(b"k", 1_000, 0);
        assert_eq!(r.remaining(b"k", 400), Some(600));
        assert_eq!(r.remaining(b"k", 1_000), None);
        assert_eq!(r.remaining(b"k", 400), None, "an expired entry is gone");
        for i in 0..REMEMBERED as u64 {
            r.remember(&i.to_be_bytes(), 10, 0);
        }
        r.remember(b"new", 2_000, 20);
        assert_eq!(r.remaining(b"new", 20), Some(1_980));
        assert_eq!(lock(&r.until).len(), 1, "the expired ones made room");
    }

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
    }
}

//! The connection to Redis: one per worker, made by the first request that needs it, and
//! every call bounded by `timeout`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{RedisResult, TlsCertificates};

use super::super::{Algorithm, Params};
use super::heartbeat::{Beat, Fleet, Heartbeat};
use super::scripts::{Mode, Reply, Scripts, TimeSource};

// The penalty box's calls (`limit::penalty`): they use this module's connections.
mod ban_calls;
pub use ban_calls::{SetBan, StoredBan, StoredBans};

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

/// One script call: the zone's algorithm, the Redis key ([`super::redis_key`]), and what
/// the request asks.
#[derive(Clone, Debug)]
pub struct Call {
    pub algorithm: Algorithm,
    pub key: Vec<u8>,
    pub params: Params,
    /// A decision's lease: the requests' units to take at once, this request's
    /// included (`lease`, [`super::lease`]); 0 for none.
    pub want: u64,
}

/// How long a worker waits before connecting again after a failed attempt; requests in
/// that time follow `on_error` at once.
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);

/// One Redis server and a connection per worker, each made on its worker's runtime by
/// the first request that needs it (within that request's `timeout`). A call that finds
/// its connection broken lets it go; a worker whose connection broke or whose attempt
/// failed tries again after [`RECONNECT_PAUSE`], its calls meanwhile failing at once.
/// Whatever happens, a call takes at most `timeout`.
pub struct Backend {
    target: Target,
    /// What this serves (a reload keeps a backend that serves the same).
    settings: Settings,
    scripts: Scripts,
    links: Box<[tokio::sync::Mutex<Link>]>,
    /// The instances counted in each Redis zone, and the thread that counts them.
    fleet: Arc<Fleet>,
    _heartbeat: Option<Heartbeat>,
    /// The caller's clock ([`Backend::now`]).
    clock: fn() -> Instant,
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
    /// How often this instance announces itself in each Redis zone
    /// ([`super::heartbeat`]).
    pub heartbeat: Duration,
}

/// One server, or a Redis Cluster.
#[derive(Clone)]
pub(super) enum Target {
    // Boxed: both clients are hundreds of bytes, and one of them sits here unused.
    Single {
        client: Box<redis::Client>,
        /// The client's own bound on a connect or an answer ([`longest_wait`]).
        wait: Duration,
    },
    Cluster(Box<ClusterClient>),
}

/// The longest any call waits for Redis: `timeout`, or an admin call's
/// [`ban_calls::ADMIN_TIMEOUT`] if longer. The client's own bounds on a connect and an
/// answer are set to this, since its defaults (1 s and 500 ms) would cut a longer
/// `timeout` short; this module's timers bound each call.
fn longest_wait(settings: &Settings) -> Duration {
    settings.timeout.max(ban_calls::ADMIN_TIMEOUT)
}

/// The connection manager's settings for one server: its own bounds at `wait`.
fn manager_config(wait: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(wait))
        .set_response_timeout(Some(wait))
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
pub(super) enum Connection {
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

impl Target {
    /// A connection made on the calling task's runtime: to one server (reconnected by
    /// the connection manager), or to every node of a cluster.
    pub(super) async fn connect(&self) -> RedisResult<Connection> {
        match self {
            Target::Single { client, wait } => {
                let config = manager_config(*wait)
                    .set_max_delay(Duration::from_millis(500))
                    .set_number_of_retries(1);
                ConnectionManager::new_with_config(redis::Client::clone(client), config)
                    .await
                    .map(Connection::Single)
            }
            Target::Cluster(client) => client.get_async_connection().await.map(Connection::Cluster),
        }
    }
}

impl Backend {
    /// A backend for `workers` workers that announces this instance in `fleet`'s zones:
    /// the fleet of the backend it replaces, so that a reload keeps the instance's id
    /// and the counts last seen. (Until the old one's generation ends, both beat, by
    /// the same id.) `clock` is the caller's, for [`Backend::now`].
    pub fn new(
        settings: Settings,
        workers: usize,
        fleet: Arc<Fleet>,
        clock: fn() -> Instant,
    ) -> RedisResult<Backend> {
        let certificates = || TlsCertificates {
            client_tls: None,
            root_cert: settings.ca.clone(),
        };
        // The ban keys' hash tags, made here rather than by a request.
        super::bans::prepare_tags();
        let wait = longest_wait(&settings);
        let target = if settings.cluster {
            let nodes = settings.urls.iter().map(String::as_str);
            let mut builder = ClusterClient::builder(nodes)
                .connection_timeout(wait)
                .response_timeout(wait);
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
            Target::Single {
                client: Box::new(client),
                wait,
            }
        };
        let heartbeat = Heartbeat::start(Beat {
            target: target.clone(),
            timeout: settings.timeout,
            every: settings.heartbeat,
            fleet: Arc::clone(&fleet),
        });
        Ok(Backend {
            target,
            settings,
            scripts: Scripts::default(),
            links: (0..workers.max(1))
                .map(|_| tokio::sync::Mutex::new(Link::Idle))
                .collect(),
            fleet,
            _heartbeat: heartbeat,
            clock,
        })
    }

    /// The time by the caller's clock: for a window that counts from the end of a wait on
    /// Redis (a ban trusted again after a failed call, a worker's reconnect pause), which
    /// a request's arrival may precede by several `timeout`s (one per Redis zone before).
    /// Never for a decision: that takes the request's arrival.
    pub fn now(&self) -> Instant {
        (self.clock)()
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The zones this instance announces itself in, and the instances counted in each.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Runs `call` on Redis's clock within `timeout`, on `worker`'s connection: decides
    /// (and charges) a request, or gives back a charge. `now` is the request's arrival
    /// (a worker that failed to connect tries again only after a pause from then).
    pub async fn call(
        &self,
        call: &Call,
        mode: Mode,
        now: Instant,
        worker: usize,
    ) -> Result<Reply, Failure> {
        self.within_timeout(async {
            let mut conn = self.connection(worker, now).await?;
            let run = self.scripts.run(
                call.algorithm,
                &mut conn,
                &call.key,
                &call.params,
                call.want,
                TimeSource::Redis,
                mode,
            );
            let result = run.await.map_err(|err| Failure::of(&err));
            self.breaker(worker, result).await
        })
        .await
    }

    /// A call that lost its connection (refused, reset, dropped) trips the worker's
    /// breaker: its connection is let go and the worker's calls fail at once, following
    /// `on_error`, for [`RECONNECT_PAUSE`]; the first call after it connects anew. So a
    /// Redis that is down costs one call per pause its wait, not every call.
    async fn breaker<T>(&self, worker: usize, result: Result<T, Failure>) -> Result<T, Failure> {
        if matches!(result, Err(Failure::Connection)) {
            let mut link = self.links[worker % self.links.len()].lock().await;
            if matches!(*link, Link::Up(_)) {
                *link = Link::Paused(self.now() + RECONNECT_PAUSE);
                tracing::warn!(urls = ?self.settings.urls, "lost the connection to Redis");
            }
        }
        result
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
        // Stands if this attempt is cut short by the caller's timeout: the pause then
        // counts from the timeout's end (no later than a `timeout` from here), so that a
        // server that never answers costs one request per pause its whole timeout, not
        // every request when `timeout` is longer than the pause.
        *link = Link::Paused(self.now() + self.settings.timeout + RECONNECT_PAUSE);
        match self.target.connect().await {
            Ok(conn) => {
                *link = Link::Up(conn.clone());
                Ok(conn)
            }
            Err(err) => {
                *link = Link::Paused(self.now() + RECONNECT_PAUSE);
                tracing::warn!(urls = ?self.settings.urls, error = %err, "cannot connect to Redis");
                Err(Failure::Connection)
            }
        }
    }
}

//! The connection to Redis: one per worker, made by the first request that needs it, and
//! every call bounded by `timeout`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::{RedisResult, TlsCertificates};

use super::connection::{failure_of, Connection, Target};
use super::heartbeat::{Beat, Fleet, Heartbeat};
use super::scripts::{Mode, Reply, Scripts, TimeSource};
use crate::config::RedisSettings as Settings;
use crate::limit::remote::{Call, Failure};

// The penalty box's calls (`admission::penalty`): they use this module's connections.
mod ban_calls;
pub use ban_calls::SetBan;
pub(crate) use ban_calls::StoredBan;

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

/// The longest any call waits for Redis: `timeout`, or an admin call's
/// [`ban_calls::ADMIN_TIMEOUT`] if longer. The client's own bounds on a connect and an
/// answer are set to this, since its defaults (1 s and 500 ms) would cut a longer
/// `timeout` short; this module's timers bound each call.
fn longest_wait(settings: &Settings) -> Duration {
    settings.timeout.max(ban_calls::ADMIN_TIMEOUT)
}

enum Link {
    Idle,
    /// No attempt before this instant.
    Paused(Instant),
    Up(Connection),
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
    pub(crate) fn now(&self) -> Instant {
        (self.clock)()
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The zones this instance announces itself in, and the instances counted in each.
    pub(crate) fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Runs `call` on Redis's clock within `timeout`, on `worker`'s connection: decides
    /// (and charges) a request, or gives back a charge. `now` is the request's arrival
    /// (a worker that failed to connect tries again only after a pause from then).
    pub(crate) async fn call(
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
            let result = run.await.map_err(|err| failure_of(&err));
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

//! The penalty box's Redis calls ("Bans" in docs/config.md): a decision that names the
//! key's ban key, a ban imposed for every instance, and the admin API's listing and
//! lifting. Each is bounded by the backend's `timeout`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Script, Value};

use super::super::scripts::{BanOr, TimeSource};
use super::{Backend, Call, Connection, Failure, Target};

/// The script that imposes a ban (`set_ban.lua`).
const SET_BAN: &str = include_str!("../set_ban.lua");

/// Keys `SCAN` asks for per step, and the most steps one listing takes.
const SCAN_COUNT: usize = 1_000;
const SCAN_STEPS: usize = 100;
/// The least time the admin API's calls get: a listing takes several round trips, and
/// `[redis] timeout` is sized for one decision.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

/// A ban as Redis holds it: its key, what its value says, and its time left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBan {
    pub key: Vec<u8>,
    pub strikes: u64,
    pub within_ms: u64,
    /// When it was imposed, in milliseconds since 1970 on Redis's clock.
    pub at_ms: u64,
    pub left_ms: u64,
}

impl Backend {
    /// Decides `call` in decide mode with `ban_key` as the script's second key: a ban
    /// there answers first (see `ban.lua`).
    pub async fn decide_banned(
        &self,
        call: &Call,
        ban_key: &[u8],
        now: Instant,
        worker: usize,
    ) -> Result<BanOr, Failure> {
        self.within_timeout(async {
            let mut conn = self.connection(worker, now).await?;
            let keys = [&call.key[..], ban_key];
            let run = self.scripts.run_banned(
                call.algorithm,
                &mut conn,
                keys,
                &call.params,
                TimeSource::Redis,
            );
            run.await.map_err(|err| Failure::of(&err))
        })
        .await
    }

    /// Imposes a ban for every instance: `ban_key` expires after `for_ms`.
    pub async fn set_ban(
        &self,
        ban_key: &[u8],
        why: [u64; 2],
        for_ms: u64,
        now: Instant,
        worker: usize,
    ) -> Result<(), Failure> {
        self.within_timeout(async {
            let mut conn = self.connection(worker, now).await?;
            static SCRIPT: OnceLock<Script> = OnceLock::new();
            let script = SCRIPT.get_or_init(|| Script::new(SET_BAN));
            let mut call = script.prepare_invoke();
            call.key(ban_key).arg(why[0]).arg(why[1]).arg(for_ms.max(1));
            let _: i64 = call
                .invoke_async(&mut conn)
                .await
                .map_err(|err| Failure::of(&err))?;
            Ok(())
        })
        .await
    }

    /// Every ban key under `prefix` (at most `limit`), with its value and time left:
    /// a bounded `SCAN` of the server, or of each primary of a cluster. Takes at most the
    /// longer of `timeout` and [`ADMIN_TIMEOUT`].
    pub async fn scan_bans(&self, prefix: &[u8], limit: usize) -> Result<Vec<StoredBan>, Failure> {
        self.within_admin_timeout(async {
            let mut conn = self.admin_connection().await?;
            let pattern = [prefix, b"*"].concat();
            let nodes = match &mut conn {
                Connection::Single(_) => vec![None],
                Connection::Cluster(cluster) => {
                    primaries(cluster).await?.into_iter().map(Some).collect()
                }
            };
            let mut found = Vec::new();
            for node in nodes {
                let mut cursor = 0u64;
                for _ in 0..SCAN_STEPS {
                    let step = scan_step(&mut conn, node.as_ref(), cursor, &pattern);
                    let (next, mut keys) = step.await?;
                    keys.truncate(limit.saturating_sub(found.len()));
                    found.extend(read(&mut conn, keys).await?);
                    cursor = next;
                    if cursor == 0 || found.len() >= limit {
                        break;
                    }
                }
            }
            Ok(found)
        })
        .await
    }

    /// Deletes `ban_key`: whether it was there.
    pub async fn delete_ban(&self, ban_key: &[u8]) -> Result<bool, Failure> {
        self.within_admin_timeout(async {
            let mut conn = self.admin_connection().await?;
            let deleted: i64 = redis::cmd("DEL")
                .arg(ban_key)
                .query_async(&mut conn)
                .await
                .map_err(|err| Failure::of(&err))?;
            Ok(deleted > 0)
        })
        .await
    }

    async fn within_admin_timeout<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let timeout = self.settings.timeout.max(ADMIN_TIMEOUT);
        match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// A connection of the caller's own runtime (the admin API's), made for one call.
    async fn admin_connection(&self) -> Result<Connection, Failure> {
        let made = match &self.target {
            Target::Single(client) => {
                let config = ConnectionManagerConfig::new().set_number_of_retries(0);
                let client = redis::Client::clone(client);
                let conn = ConnectionManager::new_with_config(client, config).await;
                conn.map(Connection::Single)
            }
            Target::Cluster(client) => client.get_async_connection().await.map(Connection::Cluster),
        };
        made.map_err(|err| Failure::of(&err))
    }
}

/// The primaries of a cluster, as routes for their own commands (`CLUSTER NODES`: lines
/// of `id host:port@bus[,name] flags …`).
async fn primaries(conn: &mut ClusterConnection) -> Result<Vec<RoutingInfo>, Failure> {
    let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let nodes = conn
        .route_command(redis::cmd("CLUSTER").arg("NODES").clone(), random)
        .await
        .map_err(|err| Failure::of(&err))?;
    let text: String = redis::from_redis_value(nodes).map_err(|_| Failure::Reply)?;
    let primaries = text.lines().filter_map(|line| {
        let mut fields = line.split(' ');
        let (address, flags) = (fields.nth(1)?, fields.next()?);
        if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
            return None;
        }
        let address = address.split('@').next()?;
        let (host, port) = address.rsplit_once(':')?;
        let (host, port) = (host.to_owned(), port.parse().ok()?);
        let node = SingleNodeRoutingInfo::ByAddress { host, port };
        Some(RoutingInfo::SingleNode(node))
    });
    Ok(primaries.collect())
}

/// One `SCAN` step from `cursor`, on the node `at` of a cluster.
async fn scan_step(
    conn: &mut Connection,
    at: Option<&RoutingInfo>,
    cursor: u64,
    pattern: &[u8],
) -> Result<(u64, Vec<Vec<u8>>), Failure> {
    let mut scan = redis::cmd("SCAN");
    scan.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT);
    let reply = match (conn, at) {
        (Connection::Cluster(conn), Some(at)) => conn.route_command(scan, at.clone()).await,
        (conn, _) => scan.query_async::<Value>(conn).await,
    };
    let reply = reply.map_err(|err| Failure::of(&err))?;
    redis::from_redis_value(reply).map_err(|_| Failure::Reply)
}

/// The values and times left of `keys` (one pipeline on one server; two commands a key
/// on a cluster, whose keys lie on several nodes); those that went meanwhile, or are not
/// bans, are left out.
async fn read(conn: &mut Connection, keys: Vec<Vec<u8>>) -> Result<Vec<StoredBan>, Failure> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let replies: Vec<(Option<String>, i64)> = match conn {
        Connection::Single(_) => {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("GET").arg(key).cmd("PTTL").arg(key);
            }
            let replies = pipe.query_async(conn).await;
            replies.map_err(|err| Failure::of(&err))?
        }
        Connection::Cluster(_) => {
            let mut replies = Vec::with_capacity(keys.len());
            for key in &keys {
                let value = redis::cmd("GET").arg(key).query_async(conn).await;
                let left = redis::cmd("PTTL").arg(key).query_async(conn).await;
                let fail = |err: redis::RedisError| Failure::of(&err);
                replies.push((value.map_err(fail)?, left.map_err(fail)?));
            }
            replies
        }
    };
    let read = keys
        .into_iter()
        .zip(replies)
        .filter_map(|(key, (value, left_ms))| {
            let (value, left_ms) = (value?, u64::try_from(left_ms).ok()?);
            let mut numbers = value.split(' ').map(str::parse::<u64>);
            let (Some(Ok(strikes)), Some(Ok(within_ms)), Some(Ok(at_ms))) =
                (numbers.next(), numbers.next(), numbers.next())
            else {
                return None;
            };
            Some(StoredBan {
                key,
                strikes,
                within_ms,
                at_ms,
                left_ms,
            })
        });
    Ok(read.collect())
}

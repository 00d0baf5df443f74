//! The penalty box's Redis calls ("Bans" in docs/config.md): a decision that names the
//! key's ban key, a ban imposed for every instance, and the admin API's listing and
//! lifting. Each is bounded by the backend's `timeout`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Script, Value};

use super::super::bans::MIN_TOMBSTONE;
use super::super::connection::{failure_of, manager_config, Connection, Target};
use super::super::scripts::{BanOr, TimeSource};
use super::Backend;
use crate::limit::remote::{Call, Failure};

/// The script that imposes a ban (`set_ban.lua`), and the one that lifts it.
const SET_BAN: &str = include_str!("../lua/set_ban.lua");
const LIFT_BAN: &str = include_str!("../lua/lift_ban.lua");

/// Keys `SCAN` asks for per step.
const SCAN_COUNT: usize = 1_000;
/// The least time the admin API's calls get: a listing takes several round trips, and
/// `[redis] timeout` is sized for one decision.
pub(super) const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

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

/// One zone's bans as Redis holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredBans {
    pub bans: Vec<StoredBan>,
    /// Cut short: by the listing's cap, or by its deadline before every key was seen.
    pub truncated: bool,
}

/// What Redis did with a ban imposed here (`set_ban.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetBan {
    /// Written: every instance honours it.
    Written,
    /// Not written: Redis holds a ban of the key already, with this many ms left.
    Held(u64),
    /// Not written: the key's ban was lifted a moment ago (a write that comes late).
    Lifted,
}

impl Backend {
    /// Decides `call` in decide mode with `ban_key` as the script's second key: a ban
    /// there answers first (see `ban.lua`).
    pub(crate) async fn decide_banned(
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
            let result = run.await.map_err(|err| failure_of(&err));
            self.breaker(worker, result).await
        })
        .await
    }

    /// Imposes a ban for every instance: `ban_key` expires after `for_ms`, unless a ban
    /// or a lift's tombstone is there already.
    pub async fn set_ban(
        &self,
        ban_key: &[u8],
        why: [u64; 2],
        for_ms: u64,
        now: Instant,
        worker: usize,
    ) -> Result<SetBan, Failure> {
        self.within_timeout(async {
            let mut conn = self.connection(worker, now).await?;
            static SCRIPT: OnceLock<Script> = OnceLock::new();
            let script = SCRIPT.get_or_init(|| Script::new(SET_BAN));
            let mut call = script.prepare_invoke();
            call.key(ban_key).arg(why[0]).arg(why[1]).arg(for_ms.max(1));
            let reply = call.invoke_async(&mut conn).await;
            let reply: i64 = self
                .breaker(worker, reply.map_err(|err| failure_of(&err)))
                .await?;
            Ok(match reply {
                0 => SetBan::Written,
                ..0 => SetBan::Lifted,
                left_ms => SetBan::Held(left_ms.unsigned_abs()),
            })
        })
        .await
    }

    /// Every ban key of each of `prefixes` (one a zone, at most `limit` a zone), with its
    /// value and time left: a `SCAN` to its end of the server, or of each primary of a
    /// cluster, until the longer of `timeout` and [`ADMIN_TIMEOUT`] has passed; a zone
    /// whose scan was cut short says so. Fails when Redis answers no `SCAN` at all.
    pub async fn scan_bans(
        &self,
        prefixes: &[Vec<u8>],
        limit: usize,
    ) -> Result<Vec<StoredBans>, Failure> {
        let mut listed = vec![StoredBans::default(); prefixes.len()];
        let (mut done, mut answered) = (0, false);
        let scan = async {
            let mut conn = self.admin_connection().await?;
            let nodes = match &mut conn {
                Connection::Single(_) => vec![None],
                Connection::Cluster(cluster) => {
                    primaries(cluster).await?.into_iter().map(Some).collect()
                }
            };
            for (prefix, zone) in prefixes.iter().zip(listed.iter_mut()) {
                for node in &nodes {
                    let at = node.as_ref();
                    scan_node(&mut conn, at, prefix, limit, zone, &mut answered).await?;
                    if zone.truncated {
                        break;
                    }
                }
                done += 1;
            }
            Ok(())
        };
        let timeout = self.settings.timeout.max(ADMIN_TIMEOUT);
        match tokio::time::timeout(timeout, scan).await {
            Ok(Ok(())) => Ok(listed),
            Ok(Err(failure)) => Err(failure),
            Err(_) if !answered => Err(Failure::Timeout),
            Err(_) => {
                for zone in &mut listed[done..] {
                    zone.truncated = true;
                }
                Ok(listed)
            }
        }
    }

    /// Lifts the ban at `ban_key` for every instance, leaving a tombstone for twice the
    /// `[redis]` timeout (at least [`MIN_TOMBSTONE`], `lift_ban.lua`), longer than a
    /// write of a ban imposed before the lift can be late: whether there was a ban.
    pub async fn delete_ban(&self, ban_key: &[u8]) -> Result<bool, Failure> {
        self.within_admin_timeout(async {
            let mut conn = self.admin_connection().await?;
            static SCRIPT: OnceLock<Script> = OnceLock::new();
            let script = SCRIPT.get_or_init(|| Script::new(LIFT_BAN));
            let tombstone = self.settings.timeout.saturating_mul(2).max(MIN_TOMBSTONE);
            let tombstone_ms = u64::try_from(tombstone.as_millis()).unwrap_or(u64::MAX);
            let mut call = script.prepare_invoke();
            call.key(ban_key).arg(tombstone_ms);
            let lifted: i64 = call
                .invoke_async(&mut conn)
                .await
                .map_err(|err| failure_of(&err))?;
            Ok(lifted > 0)
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
            Target::Single { client, wait } => {
                let config = manager_config(*wait).set_number_of_retries(0);
                let client = redis::Client::clone(client);
                let conn = ConnectionManager::new_with_config(client, config).await;
                conn.map(Connection::Single)
            }
            Target::Cluster(client) => client.get_async_connection().await.map(Connection::Cluster),
        };
        made.map_err(|err| failure_of(&err))
    }
}

/// The primaries of a cluster, as routes for their own commands (`CLUSTER NODES`: lines
/// of `id host:port@bus[,name] flags …`).
async fn primaries(conn: &mut ClusterConnection) -> Result<Vec<RoutingInfo>, Failure> {
    let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let nodes = conn
        .route_command(redis::cmd("CLUSTER").arg("NODES").clone(), random)
        .await
        .map_err(|err| failure_of(&err))?;
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

/// Scans `node` (of a cluster; `None`: the one server) for keys under `prefix` to the
/// end, adding their bans to `zone` until it holds `limit` (then it is truncated).
/// `answered` is set once a step is answered.
async fn scan_node(
    conn: &mut Connection,
    node: Option<&RoutingInfo>,
    prefix: &[u8],
    limit: usize,
    zone: &mut StoredBans,
    answered: &mut bool,
) -> Result<(), Failure> {
    let pattern = [prefix, b"*"].concat();
    let mut cursor = 0u64;
    loop {
        let (next, keys) = scan_step(conn, node, cursor, &pattern).await?;
        *answered = true;
        let mut bans = read(conn, node, keys).await?;
        let room = limit.saturating_sub(zone.bans.len());
        if bans.len() > room {
            bans.truncate(room);
            zone.truncated = true;
        }
        zone.bans.extend(bans);
        cursor = next;
        if cursor == 0 || zone.truncated {
            return Ok(());
        }
    }
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
    let reply = reply.map_err(|err| failure_of(&err))?;
    redis::from_redis_value(reply).map_err(|_| Failure::Reply)
}

/// The values and times left of `keys`, all on the node `at` (`None`: the one server):
/// one pipeline. Those that went meanwhile, or are not bans (a tombstone, or anything
/// else: a value of another type is an error reply for that key only), are left out.
async fn read(
    conn: &mut Connection,
    at: Option<&RoutingInfo>,
    keys: Vec<Vec<u8>>,
) -> Result<Vec<StoredBan>, Failure> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("GET").arg(key).cmd("PTTL").arg(key);
    }
    let count = pipe.len();
    let replies = match (conn, at) {
        (Connection::Cluster(conn), Some(RoutingInfo::SingleNode(node))) => {
            conn.route_pipeline(pipe, 0, count, node.clone()).await
        }
        (conn, _) => conn.req_packed_commands(&pipe, 0, count).await,
    };
    let replies = replies.map_err(|err| failure_of(&err))?;
    let mut replies = replies.into_iter();
    let read = keys.into_iter().filter_map(|key| {
        let (value, left_ms) = (replies.next()?, replies.next()?);
        let value: String = redis::from_redis_value(value).ok()?;
        let left_ms: i64 = redis::from_redis_value(left_ms).ok()?;
        stored(key, &value, left_ms)
    });
    Ok(read.collect())
}

/// A ban from its key, its value (`<strikes> <within_ms> <at_ms>`) and its time left.
fn stored(key: Vec<u8>, value: &str, left_ms: i64) -> Option<StoredBan> {
    let left_ms = u64::try_from(left_ms).ok()?;
    let mut numbers = value.split(' ').map(str::parse::<u64>);
    let (Some(Ok(strikes)), Some(Ok(within_ms)), Some(Ok(at_ms)), None) = (
        numbers.next(),
        numbers.next(),
        numbers.next(),
        numbers.next(),
    ) else {
        return None;
    };
    Some(StoredBan {
        key,
        strikes,
        within_ms,
        at_ms,
        left_ms,
    })
}

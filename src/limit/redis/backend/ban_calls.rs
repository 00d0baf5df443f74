//! The penalty box's Redis calls ("Bans" in docs/config.md): a decision that names the
//! key's ban key, a ban imposed for every instance, and the admin API's listing and
//! lifting. Each is bounded by the backend's `timeout`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::Script;

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

    /// Every ban key under `prefix` (at most `limit`), with its value and time left;
    /// from one server only (a cluster's nodes are not scanned). Takes at most the
    /// longer of `timeout` and [`ADMIN_TIMEOUT`].
    pub async fn scan_bans(&self, prefix: &[u8], limit: usize) -> Result<Vec<StoredBan>, Failure> {
        self.within_admin_timeout(async {
            let mut conn = self.admin_connection().await?;
            let mut pattern = prefix.to_vec();
            pattern.push(b'*');
            let (mut cursor, mut found) = (0u64, Vec::new());
            for _ in 0..SCAN_STEPS {
                let (next, mut keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .query_async(&mut conn)
                    .await
                    .map_err(|err| Failure::of(&err))?;
                keys.truncate(limit.saturating_sub(found.len()));
                found.extend(read(&mut conn, keys).await?);
                cursor = next;
                if cursor == 0 || found.len() >= limit {
                    break;
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

/// The values and times left of `keys` (one pipeline); those that went meanwhile, or
/// are not bans, are left out.
async fn read<C: ConnectionLike>(
    conn: &mut C,
    keys: Vec<Vec<u8>>,
) -> Result<Vec<StoredBan>, Failure> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("GET").arg(key).cmd("PTTL").arg(key);
    }
    let replies: Vec<(Option<String>, i64)> = pipe
        .query_async(conn)
        .await
        .map_err(|err| Failure::of(&err))?;
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

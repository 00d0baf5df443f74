//! `GET /bans` and `DELETE /bans/ZONE/KEY`: the penalty box's bans, listed per zone with
//! their time left and why, and lifted by hand ("Bans" in docs/config.md).
//!
//! A local zone's bans are read from its table. A Redis zone's are read from Redis (a
//! `SCAN` of the zone's ban keys to its end, on each primary of a cluster, within 2 s or
//! the `[redis]` timeout if longer), so every instance lists the fleet's bans; when Redis
//! cannot answer, the bans this instance holds are listed instead and `source` says so.
//! A zone lists at most [`MAX_LISTED`] bans; `truncated` says when some were left out
//! (over the cap, or not scanned before the deadline).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;

use crate::acme::rfc3339;
use crate::limit::bans::Entry;
use crate::limit::zone::Zone;
use crate::routing::percent_decode;
use crate::shared::{ban_key, parse_ban_key, zone_ban_prefix, Backend, StoredBan};
use crate::snapshot::Snapshot;
use crate::state::GatewayState;

use super::status::{line, Ordered};
use super::{not_allowed, reply};

/// Most bans listed per zone.
const MAX_LISTED: usize = 10_000;

/// `GET /bans`: per zone, in config order, whence the list came and each ban.
#[derive(serde::Serialize)]
struct Listing {
    zones: Ordered<ZoneBans>,
}

#[derive(serde::Serialize)]
struct ZoneBans {
    /// `local`: this instance's table; `redis`: Redis, for every instance;
    /// `instance`: a Redis zone's bans this instance holds (Redis not read).
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    redis_error: Option<&'static str>,
    /// Some bans were left out (present only then).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
    bans: Vec<BanView>,
}

#[derive(serde::Serialize)]
struct BanView {
    /// As `/zones/NAME/keys/KEY` takes it.
    key: String,
    seconds_left: u64,
    /// `5 rejections within 60s at 2026-11-25T02:10:00Z`.
    why: String,
    strikes: u64,
    within_seconds: u64,
    /// When it was imposed.
    since: String,
}

/// `/bans` and `/bans/ZONE/KEY`.
pub(super) async fn answer(
    method: &Method,
    path: &str,
    state: &GatewayState,
) -> Response<Full<Bytes>> {
    let snapshot = state.snapshot.load_full();
    match (method, path.strip_prefix("/bans/")) {
        (&Method::GET | &Method::HEAD, None) => {
            let body = line(&listing(&snapshot).await);
            reply(StatusCode::OK, "application/json", body)
        }
        (&Method::DELETE, Some(rest)) => lift(rest, &snapshot).await,
        (_, None) => not_allowed("GET, HEAD"),
        (_, Some(_)) => not_allowed("DELETE"),
    }
}

async fn listing(snapshot: &Snapshot) -> Listing {
    let redis_zones: Vec<&Zone> = snapshot
        .zones
        .iter()
        .filter(|zone| zone.redis.is_some())
        .map(|zone| &**zone)
        .collect();
    let stored = match snapshot.redis.as_ref() {
        Some(backend) if !redis_zones.is_empty() => {
            let prefixes: Vec<Vec<u8>> = redis_zones
                .iter()
                .map(|zone| zone_ban_prefix(&zone.name))
                .collect();
            Some(backend.scan_bans(&prefixes, MAX_LISTED).await)
        }
        _ => None,
    };
    let (now, wall) = (Instant::now(), SystemTime::now());
    let zones = snapshot.zones.iter().map(|zone| {
        let in_redis = redis_zones.iter().position(|z| std::ptr::eq(*z, &**zone));
        let bans = match (in_redis, &stored) {
            (Some(at), Some(Ok(stored))) => {
                let listed = stored.get(at);
                ZoneBans {
                    source: "redis",
                    redis_error: None,
                    truncated: listed.is_some_and(|z| z.truncated),
                    bans: listed.map_or_else(Vec::new, |z| from_redis(zone, &z.bans)),
                }
            }
            (Some(_), failed) => ZoneBans {
                source: "instance",
                redis_error: failed
                    .as_ref()
                    .and_then(|f| f.as_ref().err())
                    .map(|f| f.label()),
                ..from_table(zone, now, wall)
            },
            (None, _) => ZoneBans {
                source: "local",
                ..from_table(zone, now, wall)
            },
        };
        (zone.name.to_string(), bans)
    });
    Listing {
        zones: Ordered(zones.collect()),
    }
}

/// A zone's bans from its table (`source` left for the caller).
fn from_table(zone: &Zone, now: Instant, wall: SystemTime) -> ZoneBans {
    let mut bans = zone.bans.list(now, MAX_LISTED + 1);
    let truncated = bans.len() > MAX_LISTED;
    bans.truncate(MAX_LISTED);
    bans.sort_by_key(|(_, entry)| entry.since);
    let bans = bans
        .iter()
        .map(|(key, entry)| local_view(zone, key, entry, now, wall))
        .collect();
    ZoneBans {
        source: "local",
        redis_error: None,
        truncated,
        bans,
    }
}

fn local_view(zone: &Zone, key: &[u8], entry: &Entry, now: Instant, wall: SystemTime) -> BanView {
    let since = wall
        .checked_sub(now.saturating_duration_since(entry.since))
        .unwrap_or(wall);
    let since = since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let left = entry.until.saturating_duration_since(now);
    view(
        zone,
        key,
        left,
        u64::from(entry.strikes),
        entry.within,
        since,
    )
}

fn from_redis(zone: &Zone, stored: &[StoredBan]) -> Vec<BanView> {
    let mut bans: Vec<&StoredBan> = stored
        .iter()
        .filter(|ban| parse_ban_key(&ban.key).is_some_and(|(name, _)| name == &*zone.name))
        .collect();
    bans.sort_by_key(|ban| ban.at_ms);
    bans.into_iter()
        .filter_map(|ban| {
            let (_, key) = parse_ban_key(&ban.key)?;
            let left = Duration::from_millis(ban.left_ms);
            let within = Duration::from_millis(ban.within_ms);
            Some(view(
                zone,
                key,
                left,
                ban.strikes,
                within,
                ban.at_ms / 1_000,
            ))
        })
        .collect()
}

fn view(
    zone: &Zone,
    key: &[u8],
    left: Duration,
    strikes: u64,
    within: Duration,
    since_secs: u64,
) -> BanView {
    let since = rfc3339(i64::try_from(since_secs).unwrap_or(i64::MAX));
    let within_seconds = within.as_millis().div_ceil(1_000) as u64;
    let why = if strikes == 0 {
        format!("banned on another instance, seen here at {since}")
    } else {
        format!("{strikes} rejections within {within_seconds}s at {since}")
    };
    BanView {
        key: zone.template.text_of(key),
        seconds_left: left.as_millis().div_ceil(1_000) as u64,
        why,
        strikes,
        within_seconds,
        since,
    }
}

/// `DELETE /bans/ZONE/KEY` (KEY percent-encoded, as `/zones/NAME/keys/KEY` takes it): 200
/// when a ban was lifted (here, or in Redis for a Redis zone), 404 when there was none.
async fn lift(rest: &str, snapshot: &Arc<Snapshot>) -> Response<Full<Bytes>> {
    let Some((name, key)) = rest.split_once('/') else {
        return reply(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    };
    let Some(zone) = snapshot.zones.iter().find(|zone| *zone.name == *name) else {
        return reply(StatusCode::NOT_FOUND, "text/plain", "no such zone\n");
    };
    let Ok(text) = percent_decode(key.as_bytes()) else {
        return reply(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "bad percent-encoding\n",
        );
    };
    let key = zone.template.key_of(&text);
    let mut lifted = zone.bans.lift(&key, Instant::now());
    let mut redis_error = None;
    if let (Some(_), Some(backend)) = (zone.redis, snapshot.redis.as_ref()) {
        match lift_in_redis(backend, zone, &key).await {
            Ok(deleted) => lifted |= deleted,
            Err(failure) => redis_error = Some(failure),
        }
    }
    let document = Lifted {
        zone: &zone.name,
        key: &String::from_utf8_lossy(&text),
        lifted,
        redis_error,
    };
    let status = match (lifted, redis_error) {
        (true, _) => StatusCode::OK,
        (false, Some(_)) => StatusCode::SERVICE_UNAVAILABLE,
        (false, None) => StatusCode::NOT_FOUND,
    };
    reply(status, "application/json", line(&document))
}

async fn lift_in_redis(backend: &Backend, zone: &Zone, key: &[u8]) -> Result<bool, &'static str> {
    let deleted = backend.delete_ban(&ban_key(&zone.name, key)).await;
    deleted.map_err(|failure| failure.label())
}

/// `DELETE /bans/ZONE/KEY`: whether a ban was lifted.
#[derive(serde::Serialize)]
struct Lifted<'a> {
    zone: &'a str,
    key: &'a str,
    lifted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    redis_error: Option<&'static str>,
}

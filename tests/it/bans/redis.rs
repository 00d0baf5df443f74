//! Bans of a Redis zone, shared by two instances through a real redis-server (and a
//! Redis Cluster): a ban imposed through one is honoured by the other, listed by both,
//! lifted everywhere by a `DELETE` on either within `penalty::RECHECK` (1 s), and still
//! holds while Redis does not answer. Time bounds are `RECHECK` with room for a loaded
//! machine.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{metric, request, retry_after};
use support::redis::{self as server, Redis};
use support::*;
use tollgate::admission::penalty::RECHECK;
use tollgate::config::RedisSettings as Settings;
use tollgate::shared::{ban_key, zone_ban_prefix, Backend, Fleet, SetBan};

/// Redis zone `shared` (1r/m, no burst) with a ban after 3 rejections within 10 s, for
/// 1 min. At 1r/m an instance remembers a key's rejection for up to a minute: a ban due
/// for a check must still ask Redis. `redis` is the `[redis]` line(s) naming the server or the cluster.
fn config(redis: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[redis]
{redis}
timeout = "1s"
on_error = "allow"
[zones.shared]
key = "$binary_remote_addr"
rate = "1r/m"
backend = "redis"
[[location]]
match = "/"
return = {{ status = 200 }}
limit = [{{ zone = "shared", nodelay = true, ban = {{ after = 3, within = "10s", for = "1m" }} }}]
"#
    )
}

async fn status(addr: SocketAddr, client: &str) -> u16 {
    get_as(addr, "/", client).await.status.as_u16()
}

/// Strikes `client` through `addr` until banned there (a 403), within 30 requests.
async fn ban_through(addr: SocketAddr, client: &str) {
    for _ in 0..30 {
        match status(addr, client).await {
            403 => return,
            200 | 429 => {}
            other => panic!("{client}: {other}"),
        }
    }
    panic!("{client}: not banned after 30 requests");
}

/// The longest a ban lifted elsewhere may take to end here: [`RECHECK`], with room for
/// a loaded machine.
const LIFTED_WITHIN: Duration = RECHECK.saturating_mul(2);

/// Waits (up to 3 x [`RECHECK`]) until `status` from `client` through `addr` is no
/// longer 403: how long that took.
async fn until_lifted(addr: SocketAddr, client: &str) -> Duration {
    let started = Instant::now();
    loop {
        if status(addr, client).await != 403 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < RECHECK * 3,
            "{client} still banned after {:?}",
            RECHECK * 3
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn connect(redis: &Redis) -> ::redis::aio::MultiplexedConnection {
    let client = ::redis::Client::open(redis.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// The ban keys Redis holds (one server), and their values.
async fn ban_keys(redis: &Redis) -> Vec<(Vec<u8>, String)> {
    let mut conn = connect(redis).await;
    let keys: Vec<Vec<u8>> = ::redis::cmd("KEYS")
        .arg("tollgate-ban:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut found = Vec::new();
    for key in keys {
        let value: String = ::redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        found.push((key, value));
    }
    found
}

#[tokio::test]
async fn a_ban_through_one_instance_holds_on_the_other_until_lifted_on_either() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text = config(&format!("url = \"{}\"", redis.url()));
    let (a, b) = (gateway(&text), gateway(&text));
    let (a_addr, b_addr) = (addr(&a), addr(&b));
    let (a_admin, b_admin) = (a.admin_addr().unwrap(), b.admin_addr().unwrap());

    ban_through(a_addr, "10.8.0.1").await;
    // The ban is written to Redis in the background: one key, with a TTL.
    let started = Instant::now();
    while ban_keys(&redis).await.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "no ban key in Redis"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let keys = ban_keys(&redis).await;
    assert_eq!(keys.len(), 1);
    let (key, why) = &keys[0];
    assert!(key.starts_with(b"tollgate-ban:shared:{"), "{key:?}");
    assert!(key.ends_with(b"}:\x0a\x08\x00\x01"), "{key:?}");
    assert!(why.starts_with("3 10000 "), "{why}");

    let on_b = get_as(b_addr, "/", "10.8.0.1").await;
    assert_eq!(on_b.status, 403, "{}", on_b.body);
    assert!(
        (50..=60).contains(&retry_after(&on_b)),
        "{:?}",
        on_b.headers
    );
    assert_eq!(status(b_addr, "10.8.0.2").await, 200, "others pass");
    for admin in [a_admin, b_admin] {
        let listed = within(5, send(admin, get("/bans"))).await.body;
        let shown = r#"{"zones":{"shared":{"source":"redis","bans":[{"key":"10.8.0.1","seconds_left":60,"why":"3 rejections within 10s at "#;
        assert!(listed.starts_with(shown), "{listed}");
    }
    assert_eq!(
        metric(a_admin, r#"tollgate_bans_imposed_total{zone="shared"}"#).await,
        1
    );
    assert_eq!(
        metric(b_admin, r#"tollgate_bans_imposed_total{zone="shared"}"#).await,
        0
    );

    // Past the recheck interval, each asks Redis again (A's remembered rejection of the
    // key does not hide the ban), and the ban stands.
    tokio::time::sleep(RECHECK + Duration::from_millis(100)).await;
    assert_eq!(status(a_addr, "10.8.0.1").await, 403);
    assert_eq!(status(b_addr, "10.8.0.1").await, 403);

    // Lifted on A: a tombstone in Redis at once, and gone from B within the recheck
    // interval.
    let lifted = within(5, send(a_admin, request("DELETE", "/bans/shared/10.8.0.1"))).await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    let keys = ban_keys(&redis).await;
    assert!(
        keys.iter().all(|(_, v)| v.starts_with("lifted ")),
        "{keys:?}"
    );
    let on_b = until_lifted(b_addr, "10.8.0.1").await;
    assert!(on_b <= LIFTED_WITHIN, "lifted on B after {on_b:?}");
    assert!(until_lifted(a_addr, "10.8.0.1").await < RECHECK / 2);
    let again = within(5, send(b_admin, request("DELETE", "/bans/shared/10.8.0.1"))).await;
    assert_eq!(again.status, 404, "{}", again.body);
}

/// Past the recheck interval, pauses Redis: how long `client`'s next request through
/// `addr` waited (asking Redis, which says nothing), and how long its five after that
/// took. Each is a 403: the ban held here stands, trusted again for `RECHECK` from when
/// the wait ended, so the five do not wait for Redis.
async fn banned_while_paused(
    addr: SocketAddr,
    redis: &Redis,
    client: &str,
) -> (Duration, Duration) {
    tokio::time::sleep(RECHECK + Duration::from_millis(100)).await;
    redis.pause();
    let asked = Instant::now();
    assert_eq!(status(addr, client).await, 403, "the ban held here stands");
    let waited = asked.elapsed();
    let started = Instant::now();
    for _ in 0..5 {
        assert_eq!(status(addr, client).await, 403);
    }
    (waited, started.elapsed())
}

#[tokio::test]
async fn a_ban_holds_while_redis_does_not_answer() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // The config's timeout: as long as `RECHECK`, and longer than the Redis client's own
    // default bound on an answer (500 ms).
    let timeout = Duration::from_secs(1);
    let gw = gateway(&config(&format!("url = \"{}\"", redis.url())));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    ban_through(addr, "10.8.1.1").await;
    let (waited, next) = banned_while_paused(addr, &redis, "10.8.1.1").await;
    assert!(waited >= timeout, "waited {waited:?}");
    assert!(next < timeout, "{next:?}");
    assert_eq!(
        status(addr, "10.8.1.2").await,
        200,
        "others follow on_error = allow"
    );
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert!(
        listed.contains(r#""source":"instance","redis_error":"timeout","bans":[{"key":"10.8.1.1""#),
        "{listed}"
    );
    redis.resume();
}

#[tokio::test]
async fn a_ban_behind_another_redis_zone_holds_while_redis_does_not_answer() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let timeout = Duration::from_secs(1);
    // Zone `first` (Redis, never rejecting here) is decided before `shared`'s ban: while
    // Redis does not answer, each waits out the timeout. One worker, whose connection the
    // strikes make: a worker with none would try to connect for the first zone and then
    // pause, so that the second would fail at once.
    let text = config(&format!("url = \"{}\"", redis.url()))
        .replace("workers = 2", "workers = 1")
        .replace(
            "[[location]]",
            "[zones.first]\nkey = \"$binary_remote_addr\"\nrate = \"1000r/s\"\nbackend = \"redis\"\n[[location]]",
        )
        .replace(
            "limit = [{ zone = \"shared\"",
            "limit = [{ zone = \"first\", burst = 1000, nodelay = true }, { zone = \"shared\"",
        );
    let gw = gateway(&text);
    let addr = addr(&gw);
    ban_through(addr, "10.8.2.1").await;
    let (waited, next) = banned_while_paused(addr, &redis, "10.8.2.1").await;
    assert!(waited >= timeout * 2, "both zones waited: {waited:?}");
    // Trusted from the end of the second wait, not from the arrival (which would be over
    // by then).
    assert!(next < timeout, "{next:?}");
    redis.resume();
}

#[tokio::test]
async fn a_ban_key_shares_its_decision_keys_slot_on_a_cluster() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let cluster = server::Cluster::start(3);
    let urls: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let text = config(&format!("urls = [{}]", urls.join(", ")));
    let (a, b) = (gateway(&text), gateway(&text));
    // Six clients, whose keys spread over the nodes: each call names both of its keys.
    for client in 1..=6u8 {
        let ip = format!("10.9.0.{client}");
        ban_through(addr(&a), &ip).await;
        let started = Instant::now();
        while status(addr(&b), &ip).await != 403 {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{ip} not banned on B"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Listed from every primary, by either instance.
    let admin = a.admin_addr().unwrap();
    for gw in [&a, &b] {
        let listed = within(5, send(gw.admin_addr().unwrap(), get("/bans")))
            .await
            .body;
        assert!(listed.contains(r#""source":"redis""#), "{listed}");
        for client in 1..=6u8 {
            let key = format!(r#"{{"key":"10.9.0.{client}","seconds_left":"#);
            assert!(listed.contains(&key), "{key} in {listed}");
        }
    }
    let lifted = within(5, send(admin, request("DELETE", "/bans/shared/10.9.0.1"))).await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    assert!(until_lifted(addr(&b), "10.9.0.1").await <= LIFTED_WITHIN);
}

#[tokio::test]
async fn a_zone_moved_between_local_and_redis_starts_with_no_bans() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let in_redis = config(&format!("url = \"{}\"", redis.url()));
    let local = in_redis.replace("backend = \"redis\"\n", "");
    let reload = |gw: &tollgate::Gateway, text: &str| {
        let path = std::path::Path::new("/tmp/tollgate-test/gateway.toml");
        let next = tollgate::config::from_str(text, path).unwrap();
        gw.reload(&next).unwrap();
    };
    let gw = gateway(&local);
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    // Local → Redis: the ban held here is not in Redis; it is not enforced here alone.
    ban_through(addr, "10.8.2.1").await;
    reload(&gw, &in_redis);
    assert_ne!(status(addr, "10.8.2.1").await, 403);
    // Redis → local: the copy held here is not a local ban; none is listed or enforced.
    ban_through(addr, "10.8.2.2").await;
    reload(&gw, &local);
    assert_ne!(status(addr, "10.8.2.2").await, 403);
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert_eq!(
        listed,
        "{\"zones\":{\"shared\":{\"source\":\"local\",\"bans\":[]}}}\n"
    );
    assert_eq!(metric(admin, r#"tollgate_bans{zone="shared"}"#).await, 0);
}

/// A backend of its own on `redis` (the admin API's and the penalty box's calls).
fn backend(redis: &Redis) -> Backend {
    let settings = Settings {
        urls: vec![redis.url()],
        cluster: false,
        timeout: Duration::from_millis(500),
        ca: None,
        heartbeat: Duration::from_secs(1),
    };
    let fleet = std::sync::Arc::new(Fleet::new("bans-test".into()));
    Backend::new(settings, 1, fleet, Instant::now).unwrap()
}

#[tokio::test]
async fn a_second_ban_keeps_the_first_and_a_lift_refuses_a_late_write() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let backend = backend(&redis);
    let (key, now) = (ban_key("shared", b"k"), Instant::now());
    let first = backend.set_ban(&key, [3, 10_000], 60_000, now, 0).await;
    assert_eq!(first, Ok(SetBan::Written));
    // Another instance's ban of the same key: the first one's end and reason stay.
    match backend.set_ban(&key, [7, 20_000], 600_000, now, 0).await {
        Ok(SetBan::Held(left_ms)) => assert!((50_000..=60_000).contains(&left_ms)),
        other => panic!("{other:?}"),
    }
    let why = &ban_keys(&redis).await[0].1;
    assert!(why.starts_with("3 10000 "), "{why}");
    // Lifted; a write sent before the lift that lands after it is refused.
    assert_eq!(backend.delete_ban(&key).await, Ok(true));
    let late = backend.set_ban(&key, [3, 10_000], 60_000, now, 0).await;
    assert_eq!(late, Ok(SetBan::Lifted));
    assert_eq!(backend.delete_ban(&key).await, Ok(false), "nothing to lift");
    let listed = backend.scan_bans(&[zone_ban_prefix("shared")], 10).await;
    assert_eq!(listed.unwrap()[0].bans, [], "a tombstone is no ban");
}

#[tokio::test]
async fn a_listing_reads_every_ban_skips_foreign_keys_and_says_when_cut_short() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let backend = backend(&redis);
    let now = Instant::now();
    for i in 0..3u8 {
        let key = ban_key("shared", &[10, 0, 0, i]);
        let written = backend.set_ban(&key, [3, 10_000], 60_000, now, 0).await;
        assert_eq!(written, Ok(SetBan::Written));
    }
    let other = ban_key("other", b"k");
    backend
        .set_ban(&other, [1, 1_000], 60_000, now, 0)
        .await
        .unwrap();
    // Keys of other types under the zone's prefix: read as errors, left out.
    let mut conn = connect(&redis).await;
    for foreign in ["tollgate-ban:shared:{x}:hash", "tollgate-ban:shared:junk"] {
        let _: () = ::redis::cmd("HSET")
            .arg(foreign)
            .arg("f")
            .arg("v")
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let zones = [zone_ban_prefix("shared"), zone_ban_prefix("other")];
    let listed = backend.scan_bans(&zones, 10).await.unwrap();
    assert_eq!((listed[0].bans.len(), listed[0].truncated), (3, false));
    assert_eq!((listed[1].bans.len(), listed[1].truncated), (1, false));
    let capped = backend.scan_bans(&zones, 2).await.unwrap();
    assert_eq!((capped[0].bans.len(), capped[0].truncated), (2, true));
    assert_eq!((capped[1].bans.len(), capped[1].truncated), (1, false));
}

#[tokio::test]
async fn a_ban_from_another_instance_is_not_hidden_by_a_remembered_rejection() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text = config(&format!("url = \"{}\"", redis.url())).replace("after = 3", "after = 5");
    let (a, b) = (gateway(&text), gateway(&text));
    let b_admin = b.admin_addr().unwrap();
    // B admits the key once (1r/m), then remembers Redis's rejection for a minute.
    assert_eq!(status(addr(&b), "10.8.3.1").await, 200);
    assert_eq!(status(addr(&b), "10.8.3.1").await, 429);
    ban_through(addr(&a), "10.8.3.1").await;
    // B asks Redis again within RECHECK of its remembered rejection and answers the ban
    // (polled slowly: B strikes fewer than `after` times meanwhile).
    let started = Instant::now();
    let on_b = loop {
        let reply = get_as(addr(&b), "/", "10.8.3.1").await;
        if reply.status != 429 {
            break reply;
        }
        assert!(started.elapsed() < RECHECK * 3, "B still answers 429");
        tokio::time::sleep(RECHECK / 3 + Duration::from_millis(20)).await;
    };
    assert_eq!(on_b.status, 403, "{}", on_b.body);
    assert!(
        (50..=60).contains(&retry_after(&on_b)),
        "{:?}",
        on_b.headers
    );
    assert_eq!(
        metric(b_admin, r#"tollgate_bans_imposed_total{zone="shared"}"#).await,
        0,
        "B learnt A's ban, it imposed none of its own"
    );
    let keys = ban_keys(&redis).await;
    assert!(keys[0].1.starts_with("5 10000 "), "{keys:?}");
}

/// Waits (up to 3 s) until the sliding log at `key` holds `entries` entries.
async fn charged(conn: &mut ::redis::aio::MultiplexedConnection, key: &[u8], entries: usize) {
    let started = Instant::now();
    loop {
        let held: usize = ::redis::cmd("LLEN")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        if held == entries {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "{held} charged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_redis_zone_counting_failed_logins_bans_a_brute_force() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // 401 unless `?pw=right`.
    let up = Upstream::start(|req| async move {
        let right = req.uri().query() == Some("pw=right");
        text(if right { 200 } else { 401 }, "login")
    })
    .await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[redis]
url = "{}"
timeout = "500ms"
[zones.login]
key = "$binary_remote_addr"
rate = "3r/m"
algorithm = "sliding_log"
backend = "redis"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "= /login"
upstream = "app"
limit = [{{ zone = "login", burst = 0, count_status = [401], ban = {{ after = 2, within = "1m", for = "15m" }} }}]
"#,
        redis.url(),
        up.addr
    ));
    let addr = addr(&gw);
    for _ in 0..5 {
        let good = get_as(addr, "/login?pw=right", "10.8.4.1").await;
        assert_eq!(good.status, 200, "a good login is never limited");
    }
    // Three failures use the budget (each charged in Redis in the background after its
    // answer: waited for); the next two are rejected (two strikes); then banned.
    let mut conn = connect(&redis).await;
    let mut statuses = Vec::new();
    for failures in 1..=7usize {
        let reply = get_as(addr, "/login?pw=guess", "10.8.4.2").await;
        statuses.push(reply.status.as_u16());
        if failures <= 3 {
            charged(&mut conn, b"tollgate:login:\x0a\x08\x04\x02", failures).await;
        }
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429, 403, 403]);
    assert_eq!(up.count(), 8, "rejected and banned attempts never reach it");
    // The ban is written to Redis in the background.
    let started = Instant::now();
    let keys = loop {
        let keys = ban_keys(&redis).await;
        if !keys.is_empty() || started.elapsed() > Duration::from_secs(3) {
            break keys;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].0.starts_with(b"tollgate-ban:login:{"), "{keys:?}");
}

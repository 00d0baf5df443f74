//! Bans of a Redis zone, shared by two instances through a real redis-server (and a
//! Redis Cluster): a ban imposed through one is honoured by the other, listed by both,
//! lifted everywhere by a `DELETE` on either within `penalty::RECHECK` (1 s), and still
//! holds while Redis does not answer.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{metric, request, retry_after};
use support::redis::{self as server, Redis};
use support::*;

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
[redis]
{redis}
timeout = "50ms"
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

/// Waits (up to 2 s) until `status` from `client` through `addr` is no longer 403: how
/// long that took.
async fn until_lifted(addr: SocketAddr, client: &str) -> Duration {
    let started = Instant::now();
    loop {
        if status(addr, client).await != 403 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{client} still banned after 2 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The ban keys Redis holds (one server).
async fn ban_keys(redis: &Redis) -> Vec<Vec<u8>> {
    let client = ::redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    ::redis::cmd("KEYS")
        .arg("tollgate:ban:*")
        .query_async(&mut conn)
        .await
        .unwrap()
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
    assert!(
        keys[0].ends_with(b":shared:\x0a\x08\x00\x01"),
        "{:?}",
        keys[0]
    );

    let on_b = get_as(b_addr, "/", "10.8.0.1").await;
    assert_eq!(on_b.status, 403, "{}", on_b.body);
    assert!(
        (59..=60).contains(&retry_after(&on_b)),
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
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(status(a_addr, "10.8.0.1").await, 403);
    assert_eq!(status(b_addr, "10.8.0.1").await, 403);

    // Lifted on A: gone from Redis at once, and from B within the recheck interval.
    let lifted = within(5, send(a_admin, request("DELETE", "/bans/shared/10.8.0.1"))).await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    assert!(ban_keys(&redis).await.is_empty());
    let on_b = until_lifted(b_addr, "10.8.0.1").await;
    assert!(
        on_b <= Duration::from_millis(1_200),
        "lifted on B after {on_b:?}"
    );
    assert!(until_lifted(a_addr, "10.8.0.1").await < Duration::from_millis(100));
    let again = within(5, send(b_admin, request("DELETE", "/bans/shared/10.8.0.1"))).await;
    assert_eq!(again.status, 404, "{}", again.body);
}

#[tokio::test]
async fn a_ban_holds_while_redis_does_not_answer() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&config(&format!("url = \"{}\"", redis.url())));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    ban_through(addr, "10.8.1.1").await;
    // Past the recheck interval, the next request asks Redis, which says nothing.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    redis.pause();
    let started = Instant::now();
    assert_eq!(
        status(addr, "10.8.1.1").await,
        403,
        "the ban held here stands"
    );
    assert_eq!(
        status(addr, "10.8.1.2").await,
        200,
        "others follow on_error = allow"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert!(
        listed.contains(r#""source":"instance","redis_error":"timeout","bans":[{"key":"10.8.1.1""#),
        "{listed}"
    );
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
    assert!(until_lifted(addr(&b), "10.9.0.1").await <= Duration::from_millis(1_200));
}

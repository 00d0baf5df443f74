//! The penalty box (`ban` on a limit item) through the real gateway: a key rejected
//! `after` times is banned and answered before any zone or upstream, listed and lifted by
//! the admin API, counted in the metrics and the access log, kept across a reload, and
//! free again when the ban ends. `bans/redis.rs`: shared by two instances through Redis;
//! `bans/spray.rs`: a full table under a spray of fake bans; `bans/tables.rs`: the tables.

use crate::support;

mod redis;
mod spray;
mod tables;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use http::Request;
use support::*;

/// `login` (10r/s, no burst) with a ban on `/login`; `/open` lists the same zone without
/// a ban. The upstream at `up` counts what reaches it.
fn config(up: SocketAddr, log: &Path, algorithm: &str, ban: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "{}"
format = "json"
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[zones.login]
key = "$binary_remote_addr"
rate = "5r/s"
algorithm = "{algorithm}"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/login"
upstream = "app"
limit = [{{ zone = "login", nodelay = true, ban = {ban} }}]
[[location]]
match = "/open"
upstream = "app"
limit = [{{ zone = "login", nodelay = true }}]
"#,
        log.display()
    )
}

const BAN: &str = r#"{ after = 3, within = "10s", for = "1m" }"#;

async fn from(addr: SocketAddr, path: &str, client: &str) -> Reply {
    get_as(addr, path, client).await
}

/// Sends from `client` until the zone has rejected it `strikes` times (a request that
/// passes meanwhile strikes nothing); fails after 30 requests.
async fn strike(addr: SocketAddr, client: &str, strikes: usize) {
    let mut rejected = 0;
    for _ in 0..30 {
        let reply = from(addr, "/login", client).await;
        match reply.status.as_u16() {
            429 => rejected += 1,
            200 => {}
            other => panic!("{client}: {other} before its ban: {}", reply.body),
        }
        if rejected == strikes {
            return;
        }
    }
    panic!("{client}: {rejected} rejections in 30 requests");
}

fn retry_after(reply: &Reply) -> u64 {
    reply.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// An admin call, with the tests' admin token (calls that change state need it).
fn request(method: &str, path: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "admin")
        .header("authorization", admin_authorization())
        .body(empty())
        .unwrap()
}

/// `name{labels} value` from the admin listener's scrape, 0 when absent.
async fn metric(admin: SocketAddr, sample: &str) -> u64 {
    let text = within(5, send(admin, get("/metrics"))).await.body;
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .map_or(0, |value| value.trim().parse().unwrap())
}

#[tokio::test]
async fn a_key_rejected_after_times_is_banned_before_any_zone_or_upstream() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &log, "leaky_bucket", BAN));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());

    strike(addr, "10.0.0.1", 3).await;
    let seen = up.count();
    let banned = from(addr, "/login", "10.0.0.1").await;
    assert_eq!(banned.status, 403, "{}", banned.body);
    assert!(
        (59..=60).contains(&retry_after(&banned)),
        "{:?}",
        banned.headers
    );
    assert_eq!(banned.headers["content-type"], "application/problem+json");
    assert!(banned.body.contains(r#""title":"Forbidden","status":403,"detail":"banned for exceeding the rate limit repeatedly","zone":"login""#), "{}", banned.body);
    // Past the time the zone would admit the key again (5r/s), the ban still answers.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(from(addr, "/login", "10.0.0.1").await.status, 403);
    assert_eq!(up.count(), seen, "no banned request reached the upstream");
    // Another client is not banned; a location without `ban` ignores the zone's bans.
    assert_eq!(from(addr, "/login", "10.0.0.2").await.status, 200);
    let open = from(addr, "/open", "10.0.0.1").await.status;
    assert!(matches!(open.as_u16(), 200 | 429), "{open}");

    let decisions = r#"tollgate_limit_decisions_total{zone="login",outcome="banned"}"#;
    assert_eq!(metric(admin, decisions).await, 2);
    assert_eq!(metric(admin, r#"tollgate_bans{zone="login"}"#).await, 1);
    assert_eq!(
        metric(admin, r#"tollgate_bans_imposed_total{zone="login"}"#).await,
        1
    );
    let status = within(5, send(admin, get("/status"))).await.body;
    assert!(status.contains(r#""evictions":0,"bans":1,"#), "{status}");
    // The access log (written by a flusher thread) says BANNED for both.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        let banned = lines
            .lines()
            .filter(|l| l.contains(r#""limit_status":"BANNED""#));
        if banned.count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{lines}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn bans_are_listed_with_time_left_and_why_and_lifted_by_hand() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(
        up.addr,
        &dir.path().join("a.log"),
        "leaky_bucket",
        BAN,
    ));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    let empty = within(5, send(admin, get("/bans"))).await;
    assert_eq!(empty.status, 200);
    assert_eq!(
        empty.body,
        "{\"zones\":{\"login\":{\"source\":\"local\",\"bans\":[]}}}\n"
    );

    strike(addr, "2001:db8::7", 3).await;
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert!(listed.starts_with(r#"{"zones":{"login":{"source":"local","bans":[{"key":"2001:db8::7","seconds_left":60,"why":"3 rejections within 10s at "#), "{listed}");
    assert!(
        listed.contains(r#"Z","strikes":3,"within_seconds":10,"since":""#),
        "{listed}"
    );

    let lifted = within(5, send(admin, request("DELETE", "/bans/login/2001:db8::7"))).await;
    assert_eq!(lifted.status, 200, "{}", lifted.body);
    assert_eq!(
        lifted.body,
        "{\"zone\":\"login\",\"key\":\"2001:db8::7\",\"lifted\":true}\n"
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(from(addr, "/login", "2001:db8::7").await.status, 200);
    let again = within(
        5,
        send(admin, request("DELETE", "/bans/login/2001%3Adb8%3A%3A7")),
    )
    .await;
    assert_eq!(again.status, 404, "{}", again.body);
    assert_eq!(metric(admin, r#"tollgate_bans{zone="login"}"#).await, 0);
    assert_eq!(
        metric(admin, r#"tollgate_bans_imposed_total{zone="login"}"#).await,
        1
    );

    let no_zone = within(5, send(admin, request("DELETE", "/bans/nope/10.0.0.1"))).await;
    assert_eq!(
        (no_zone.status.as_u16(), no_zone.body.as_str()),
        (404, "no such zone\n")
    );
    let post = within(5, send(admin, request("POST", "/bans"))).await;
    assert_eq!(
        (
            post.status.as_u16(),
            post.headers["allow"].to_str().unwrap()
        ),
        (405, "GET, HEAD")
    );
    let get_one = within(5, send(admin, request("GET", "/bans/login/10.0.0.1"))).await;
    assert_eq!(
        (
            get_one.status.as_u16(),
            get_one.headers["allow"].to_str().unwrap()
        ),
        (405, "DELETE")
    );
}

#[tokio::test]
async fn hostile_bytes_in_a_delete_are_answered_not_obeyed() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(
        up.addr,
        &dir.path().join("a.log"),
        "leaky_bucket",
        BAN,
    ));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    strike(addr, "10.0.0.1", 3).await;
    let cases: [(&[u8], &[u16]); 8] = [
        (b"/bans/login/%zz", &[400]),
        (b"/bans/login/%", &[400]),
        (b"/bans/login/%00%ff", &[400]),
        (b"/bans/login/%ff%fe", &[400, 404]),
        (b"/bans/login/", &[404]),
        (b"/bans/login", &[404]),
        (b"/bans//10.0.0.1", &[404]),
        (b"/bans/login/\xff\xfe", &[400]),
    ];
    for (path, expected) in cases {
        let mut stream = tokio::net::TcpStream::connect(admin).await.unwrap();
        let head = [
            b"DELETE ",
            path,
            b" HTTP/1.1\r\nhost: admin\r\nconnection: close\r\nauthorization: ",
            admin_authorization().as_bytes(),
            b"\r\n\r\n",
        ]
        .concat();
        tokio::io::AsyncWriteExt::write_all(&mut stream, &head)
            .await
            .unwrap();
        let response = raw::read_response(&mut stream).await.expect("an answer");
        assert!(
            expected.contains(&response.status),
            "{:?}: {response:?}",
            String::from_utf8_lossy(path)
        );
    }
    let body = within(5, send(admin, get("/bans"))).await.body;
    assert!(
        body.contains(r#""key":"10.0.0.1""#),
        "the ban stands: {body}"
    );
    assert_eq!(from(addr, "/login", "10.0.0.1").await.status, 403);
}

#[tokio::test]
async fn a_ban_survives_a_reload_and_ends_when_its_time_is_up() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let short = r#"{ after = 2, within = "10s", for = "2s", status = 429 }"#;
    let gw = gateway(&config(up.addr, &log, "leaky_bucket", short));
    let addr = addr(&gw);
    // Timed from before the strikes: the ban began after this, however slow they are.
    let imposed = Instant::now();
    strike(addr, "10.0.0.3", 2).await;
    let banned = from(addr, "/login", "10.0.0.3").await;
    assert_eq!(banned.status, 429);
    // 2 s, rounded up from what is left: 1 when the box is slow to answer.
    assert!(
        (1..=2).contains(&retry_after(&banned)),
        "{:?}",
        banned.headers
    );
    assert!(
        banned.body.contains("banned for exceeding"),
        "{}",
        banned.body
    );

    // Another algorithm and a new status: the zone's state starts over, its bans stay.
    let next = config(up.addr, &log, "token_bucket", &short.replace("429", "403"));
    let next = tollgate::config::from_str(&next, Path::new("/tmp/tollgate-test/gateway.toml"));
    assert_eq!(gw.reload(&next.unwrap()).unwrap(), 2);
    let seen = up.count();
    assert_eq!(from(addr, "/login", "10.0.0.3").await.status, 403);
    assert_eq!(up.count(), seen);

    // It ends about 2 s after it began: polled, not slept through.
    let ended = loop {
        let status = from(addr, "/login", "10.0.0.3").await.status;
        if status == 200 {
            break imposed.elapsed();
        }
        assert_eq!(status, 403);
        assert!(
            imposed.elapsed() < Duration::from_secs(4),
            "still banned after 4 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        ended >= Duration::from_millis(1_900),
        "ended after {ended:?}"
    );
    assert_eq!(up.count(), seen + 1);
}

#[tokio::test]
async fn a_login_brute_force_is_banned_and_a_good_login_never_is() {
    let _shared = support::shared();
    // 401 unless `?pw=right`.
    let up = Upstream::start(|req| async move {
        let right = req.uri().query() == Some("pw=right");
        text(if right { 200 } else { 401 }, "login")
    })
    .await;
    let text = format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[zones.login]
key = "$binary_remote_addr"
rate = "3r/m"
algorithm = "sliding_log"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "= /login"
upstream = "app"
limit = [{{ zone = "login", burst = 0, count_status = [401, 403], ban = {{ after = 2, within = "1m", for = "15m" }} }}]
"#,
        up.addr
    );
    let gw = gateway(&text);
    let addr = addr(&gw);
    for _ in 0..10 {
        let good = from(addr, "/login?pw=right", "10.1.0.1").await;
        assert_eq!(good.status, 200, "a good login is never limited");
    }
    // Three failures use the budget; the next two are rejected (two strikes); then banned.
    let mut statuses = Vec::new();
    for _ in 0..7 {
        statuses.push(
            from(addr, "/login?pw=guess", "10.1.0.2")
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429, 403, 403]);
    assert_eq!(
        up.count(),
        13,
        "rejected and banned attempts never reach the application"
    );
    let right_but_banned = from(addr, "/login?pw=right", "10.1.0.2").await;
    assert_eq!(right_but_banned.status, 403);
}

#[tokio::test]
async fn rejections_where_the_item_has_no_ban_are_no_strikes() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(
        up.addr,
        &dir.path().join("a.log"),
        "leaky_bucket",
        BAN,
    ));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    // Many rejections through `/open`, the same zone without `ban`.
    let mut rejected = 0;
    for _ in 0..20 {
        if from(addr, "/open", "10.0.0.4").await.status == 429 {
            rejected += 1;
        }
    }
    // As many as a ban's `after` would be enough (most are, unless the box is slow).
    assert!(rejected >= 3, "{rejected} rejections");
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert!(listed.contains(r#""bans":[]"#), "{listed}");
    let imposed = r#"tollgate_bans_imposed_total{zone="login"}"#;
    assert_eq!(metric(admin, imposed).await, 0);
    // Through `/login`, the key's strikes start from none: the third one bans.
    strike(addr, "10.0.0.4", 2).await;
    assert_eq!(metric(admin, imposed).await, 0);
    strike(addr, "10.0.0.4", 1).await;
    assert_eq!(metric(admin, imposed).await, 1);
    assert_eq!(from(addr, "/login", "10.0.0.4").await.status, 403);
}

#[tokio::test]
async fn a_zone_given_another_key_starts_with_no_bans() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let text = config(up.addr, &dir.path().join("a.log"), "leaky_bucket", BAN);
    let gw = gateway(&text);
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    strike(addr, "10.0.0.5", 3).await;
    assert_eq!(from(addr, "/login", "10.0.0.5").await.status, 403);
    // Keyed by a header now: a key names another client, the old bans mean nothing.
    let rekeyed = text.replace(r#"key = "$binary_remote_addr""#, r#"key = "$http_x_user""#);
    let rekeyed =
        tollgate::config::from_str(&rekeyed, Path::new("/tmp/tollgate-test/gateway.toml"));
    gw.reload(&rekeyed.unwrap()).unwrap();
    assert_eq!(from(addr, "/login", "10.0.0.5").await.status, 200);
    let listed = within(5, send(admin, get("/bans"))).await.body;
    assert_eq!(
        listed,
        "{\"zones\":{\"login\":{\"source\":\"local\",\"bans\":[]}}}\n"
    );
}

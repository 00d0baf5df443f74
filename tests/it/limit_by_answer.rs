//! Charging by the answer, through the real gateway: `count_status` (a login endpoint
//! that counts only failed logins) and `cost_from` (an upstream that says what each
//! request cost), in local zones and in Redis zones on a real redis-server.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::redis::{self as server, Redis};
use support::*;

/// An upstream that plays a login form and a metered API: `/login?pw=right` is 200,
/// any other `/login` 401 (after `?slow=MS` milliseconds); `/api?cost=N` answers 200 with
/// `X-Cost: N` (no header without `cost`).
async fn app() -> Upstream {
    Upstream::start(|req| async move {
        let query = req.uri().query().unwrap_or("").to_owned();
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
                .map(str::to_owned)
        };
        if let Some(ms) = param("slow") {
            let ms = ms.parse().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if req.uri().path() == "/login" {
            let status = if param("pw").as_deref() == Some("right") {
                200
            } else {
                401
            };
            return text(status, "login");
        }
        let mut response = text(200, "metered");
        if let Some(cost) = param("cost") {
            response
                .headers_mut()
                .insert("x-cost", cost.parse().expect("header value"));
        }
        response
    })
    .await
}

/// A gateway in front of `up`: `/login` limited to 5 failures a minute, `/api` (and
/// `/api-visible`, which keeps the cost header) at `api_rate` with `cost_from`;
/// `zone_lines` go into both zones' tables, `redis` is a `[redis] url`.
fn config(up: SocketAddr, zone_lines: &str, api_rate: &str, redis: Option<&str>) -> String {
    let redis_section = redis.map_or(String::new(), |url| {
        format!("[redis]\nurl = \"{url}\"\ntimeout = \"500ms\"\non_error = \"deny\"\n")
    });
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
{redis_section}
[upstreams.app]
servers = ["{up}"]
[zones.login]
key = "$binary_remote_addr"
rate = "5r/m"
algorithm = "sliding_log"
{zone_lines}
[zones.api]
key = "$binary_remote_addr"
rate = "{api_rate}"
algorithm = "sliding_log"
{zone_lines}
[[location]]
match = "= /login"
upstream = "app"
limit = [{{ zone = "login", count_status = [401, 403] }}]
[[location]]
match = "/api"
upstream = "app"
cost_from = "X-Cost"
limit = [{{ zone = "api" }}]
[[location]]
match = "/api-visible"
upstream = "app"
cost_from = "X-Cost"
keep_cost_header = true
limit = [{{ zone = "api" }}]
"#
    )
}

async fn as_client(addr: SocketAddr, path: &str, client: &str) -> Reply {
    get_as(addr, path, client).await
}

/// Successful logins never use the budget; five failures do, and the sixth attempt is
/// refused before the application sees it, whatever its password. Another client is
/// untouched.
async fn failed_logins_are_counted(addr: SocketAddr, up: &Upstream, client: &str) {
    for _ in 0..10 {
        let reply = as_client(addr, "/login?pw=right", client).await;
        assert_eq!(reply.status, 200, "a successful login costs nothing");
    }
    for n in 1..=5 {
        let reply = as_client(addr, "/login?pw=wrong", client).await;
        assert_eq!(reply.status, 401, "failure {n} reaches the application");
    }
    let seen = up.count();
    for password in ["wrong", "right"] {
        let reply = as_client(addr, &format!("/login?pw={password}"), client).await;
        assert_eq!(reply.status, 429, "the sixth attempt is refused");
        let retry: u64 = reply.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry), "until the minute ends: {retry}");
    }
    assert_eq!(
        up.count(),
        seen,
        "the refused attempts never reach the application"
    );
    let other = as_client(addr, "/login?pw=wrong", "198.51.100.99").await;
    assert_eq!(other.status, 401, "another client has its own budget");
}

#[tokio::test]
async fn only_failed_logins_use_the_budget() {
    let _shared = support::shared();
    let up = app().await;
    let gw = gateway(&config(up.addr, "", "100r/m", None));
    failed_logins_are_counted(addr(&gw), &up, "198.51.100.1").await;
}

#[tokio::test]
async fn guesses_sent_at_once_cannot_slip_past_the_limit() {
    let _shared = support::shared();
    let up = app().await;
    let gw = gateway(&config(up.addr, "", "100r/m", None));
    let gw = addr(&gw);
    // Twenty slow failures at once: each is held against the budget while in flight, so
    // only five are let through, not twenty checked against an empty bucket.
    let guesses: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(async move { as_client(gw, "/login?pw=x&slow=300", "198.51.100.2").await })
        })
        .collect();
    let mut statuses = Vec::new();
    for guess in guesses {
        statuses.push(guess.await.unwrap().status.as_u16());
    }
    statuses.sort_unstable();
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        15,
        "{statuses:?}"
    );
    assert_eq!(up.count(), 5);
}

#[tokio::test]
async fn successful_logins_in_flight_give_their_units_back() {
    let _shared = support::shared();
    let up = app().await;
    let gw = gateway(&config(up.addr, "", "100r/m", None));
    let gw = addr(&gw);
    // Five slow successes hold the whole budget while in flight...
    let logins: Vec<_> = (0..5)
        .map(|_| {
            tokio::spawn(
                async move { as_client(gw, "/login?pw=right&slow=1500", "198.51.100.3").await },
            )
        })
        .collect();
    up.holds(5).await;
    let meanwhile = as_client(gw, "/login?pw=right", "198.51.100.3").await;
    assert_eq!(
        meanwhile.status, 429,
        "the budget is held while they are in flight"
    );
    for login in logins {
        assert_eq!(login.await.unwrap().status, 200);
    }
    // ...and give it back when they succeed.
    for _ in 0..5 {
        let reply = as_client(gw, "/login?pw=wrong", "198.51.100.3").await;
        assert_eq!(reply.status, 401, "the whole budget is back");
    }
}

/// `/api` at 100 a minute: requests declaring 0 are free, one declaring 60 is
/// admitted on 1 and then charged 59 more, the next declaring 60 still fits (61 + 1) and
/// leaves the key in debt (121), so the one after is refused until the window ends. The
/// cost header never reaches the client, unless `keep_cost_header`.
async fn declared_costs_are_charged(addr: SocketAddr, client: &str) {
    for _ in 0..10 {
        let reply = as_client(addr, "/api?cost=0", client).await;
        assert_eq!(reply.status, 200);
        assert!(
            !reply.headers.contains_key("x-cost"),
            "the cost header is removed"
        );
    }
    for n in 1..=2 {
        let reply = as_client(addr, "/api?cost=60", client).await;
        assert_eq!(reply.status, 200, "request {n} declaring 60");
    }
    let reply = as_client(addr, "/api-visible?cost=1", client).await;
    assert_eq!(reply.status, 429, "the key owes more than its window holds");
    let other = as_client(addr, "/api-visible?cost=7", "198.51.100.98").await;
    assert_eq!(other.status, 200);
    assert_eq!(other.headers["x-cost"], "7", "kept where configured");
}

#[tokio::test]
async fn the_upstream_says_what_a_request_cost() {
    let _shared = support::shared();
    let up = app().await;
    let gw = gateway(&config(up.addr, "", "100r/m", None));
    declared_costs_are_charged(addr(&gw), "198.51.100.4").await;
}

#[tokio::test]
async fn a_declared_debt_is_waited_off() {
    let _shared = support::shared();
    let up = app().await;
    // 10 a second in a token bucket: a request declaring 20 leaves 2 s of debt.
    let text = config(up.addr, "", "10r/s", None).replace(
        "rate = \"10r/s\"\nalgorithm = \"sliding_log\"",
        "rate = \"10r/s\"\nalgorithm = \"token_bucket\"",
    );
    let gw = gateway(&text);
    let gw = addr(&gw);
    let client = "198.51.100.5";
    assert_eq!(as_client(gw, "/api?cost=20", client).await.status, 200);
    // The debt is charged as the answer passes, before the client has it.
    let started = Instant::now();
    let refused = as_client(gw, "/api", client).await;
    assert_eq!(refused.status, 429, "in debt");
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "about 2 s of debt left: {retry}");
    let waited = Duration::from_millis(2_100).saturating_sub(started.elapsed());
    tokio::time::sleep(waited).await;
    assert_eq!(as_client(gw, "/api", client).await.status, 200, "paid off");
}

#[tokio::test]
async fn a_cost_that_is_not_a_number_leaves_the_static_cost() {
    let _shared = support::shared();
    let up = app().await;
    let gw = gateway(&config(up.addr, "", "4r/m", None));
    let gw = addr(&gw);
    for bad in ["-5", "lots", "1e9", "0x10"] {
        let reply = as_client(gw, &format!("/api?cost={bad}"), "198.51.100.6").await;
        assert_eq!(reply.status, 200, "{bad}: admitted on its static cost of 1");
        assert!(!reply.headers.contains_key("x-cost"));
    }
    assert_eq!(
        as_client(gw, "/api", "198.51.100.6").await.status,
        429,
        "3 a minute"
    );
}

/// Redis settles in the background: waits until `key`'s log holds `want` units.
async fn redis_count_is(redis: &Redis, key: &[u8], want: u64) {
    let client = ::redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let log: Vec<String> = ::redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        let units = |entry: &String| -> u64 {
            entry.split_once(':').map_or(0, |(_, u)| u.parse().unwrap())
        };
        let used: u64 = log.iter().map(units).sum();
        if used == want {
            return;
        }
        assert!(Instant::now() < deadline, "Redis holds {used}, not {want}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn redis_zones_count_failed_logins_and_declared_costs() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let up = app().await;
    let text = config(up.addr, "backend = \"redis\"", "100r/m", Some(&redis.url()));
    let (a, b) = (gateway(&text), gateway(&text));
    let (a, b) = (addr(&a), addr(&b));
    // Failures through one instance count on the other.
    let client = "198.51.100.7";
    let login_key = [b"tollgate:login:".as_slice(), &[198, 51, 100, 7]].concat();
    for _ in 0..3 {
        assert_eq!(as_client(a, "/login?pw=right", client).await.status, 200);
        assert_eq!(as_client(a, "/login?pw=wrong", client).await.status, 401);
    }
    redis_count_is(&redis, &login_key, 3).await;
    for _ in 0..2 {
        assert_eq!(as_client(b, "/login?pw=wrong", client).await.status, 401);
    }
    redis_count_is(&redis, &login_key, 5).await;
    assert_eq!(as_client(a, "/login?pw=right", client).await.status, 429);
    assert_eq!(as_client(b, "/login?pw=right", client).await.status, 429);

    let client = "198.51.100.8";
    let api_key = [b"tollgate:api:".as_slice(), &[198, 51, 100, 8]].concat();
    let mut charged = 0;
    for (gw, cost) in [(a, 0), (b, 60), (a, 60)] {
        assert_eq!(
            as_client(gw, &format!("/api?cost={cost}"), client)
                .await
                .status,
            200
        );
        charged += cost;
        redis_count_is(&redis, &api_key, charged).await;
    }
    assert_eq!(as_client(b, "/api", client).await.status, 429, "in debt");
}

/// The shipped `gateway.toml`'s demo login form, as the README shows it: five failures,
/// three refusals, then the ban.
#[tokio::test]
async fn the_shipped_demo_login_counts_failures_then_bans() {
    let _shared = support::shared();
    let shipped = include_str!("../../gateway.toml")
        .replace(
            "listen = [\"127.0.0.1:8080\"]",
            "listen = [\"127.0.0.1:0\"]",
        )
        .replace("access = \"stdout\"", "access = \"off\"")
        .replace("listen = \"127.0.0.1:9901\"", "listen = \"127.0.0.1:0\"");
    let gw = gateway(&shipped);
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(get_text(addr(&gw), "/demo/login").await.status.as_u16());
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429, 403, 403]);
}

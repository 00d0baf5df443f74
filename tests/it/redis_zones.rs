//! Zones with `backend = "redis"` through the real gateway and a real redis-server:
//! two instances sharing one limit under load, what each `on_error` does while Redis is
//! down and after it comes back, a Redis that stops answering, and a flood from one
//! key that costs Redis nothing after its first rejection.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::Request;
use hyper_util::rt::TokioIo;
use support::redis::{self as server, Redis};
use support::*;

pub(crate) fn config(url: &str, on_error: &str, rate: &str, burst: u64) -> String {
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
url = "{url}"
timeout = "1s"
on_error = "{on_error}"
[zones.shared]
key = "$binary_remote_addr"
rate = "{rate}"
backend = "redis"
[[location]]
match = "/"
return = {{ status = 200 }}
limit = [{{ zone = "shared", burst = {burst}, nodelay = true }}]
"#
    )
}

/// `text` with a Redis call cut after 50 ms instead of 1 s: for the tests of what a dead or
/// silent Redis costs a request. (The others keep 1 s, so that a busy machine's slow
/// answer is not taken for a dead Redis.)
fn cut_after_50ms(text: String) -> String {
    text.replace("timeout = \"1s\"", "timeout = \"50ms\"")
}

async fn from(addr: SocketAddr, client: &str) -> Reply {
    get_as(addr, "/", client).await
}

async fn redis_conn(redis: &Redis) -> ::redis::aio::MultiplexedConnection {
    let client = ::redis::Client::open(redis.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Within 2 s, requests from new clients (`net.1`, `net.2`, …) are decided by Redis: their
/// keys appear there.
async fn back_on_redis(addr: SocketAddr, redis: &Redis, net: [u8; 3], label: &str) {
    let mut conn = redis_conn(redis).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    for n in 1..=u8::MAX {
        let [a, b, c] = net;
        from(addr, &format!("{a}.{b}.{c}.{n}")).await;
        let key = [b"tollgate:shared:".as_slice(), &[a, b, c, n]].concat();
        let stored: bool = ::redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        if stored {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: not back on Redis after 2 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{label}: not back on Redis");
}

/// Sends requests from `client` over one keep-alive connection until `until`; returns
/// how many were admitted and how many were sent (every answer must be 200 or 429).
async fn load(addr: SocketAddr, client: &'static str, until: Instant) -> (u64, u64) {
    let seen = timed_load(addr, client.to_owned(), until).await;
    let odd: Vec<_> = seen
        .iter()
        .filter(|(s, _)| !matches!(s, 200 | 429))
        .collect();
    assert!(odd.is_empty(), "unexpected statuses: {odd:?}");
    let admitted = seen.iter().filter(|(s, _)| *s == 200).count();
    (admitted as u64, seen.len() as u64)
}

#[tokio::test]
async fn two_instances_share_one_limit_under_load() {
    // Alone: 10 s of load on every core, which would upset other tests' timing (and
    // theirs would lower the rate this one counts on reaching).
    let _alone = support::alone();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // 20r/s with burst 5: over T seconds one instance admits at most 6 + 20 T.
    let text = config(&redis.url(), "deny", "20r/s", 5);
    let (a, b) = (gateway(&text), gateway(&text));
    let (a, b) = (addr(&a), addr(&b));
    let started = Instant::now();
    let until = started + Duration::from_secs(10);
    let tasks: Vec<_> = [a, b, a, b]
        .into_iter()
        .map(|gw| tokio::spawn(load(gw, "203.0.113.50", until)))
        .collect();
    let (mut admitted, mut sent) = (0, 0);
    for task in tasks {
        let (ok, all) = task.await.unwrap();
        admitted += ok;
        sent += all;
    }
    let secs = started.elapsed().as_secs_f64();
    let limit = 6.0 + 20.0 * secs;
    eprintln!("{sent} requests in {secs:.1} s over two instances: {admitted} admitted (one instance's limit: {limit:.0})");
    assert!(
        sent > 2 * admitted,
        "the load must exceed the limit: {sent} sent"
    );
    assert!(
        (admitted as f64) <= limit + 2.0,
        "{admitted} admitted, more than one instance's {limit:.0} (+1 per instance)"
    );
    assert!(
        (admitted as f64) >= 0.9 * 20.0 * secs,
        "{admitted} admitted: far below the limit"
    );
}

#[tokio::test]
async fn a_flood_from_one_key_costs_redis_nothing_after_its_first_rejection() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&config(&redis.url(), "deny", "1r/m", 0));
    let mut conn = redis_conn(&redis).await;
    let calls = |info: String| -> u64 {
        info.lines()
            .filter(|line| {
                line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")
            })
            .filter_map(|line| {
                line.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    };
    assert_eq!(from(addr(&gw), "198.51.100.1").await.status, 200);
    assert_eq!(from(addr(&gw), "198.51.100.1").await.status, 429);
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = calls(info);
    for _ in 0..200 {
        assert_eq!(from(addr(&gw), "198.51.100.1").await.status, 429);
    }
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(calls(info), before, "the flood went to Redis");
    // The key is where docs/config.md says, as redis-cli lists it, with the drain time as its TTL
    // (one request of a minute).
    use std::os::unix::ffi::OsStrExt;
    let key = b"tollgate:shared:\xc6\x33\x64\x01";
    let cli = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &redis.addr.port().to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        out.stdout
    };
    let listed = cli(&[
        "--scan".as_ref(),
        "--pattern".as_ref(),
        "tollgate:*".as_ref(),
    ]);
    assert_eq!(listed, [key.as_slice(), b"\n"].concat(), "redis-cli --scan");
    let pttl = cli(&["PTTL".as_ref(), std::ffi::OsStr::from_bytes(key)]);
    let ttl: i64 = String::from_utf8_lossy(&pttl)
        .trim()
        .parse()
        .expect("a PTTL");
    assert!((50_000..=60_000).contains(&ttl), "PTTL {ttl}");
}

/// What each `on_error` does while Redis is down, and that decisions go back to Redis
/// within 2 s of its return.
#[tokio::test]
async fn each_on_error_while_redis_is_down_and_back() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    for on_error in ["allow", "deny", "local"] {
        let redis = Redis::start();
        let port = redis.addr.port();
        let gw = gateway(&cut_after_50ms(config(&redis.url(), on_error, "1r/m", 2)));
        let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
        // Redis decides: three pass, the fourth is rejected (and remembered).
        for expected in [200, 200, 200, 429] {
            assert_eq!(from(addr, "192.0.2.1").await.status, expected, "{on_error}");
        }

        drop(redis);
        let mut statuses = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let reply = from(addr, "192.0.2.2").await;
            assert!(
                started.elapsed() < Duration::from_millis(50 + 250),
                "{on_error}: answered in {:?}",
                started.elapsed()
            );
            if reply.status == 503 {
                assert_eq!(reply.headers["retry-after"], "1");
                assert!(
                    reply.body.contains("temporary-reduced-capacity"),
                    "{}",
                    reply.body
                );
            }
            statuses.push(reply.status.as_u16());
        }
        let want: &[u16] = match on_error {
            "allow" => &[200; 5],
            "deny" => &[503; 5],
            _ => &[200, 200, 200, 429, 429], // the instance's own limiter, 1r/m burst 2
        };
        assert_eq!(statuses, want, "{on_error}");
        // A rejection Redis gave is remembered: no Redis needed to reject it again.
        assert_eq!(from(addr, "192.0.2.1").await.status, 429, "{on_error}");
        let metrics = within(5, send(admin, get("/metrics"))).await.body;
        // Every failed call is counted (refused, or cut by the timeout while reconnecting).
        let errors: u64 = metrics
            .lines()
            .filter(|l| l.starts_with("tollgate_redis_errors_total{zone=\"shared\","))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert!(
            errors >= 5,
            "{on_error}: {errors} errors counted:\n{metrics}"
        );

        // Back on the same port: within 2 s a new client's decision is made by Redis.
        let redis = Redis::try_start(port).expect("redis-server restarts");
        back_on_redis(addr, &redis, [192, 0, 3], on_error).await;
    }
}

#[tokio::test]
async fn a_redis_that_stops_answering_costs_a_request_the_timeout_and_no_more() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&cut_after_50ms(config(&redis.url(), "allow", "1r/m", 0)));
    let addr = addr(&gw);
    assert_eq!(from(addr, "192.0.2.9").await.status, 200);
    redis.pause();
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let started = Instant::now();
        let reply = from(addr, &format!("192.0.2.{}", 20 + i)).await;
        let took = started.elapsed();
        assert_eq!(reply.status, 200, "on_error = \"allow\"");
        // A worker that has just given up waits a moment before trying Redis again, and
        // its requests are answered at once meanwhile.
        assert!(
            took < Duration::from_millis(50 + 150),
            "answered in {took:?}"
        );
        slowest = slowest.max(took);
    }
    assert!(
        slowest >= Duration::from_millis(45),
        "no request waited for the timeout"
    );
    redis.resume();
}

#[tokio::test]
async fn a_request_a_later_zone_rejects_gives_its_redis_charge_back() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // `shared` (Redis, 1r/m burst 2) first, then `strict` (local, 1r/m, no burst).
    let text = config(&redis.url(), "deny", "1r/m", 2).replace(
        "limit = [{ zone = \"shared\", burst = 2, nodelay = true }]",
        "limit = [{ zone = \"shared\", burst = 2, nodelay = true }, { zone = \"strict\", nodelay = true }]",
    ) + "[zones.strict]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let gw = gateway(&text);
    assert_eq!(from(addr(&gw), "192.0.2.77").await.status, 200);
    // Redis admits each of these, `strict` rejects them: each charge is given back.
    for _ in 0..4 {
        assert_eq!(from(addr(&gw), "192.0.2.77").await.status, 429);
    }
    let mut conn = redis_conn(&redis).await;
    let key = b"tollgate:shared:\xc0\x00\x02\x4d".to_vec();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let fill: Option<u64> = ::redis::cmd("HGET")
            .arg(&key)
            .arg("f")
            .query_async(&mut conn)
            .await
            .unwrap();
        // One request is 86,400,000 units; without refunds Redis would hold three.
        let fill = fill.expect("the key is stored");
        if fill <= 86_400_000 {
            break;
        }
        assert!(Instant::now() < deadline, "Redis still holds {fill} units");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_other_algorithm_is_shared_too() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let mut conn = redis_conn(&redis).await;
    // (algorithm, rate, client, the key's TTL range in ms after three requests)
    let cases = [
        // Three minutes to drain.
        ("token_bucket", "1r/m", "192.0.2.88", 170_000..=180_000),
        // The rest of this hour (an hour, so that the run rarely straddles two windows).
        ("fixed_window", "1r/h", "192.0.2.89", 1..=3_600_000),
        // Until the next hour's end.
        (
            "sliding_window",
            "1r/h",
            "192.0.2.90",
            3_600_000..=7_200_000,
        ),
        // Until the newest request leaves the window, an hour after it.
        ("sliding_log", "1r/h", "192.0.2.91", 3_590_000..=3_600_000),
    ];
    for (algorithm, rate, client, ttl_range) in cases {
        let text = config(&redis.url(), "deny", rate, 2).replace(
            "backend = \"redis\"",
            &format!("backend = \"redis\"\nalgorithm = \"{algorithm}\""),
        );
        let (a, b) = (gateway(&text), gateway(&text));
        let mut statuses = Vec::new();
        for i in 0..6 {
            let gw = if i % 2 == 0 { &a } else { &b };
            statuses.push(from(addr(gw), client).await.status.as_u16());
        }
        // burst 2: three pass between the two instances, then both reject.
        assert_eq!(statuses, [200, 200, 200, 429, 429, 429], "{algorithm}");
        let ip: std::net::Ipv4Addr = client.parse().unwrap();
        let key = [b"tollgate:shared:".as_slice(), &ip.octets()].concat();
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl_range.contains(&ttl), "{algorithm}: PTTL {ttl}");
    }
}

#[tokio::test]
async fn a_zone_spreads_over_a_redis_cluster_and_still_holds_each_limit() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let cluster = server::Cluster::start(3);
    let urls: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let text = config(&cluster.nodes[0].url(), "deny", "1r/m", 2).replace(
        &format!("url = \"{}\"", cluster.nodes[0].url()),
        &format!("urls = [{}]", urls.join(", ")),
    );
    let (a, b) = (gateway(&text), gateway(&text));
    // 30 clients, each three admitted then rejected, across both instances.
    for client in 1..=30u8 {
        let ip = format!("10.7.0.{client}");
        let mut statuses = Vec::new();
        for i in 0..5 {
            let gw = if i % 2 == 0 { &a } else { &b };
            statuses.push(from(addr(gw), &ip).await.status.as_u16());
        }
        assert_eq!(statuses, [200, 200, 200, 429, 429], "client {ip}");
    }
    // No hash tag: the zone's keys are spread over the nodes.
    let mut holding = 0;
    let mut total = 0;
    for node in &cluster.nodes {
        let mut conn = redis_conn(node).await;
        // The zone's keys, not the instances' heartbeat key.
        let keys: Vec<Vec<u8>> = ::redis::cmd("KEYS")
            .arg("tollgate:shared:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        total += keys.len();
        holding += usize::from(!keys.is_empty());
    }
    assert_eq!(total, 30);
    assert!(holding >= 2, "all keys on one node");
}

#[tokio::test]
async fn rediss_speaks_tls_to_redis_and_checks_its_certificate() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tollgate test Redis CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(d.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(d.join("redis.pem"), cert.pem()).unwrap();
    std::fs::write(d.join("redis.key"), key.serialize_pem()).unwrap();
    let redis = Redis::start_tls(&d.join("redis.pem"), &d.join("redis.key"));
    let url = format!("rediss://{}/", redis.addr);

    // Trusting the test CA: the zone is shared over TLS.
    let trusted = config(&url, "deny", "1r/m", 2).replace(
        "timeout = \"1s\"",
        &format!("timeout = \"1s\"\nca = \"{}\"", d.join("ca.pem").display()),
    );
    let (a, b) = (gateway(&trusted), gateway(&trusted));
    let mut statuses = Vec::new();
    for i in 0..5 {
        let gw = if i % 2 == 0 { &a } else { &b };
        statuses.push(from(addr(gw), "192.0.2.120").await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);

    // Trusting only the system's store, the certificate is refused: every call fails,
    // and `on_error = "deny"` answers 503.
    let c = gateway(&config(&url, "deny", "1r/m", 2));
    assert_eq!(from(addr(&c), "192.0.2.121").await.status, 503);
}

/// Sends requests from `client` over one keep-alive connection until `until`; returns each
/// status with how long it took.
async fn timed_load(addr: SocketAddr, client: String, until: Instant) -> Vec<(u16, Duration)> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut seen = Vec::new();
    while Instant::now() < until {
        let req = Request::get("/")
            .header("host", "example.test")
            .header("x-forwarded-for", client.as_str())
            .body(empty())
            .unwrap();
        let started = Instant::now();
        let response = sender.send_request(req).await.expect("no connection error");
        let status = response.status().as_u16();
        read(response).await;
        seen.push((status, started.elapsed()));
    }
    seen
}

/// Redis killed while clients keep the gateway busy, then brought back: no request
/// fails but as `on_error` says, none waits much beyond `timeout`, and decisions go back
/// to Redis.
#[tokio::test]
async fn redis_killed_and_restarted_under_load() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    for on_error in ["allow", "deny", "local"] {
        let redis = Redis::start();
        let port = redis.addr.port();
        // Fast enough that every client is mostly admitted while Redis decides.
        let gw = gateway(&cut_after_50ms(config(
            &redis.url(),
            on_error,
            "1000r/s",
            50,
        )));
        let addr = addr(&gw);
        let until = Instant::now() + Duration::from_secs(3);
        let tasks: Vec<_> = (0..4)
            .map(|i| tokio::spawn(timed_load(addr, format!("10.9.{i}.1"), until)))
            .collect();
        tokio::time::sleep(Duration::from_millis(800)).await;
        drop(redis);
        tokio::time::sleep(Duration::from_millis(800)).await;
        let redis = Redis::try_start(port).expect("redis-server restarts");
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        let allowed: &[u16] = match on_error {
            "deny" => &[200, 429, 503],
            _ => &[200, 429],
        };
        let unexpected: Vec<_> = all.iter().filter(|(s, _)| !allowed.contains(s)).collect();
        assert!(unexpected.is_empty(), "{on_error}: {unexpected:?}");
        let slowest = all.iter().map(|(_, took)| *took).max().unwrap_or_default();
        assert!(
            slowest < Duration::from_millis(50 + 250),
            "{on_error}: a request took {slowest:?} with a 50 ms timeout"
        );
        if on_error == "deny" {
            assert!(
                all.iter().any(|(s, _)| *s == 503),
                "deny: no 503 while Redis was down"
            );
        }
        // Back on Redis: a new client's key is stored there within 2 s of the restart.
        back_on_redis(addr, &redis, [10, 9, 100], on_error).await;
        eprintln!(
            "{on_error}: {} requests while Redis was killed and restarted",
            all.len()
        );
    }
}

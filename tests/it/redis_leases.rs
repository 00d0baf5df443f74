//! Leases (`lease = N`): each script takes up to `want` units at once when a request is
//! admitted without delay (never past the cap or the no-delay line; never on a delayed or
//! rejected request), replayed at explicit times on a real redis-server; through the
//! real gateway, a leased zone costs Redis about one call per N requests, and two
//! gateways sharing a leased zone admit at most the limit plus N per instance.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tollgate::limit::{Algorithm, Params, Period, Rate, Verdict, NODELAY};
use tollgate::shared::{redis_key, Mode, Reply, Scripts, TimeSource};

use support::redis::{self as server, Redis};
use support::*;

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::LeakyBucket,
    Algorithm::TokenBucket,
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow,
    Algorithm::SlidingLog,
];

/// Inside a second (the windows' first microseconds are not special, but a case must not
/// straddle a window's end).
const T0: u64 = 1_700_000_000_000_000 + 1_000;

fn params(burst: u64, delay: u64) -> Params {
    Params {
        rate: Rate::new(10, Period::Second).unwrap(),
        burst,
        delay,
        cost: 1,
        max: 0,
    }
}

/// The units a fresh key may take at once, and those it may take without delay: the
/// buckets hold `burst + 1` and admit `delay + 1` at once; the windows count + burst and
/// count + delay.
fn room(algorithm: Algorithm, p: &Params) -> (u64, u64) {
    let count = p.rate.count.get();
    let (cap, free) = match algorithm {
        Algorithm::LeakyBucket | Algorithm::TokenBucket => (p.burst + 1, p.delay.wrapping_add(1)),
        _ => (count + p.burst, count.saturating_add(p.delay)),
    };
    (
        cap,
        if p.delay == NODELAY {
            cap
        } else {
            free.min(cap)
        },
    )
}

async fn run(
    scripts: &Scripts,
    conn: &mut ::redis::aio::MultiplexedConnection,
    (algorithm, key): (Algorithm, &[u8]),
    p: &Params,
    want: u64,
) -> Reply {
    let at = TimeSource::At(T0);
    let call = scripts.run(algorithm, conn, key, p, want, at, Mode::Decide);
    call.await.unwrap()
}

#[tokio::test]
async fn every_script_grants_what_fits_now_without_delay_and_no_more() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let client = ::redis::Client::open(redis.url()).unwrap();
    let conn = &mut client.get_multiplexed_async_connection().await.unwrap();
    let scripts = Scripts::default();
    // (burst, delay, want): room to spare, a lease the cap cuts, a delay line that cuts
    // it (or, for buckets admitting one at once, leaves nothing).
    let cases = [(20, NODELAY, 5), (3, NODELAY, 8), (20, 2, 6), (20, 0, 6)];
    for algorithm in ALGORITHMS {
        for (i, &(burst, delay, want)) in cases.iter().enumerate() {
            let p = params(burst, delay);
            let key = redis_key("lease", format!("{algorithm:?}-{i}").as_bytes());
            let (cap, free) = room(algorithm, &p);
            let case = format!("{algorithm:?} burst {burst} delay {delay} want {want}");
            let first = run(&scripts, conn, (algorithm, &key), &p, want).await;
            assert_eq!(first.decision.verdict, Verdict::Pass, "{case}");
            let granted = (want - 1).min(free - 1);
            assert_eq!(first.granted, granted, "{case}");
            // What Redis holds: the request and its grant. The rest of the cap is left
            // to requests without a lease, and then the key is full.
            let mut admitted = 0;
            loop {
                let next = run(&scripts, conn, (algorithm, &key), &p, 0).await;
                assert_eq!(next.granted, 0, "{case}: no lease asked");
                if !next.decision.admitted() {
                    break;
                }
                admitted += 1;
            }
            assert_eq!(admitted, cap - 1 - granted, "{case}: the grant was charged");
        }
    }
}

#[tokio::test]
async fn a_delayed_or_rejected_request_takes_no_lease() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let client = ::redis::Client::open(redis.url()).unwrap();
    let conn = &mut client.get_multiplexed_async_connection().await.unwrap();
    let scripts = Scripts::default();
    for algorithm in ALGORITHMS {
        // Delay 0 on a window of 10 delays from the 11th unit; a bucket from the 2nd.
        let p = params(20, 0);
        let key = redis_key("lease-delay", format!("{algorithm:?}").as_bytes());
        let (_, free) = room(algorithm, &p);
        for _ in 0..free {
            run(&scripts, conn, (algorithm, &key), &p, 0).await;
        }
        let delayed = run(&scripts, conn, (algorithm, &key), &p, 5).await;
        assert!(
            matches!(delayed.decision.verdict, Verdict::Delay(_)),
            "{algorithm:?}: {delayed:?}"
        );
        assert_eq!(delayed.granted, 0, "{algorithm:?}: delayed");

        let p = params(0, NODELAY);
        let key = redis_key("lease-full", format!("{algorithm:?}").as_bytes());
        let (cap, _) = room(algorithm, &p);
        for _ in 0..cap {
            run(&scripts, conn, (algorithm, &key), &p, 0).await;
        }
        let rejected = run(&scripts, conn, (algorithm, &key), &p, 5).await;
        assert!(!rejected.decision.admitted(), "{algorithm:?}");
        assert_eq!(rejected.granted, 0, "{algorithm:?}: rejected");
    }
}

fn config(url: &str, rate: &str, burst: u64, lease: u64) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[redis]
url = "{url}"
timeout = "100ms"
on_error = "deny"
heartbeat = "1m"
[zones.leased]
key = "$binary_remote_addr"
rate = "{rate}"
backend = "redis"
lease = {lease}
[[location]]
match = "/"
return = {{ status = 200 }}
limit = [{{ zone = "leased", burst = {burst}, nodelay = true }}]
"#
    )
}

/// The zones' script calls Redis has run: EVALSHA and EVAL in `INFO commandstats`, less
/// the heartbeats (their script is the only one to call ZCARD, once a beat; commands a
/// script runs are counted too), whenever they come.
async fn script_calls(conn: &mut ::redis::aio::MultiplexedConnection) -> u64 {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let calls = |prefixes: &[&str]| -> u64 {
        info.lines()
            .filter(|l| prefixes.iter().any(|prefix| l.starts_with(prefix)))
            .filter_map(|l| l.split(['=', ',']).nth(1)?.parse::<u64>().ok())
            .sum()
    };
    let scripts = calls(&["cmdstat_evalsha:", "cmdstat_eval:"]);
    scripts - calls(&["cmdstat_zcard:"])
}

#[tokio::test]
async fn a_leased_zone_asks_redis_once_per_lease() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let client = ::redis::Client::open(redis.url()).unwrap();
    let conn = &mut client.get_multiplexed_async_connection().await.unwrap();
    // Per minute: a lease lives its longest (5 s), however slowly the requests come.
    let gw = gateway(&config(&redis.url(), "1000r/m", 1_000, 10));
    let addr = addr(&gw);
    // Loads the script before counting (a NOSCRIPT answer costs an EVAL too).
    assert_eq!(get_as(addr, "/", "203.0.113.1").await.status, 200);
    let before = script_calls(conn).await;
    let clients = ["203.0.113.2", "203.0.113.3", "203.0.113.4"];
    for _ in 0..40 {
        for client in clients {
            assert_eq!(get_as(addr, "/", client).await.status, 200);
        }
    }
    let calls = script_calls(conn).await - before;
    eprintln!("120 requests of 3 clients, lease 10: {calls} Redis calls");
    // Each client: one call per 10 requests (the request and 9 leased units).
    assert!(calls >= 12, "{calls} calls: the leases were not charged?");
    assert!(
        calls <= 12 + 2,
        "{calls} calls for 120 requests with lease = 10"
    );

    // One client on 8 connections at once: its requests that arrive while one of them
    // fetches a lease wait for that lease instead of fetching their own.
    let before = script_calls(conn).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                for _ in 0..25 {
                    assert_eq!(get_as(addr, "/", "203.0.113.5").await.status, 200);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let calls = script_calls(conn).await - before;
    eprintln!("200 requests of one client on 8 connections, lease 10: {calls} Redis calls");
    // About one per 10; a waiter that finds the lease spent by others asks Redis itself.
    assert!(
        calls <= 30,
        "{calls} calls for 200 requests with lease = 10"
    );
}

#[tokio::test]
async fn leased_units_are_spent_while_redis_is_down_then_on_error_decides() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&config(&redis.url(), "1000r/m", 1_000, 10));
    let addr = addr(&gw);
    // The first request takes a lease of 10: itself and 9 more.
    assert_eq!(get_as(addr, "/", "203.0.113.7").await.status, 200);
    drop(redis);
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(get_as(addr, "/", "203.0.113.7").await.status.as_u16());
    }
    // `on_error = "deny"` once the lease is spent.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 200, 503]);
}

#[tokio::test]
async fn an_item_with_a_ban_leases_nothing() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let client = ::redis::Client::open(redis.url()).unwrap();
    let conn = &mut client.get_multiplexed_async_connection().await.unwrap();
    let text = config(&redis.url(), "1000r/s", 1_000, 10).replace(
        "nodelay = true }]",
        "nodelay = true, ban = { after = 100, within = \"1m\", for = \"1m\" } }]",
    );
    let gw = gateway(&text);
    let addr = addr(&gw);
    assert_eq!(get_as(addr, "/", "203.0.113.6").await.status, 200);
    let before = script_calls(conn).await;
    for _ in 0..20 {
        assert_eq!(get_as(addr, "/", "203.0.113.6").await.status, 200);
    }
    let calls = script_calls(conn).await - before;
    assert!(
        calls >= 20,
        "{calls} calls: each request must read the key's ban"
    );
}

/// Sends requests from `client` over new connections until `until`; how many were
/// admitted (every answer must be 200 or 429).
async fn admitted_until(addr: SocketAddr, client: &'static str, until: Instant) -> u64 {
    let mut admitted = 0;
    while Instant::now() < until {
        match get_as(addr, "/", client).await.status.as_u16() {
            200 => admitted += 1,
            429 => {}
            other => panic!("status {other}"),
        }
    }
    admitted
}

#[tokio::test]
async fn two_instances_sharing_a_leased_zone_stay_within_the_limit_plus_their_leases() {
    // Alone: seconds of load on every core.
    let _alone = support::alone();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // 50r/s, burst 20, lease 8: over T seconds one limit admits at most 21 + 50 T; the
    // leases add at most 8 per instance.
    let (rate, burst, lease) = (50.0, 20, 8);
    let text = config(&redis.url(), "50r/s", burst, lease);
    let (a, b) = (gateway(&text), gateway(&text));
    let (a, b) = (addr(&a), addr(&b));
    let started = Instant::now();
    let until = started + Duration::from_secs(4);
    // Three clients per instance: their fetches race, and waiters spend or ask.
    let tasks: Vec<_> = [a, b, a, b, a, b]
        .into_iter()
        .map(|gw| tokio::spawn(admitted_until(gw, "203.0.113.80", until)))
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let limit = (burst + 1) as f64 + rate * secs;
    let bound = limit + 2.0 * lease as f64;
    eprintln!(
        "{admitted} admitted in {secs:.2} s by two instances (limit {limit:.0}, with leases {bound:.0})"
    );
    assert!(
        admitted as f64 <= bound,
        "{admitted} admitted: more than the limit {limit:.0} plus 2 x {lease}"
    );
    // Not far below: at least 90% of the rate over the run (leases left unspent at the
    // end, and the first window's remembered rejections, cost little).
    assert!(
        admitted as f64 >= 0.9 * rate * secs,
        "{admitted} admitted: far below the limit {limit:.0}"
    );
}

#[tokio::test]
async fn a_burst_of_one_key_that_fits_its_budget_is_admitted_whole_with_a_lease() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // 80 requests at once under a burst of 100: every one fits. Only the key's one fetch
    // asks for a lease; a waiter it leaves short asks for its own unit, not for 20.
    let gw = gateway(&config(&redis.url(), "100r/s", 100, 20));
    let addr = addr(&gw);
    let tasks: Vec<_> = (0..80)
        .map(|_| tokio::spawn(async move { get_as(addr, "/", "203.0.113.9").await.status }))
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap().as_u16());
    }
    let rejected = statuses.iter().filter(|&&status| status != 200).count();
    assert_eq!(rejected, 0, "{statuses:?}");
}

#[tokio::test]
async fn a_lease_taken_under_one_locations_terms_is_not_spent_under_anothers() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text = config(&redis.url(), "1r/m", 50, 10).replace(
        "[[location]]\nmatch = \"/\"",
        "[[location]]\nmatch = \"/strict\"\nreturn = { status = 200 }\n\
         limit = [{ zone = \"leased\", nodelay = true }]\n[[location]]\nmatch = \"/\"",
    );
    let gw = gateway(&text);
    let addr = addr(&gw);
    // `/` (burst 50) takes the request and 9 more; `/strict` (burst 0) may not spend them.
    assert_eq!(get_as(addr, "/wide", "203.0.113.10").await.status, 200);
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(
            get_as(addr, "/strict", "203.0.113.10")
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(statuses, [429; 10]);
}

/// How many requests of `client` to `path` are admitted before the first 429.
async fn admitted_before_429(addr: SocketAddr, path: &str, client: &str) -> u64 {
    let mut admitted = 0;
    while get_as(addr, path, client).await.status == 200 {
        admitted += 1;
        assert!(admitted <= 1_000, "never rejected");
    }
    admitted
}

#[tokio::test]
async fn leased_units_go_back_to_redis_when_a_later_zone_rejects_or_the_answer_settles() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    // A key may take 51 units an hour. `/both` adds a local zone of 1 an hour after the
    // leased one; `/free` charges only 500s (its 200s are given back); `/` is the leased
    // zone alone, under the same terms.
    let text = config(&redis.url(), "1r/h", 50, 10).replace(
        "[[location]]\nmatch = \"/\"",
        "[zones.tight]\nkey = \"$binary_remote_addr\"\nrate = \"1r/h\"\n\
         [[location]]\nmatch = \"/both\"\nreturn = { status = 200 }\n\
         limit = [{ zone = \"leased\", burst = 50, nodelay = true }, \
                  { zone = \"tight\", nodelay = true }]\n\
         [[location]]\nmatch = \"/free\"\nreturn = { status = 200 }\n\
         limit = [{ zone = \"leased\", burst = 50, nodelay = true, count_status = [500] }]\n\
         [[location]]\nmatch = \"/\"",
    );
    let gw = gateway(&text);
    let addr = addr(&gw);
    // The first takes the lease (itself and 9); the next 9 spend it and are rejected by
    // `tight`: their units go back.
    let mut both = Vec::new();
    for _ in 0..10 {
        both.push(get_as(addr, "/both", "203.0.113.11").await.status.as_u16());
    }
    assert_eq!(both, [200, 429, 429, 429, 429, 429, 429, 429, 429, 429]);
    // 20 answers that are not 500: each unit, leased or not, goes back.
    for _ in 0..20 {
        assert_eq!(get_as(addr, "/free", "203.0.113.11").await.status, 200);
    }
    // The refunds run in the background.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Only the first request's unit is left in Redis (up to a lease the table still
    // holds after `/free`, which `/` spends: it admits as many).
    let admitted = admitted_before_429(addr, "/", "203.0.113.11").await;
    assert_eq!(admitted, 50, "51 an hour, 1 charged");
}

//! Instances counted, not configured: gateways sharing a Redis zone announce themselves
//! (a heartbeat with a TTL), each sees how many share it in `/status`, an instance that
//! stops drops out of the count, and with Redis down `on_error = "local"` divides the
//! zone's rate by the count last seen, never below one request per window.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::redis::{self as server, Redis};
use support::*;

/// Two Redis zones (fixed windows of an hour, so that no window ends during a test):
/// `four` admits 4 an hour per client, `one` admits 1.
fn config(url: &str) -> String {
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
timeout = "50ms"
on_error = "local"
heartbeat = "100ms"
[zones.four]
key = "$binary_remote_addr"
rate = "4r/h"
algorithm = "fixed_window"
backend = "redis"
[zones.one]
key = "$binary_remote_addr"
rate = "1r/h"
algorithm = "fixed_window"
backend = "redis"
[[location]]
match = "/four"
return = {{ status = 200 }}
limit = [{{ zone = "four", nodelay = true }}]
[[location]]
match = "/one"
return = {{ status = 200 }}
limit = [{{ zone = "one", nodelay = true }}]
"#
    )
}

/// What `/status` says of `zone`'s instances.
async fn instances(admin: SocketAddr, zone: &str) -> serde_json::Value {
    let status = within(5, send(admin, get("/status"))).await.body;
    let status: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    status["zones"][zone]["instances"].clone()
}

/// Waits (up to `secs`) until `/status` counts `want` instances in `zone`.
async fn counted(admin: SocketAddr, zone: &str, want: u64, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let seen = instances(admin, zone).await;
        if seen["live"] == want && seen["from"] == "counted" && seen["instances"] == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{zone}: {want} instances not counted within {secs} s: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits (up to `secs`) until every admin counts `want` instances in every zone at once:
/// right before Redis goes, no count may be stale.
async fn all_counted(admins: &[SocketAddr], zones: &[&str], want: u64, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut all = true;
        for &admin in admins {
            for zone in zones {
                let seen = instances(admin, zone).await;
                all &= seen["live"] == want && seen["instances"] == want;
            }
        }
        if all {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{want} instances not counted by all"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The config with a heartbeat of a second: for tests that do not time a drop-out, so
/// that a loaded machine starving a beat or two does not drop an instance.
fn config_slow_beats(url: &str) -> String {
    config(url).replace("heartbeat = \"100ms\"", "heartbeat = \"1s\"")
}

#[tokio::test]
async fn two_gateways_count_each_other_and_one_that_stops_drops_out() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text = config(&redis.url());
    let (a, b) = (gateway(&text), gateway(&text));
    let (admin_a, admin_b) = (a.admin_addr().unwrap(), b.admin_addr().unwrap());
    for admin in [admin_a, admin_b] {
        for zone in ["four", "one"] {
            counted(admin, zone, 2, 5).await;
        }
    }

    // Stopped, `a` announces itself no more: `b` counts 1 once its last announcement
    // expired (three beats: 300 ms after it).
    let stopped = Instant::now();
    a.stop().await;
    counted(admin_b, "four", 1, 5).await;
    eprintln!(
        "the stopped instance left the count after {:?}",
        stopped.elapsed()
    );

    // A reload that connects to Redis anew (another timeout) keeps the instance's id: it
    // is still one instance, not a new one beside its own lingering announcement.
    let reloaded = text.replace("timeout = \"50ms\"", "timeout = \"60ms\"");
    let config = tollgate::config::from_str(&reloaded, std::path::Path::new("/tmp/t.toml"));
    b.reload(&config.expect("valid")).expect("reload");
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        let seen = instances(admin_b, "four").await;
        assert_eq!(seen["live"], 1, "after the reload: {seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn with_redis_down_each_instance_takes_its_share_and_never_less_than_one() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text = config_slow_beats(&redis.url());
    let (a, b) = (gateway(&text), gateway(&text));
    let admins = [a.admin_addr().unwrap(), b.admin_addr().unwrap()];
    all_counted(&admins, &["four", "one"], 2, 10).await;
    drop(redis);

    // Each instance alone: 4r/h over 2 is 2r/h; 1r/h over 2 stays 1r/h, not nothing.
    for (gw, client) in [(&a, "198.51.100.1"), (&b, "198.51.100.2")] {
        let addr = addr(gw);
        let mut four = Vec::new();
        for _ in 0..4 {
            four.push(get_as(addr, "/four", client).await.status.as_u16());
        }
        assert_eq!(four, [200, 200, 429, 429], "4r/h shared by 2");
        let mut one = Vec::new();
        for _ in 0..3 {
            one.push(get_as(addr, "/one", client).await.status.as_u16());
        }
        assert_eq!(one, [200, 429, 429], "1r/h shared by 2: one each, not none");
        // The count last seen is kept while Redis is away.
        let seen = instances(gw.admin_addr().unwrap(), "four").await;
        assert_eq!(seen["live"], 2, "{seen}");
    }
}

#[tokio::test]
async fn written_instances_override_the_count() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let text =
        config(&redis.url()).replace("rate = \"4r/h\"\n", "rate = \"4r/h\"\ninstances = 4\n");
    let gw = gateway(&text);
    let admin = gw.admin_addr().unwrap();
    counted(admin, "one", 1, 5).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let seen = instances(admin, "four").await;
        if seen["live"] == 1 {
            assert_eq!(seen["instances"], 4, "{seen}");
            assert_eq!(seen["from"], "configured", "{seen}");
            break;
        }
        assert!(Instant::now() < deadline, "never counted: {seen}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    drop(redis);
    let addr = addr(&gw);
    let mut four = Vec::new();
    for _ in 0..2 {
        four.push(get_as(addr, "/four", "198.51.100.3").await.status.as_u16());
    }
    assert_eq!(four, [200, 429], "4r/h over the 4 written");
}

/// Heartbeat threads of this process (Linux: their names in /proc).
fn heartbeat_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("tollgate-heartb"))
        .count()
}

/// How long a replaced heartbeat thread may take to stop: its stop is seen at once and a
/// beat under way dropped, so well under a second here, but a machine loaded by other
/// tests (a full `cargo test` on 2 cores) once took over 2 s.
const STOPS_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn heartbeats_do_not_pile_up_across_reloads() {
    // Alone: no other test's gateway has a heartbeat thread meanwhile.
    let _alone = support::alone();
    if !server::available() || !std::path::Path::new("/proc/self/task").exists() {
        return;
    }
    let redis = Redis::start();
    let text = config_slow_beats(&redis.url());
    let gw = gateway(&text);
    counted(gw.admin_addr().unwrap(), "four", 1, 5).await;
    // Each reload changes `[redis]`, so each makes a new backend and heartbeat.
    for (i, timeout) in ["60ms", "70ms", "50ms", "60ms", "70ms"].iter().enumerate() {
        let next = text.replace("timeout = \"50ms\"", &format!("timeout = \"{timeout}\""));
        let config = tollgate::config::from_str(&next, std::path::Path::new("/tmp/t.toml"));
        gw.reload(&config.expect("valid"))
            .unwrap_or_else(|e| panic!("reload {i}: {e}"));
    }
    // The replaced ones stop as soon as their generation is gone (a call under way is
    // dropped): within a timeout or two of 70 ms. The deadline is generous, for a
    // machine loaded by other tests; a thread that never stops still fails it.
    // One, and still one 200 ms later: a thread just spawned bears its name only once it
    // runs, so a single look may see 0 (or 1 beside an old one).
    let deadline = Instant::now() + STOPS_WITHIN;
    let mut steady = 0;
    while steady < 10 {
        let threads = heartbeat_threads();
        steady = if threads == 1 { steady + 1 } else { 0 };
        assert!(
            Instant::now() < deadline,
            "{threads} heartbeat threads after 5 reloads"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    counted(gw.admin_addr().unwrap(), "four", 1, 5).await;
    gw.stop().await;
    let deadline = Instant::now() + STOPS_WITHIN;
    while heartbeat_threads() > 0 {
        assert!(
            Instant::now() < deadline,
            "a heartbeat outlived its gateway"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_instance_beating_often_that_stops_does_not_expire_one_beating_seldom() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let client = ::redis::Client::open(redis.url()).unwrap();
    let conn = &mut client.get_multiplexed_async_connection().await.unwrap();
    let script = ::redis::Script::new(tollgate::shared::heartbeat::HEARTBEAT);
    let key = tollgate::shared::heartbeat::instances_key("z");
    let beat = |id: &str, ttl_ms: u64, at_us: u64| {
        let mut call = script.prepare_invoke();
        call.key(&key).arg(id).arg(ttl_ms).arg(at_us);
        call
    };
    let t0 = 1_700_000_000_000_000u64;
    // `seldom` lasts a minute; `often` lasts 300 ms, beats last and stops.
    let seen: u64 = beat("seldom", 60_000, t0).invoke_async(conn).await.unwrap();
    assert_eq!(seen, 1);
    let seen: u64 = beat("often", 300, t0 + 1_000)
        .invoke_async(conn)
        .await
        .unwrap();
    assert_eq!(seen, 2);
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(&key)
        .query_async(conn)
        .await
        .unwrap();
    assert!(ttl > 50_000, "the set lasts as long as `seldom`: {ttl} ms");
}

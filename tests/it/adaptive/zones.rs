//! A zone with `adaptive` against the knob upstream: its factor falls while the upstream
//! is slow and recovers when it is fast, without oscillating, and clients see it.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{status, until};
use crate::support::{self, *};

/// The zone's key: each client names itself, so the load and the probe do not share a
/// bucket.
fn as_client(client: &str) -> http::Request<Body> {
    let mut req = get("/");
    let value = http::HeaderValue::from_str(client).expect("a header value");
    req.headers_mut().insert("x-client", value);
    req
}

/// Starts one request every `every`, each on its own task, until `stop` is set.
fn paced(addr: std::net::SocketAddr, every: Duration, stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while !stop.load(Relaxed) {
            tick.tick().await;
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), send(addr, as_client("load")))
                        .await;
            });
        }
    });
}

fn factor(doc: &Value) -> f64 {
    doc["zones"]["api"]["rate_factor"]
        .as_f64()
        .expect("rate_factor")
}

fn changes(doc: &Value) -> (u64, u64) {
    let adaptive = &doc["zones"]["api"]["adaptive"];
    (
        adaptive["cuts"].as_u64().unwrap_or(0),
        adaptive["raises"].as_u64().unwrap_or(0),
    )
}

/// Reversals of direction in a sequence of factors (equal neighbours skipped).
fn reversals(seen: &[f64]) -> usize {
    let steps: Vec<bool> = seen
        .windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| w[1] > w[0])
        .collect();
    steps.windows(2).filter(|w| w[0] != w[1]).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_rate_falls_while_upstream_is_slow_and_recovers_without_oscillating() {
    let _shared = support::shared();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(5);
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[zones.api]
key = "$http_x_client"
rate = "100r/s"
adaptive = {{ upstream = "app", latency = "100ms", min = 0.25 }}
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "api", burst = 20, nodelay = true }}]
upstream = "app"
"#,
        up.addr
    ));
    let admin = gw.admin_addr().expect("admin");
    let first = within(10, send(addr(&gw), as_client("first"))).await;
    assert_eq!(first.status, 200, "{first:?}");
    let stop = Arc::new(AtomicBool::new(false));
    // About 80 r/s: under the zone's 100r/s, and at a factor of 0.25 still 25 r/s
    // admitted, enough samples (10) in each 1 s interval for the signals to be known.
    paced(addr(&gw), Duration::from_micros(12_500), stop.clone());
    let mut seen = Vec::new();

    // 1. Fast: the factor stays exactly 1 for 2 s once the signals are known.
    until(admin, 30, "known signals", |doc| {
        doc["upstream_load"]["app"]["latency_ms"]["p90"].is_number()
    })
    .await;
    let calm = Instant::now() + Duration::from_secs(2);
    while Instant::now() < calm {
        let doc = status(admin).await;
        assert_eq!((factor(&doc), changes(&doc)), (1.0, (0, 0)), "{doc}");
        seen.push(factor(&doc));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // 2. Slow: down to the floor within 5 steps (1 s each) plus slack.
    knobs.set_latency(300);
    let doc = until(admin, 5 * 5 + 10, "the factor at its floor", |doc| {
        factor(doc) == 0.25
    })
    .await;
    let (cuts, raises) = changes(&doc);
    assert_eq!((cuts, raises), (5, 0), "{doc}");
    // Clients see the scaled rate: 100r/s × 0.25.
    let probe = within(10, send(addr(&gw), as_client("probe"))).await;
    let policy = probe.headers["ratelimit-policy"].to_str().unwrap();
    assert_eq!(policy, "\"api\";q=25;w=1");
    seen.push(0.25);

    // 3. Fast again: back to 1 within 8 steps plus slack, no cut on the way.
    knobs.set_latency(5);
    let deadline = Instant::now() + Duration::from_secs(8 * 5 + 10);
    let doc = loop {
        let doc = status(admin).await;
        seen.push(factor(&doc));
        if factor(&doc) == 1.0 {
            break doc;
        }
        assert!(Instant::now() < deadline, "no recovery: {doc}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (cuts, raises) = changes(&doc);
    assert_eq!((cuts, raises), (5, 8), "{doc}");
    assert!(reversals(&seen) <= 1, "oscillated: {seen:?}");
    stop.store(true, Relaxed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_factor() {
    let _shared = support::shared();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(300);
    let config = |rate: &str| {
        format!(
            r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[zones.api]
key = "$http_x_client"
rate = "{rate}"
adaptive = {{ upstream = "app", latency = "100ms", min = 0.25, interval = "500ms" }}
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "api", burst = 20, nodelay = true }}]
upstream = "app"
"#,
            up.addr
        )
    };
    let gw = gateway(&config("100r/s"));
    let admin = gw.admin_addr().expect("admin");
    let stop = Arc::new(AtomicBool::new(false));
    paced(addr(&gw), Duration::from_micros(12_500), stop.clone());
    until(admin, 30, "a cut factor", |doc| factor(doc) < 1.0).await;
    // Idle: the signals become unknown and the factor holds still.
    stop.store(true, Relaxed);
    let before = until(admin, 30, "unknown signals", |doc| {
        doc["upstream_load"]["app"]["latency_ms"]
            .get("p90")
            .is_none()
    })
    .await;
    let reloaded = tollgate::config::from_str(
        &config("200r/s"),
        std::path::Path::new("/tmp/tollgate-test/gateway.toml"),
    )
    .expect("valid");
    assert_eq!(gw.reload(&reloaded).expect("reload"), 2);
    let after = status(admin).await;
    assert_eq!(after["generation"], 2);
    assert_eq!(factor(&after), factor(&before), "{after}");
    assert_eq!(changes(&after), changes(&before), "{after}");
}

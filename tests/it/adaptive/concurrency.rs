//! `max_in_flight = "auto"` against an upstream of C workers with service time S (a
//! `knob` upstream with a capacity): clients overload it three times over, and the gate's
//! limit must settle where the gradient's bounds say (`limit::adaptive::gradient`: the
//! fixed point `L* = 1.2C + √L*`), follow C down and up, and measure S again by its
//! probes, while every request gets an answer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use super::{status, until};
use crate::support::{self, *};

/// The gradient's fixed point against C workers: `L* = 1.2C + √L*`.
fn fixed_point(capacity: f64) -> f64 {
    let root = (1.0 + (1.0 + 4.0 * 1.2 * capacity).sqrt()) / 2.0;
    root * root
}

/// The band the limit must settle in against C workers: never below C (the upstream is
/// kept busy), at most 15 % over L* (the latency histogram's quarter-octave buckets and
/// a loaded machine's timer jitter move the measured p90 by about that much).
fn band(capacity: u64) -> (u64, u64) {
    let high = fixed_point(capacity as f64) * 1.15;
    (capacity, high.ceil() as u64)
}

fn gate(doc: &Value) -> &Value {
    &doc["upstream_concurrency"]["app"]
}

fn limit(doc: &Value) -> u64 {
    gate(doc)["limit"].as_u64().expect("a limit")
}

/// What the clients got.
#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    shed: AtomicU64,
    other: AtomicU64,
    /// Requests that got no answer: a broken connection or none within 10 s.
    unanswered: AtomicU64,
}

/// Clients, each sending `GET /` one after another on a keep-alive connection until
/// stopped, counting every answer.
struct Clients {
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Clients {
    fn start(addr: SocketAddr, clients: usize) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let tasks = (0..clients)
            .map(|_| tokio::spawn(client(addr, stop.clone(), tally.clone())))
            .collect();
        Clients { stop, tally, tasks }
    }

    async fn stop(self) -> Arc<Tally> {
        self.stop.store(true, Relaxed);
        for task in self.tasks {
            task.await.expect("client");
        }
        self.tally
    }
}

async fn client(addr: SocketAddr, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    while !stop.load(Relaxed) {
        let stream = TcpStream::connect(addr).await.expect("connect to gateway");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        // A connection the gateway closed after an answer is left for a new one.
        while !stop.load(Relaxed) && sender.ready().await.is_ok() {
            let exchange = async {
                let response = sender.send_request(get("/")).await.ok()?;
                let (parts, body) = response.into_parts();
                body.collect().await.ok()?;
                Some(parts.status.as_u16())
            };
            let counter = match tokio::time::timeout(Duration::from_secs(10), exchange).await {
                Ok(Some(200)) => &tally.ok,
                Ok(Some(503)) => &tally.shed,
                Ok(Some(_)) => &tally.other,
                Ok(None) | Err(_) => &tally.unanswered,
            };
            counter.fetch_add(1, Relaxed);
        }
    }
}

/// A gateway's config in front of `up` with an `"auto"` gate: `probe` is its
/// `probe_interval`, `min` its `in_flight_min`.
fn config(up: &Upstream, probe: &str, min: u32) -> String {
    config_for(&format!("\"{}\"", up.addr), probe, min)
}

/// The same in front of `servers` (as written in the list).
fn config_for(servers: &str, probe: &str, min: u32) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[upstreams.app]
servers = [{servers}]
max_in_flight = "auto"
in_flight_min = {min}
in_flight_max = 500
queue = 200
queue_timeout = "5s"
probe_interval = "{probe}"
[[location]]
match = "/"
upstream = "app"
"#
    )
}

/// Waits until the limit is in `band(capacity)`.
async fn settles(admin: SocketAddr, capacity: u64, secs: u64) {
    let (low, high) = band(capacity);
    let what = format!("a limit in [{low}, {high}] against {capacity} workers");
    until(admin, secs, &what, |doc| (low..=high).contains(&limit(doc))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_limit_keeps_the_upstream_near_its_capacity_and_answers_everyone() {
    // Alone: it measures latencies, which other tests' CPU would stretch.
    let _alone = support::alone();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(50);
    knobs.set_capacity(20).await;
    let gw = gateway(&config(&up, "1h", 4));
    let admin = gw.admin_addr().expect("admin");
    // 60 clients against 20 workers: without the gate 60 would be in the upstream.
    let clients = Clients::start(addr(&gw), 60);
    settles(admin, 20, 20).await;

    // Settled, it stays: for 4 s, the limit and the upstream's load stay in the band,
    // and the upstream is kept busy (its median load is at least its workers).
    let (low, high) = band(20);
    let mut loads = Vec::new();
    let mut limits = Vec::new();
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end {
        limits.push(limit(&status(admin).await));
        for _ in 0..10 {
            loads.push(knobs.in_flight.load(Relaxed));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    loads.sort_unstable();
    let median = loads[loads.len() / 2];
    // Three readings in four, and none below half the band: a stall of the shared machine
    // (answers held up for a few tenths of a second) reads as congestion, and the limit
    // dips for a reading or a few, then comes back (seen: 16 for 0.3 s against 20).
    let inside = limits.iter().filter(|l| (low..=high).contains(l)).count();
    assert!(
        inside * 4 >= limits.len() * 3 && limits.iter().all(|l| (low / 2..=high).contains(l)),
        "limits {limits:?} left [{low}, {high}] too often or too far"
    );
    // Without oscillating: over the last 2 s (the first may still close in on L* from
    // where the band begins) the limit's spread stays within a quarter of L*, a tenth of
    // the readings left out at each end (a one-off jump of 0.2 s after a stall of the
    // shared machine is no swing). Before the controller waited out its dead time it
    // swung by ±40 % around L*, every 0.6 s: most readings were near the swing's ends.
    let mut last = limits[limits.len() / 2..].to_vec();
    last.sort_unstable();
    let trim = last.len().div_ceil(10);
    let spread = last[last.len() - 1 - trim] - last[trim];
    assert!(
        spread as f64 <= fixed_point(20.0) / 4.0,
        "limits {limits:?}: the last half's spread is {spread} (trimmed by {trim} each end)"
    );
    assert!(
        median >= low,
        "upstream load median {median} < {low}: {loads:?}"
    );
    assert!(
        *loads.last().unwrap() <= high,
        "upstream load above {high}: {loads:?}"
    );

    // Half the workers: the limit follows them down, then up again.
    knobs.set_capacity(10).await;
    settles(admin, 10, 20).await;
    knobs.set_capacity(20).await;
    settles(admin, 20, 20).await;

    // A reload with the same keys keeps the gate and its controller: the limit is not
    // back at `in_flight_min`, and min_rtt is known at once. New keys start afresh.
    gw.reload(&parse(&config(&up, "1h", 4))).expect("reload");
    let doc = status(admin).await;
    assert!(limit(&doc) >= low, "{doc}");
    assert!(gate(&doc)["auto"]["min_rtt_ms"].is_f64(), "{doc}");
    gw.reload(&parse(&config(&up, "1h", 5))).expect("reload");
    let doc = status(admin).await;
    assert_eq!(gate(&doc)["auto"]["in_flight_min"], 5, "{doc}");
    settles(admin, 20, 20).await;

    let tally = clients.stop().await;
    assert_eq!(tally.unanswered.load(Relaxed), 0, "{tally:?}");
    assert_eq!(tally.other.load(Relaxed), 0, "{tally:?}");
    assert!(tally.ok.load(Relaxed) >= 1000, "{tally:?}");
    let doc = status(admin).await;
    assert_eq!(gate(&doc)["mode"], "auto", "{doc}");
    let min_rtt = gate(&doc)["auto"]["min_rtt_ms"].as_f64().expect("min_rtt");
    assert!((45.0..=65.0).contains(&min_rtt), "{doc}");
    let metrics = within(10, send(admin, get("/metrics"))).await.body;
    for line in [
        "tollgate_upstream_concurrency_limit{upstream=\"app\"} ",
        "tollgate_upstream_concurrency_min_rtt_seconds{upstream=\"app\"} 0.0",
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }

    // What the controller measured belongs to the group's servers: another list starts
    // a new one, which has measured nothing yet (idle now).
    let (other, _) = knob::start().await;
    let servers = format!("\"{}\", \"{}\"", up.addr, other.addr);
    gw.reload(&parse(&config_for(&servers, "1h", 5)))
        .expect("reload");
    let doc = status(admin).await;
    assert!(gate(&doc)["auto"].get("min_rtt_ms").is_none(), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_limit_measures_a_slower_upstream_again_by_probing() {
    // Alone: it measures latencies, which other tests' CPU would stretch.
    let _alone = support::alone();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(20);
    knobs.set_capacity(10).await;
    let gw = gateway(&config(&up, "3s", 4));
    let admin = gw.admin_addr().expect("admin");
    let clients = Clients::start(addr(&gw), 30);
    settles(admin, 10, 20).await;
    let min_rtt = |doc: &Value| gate(doc)["auto"]["min_rtt_ms"].as_f64();
    let doc = status(admin).await;
    assert!(
        min_rtt(&doc).is_some_and(|ms| (15.0..=30.0).contains(&ms)),
        "{doc}"
    );

    // Three times slower, as many workers: between probes the unloaded latency may only
    // fall, so the limit drops; a probe measures it again and the limit comes back.
    knobs.set_latency(60);
    until(admin, 30, "min_rtt measured again near 60 ms", |doc| {
        min_rtt(doc).is_some_and(|ms| (50.0..=80.0).contains(&ms))
    })
    .await;
    settles(admin, 10, 20).await;

    let tally = clients.stop().await;
    assert_eq!(tally.unanswered.load(Relaxed), 0, "{tally:?}");
    assert_eq!(tally.other.load(Relaxed), 0, "{tally:?}");
}

/// A slow application: at the floor of 4 a 300 ms upstream answers about 13 times a
/// second, fewer than a window's 20; windows close after 1 s with what they hold, so the
/// limit leaves the floor and finds the workers (before, it stayed at 4 for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_limit_finds_the_capacity_of_a_300ms_upstream() {
    // Alone: it measures latencies, which other tests' CPU would stretch.
    let _alone = support::alone();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(300);
    knobs.set_capacity(16).await;
    let gw = gateway(&config(&up, "1h", 4));
    let admin = gw.admin_addr().expect("admin");
    let clients = Clients::start(addr(&gw), 48);
    // About 5 s on an idle machine (the unit test's simulation: at most 4.2 s).
    settles(admin, 16, 30).await;
    let doc = status(admin).await;
    let min_rtt = gate(&doc)["auto"]["min_rtt_ms"].as_f64();
    assert!(
        min_rtt.is_some_and(|ms| (250.0..=400.0).contains(&ms)),
        "{doc}"
    );
    let tally = clients.stop().await;
    assert_eq!(tally.unanswered.load(Relaxed), 0, "{tally:?}");
    assert_eq!(tally.other.load(Relaxed), 0, "{tally:?}");
}

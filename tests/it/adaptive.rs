//! Adaptive protection against an upstream the test turns (`support::knob`): the load
//! signals in `/status` and `/metrics`, and zones whose rates follow them. Nothing is
//! asserted after a fixed sleep: each test polls `/status` until what it waits for
//! holds, with deadlines generous for a loaded two-core machine.

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

/// `/status` as JSON.
async fn status(admin: SocketAddr) -> Value {
    let reply = within(10, send(admin, get("/status"))).await;
    serde_json::from_str(&reply.body).expect("status is JSON")
}

/// Polls `/status` every 50 ms until `holds` says yes; panics with `what` and the last
/// document after `secs`.
async fn until(admin: SocketAddr, secs: u64, what: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let doc = status(admin).await;
        if holds(&doc) {
            return doc;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {secs} s: {doc}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clients sending `GET path` one after another until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, path: &'static str, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..clients)
            .map(|_| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.load(Relaxed) {
                        let _ =
                            tokio::time::timeout(Duration::from_secs(10), send(addr, get(path)))
                                .await;
                    }
                })
            })
            .collect();
        Load { stop, tasks }
    }

    async fn stop(self) {
        self.stop.store(true, Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

fn load_of<'a>(doc: &'a Value, group: &str) -> &'a Value {
    &doc["upstream_load"][group]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_appear_in_metrics_and_status() {
    let _shared = support::shared();
    let (up, knobs) = knob::start().await;
    knobs.set_latency(30);
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
upstream = "app"
"#,
        up.addr
    ));
    let admin = gw.admin_addr().expect("admin");
    let load = Load::start(addr(&gw), "/", 2);
    let doc = until(admin, 20, "a p90 near 30 ms", |doc| {
        let p90 = load_of(doc, "app")["latency_ms"]["p90"].as_f64();
        p90.is_some_and(|p90| (25.0..=60.0).contains(&p90))
    })
    .await;
    let app = load_of(&doc, "app");
    assert_eq!(app["window_ms"], 1000, "{doc}");
    assert!(app["samples"].as_u64().unwrap() >= 10, "{doc}");
    assert_eq!(app["failure_ratio"], 0.0, "{doc}");

    let metrics = within(10, send(admin, get("/metrics"))).await.body;
    for line in [
        "tollgate_upstream_latency_seconds{upstream=\"app\",quantile=\"0.9\"} 0.0",
        "tollgate_upstream_requests_total{upstream=\"app\"} ",
        "tollgate_upstream_failed_requests_total{upstream=\"app\",kind=\"5xx\"} 0",
        "tollgate_upstream_in_flight{upstream=\"app\"} ",
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }

    // Every fifth response a 500: a share of 0.2 once the window holds only those.
    knobs.set_failures(200);
    until(admin, 20, "a failure ratio of 0.2", |doc| {
        let ratio = load_of(doc, "app")["failure_ratio"].as_f64();
        ratio.is_some_and(|r| (r - 0.2).abs() <= 0.05)
    })
    .await;
    load.stop().await;
    let doc = until(admin, 20, "nothing in flight once idle", |doc| {
        load_of(doc, "app")["in_flight"] == 0
    })
    .await;
    assert!(knobs.peak_in_flight.load(Relaxed) <= 2, "{doc}");
    // Idle, the window empties and the signals become unknown, not fine.
    until(admin, 20, "unknown latency once idle", |doc| {
        load_of(doc, "app")["latency_ms"].get("p90").is_none()
    })
    .await;
}

/// An attacker's way to cut every client's adaptive limit would be to make the upstream
/// look slow: uploads trickled a byte at a time make the exchanges slow, but the load
/// signals time the upstream from the last body bytes it was sent, so its p90 stays that
/// of the upstream itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_upload_is_not_the_upstreams_latency() {
    use http_body_util::BodyExt;
    use tokio::io::AsyncWriteExt;

    let _shared = support::shared();
    let up = Upstream::start(|req| async move {
        let _ = req.into_body().collect().await;
        text(200, "ok")
    })
    .await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
client_body_buffer_size = 0
request_buffering = "off"
[admin]
listen = "127.0.0.1:0"
[log]
access = "off"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
upstream = "app"
"#,
        up.addr
    ));
    let (admin, at) = (gw.admin_addr().expect("admin"), addr(&gw));
    // 12 uploads of 8 bytes, one byte every 100 ms: each exchange lasts about 0.8 s.
    let uploads: Vec<_> = (0..12)
        .map(|_| {
            tokio::spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(at).await.expect("connect");
                let head =
                    "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: 8\r\n\r\n";
                stream.write_all(head.as_bytes()).await.expect("head");
                for _ in 0..8 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    stream.write_all(b"x").await.expect("body byte");
                }
                let reply = within(10, raw::read_response(&mut stream)).await;
                reply.expect("a response").status
            })
        })
        .collect();
    for upload in uploads {
        assert_eq!(upload.await.expect("upload"), 200);
    }
    let doc = until(admin, 10, "the uploads' latency in the window", |doc| {
        load_of(doc, "app")["samples"].as_u64() >= Some(12)
    })
    .await;
    let p90 = load_of(&doc, "app")["latency_ms"]["p90"]
        .as_f64()
        .expect("a p90");
    assert!(p90 < 100.0, "the uploads' slowness was counted: {doc}");
}

mod concurrency;
mod elastic;
mod zones;

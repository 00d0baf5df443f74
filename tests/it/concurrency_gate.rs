//! `max_in_flight` on an upstream group (docs/config.md, "Concurrency per upstream
//! group"): at most that many requests reach the group at once, the rest wait in a bounded
//! queue (best priority first) for at most `queue_timeout`, and every request is answered:
//! 200, or 503 with `Retry-After`. The upstream here counts what it holds in flight and
//! holds requests until the test lets them go, so the tests poll `/status` for the gate's
//! state rather than sleeping for it.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Request;
use tokio::sync::watch;

use support::*;

/// An upstream whose requests the test holds, and which counts them.
struct Held {
    upstream: Upstream,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    release: watch::Sender<bool>,
}

impl Held {
    /// Requests wait until [`Held::let_go`]; after it, each takes `latency`.
    async fn start(latency: Duration) -> Held {
        let (release, released) = watch::channel(false);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (count, most) = (in_flight.clone(), peak.clone());
        let upstream = Upstream::start(move |_req| {
            let (count, most, mut released) = (count.clone(), most.clone(), released.clone());
            async move {
                let now = count.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let _ = released.wait_for(|go| *go).await;
                tokio::time::sleep(latency).await;
                count.fetch_sub(1, Ordering::SeqCst);
                text(200, "ok")
            }
        })
        .await;
        Held {
            upstream,
            in_flight,
            peak,
            release,
        }
    }

    fn let_go(&self) {
        let _ = self.release.send(true);
    }
}

/// Two workers, an admin listener, and `app` with the gate keys `gate`; `extra` is added
/// at the end (zones, `[api_keys]`).
fn config(up: &Upstream, gate: &str, extra: &str) -> String {
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
servers = ["{}"]
{gate}
[[location]]
match = "/"
upstream = "app"
{extra}
"#,
        up.addr
    )
}

/// `/status`'s `upstream_concurrency.app`.
async fn gate_status(gw: &tollgate::Gateway) -> serde_json::Value {
    let admin = gw.admin_addr().expect("admin configured");
    let body = within(5, send(admin, get("/status"))).await.body;
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    status["upstream_concurrency"]["app"].clone()
}

/// Polls `/status` until `check` holds of the gate, for up to 20 s.
async fn until(gw: &tollgate::Gateway, what: &str, check: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let gate = gate_status(gw).await;
        if check(&gate) {
            return;
        }
        assert!(Instant::now() < deadline, "never {what}: {gate}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `/status` until `check` holds of `upstream_load.app`, for up to 20 s.
async fn until_load(
    gw: &tollgate::Gateway,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) {
    let admin = gw.admin_addr().expect("admin configured");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = within(5, send(admin, get("/status"))).await.body;
        let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let load = &status["upstream_load"]["app"];
        if check(load) {
            return;
        }
        assert!(Instant::now() < deadline, "never {what}: {load}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn request(plan_key: Option<&str>) -> Request<Body> {
    let mut req = Request::get("/").header("host", "example.test");
    if let Some(key) = plan_key {
        req = req.header("x-api-key", key);
    }
    req.body(empty()).unwrap()
}

/// Sends a request on its own task; its answer comes from the handle.
fn spawn(gw: &tollgate::Gateway, plan_key: Option<&'static str>) -> tokio::task::JoinHandle<Reply> {
    let at = addr(gw);
    tokio::spawn(async move { within(60, send(at, request(plan_key))).await })
}

/// A 503 from the gate: `Retry-After` (the queue's longest wait, 1 s unless said) and a
/// problem+json body naming the group.
fn assert_shed(reply: &Reply) {
    assert_shed_after(reply, "1");
}

fn assert_shed_after(reply: &Reply, retry_after: &str) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.headers["retry-after"], retry_after);
    assert_eq!(reply.headers["content-type"], "application/problem+json");
    assert!(
        reply.body.contains("temporary-reduced-capacity"),
        "{}",
        reply.body
    );
    assert!(reply.body.contains(r#""upstream":"app""#), "{}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_never_holds_more_than_the_limit_and_everyone_is_answered() {
    let _shared = support::shared();
    let held = Held::start(Duration::from_millis(20)).await;
    held.let_go();
    let gw = gateway(&config(
        &held.upstream,
        "max_in_flight = 4\nqueue = 8\nqueue_timeout = \"500ms\"",
        "",
    ));
    let clients: Vec<_> = (0..64).map(|_| spawn(&gw, None)).collect();
    let (mut ok, mut shed) = (0, 0);
    for client in clients {
        let reply = client.await.expect("client");
        if reply.status == 200 {
            ok += 1;
        } else {
            assert_shed(&reply);
            shed += 1;
        }
    }
    assert_eq!(ok + shed, 64);
    assert!(ok >= 12, "{ok} passed, {shed} shed");
    assert!(
        held.peak.load(Ordering::SeqCst) <= 4,
        "the upstream held {}",
        held.peak.load(Ordering::SeqCst)
    );
    until(&gw, "idle", |g| g["in_flight"] == 0 && g["queue"] == 0).await;
    let gate = gate_status(&gw).await;
    assert_eq!(gate["mode"], "fixed");
    assert_eq!(gate["limit"], 4);
    let counted =
        gate["shed"]["queue_full"].as_u64().unwrap() + gate["shed"]["timeout"].as_u64().unwrap();
    assert_eq!(counted, shed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_sheds_at_once_and_a_long_wait_times_out() {
    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    let gw = gateway(&config(
        &held.upstream,
        "max_in_flight = 1\nqueue = 1\nqueue_timeout = \"1s\"",
        "",
    ));
    let first = spawn(&gw, None);
    until(&gw, "one in flight", |g| g["in_flight"] == 1).await;
    let waiting = spawn(&gw, None);
    until(&gw, "one waiting", |g| g["queue"] == 1).await;
    // The queue is full: shed at once.
    let reply = within(5, send(addr(&gw), request(None))).await;
    assert_shed(&reply);
    // The waiter gives up after queue_timeout.
    assert_shed(&waiting.await.expect("client"));
    let gate = gate_status(&gw).await;
    assert_eq!(gate["shed"]["queue_full"], 1);
    assert_eq!(gate["shed"]["timeout"], 1);
    assert_eq!(gate["queue"], 0);
    held.let_go();
    assert_eq!(first.await.expect("client").status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_queued_frees_its_place() {
    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    let gw = gateway(&config(
        &held.upstream,
        "max_in_flight = 1\nqueue = 1\nqueue_timeout = \"30s\"",
        "",
    ));
    let first = spawn(&gw, None);
    until(&gw, "one in flight", |g| g["in_flight"] == 1).await;
    let leaver = spawn(&gw, None);
    until(&gw, "one waiting", |g| g["queue"] == 1).await;
    leaver.abort();
    until(&gw, "the place freed", |g| g["queue"] == 0).await;
    // The freed place takes the next request, which gets through once the first ends.
    let next = spawn(&gw, None);
    until(&gw, "the next waiting", |g| g["queue"] == 1).await;
    held.let_go();
    assert_eq!(first.await.expect("client").status, 200);
    assert_eq!(next.await.expect("client").status, 200);
    assert_eq!(
        held.upstream.count(),
        2,
        "the leaver never reached the upstream"
    );
    let gate = gate_status(&gw).await;
    assert_eq!(gate["shed"]["queue_full"], 0);
    assert_eq!(gate["shed"]["timeout"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_the_same_keys_keeps_the_gate() {
    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    let keys = "max_in_flight = 1\nqueue = 4\nqueue_timeout = \"30s\"";
    let gw = gateway(&config(&held.upstream, keys, ""));
    let first = spawn(&gw, None);
    until(&gw, "one in flight", |g| g["in_flight"] == 1).await;
    gw.reload(&parse(&config(&held.upstream, keys, "")))
        .expect("reload");
    // The old generation's request still counts against the one limit.
    let gate = gate_status(&gw).await;
    assert_eq!(gate["in_flight"], 1);
    let second = spawn(&gw, None);
    until(&gw, "the new generation's request waiting", |g| {
        g["queue"] == 1
    })
    .await;
    assert_eq!(held.in_flight.load(Ordering::SeqCst), 1);
    held.let_go();
    assert_eq!(first.await.expect("client").status, 200);
    assert_eq!(second.await.expect("client").status, 200);
    assert_eq!(held.peak.load(Ordering::SeqCst), 1);
    // New keys: a new gate, its sheds still counted where the old one counted them.
    gw.reload(&parse(&config(&held.upstream, "max_in_flight = 2", "")))
        .expect("reload");
    until(&gw, "the new limit", |g| {
        g["limit"] == 2 && g["in_flight"] == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_sheds_free_before_pro() {
    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    let plans = r#"
[zones.by_plan]
key = "$binary_remote_addr"
rate = "1000r/s"
plans = { pro = "1000r/s", free = "1000r/s" }
[api_keys]
inline = { "pro-key" = "pro", "free-key" = "free" }
priority = { pro = 10, free = 0 }
"#;
    let gw = gateway(&config(
        &held.upstream,
        "max_in_flight = 2\nqueue = 4\nqueue_timeout = \"30s\"",
        plans,
    ));
    let running: Vec<_> = (0..2).map(|_| spawn(&gw, Some("free-key"))).collect();
    until(&gw, "two in flight", |g| g["in_flight"] == 2).await;
    let free: Vec<_> = (0..4).map(|_| spawn(&gw, Some("free-key"))).collect();
    until(&gw, "four free waiting", |g| g["queue"] == 4).await;
    // The load signals count the waiting requests as the group's load: a full queue
    // is no room (elastic limits and `adaptive.in_flight` read this).
    until_load(&gw, "six in flight with the queue", |l| l["in_flight"] == 6).await;
    let pro: Vec<_> = (0..4).map(|_| spawn(&gw, Some("pro-key"))).collect();
    until(&gw, "four shed for priority", |g| {
        g["shed"]["priority"] == 4
    })
    .await;
    held.let_go();
    for client in free {
        assert_shed_after(&client.await.expect("client"), "30");
    }
    for client in pro.into_iter().chain(running) {
        assert_eq!(client.await.expect("client").status, 200);
    }
    let gate = gate_status(&gw).await;
    assert_eq!(gate["shed"]["queue_full"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_requests_are_logged_shed_and_counted_in_metrics() {
    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let text = config(&held.upstream, "max_in_flight = 1\nqueue = 0", "").replace(
        "access = \"off\"",
        &format!("access = \"{}\"\nformat = \"json\"", log.display()),
    );
    let gw = gateway(&text);
    let first = spawn(&gw, None);
    until(&gw, "one in flight", |g| g["in_flight"] == 1).await;
    assert_shed(&within(5, send(addr(&gw), request(None))).await);
    let lines = log_lines(&log, 1).await;
    assert!(
        lines[0].contains("SHED") && lines[0].contains("503"),
        "{}",
        lines[0]
    );
    let admin = gw.admin_addr().unwrap();
    let metrics = within(5, send(admin, get("/metrics"))).await.body;
    for line in [
        r#"tollgate_upstream_concurrency_limit{upstream="app"} 1"#,
        r#"tollgate_upstream_concurrency_in_flight{upstream="app"} 1"#,
        r#"tollgate_upstream_queue{upstream="app"} 0"#,
        r#"tollgate_upstream_shed_total{upstream="app",reason="queue_full"} 1"#,
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    held.let_go();
    assert_eq!(first.await.expect("client").status, 200);
}

/// An upstream that accepts WebSocket handshakes (and keeps the tunnel open, reading
/// until the client closes) and answers anything else 200 once `released` says so.
async fn websocket_upstream(released: watch::Receiver<bool>) -> Upstream {
    use hyper_util::rt::TokioIo;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::Role;
    Upstream::start(move |mut req| {
        let mut released = released.clone();
        async move {
            let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
                let _ = released.wait_for(|go| *go).await;
                return text(200, "plain");
            };
            let upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                use futures_util::StreamExt;
                let upgraded = upgrade.await.expect("upgraded");
                let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    None,
                )
                .await;
                while let Some(Ok(_)) = ws.next().await {}
            });
            let mut response = text(101, "");
            let h = response.headers_mut();
            h.insert("upgrade", "websocket".parse().unwrap());
            h.insert("connection", "upgrade".parse().unwrap());
            h.insert(
                "sec-websocket-accept",
                derive_accept_key(key.as_bytes()).parse().unwrap(),
            );
            *response.body_mut() = empty();
            response
        }
    })
    .await
}

/// A plain GET dressed as a WebSocket handshake: the four headers anyone can send.
fn dressed_as_websocket() -> Request<Body> {
    let mut req = request(None);
    let h = req.headers_mut();
    h.insert("connection", "upgrade".parse().unwrap());
    h.insert("upgrade", "websocket".parse().unwrap());
    h.insert(
        "sec-websocket-key",
        "dGhlIHNhbXBsZSBub25jZQ==".parse().unwrap(),
    );
    h.insert("sec-websocket-version", "13".parse().unwrap());
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_handshakes_wait_at_the_gate_and_tunnels_hold_no_slot() {
    let _shared = support::shared();
    let (release, released) = watch::channel(false);
    let up = websocket_upstream(released).await;
    let gw = gateway(&config(&up, "max_in_flight = 1\nqueue = 0", ""));
    // The one slot taken: a plain request now is shed at once, and so is one wearing a
    // handshake's headers (else any client could walk past the gate in them), and a
    // real handshake.
    let plain = spawn(&gw, None);
    until(&gw, "the slot taken", |g| g["in_flight"] == 1).await;
    assert_shed(&within(5, send(addr(&gw), request(None))).await);
    assert_shed(&within(5, send(addr(&gw), dressed_as_websocket())).await);
    let stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    let url = format!("ws://{}/ws", addr(&gw));
    let refused = within(5, tokio_tungstenite::client_async(url, stream)).await;
    assert!(refused.is_err(), "a handshake passed a full gate");
    let _ = release.send(true);
    assert_eq!(plain.await.expect("client").status, 200);
    until(&gw, "the slot free", |g| g["in_flight"] == 0).await;

    // Each handshake takes the one slot and gives it back with the 101: three tunnels
    // open through a gate of one, and a plain request still gets in beside them.
    let mut tunnels = Vec::new();
    for _ in 0..3 {
        let stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
        let url = format!("ws://{}/ws", addr(&gw));
        let (ws, response) = within(5, tokio_tungstenite::client_async(url, stream))
            .await
            .expect("handshake through a free gate");
        assert_eq!(response.status(), 101);
        tunnels.push(ws);
    }
    assert_eq!(gate_status(&gw).await["in_flight"], 0);
    assert_eq!(within(5, send(addr(&gw), request(None))).await.status, 200);
    drop(tunnels);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_small_upload_holds_no_slot_while_it_trickles() {
    use tokio::io::AsyncWriteExt;

    let _shared = support::shared();
    let held = Held::start(Duration::ZERO).await;
    held.let_go();
    let gw = gateway(&config(&held.upstream, "max_in_flight = 1\nqueue = 0", ""));
    let mut slow = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    let head = "POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 4\r\n\r\nab";
    slow.write_all(head.as_bytes()).await.unwrap();
    // Time for the gateway to take the head and half the body: a slot taken before the
    // body is read would be held by now, and the next request shed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(gate_status(&gw).await["in_flight"], 0);
    assert_eq!(within(5, send(addr(&gw), request(None))).await.status, 200);
    slow.write_all(b"cd").await.unwrap();
    let reply = within(5, raw::read_response(&mut slow)).await;
    assert_eq!(reply.expect("a response").status, 200);
}

//! Upstream groups through the real gateway (`[upstreams.*]` in docs/config.md): failures
//! and their statuses, balancing, passive health, retry rules and keep-alive pooling.

use crate::support;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use support::*;

/// One group `app` of `servers` (TOML array items) with `extra` keys, proxied at `/`;
/// a second group `ok` (one healthy server) at `/ok/`, to show the gateway still serves.
fn config(servers: &str, extra: &str, ok: SocketAddr) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[upstreams.app]
servers = [{servers}]
{extra}
[upstreams.ok]
servers = ["{ok}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "/ok/"
upstream = "ok"
"#
    )
}

/// `"a", "b"` for a TOML array.
fn list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A raw TCP upstream on 127.0.0.1:0: each accepted connection goes to `serve`. It
/// counts accepted connections, which the HTTP-level [`Upstream`] cannot.
struct Raw {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Raw {
    async fn start<F, Fut>(serve: F) -> Raw
    where
        F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream));
            }
        });
        Raw {
            addr,
            accepted,
            task,
        }
    }

    /// A real hyper HTTP/1.1 server (keep-alive on) answering `200 ok from NAME`.
    async fn http(name: &'static str) -> Raw {
        Raw::start(move |stream| async move {
            let service = hyper::service::service_fn(move |_req| async move {
                Ok::<_, std::convert::Infallible>(text(200, &format!("ok from {name}")))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        })
        .await
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Reads until the end of a request head (or EOF); returns what was read.
async fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf
}

/// Reads whatever else comes until the peer is quiet for `quiet` (a request body).
async fn drain(stream: &mut TcpStream, quiet: Duration) {
    let mut chunk = [0u8; 4096];
    while let Ok(Ok(n)) = tokio::time::timeout(quiet, stream.read(&mut chunk)).await {
        if n == 0 {
            break;
        }
    }
}

/// Sends `req` over a new connection; the status and the body as far as it arrived
/// (`Err` when it broke off). Unlike [`send`], a broken body does not panic.
async fn send_partial(addr: SocketAddr, req: Request<Body>) -> (StatusCode, Result<Bytes, String>) {
    let stream = TcpStream::connect(addr).await.expect("connect to gateway");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let response = sender.send_request(req).await.expect("response head");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| e.to_string());
    (status, body)
}

/// Waits (polling) until `done()` holds.
async fn until(done: impl Fn() -> bool) {
    while !done() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

// ---- failures and their statuses -------------------------------------------------

#[tokio::test]
async fn refused_upstream_is_a_quick_502_with_a_short_body() {
    let _shared = support::shared();
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(&list(&[closed_port()]), "", ok.addr));
    let started = Instant::now();
    let reply = within(5, get_text(addr(&gw), "/x")).await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.body, "502 Bad Gateway\n");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn silent_upstream_is_504_after_read_timeout() {
    let _shared = support::shared();
    let slow = Upstream::start(|_req| async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        text(200, "too late")
    })
    .await;
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(
        &list(&[slow.addr]),
        r#"read_timeout = "200ms""#,
        ok.addr,
    ));
    let started = Instant::now();
    let reply = within(5, get_text(addr(&gw), "/x")).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 504);
    assert_eq!(reply.body, "504 Gateway Timeout\n");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

// A connect timeout (504) is not tested: on loopback a connect is refused or accepted at
// once, and a full accept backlog does not reliably hold a SYN unanswered.

#[tokio::test]
async fn garbage_response_is_502_and_the_gateway_keeps_serving() {
    let _shared = support::shared();
    let garbage = Raw::start(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream.write_all(b"nonsense\r\n\r\n").await;
    })
    .await;
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(&list(&[garbage.addr]), "", ok.addr));
    within(5, async {
        for _ in 0..3 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(reply.status, 502);
            assert_eq!(reply.body, "502 Bad Gateway\n");
            let reply = get_text(addr(&gw), "/ok/").await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (StatusCode::OK, "ok from ok")
            );
        }
    })
    .await;
}

#[tokio::test]
async fn upstream_closing_mid_body_cuts_the_clients_body_short() {
    let _shared = support::shared();
    let cut = Raw::start(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            .await;
        let _ = stream.flush().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    })
    .await;
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(&list(&[cut.addr]), "", ok.addr));
    let (status, body) = within(5, send_partial(addr(&gw), get("/x"))).await;
    assert_eq!(status, 200, "the head was already on its way");
    match body {
        Err(_) => {}
        Ok(bytes) => assert!(bytes.len() < 1000, "a whole body of {} bytes", bytes.len()),
    }
    let reply = within(5, get_text(addr(&gw), "/ok/")).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn read_timeout_applies_between_reads_not_to_the_whole_body() {
    let _shared = support::shared();
    const BODY: &[u8] = b"abcdefghijkl";
    let drip = Raw::start(|mut stream| async move {
        read_head(&mut stream).await;
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", BODY.len());
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for byte in BODY {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if stream.write_all(&[*byte]).await.is_err() {
                return;
            }
        }
    })
    .await;
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(
        &list(&[drip.addr]),
        r#"read_timeout = "200ms""#,
        ok.addr,
    ));
    let started = Instant::now();
    let (status, body) = within(5, send_partial(addr(&gw), get("/x"))).await;
    assert_eq!(status, 200);
    assert_eq!(body.expect("whole body").as_ref(), BODY);
    // 12 × 50 ms: the body as a whole took far longer than read_timeout.
    assert!(started.elapsed() >= Duration::from_millis(500));
}

// ---- balancing ------------------------------------------------------------------

#[tokio::test]
async fn round_robin_alternates_between_equal_servers() {
    let _shared = support::shared();
    let (a, b) = (Upstream::named("a").await, Upstream::named("b").await);
    let gw = gateway(&config(
        &list(&[a.addr, b.addr]),
        r#"balance = "round_robin""#,
        a.addr,
    ));
    let mut bodies = Vec::new();
    for _ in 0..6 {
        bodies.push(within(5, get_text(addr(&gw), "/x")).await.body);
    }
    let expected = ["ok from a", "ok from b"].repeat(3);
    assert_eq!(bodies, expected);
}

#[tokio::test]
async fn round_robin_weights_3_to_1_split_40_requests_30_to_10() {
    let _shared = support::shared();
    let (a, b) = (Upstream::named("a").await, Upstream::named("b").await);
    let servers = format!(r#"{{ addr = "{}", weight = 3 }}, "{}""#, a.addr, b.addr);
    let gw = gateway(&config(&servers, "", a.addr));
    within(10, async {
        for _ in 0..40 {
            assert_eq!(get_text(addr(&gw), "/x").await.status, 200);
        }
    })
    .await;
    // Smooth weighted round robin repeats a fixed cycle of 4, so 40 requests split exactly.
    assert_eq!((a.count(), b.count()), (30, 10));
}

#[tokio::test]
async fn least_conn_sends_new_requests_away_from_the_busy_server() {
    let _shared = support::shared();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let slow = Upstream::start(move |_req| {
        let held = held.clone();
        async move {
            // Held until the test closes the gate.
            let _ = held.acquire().await;
            text(200, "ok from slow")
        }
    })
    .await;
    let fast = Upstream::named("fast").await;
    let gw = gateway(&config(
        &list(&[slow.addr, fast.addr]),
        r#"balance = "least_conn""#,
        fast.addr,
    ));
    let gw_addr = addr(&gw);
    let mut pending = Vec::new();
    within(10, async {
        for _ in 0..20 {
            // One at a time, but without waiting for the held ones: each new request
            // starts once the previous one is either answered or held by `slow`.
            let before = slow.count();
            let task = tokio::spawn(get_text(gw_addr, "/x"));
            until(|| task.is_finished() || slow.count() > before).await;
            pending.push(task);
        }
        assert!(
            slow.count() <= 3,
            "slow got {} of 20, fast {}",
            slow.count(),
            fast.count()
        );
        assert_eq!(slow.count() + fast.count(), 20);
        gate.close();
        for task in pending {
            assert_eq!(task.await.unwrap().status, 200);
        }
    })
    .await;
}

#[tokio::test]
async fn ip_hash_keeps_a_client_on_one_server() {
    let _shared = support::shared();
    let (a, b) = (Upstream::named("a").await, Upstream::named("b").await);
    let gw = gateway(&config(
        &list(&[a.addr, b.addr]),
        r#"balance = "ip_hash""#,
        a.addr,
    ));
    let first = within(5, get_text(addr(&gw), "/x")).await.body;
    within(10, async {
        for _ in 0..19 {
            assert_eq!(get_text(addr(&gw), "/x").await.body, first);
        }
    })
    .await;
    let counts = (a.count(), b.count());
    assert!(counts == (20, 0) || counts == (0, 20), "{counts:?}");
}

// ---- passive health -------------------------------------------------------------

#[tokio::test]
async fn gets_all_succeed_quickly_with_one_server_down() {
    let _shared = support::shared();
    let live = Upstream::named("live").await;
    let gw = gateway(&config(
        &list(&[closed_port(), live.addr]),
        "max_fails = 1\nfail_timeout = \"10s\"",
        live.addr,
    ));
    let started = Instant::now();
    within(5, async {
        for _ in 0..10 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (StatusCode::OK, "ok from live")
            );
        }
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn failed_server_is_not_tried_again_within_fail_timeout() {
    let _shared = support::shared();
    // Accepts, then closes without a word: every exchange with it fails.
    let dead = Raw::start(|_stream| async {}).await;
    let live = Upstream::named("live").await;
    let gw = gateway(&config(
        &list(&[dead.addr, live.addr]),
        "max_fails = 1\nfail_timeout = \"10s\"",
        live.addr,
    ));
    within(5, async {
        for _ in 0..10 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (StatusCode::OK, "ok from live")
            );
        }
    })
    .await;
    assert_eq!(live.count(), 10);
    assert_eq!(dead.accepted(), 1, "the dead server was tried again");
}

// ---- retry rules ----------------------------------------------------------------

/// Reads the whole request, then closes without answering.
async fn take_and_hang_up() -> Raw {
    Raw::start(|mut stream| async move {
        read_head(&mut stream).await;
        drain(&mut stream, Duration::from_millis(100)).await;
    })
    .await
}

#[tokio::test]
async fn post_with_body_is_not_retried_once_a_server_took_it() {
    let _shared = support::shared();
    let taker = take_and_hang_up().await;
    let other = Upstream::named("other").await;
    // Round robin starts at the first server listed.
    let gw = gateway(&config(&list(&[taker.addr, other.addr]), "", other.addr));
    let req = Request::post("/x")
        .header("host", "example.test")
        .body(full("payload"))
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 502);
    assert_eq!(taker.accepted(), 1);
    assert_eq!(other.count(), 0, "the POST was sent twice");
}

#[tokio::test]
async fn get_is_retried_on_the_next_server_when_one_hangs_up() {
    let _shared = support::shared();
    let taker = take_and_hang_up().await;
    let other = Upstream::named("other").await;
    let gw = gateway(&config(&list(&[taker.addr, other.addr]), "", other.addr));
    let reply = within(5, get_text(addr(&gw), "/x")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "ok from other")
    );
    assert_eq!(taker.accepted(), 1, "the first server was not tried first");
    assert_eq!(other.count(), 1);
}

#[tokio::test]
async fn a_retried_put_takes_its_whole_body_to_the_next_server() {
    let _shared = support::shared();
    let taker = take_and_hang_up().await;
    let other = support::raw::RawUpstream::ok().await;
    let gw = gateway(&config(&list(&[taker.addr, other.addr]), "", other.addr));
    let req = Request::put("/doc")
        .header("host", "example.test")
        .body(full("IMPORTANT!!"))
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(taker.accepted(), 1, "the first server was not tried first");
    let seen = String::from_utf8_lossy(&other.bytes()).to_ascii_lowercase();
    assert!(seen.contains("content-length: 11\r\n"), "{seen}");
    assert!(seen.ends_with("\r\n\r\nimportant!!"), "{seen}");
}

// ---- keep-alive pool ------------------------------------------------------------

/// One worker, so every request meets the same per-worker idle pool.
fn single_worker(up: SocketAddr, extra: &str) -> String {
    config(&list(&[up]), extra, up).replace("workers = 2", "workers = 1")
}

#[tokio::test]
async fn sequential_requests_reuse_upstream_connections() {
    let _shared = support::shared();
    let up = Raw::http("app").await;
    let gw = gateway(&single_worker(up.addr, ""));
    within(5, async {
        for _ in 0..10 {
            assert_eq!(get_text(addr(&gw), "/x").await.body, "ok from app");
        }
    })
    .await;
    assert!(
        up.accepted() <= 2,
        "{} connections for 10 requests",
        up.accepted()
    );
}

#[tokio::test]
async fn keepalive_zero_opens_a_connection_per_request() {
    let _shared = support::shared();
    let up = Raw::http("app").await;
    let gw = gateway(&single_worker(up.addr, "keepalive = 0"));
    within(5, async {
        for _ in 0..5 {
            assert_eq!(get_text(addr(&gw), "/x").await.body, "ok from app");
        }
    })
    .await;
    assert_eq!(up.accepted(), 5);
}

/// Answers each request on a connection and closes it when it has been idle for
/// `idle` (an upstream's own keep-alive timeout).
async fn closing_when_idle(idle: Duration) -> Raw {
    Raw::start(move |mut stream| async move {
        while let Ok(head) = tokio::time::timeout(idle, read_head(&mut stream)).await {
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if head.is_empty() || stream.write_all(answer).await.is_err() {
                return;
            }
        }
    })
    .await
}

/// Sends 30 GETs with pauses from 0 to 28 ms, some shorter and some longer than the
/// upstream keeps a connection; none may fail. (Catching the close in flight is left
/// to [`answers_once_per_connection`], which makes that race deterministic.)
async fn gets_never_fail(gw: &tollgate::Gateway) {
    within(10, async {
        for i in 0..30u64 {
            let reply = get_text(addr(gw), "/x").await;
            assert_eq!(
                (i, reply.status, reply.body.as_str()),
                (i, StatusCode::OK, "ok")
            );
            tokio::time::sleep(Duration::from_millis(i * 7 % 29)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn upstream_closing_idle_connections_never_causes_a_502_for_gets() {
    let _shared = support::shared();
    let up = closing_when_idle(Duration::from_millis(14)).await;
    let gw = gateway(&single_worker(up.addr, ""));
    gets_never_fail(&gw).await;
}

#[tokio::test]
async fn upstream_saying_connection_close_never_causes_a_502_for_gets() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        let mut response = text(200, "ok");
        response
            .headers_mut()
            .insert("connection", http::HeaderValue::from_static("close"));
        response
    })
    .await;
    let gw = gateway(&single_worker(up.addr, ""));
    gets_never_fail(&gw).await;
    assert_eq!(up.count(), 30);
}

/// Answers the first request on each connection (after `hold`); any later request on
/// it finds the server closing: read, then hung up on unanswered. This is the race of
/// an upstream's keep-alive timeout firing just as a pooled connection is reused,
/// made deterministic.
async fn answers_once_per_connection(hold: Duration) -> Raw {
    Raw::start(move |mut stream| async move {
        if read_head(&mut stream).await.is_empty() {
            return;
        }
        tokio::time::sleep(hold).await;
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        if stream.write_all(answer).await.is_err() {
            return;
        }
        read_head(&mut stream).await;
    })
    .await
}

#[tokio::test]
async fn get_meeting_a_stale_pooled_connection_is_answered() {
    let _shared = support::shared();
    let up = answers_once_per_connection(Duration::ZERO).await;
    let gw = gateway(&single_worker(up.addr, ""));
    within(5, async {
        for i in 0..10 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(
                (i, reply.status, reply.body.as_str()),
                (i, StatusCode::OK, "ok")
            );
        }
    })
    .await;
    // Every request after the first met a stale connection, then opened a fresh one.
    assert_eq!(up.accepted(), 10);
}

/// Answers the first request on each connection; a later one finds the server closing
/// with it unread, which the kernel answers with a reset rather than EOF: the same race
/// as [`answers_once_per_connection`], when the request arrives as the server closes.
async fn resets_after_one_answer() -> Raw {
    Raw::start(|mut stream| async move {
        if read_head(&mut stream).await.is_empty() {
            return;
        }
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        if stream.write_all(answer).await.is_err() {
            return;
        }
        // Closed once the next request is there (all of it: one write), unread.
        let _ = stream.readable().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    })
    .await
}

#[tokio::test]
async fn get_meeting_a_reset_pooled_connection_is_answered() {
    let _shared = support::shared();
    let up = resets_after_one_answer().await;
    let gw = gateway(&single_worker(up.addr, ""));
    within(5, async {
        for i in 0..10 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(
                (i, reply.status, reply.body.as_str()),
                (i, StatusCode::OK, "ok")
            );
        }
    })
    .await;
    // Every request after the first met a reset connection, then opened a fresh one.
    assert_eq!(up.accepted(), 10);
}

#[tokio::test]
async fn get_meeting_several_stale_pooled_connections_is_answered() {
    let _shared = support::shared();
    let up = answers_once_per_connection(Duration::from_millis(100)).await;
    let gw = gateway(&single_worker(up.addr, ""));
    let gw_addr = addr(&gw);
    within(5, async {
        // Two requests at once: two upstream connections, both pooled afterwards.
        let (one, two) = tokio::join!(get_text(gw_addr, "/x"), get_text(gw_addr, "/x"));
        assert_eq!((one.status, two.status), (StatusCode::OK, StatusCode::OK));
        assert_eq!(up.accepted(), 2);
        let reply = get_text(gw_addr, "/x").await;
        assert_eq!((reply.status, reply.body.as_str()), (StatusCode::OK, "ok"));
    })
    .await;
}

#[tokio::test]
async fn stale_pooled_connections_do_not_take_a_server_down() {
    let _shared = support::shared();
    let a = answers_once_per_connection(Duration::ZERO).await;
    let b = answers_once_per_connection(Duration::ZERO).await;
    let toml = config(
        &list(&[a.addr, b.addr]),
        "max_fails = 1\nfail_timeout = \"10s\"",
        a.addr,
    )
    .replace("workers = 2", "workers = 1");
    let gw = gateway(&toml);
    within(5, async {
        for i in 0..20 {
            let reply = get_text(addr(&gw), "/x").await;
            assert_eq!(
                (i, reply.status, reply.body.as_str()),
                (i, StatusCode::OK, "ok")
            );
        }
    })
    .await;
    // Each server answers exactly once per connection, so `accepted` counts answers.
    let (a, b) = (a.accepted(), b.accepted());
    assert!(
        a >= 5 && b >= 5,
        "answers: a {a}, b {b}: one was marked down"
    );
}

/// A response head over the limits (more than 128 fields) is a 502 for that request
/// alone: no try on another server, and no mark against the server's health, since a
/// client can often make a response's head grow (an echoed cookie) and would otherwise
/// take every server out of the group with a few requests.
#[tokio::test]
async fn an_oversized_response_head_is_a_502_that_marks_no_server_down() {
    let _shared = support::shared();
    let respond = |head: &[u8]| {
        if head.starts_with(b"GET /big") {
            let fields: String = (0..200).map(|i| format!("x-{i}: v\r\n")).collect();
            format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 0\r\n\r\n").into_bytes()
        } else {
            support::raw::ok_response("ok")
        }
    };
    let a = support::raw::RawUpstream::start(respond).await;
    let b = support::raw::RawUpstream::start(respond).await;
    let ok = Upstream::named("ok").await;
    let gw = gateway(&config(&list(&[a.addr, b.addr]), "max_fails = 1", ok.addr));
    let big = get_text(addr(&gw), "/big").await;
    assert_eq!(big.status, 502);
    assert_eq!(a.requests() + b.requests(), 1, "tried on one server only");
    for _ in 0..4 {
        assert_eq!(get_text(addr(&gw), "/x").await.status, 200);
    }
    assert!(a.requests() >= 2 && b.requests() >= 2, "both still in use");
}

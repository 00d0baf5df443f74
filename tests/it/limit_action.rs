//! `limit_action`: a limited request closed without a byte (HTTP/1.1) or its stream reset
//! (HTTP/2), as nginx's 444; or held (the tarpit) and then answered and closed, at most
//! `tarpit_max` at once, a slot freed when its client hangs up, every hold ended by a
//! drain, and a client that sends more meanwhile read no further. Each client is an
//! `X-Forwarded-For` address (trusted from 127.0.0.1) whose first request spends its
//! zone's one request a minute.

use crate::support;

use std::time::{Duration, Instant};

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `action` in `[server]` with the keys of `server`; the access log at `log`.
fn config(action: &str, server: &str, log: &std::path::Path) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
limit_action = "{action}"
{server}
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "{log}"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[[location]]
match = "/"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200, body = "ok\n" }}
[[location]]
match = "/dry"
limit = [{{ zone = "per_ip", dry_run = true }}]
return = {{ status = 200, body = "dry\n" }}
[[location]]
match = "/free"
return = {{ status = 200, body = "free\n" }}
"#,
        log = log.display()
    )
}

/// A request for `path` from `client`.
fn request(path: &str, client: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: example.test\r\nX-Forwarded-For: {client}\r\n\r\n")
}

/// Spends `client`'s one request of the minute: its next one to `/` is limited.
async fn spend(gw: &tollgate::Gateway, client: &str) {
    let mut stream = TcpStream::connect(addr(gw)).await.unwrap();
    stream
        .write_all(request("/", client).as_bytes())
        .await
        .unwrap();
    let answer = raw::read_response(&mut stream).await.expect("an answer");
    assert_eq!(answer.status, 200, "{}", answer.head);
}

/// A connection that has sent `bytes`.
async fn sent(gw: &tollgate::Gateway, bytes: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr(gw)).await.unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    stream
}

/// Everything the gateway sends until it closes (a reset ends it too); `None` if it is
/// still open after `secs` seconds.
async fn until_closed(stream: &mut TcpStream, secs: u64) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let read = stream.read_to_end(&mut received);
    match tokio::time::timeout(Duration::from_secs(secs), read).await {
        Ok(_) => Some(received),
        Err(_) => None,
    }
}

fn lines_with<'a>(lines: &'a [String], part: &'a str) -> impl Iterator<Item = &'a String> {
    lines.iter().filter(move |line| line.contains(part))
}

#[tokio::test]
async fn close_ends_an_http1_connection_without_a_byte_and_drops_what_was_pipelined() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config("close", "", &log));
    spend(&gw, "10.0.0.1").await;
    let both = request("/", "10.0.0.1") + &request("/free", "10.0.0.1");
    let mut stream = sent(&gw, &both).await;
    let received = until_closed(&mut stream, 5).await.expect("closed");
    assert!(
        received.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&received)
    );
    // A dry-run zone never refuses, so never closes.
    let mut dry = sent(&gw, &request("/dry", "10.0.0.1")).await;
    let answer = raw::read_response(&mut dry).await.expect("answered");
    assert_eq!((answer.status, answer.body.as_str()), (200, "dry\n"));
    // As nginx logs a 444: no bytes sent. The pipelined request was never read.
    let lines = log_lines(&log, 3).await;
    assert_eq!(lines_with(&lines, "\" 444 0 ").count(), 1, "{lines:#?}");
    assert_eq!(lines_with(&lines, "/free").count(), 0, "{lines:#?}");
    gw.stop().await;
}

#[tokio::test]
async fn close_resets_only_the_http2_stream_with_protocol_error_as_nginx() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config("close", "", &dir.path().join("access.log")));
    let mut client = h2_client(&gw).await;
    let get = |path: &str| h2_get(path, "10.0.0.2");
    let (first, _) = client.send_request(get("/"), true).unwrap();
    assert_eq!(within(5, first).await.unwrap().status(), 200);
    let (limited, _) = client.send_request(get("/"), true).unwrap();
    let err = within(5, limited).await.expect_err("the stream is reset");
    // nginx's 444 on HTTP/2: RST_STREAM PROTOCOL_ERROR (it marks the request timed out).
    assert_eq!(err.reason(), Some(h2::Reason::PROTOCOL_ERROR), "{err}");
    let mut client = within(5, client.ready())
        .await
        .expect("the connection is open");
    let (other, _) = client.send_request(get("/free"), true).unwrap();
    assert_eq!(within(5, other).await.unwrap().status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn a_tarpit_holds_the_refusal_then_answers_it_and_closes() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config("tarpit", "tarpit_hold = \"300ms\"", &log));
    spend(&gw, "10.0.0.3").await;
    let start = Instant::now();
    let both = request("/", "10.0.0.3") + &request("/free", "10.0.0.3");
    let mut stream = sent(&gw, &both).await;
    let answer = raw::read_response(&mut stream).await.expect("answered");
    assert!(start.elapsed() >= Duration::from_millis(300), "not held");
    assert_eq!(answer.status, 429, "{}", answer.head);
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{}",
        answer.head
    );
    assert!(answer.body.contains("\"status\":429"), "{}", answer.body);
    // The pipelined request is not answered: the connection closes after the refusal.
    let rest = until_closed(&mut stream, 5).await.expect("closed");
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    let lines = log_lines(&log, 2).await;
    assert_eq!(lines_with(&lines, "\" 429 ").count(), 1, "{lines:#?}");
    gw.stop().await;
}

#[tokio::test]
async fn an_http2_stream_is_held_then_answered_and_its_connection_goes_on() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config("tarpit", "tarpit_hold = \"300ms\"", &log));
    let mut client = h2_client(&gw).await;
    let get = |path: &str| h2_get(path, "10.0.0.8");
    let (first, _) = client.send_request(get("/"), true).unwrap();
    assert_eq!(within(5, first).await.unwrap().status(), 200);
    let start = Instant::now();
    let (held, _) = client.send_request(get("/"), true).unwrap();
    // Meanwhile the connection's other streams are served.
    let mut client = within(5, client.ready()).await.unwrap();
    let (other, _) = client.send_request(get("/free"), true).unwrap();
    assert_eq!(within(5, other).await.unwrap().status(), 200);
    let held = within(5, held).await.expect("answered");
    assert!(start.elapsed() >= Duration::from_millis(300), "not held");
    assert_eq!(held.status(), 429);
    let mut client = within(5, client.ready())
        .await
        .expect("the connection is open");
    let (after, _) = client.send_request(get("/free"), true).unwrap();
    assert_eq!(within(5, after).await.unwrap().status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn past_tarpit_max_a_refusal_is_closed_across_a_reload_and_a_drain_ends_the_hold_at_once() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = "tarpit_max = 1\ntarpit_hold = \"1m\"\nshutdown_timeout = \"1m\"";
    let gw = gateway(&config("tarpit", server, &log));
    for client in ["10.0.0.4", "10.0.0.5", "10.0.0.11"] {
        spend(&gw, client).await;
    }
    let mut a = sent(&gw, &request("/", "10.0.0.4")).await;
    let mut b = sent(&gw, &request("/", "10.0.0.5")).await;
    // One is held, the other is over the count: closed at once, without a byte.
    let (a_closed, closed) = tokio::select! {
        closed = until_closed(&mut a, 5) => (true, closed),
        closed = until_closed(&mut b, 5) => (false, closed),
    };
    let mut held = if a_closed { b } else { a };
    let closed = closed.expect("one closed at once");
    assert!(closed.is_empty(), "{:?}", String::from_utf8_lossy(&closed));
    let holding = tokio::spawn(async move { until_closed(&mut held, 10).await });
    // The count outlives a reload: the held request still fills tarpit_max.
    gw.reload(&parse(&config("tarpit", server, &log))).unwrap();
    let mut after = sent(&gw, &request("/", "10.0.0.11")).await;
    let closed = until_closed(&mut after, 5)
        .await
        .expect("still over the count: closed");
    assert!(closed.is_empty(), "{:?}", String::from_utf8_lossy(&closed));
    assert!(!holding.is_finished(), "the other is held");
    // The drain does not wait out the minute's hold (nor the minute's shutdown_timeout).
    within(10, gw.stop()).await;
    let ended = within(10, holding).await.unwrap();
    let ended = ended.expect("the held connection closed by the drain");
    assert!(ended.is_empty(), "{:?}", String::from_utf8_lossy(&ended));
    let lines = log_lines(&log, 6).await;
    assert_eq!(lines_with(&lines, "\" 444 0 ").count(), 3, "{lines:#?}");
}

#[tokio::test]
async fn a_client_that_hangs_up_while_held_frees_its_slot_at_once() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = "tarpit_max = 1\ntarpit_hold = \"2s\"";
    let gw = gateway(&config("tarpit", server, &log));
    for client in ["10.0.0.6", "10.0.0.7", "10.0.0.9"] {
        spend(&gw, client).await;
    }
    let held = sent(&gw, &request("/", "10.0.0.6")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The slot is taken: another refusal is closed.
    let mut probe = sent(&gw, &request("/", "10.0.0.9")).await;
    let closed = until_closed(&mut probe, 1)
        .await
        .expect("over tarpit_max: closed");
    assert!(closed.is_empty());
    drop(held);
    // Its request ends as nginx logs a client gone: 499.
    let lines = log_lines(&log, 5).await;
    assert_eq!(lines_with(&lines, "\" 499 ").count(), 1, "{lines:#?}");
    // Long before its hold would have ended, the slot holds the next refusal.
    let mut next = sent(&gw, &request("/", "10.0.0.7")).await;
    let answer = within(5, raw::read_response(&mut next)).await;
    let answer = answer.expect("held, then answered (not closed)");
    assert_eq!(answer.status, 429);
    gw.stop().await;
}

#[tokio::test]
async fn a_held_request_reads_nothing_more_however_much_the_client_sends() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(
        "tarpit",
        "tarpit_hold = \"3s\"",
        &dir.path().join("access.log"),
    ));
    spend(&gw, "10.0.0.10").await;
    let mut stream = sent(&gw, &request("/", "10.0.0.10")).await;
    // 64 MiB of junk behind the request, for a second: only the sockets' buffers (and
    // the connection's own, not grown) take any of it.
    let junk = vec![b'x'; 64 * 1024];
    let mut pushed = 0usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while pushed < 64 << 20 {
        match tokio::time::timeout_at(deadline, stream.write(&junk)).await {
            Ok(Ok(n)) => pushed += n,
            _ => break,
        }
    }
    assert!(
        pushed < 32 << 20,
        "the gateway read {pushed} bytes meanwhile"
    );
    let answer = within(10, raw::read_response(&mut stream)).await;
    assert_eq!(answer.expect("answered after the hold").status, 429);
    gw.stop().await;
}

#[test]
fn a_bad_limit_action_fails_the_check_at_its_place() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    let text = "[server]\nlisten = [\"127.0.0.1:8080\"]\nlimit_action = \"drop\"\ntarpit_max = 0\n\
                [[location]]\nmatch = \"/\"\nreturn = { status = 200 }\n";
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("-t")
        .arg("-c")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("gateway.toml:3:16"), "{stderr}");
    assert!(stderr.contains("unknown variant `drop`"), "{stderr}");
    let ok = text
        .replace("\"drop\"", "\"tarpit\"")
        .replace("tarpit_max = 0", "tarpit_max = 4");
    std::fs::write(&path, ok).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("-t")
        .arg("-c")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HTTP/2 client (prior knowledge) on `gw`'s listener.
async fn h2_client(gw: &tollgate::Gateway) -> h2::client::SendRequest<bytes::Bytes> {
    let stream = TcpStream::connect(addr(gw)).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client.ready().await.unwrap()
}

/// A GET of `path` from the client `ip` (as the proxy in front says).
fn h2_get(path: &str, ip: &str) -> http::Request<()> {
    http::Request::get(format!("http://example.test{path}"))
        .header("x-forwarded-for", ip)
        .body(())
        .unwrap()
}

//! `client_max_body_size` through the real gateway: a body declared too large is answered
//! 413 before any upstream connection; a body that grows too large (chunked, HTTP/2 without
//! a length) is cut off, and the upstream never gets more than the limit. The streamed
//! cases are with `request_buffering = "off"` (with it on, the default, a body is read
//! whole first: `request_buffering.rs`).

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::raw::{read_response, EarlyUpstream, RawResponse, RawUpstream};
use support::{addr, gateway, proxying, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `POST path` with a `Content-Length` body of `len` bytes.
fn with_length(path: &str, len: usize) -> Vec<u8> {
    let mut raw =
        format!("POST {path} HTTP/1.1\r\nHost: example.test\r\nContent-Length: {len}\r\n\r\n")
            .into_bytes();
    raw.resize(raw.len() + len, b'a');
    raw
}

/// `POST /` with a chunked body of `total` bytes in chunks of `chunk`, each with an
/// extension (which must not count, nor hide bytes).
fn chunked(total: usize, chunk: usize) -> Vec<u8> {
    let mut raw =
        b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk);
        raw.extend_from_slice(format!("{n:x};name=value\r\n").as_bytes());
        raw.resize(raw.len() + n, b'c');
        raw.extend_from_slice(b"\r\n");
        left -= n;
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

/// Sends `raw` on a new connection (a write cut short by the gateway's close is no
/// failure) and reads the answer, within 5 s.
async fn exchange(gw: SocketAddr, raw: &[u8]) -> Option<RawResponse> {
    let mut client = TcpStream::connect(gw).await.unwrap();
    let _ = client.write_all(raw).await;
    within(5, read_response(&mut client)).await
}

async fn status(gw: SocketAddr, raw: &[u8]) -> u16 {
    exchange(gw, raw).await.map_or(0, |reply| reply.status)
}

/// Bytes of body the upstream received, over every connection: after each head, what a
/// `Content-Length` declares or the data of the (possibly cut off) chunked body.
fn body_bytes(received: &[u8]) -> usize {
    let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
        return 0;
    };
    let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
    let mut rest = &received[end + 4..];
    if !head.contains("transfer-encoding: chunked") {
        return rest.len();
    }
    let mut data = 0;
    while let Some(line) = rest.windows(2).position(|w| w == b"\r\n") {
        let text = String::from_utf8_lossy(&rest[..line]);
        let size = usize::from_str_radix(text.split(';').next().unwrap_or("").trim(), 16);
        let Ok(size) = size else { break };
        let available = (rest.len() - line - 2).min(size);
        data += available;
        rest = &rest[(line + 2 + available).min(rest.len())..];
        rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        if size == 0 || available < size {
            break;
        }
    }
    data
}

/// Waits until the upstream has accepted `connections` and seen them end (its accept
/// loop runs on the test's thread, so it may not have run yet when the answer is in).
async fn settled(up: &RawUpstream, connections: usize) {
    settled_counts(|| (up.accepted(), up.closed()), connections).await;
}

/// [`settled`] for any upstream: `counts` says how many connections it accepted and
/// saw end.
async fn settled_counts(counts: impl Fn() -> (usize, usize), connections: usize) {
    for _ in 0..100 {
        let (accepted, closed) = counts();
        if accepted >= connections && closed == accepted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (accepted, closed) = counts();
    panic!("the upstream accepted {accepted} and saw {closed} end");
}

/// Bytes of body an [`EarlyUpstream`] received once its connections ended.
async fn early_body_bytes(early: &EarlyUpstream) -> usize {
    settled_counts(|| (early.accepted(), early.closed()), 1).await;
    early.connections().iter().map(|c| body_bytes(c)).sum()
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_and_reaches_no_upstream() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&proxying(up.addr, r#"client_max_body_size = "1k""#));
    let reply = exchange(addr(&gw), &with_length("/", 1025)).await.unwrap();
    assert_eq!(reply.status, 413, "{reply:?}");
    assert!(
        reply
            .head
            .to_ascii_lowercase()
            .contains("connection: close"),
        "{reply:?}"
    );
    // Expect: 100-continue gets the 413 instead of the 100, and no byte is waited for.
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n";
    let reply = exchange(addr(&gw), head).await.unwrap();
    assert_eq!(reply.status, 413, "{reply:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(up.accepted(), 0, "the upstream was connected to");
}

#[tokio::test]
async fn a_body_exactly_at_the_limit_passes_whole() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&proxying(up.addr, r#"client_max_body_size = "1k""#));
    assert_eq!(status(addr(&gw), &with_length("/", 1024)).await, 200);
    assert_eq!(status(addr(&gw), &chunked(1024, 100)).await, 200);
    // Each answer came from the upstream, so it has framed both requests whole.
    assert_eq!(up.requests(), 2);
    let received = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert_eq!(
        received.matches("content-length: 1024\r\n").count(),
        2,
        "{received}"
    );
}

#[tokio::test]
async fn a_chunked_body_growing_past_the_limit_while_buffered_is_413_before_any_upstream() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    // The default 16k client_body_buffer_size holds the whole limit.
    let gw = gateway(&proxying(up.addr, r#"client_max_body_size = "8k""#));
    assert_eq!(status(addr(&gw), &chunked(8 * 1024 + 1, 1000)).await, 413);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(up.accepted(), 0, "the upstream was connected to");
}

#[tokio::test]
async fn a_streamed_chunked_body_growing_past_the_limit_is_413_and_the_upstream_gets_at_most_the_limit(
) {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let limit = 64 * 1024;
    let gw = gateway(&proxying(
        up.addr,
        r#"client_max_body_size = "64k"
client_body_buffer_size = "4k"
request_buffering = "off""#,
    ));
    let reply = exchange(addr(&gw), &chunked(limit + 3000, 7000)).await;
    assert_eq!(reply.map(|r| r.status), Some(413));
    settled(&up, 1).await;
    assert_eq!(up.requests(), 0, "the upstream got a whole request");
    let got = body_bytes(&up.bytes());
    assert!(got <= limit, "the upstream got {got} bytes of body");
}

/// An HTTP/2 body of `total` bytes in `chunk`-byte DATA frames, without a length.
fn h2_stream_body(total: usize, chunk: usize) -> support::Body {
    let frames = (0..total.div_ceil(chunk)).map(move |i| {
        let n = chunk.min(total - i * chunk);
        Ok::<_, hyper::Error>(hyper::body::Frame::data(Bytes::from(vec![b'h'; n])))
    });
    StreamBody::new(futures_util::stream::iter(frames)).boxed()
}

fn h2_post(body: support::Body) -> http::Request<support::Body> {
    http::Request::post("http://example.test/")
        .body(body)
        .unwrap()
}

#[tokio::test]
async fn an_http2_body_over_the_limit_is_413_with_or_without_a_length() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let limit = 32 * 1024;
    let gw = gateway(&proxying(
        up.addr,
        r#"client_max_body_size = "32k"
client_body_buffer_size = "4k"
request_buffering = "off""#,
    ));
    // With a length (hyper's client sends the body's exact size): refused unread.
    let body = support::full(vec![b'x'; limit + 1]);
    let reply = within(5, support::send_h2(addr(&gw), h2_post(body))).await;
    assert_eq!(reply.status, 413);
    assert_eq!(up.accepted(), 0);
    // DATA frames without a length: cut off at the limit.
    let reply = within(
        5,
        support::send_h2(addr(&gw), h2_post(h2_stream_body(limit + 5000, 3000))),
    )
    .await;
    assert_eq!(reply.status, 413);
    settled(&up, 1).await;
    assert_eq!(up.requests(), 0, "the upstream got a whole request");
    let got = body_bytes(&up.bytes());
    assert!(got <= limit, "the upstream got {got} bytes of body");
    // At the limit, both pass.
    let reply = within(
        5,
        support::send_h2(addr(&gw), h2_post(h2_stream_body(limit, 3000))),
    )
    .await;
    assert_eq!(reply.status, 200);
    let body = support::full(vec![b'x'; limit]);
    let reply = within(5, support::send_h2(addr(&gw), h2_post(body))).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_location_limit_overrides_the_server_limit() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
client_max_body_size = "1k"
[log]
access = "off"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "/big/"
upstream = "app"
client_max_body_size = "64k"
[[location]]
match = "/any/"
upstream = "app"
client_max_body_size = 0
[[location]]
match = "/small/"
upstream = "app"
client_max_body_size = 100
[[location]]
match = "= /answer"
return = {{ status = 204 }}
"#,
        up.addr
    ));
    let gw = addr(&gw);
    assert_eq!(status(gw, &with_length("/", 2000)).await, 413);
    assert_eq!(status(gw, &with_length("/big/", 2000)).await, 200);
    assert_eq!(status(gw, &with_length("/big/", 64 * 1024 + 1)).await, 413);
    assert_eq!(status(gw, &with_length("/any/", 2 << 20)).await, 200);
    assert_eq!(status(gw, &with_length("/small/", 100)).await, 200);
    assert_eq!(status(gw, &with_length("/small/", 101)).await, 413);
    // nginx checks the declared length in every location, `return` ones too.
    assert_eq!(status(gw, &with_length("/answer", 1025)).await, 413);
    assert_eq!(status(gw, &with_length("/answer", 10)).await, 204);
}

#[tokio::test]
async fn zero_means_no_limit() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&proxying(up.addr, r#"client_max_body_size = "0""#));
    assert_eq!(status(addr(&gw), &with_length("/", 3 << 20)).await, 200);
    assert_eq!(status(addr(&gw), &chunked(3 << 20, 64 * 1024)).await, 200);
}

#[tokio::test]
async fn the_default_limit_is_one_megabyte() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&proxying(up.addr, ""));
    assert_eq!(status(addr(&gw), &with_length("/", 1 << 20)).await, 200);
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 1048577\r\n\r\n";
    assert_eq!(status(addr(&gw), head).await, 413);
}

/// nginx with `client_max_body_size 1k`, proxying `/` to `up` and answering `= /answer`
/// itself.
fn nginx_config(dir: &std::path::Path, port: u16, up: SocketAddr) -> String {
    let tmp = dir.join("tmp");
    let tmp = tmp.display();
    format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {dir}/nginx.pid;\n\
         events {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {tmp};\n  proxy_temp_path {tmp};\n\
         fastcgi_temp_path {tmp};\n  uwsgi_temp_path {tmp};\n  scgi_temp_path {tmp};\n\
         client_max_body_size 1k;\n\
         server {{\n    listen 127.0.0.1:{port};\n\
         location / {{\n      proxy_pass http://{up};\n      proxy_http_version 1.1;\n\
         proxy_set_header Connection \"\";\n    }}\n\
         location = /answer {{\n      return 204;\n    }}\n  }}\n}}\n",
        dir = dir.display()
    )
}

#[tokio::test]
async fn body_limit_matches_nginx_for_declared_lengths() {
    let _shared = support::shared();
    if !support::nginx::available("the nginx comparison of client_max_body_size") {
        return;
    }
    let up = RawUpstream::ok().await;
    let up_addr = up.addr;
    let nginx = support::nginx::Nginx::start(
        move |dir: &std::path::Path, port: u16| nginx_config(dir, port, up_addr),
        &[],
    );
    let toml = format!(
        "{}[[location]]\nmatch = \"= /answer\"\nreturn = {{ status = 204 }}\n",
        proxying(up.addr, r#"client_max_body_size = "1k""#)
    );
    let gw = gateway(&toml);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("no body", with_length("/", 0), 200),
        ("1 byte", with_length("/", 1), 200),
        ("1023 bytes", with_length("/", 1023), 200),
        ("exactly 1k", with_length("/", 1024), 200),
        ("1k + 1", with_length("/", 1025), 413),
        ("64k", with_length("/", 64 * 1024), 413),
        ("return, 1k", with_length("/answer", 1024), 204),
        ("return, 1k + 1", with_length("/answer", 1025), 413),
        ("chunked 1k", chunked(1024, 300), 200),
        ("chunked 1k + 1", chunked(1025, 300), 413),
    ];
    let mut report = String::new();
    for (name, raw, expected) in &cases {
        let theirs = status(nginx.addr, raw).await;
        let ours = status(addr(&gw), raw).await;
        if theirs != *expected || ours != theirs {
            report.push_str(&format!(
                "{name}: nginx {theirs}, tollgate {ours}, expected {expected}\n"
            ));
        }
    }
    assert!(report.is_empty(), "{report}{}", nginx.error_log());
}

#[tokio::test]
async fn a_413_is_logged_and_counted_like_any_answer() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let toml = proxying(up.addr, r#"client_max_body_size = "1k""#).replace(
        "[log]\naccess = \"off\"",
        &format!(
            "[log]\naccess = \"{}\"\n[admin]\nlisten = \"127.0.0.1:0\"",
            log.display()
        ),
    );
    let gw = gateway(&toml);
    assert_eq!(status(addr(&gw), &with_length("/", 1025)).await, 413);
    let lines = support::log_lines(&log, 1).await;
    assert!(lines[0].contains("\"POST / HTTP/1.1\" 413 "), "{lines:?}");
    let admin = gw.admin_addr().expect("admin configured");
    let series = "tollgate_requests_total{site=\"-\",location=\"/\",status=\"413\"} 1";
    let reply = within(5, support::send(admin, support::get("/metrics"))).await;
    assert!(reply.body.contains(series), "{}", reply.body);
}

/// A gateway limiting bodies to 64k and streaming them all (`client_body_buffer_size =
/// 0`, `request_buffering = "off"`), proxying `/` to `early` and `/ok/` to `ok`, logging to `log`, with an admin port.
fn early_config(early: SocketAddr, ok: SocketAddr, log: &std::path::Path) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
client_max_body_size = "64k"
client_body_buffer_size = 0
request_buffering = "off"
[log]
access = "{}"
[admin]
listen = "127.0.0.1:0"
[upstreams.early]
servers = ["{early}"]
[upstreams.ok]
servers = ["{ok}"]
[[location]]
match = "/"
upstream = "early"
[[location]]
match = "/ok/"
upstream = "ok"
"#,
        log.display()
    )
}

/// Reads a response head from `client`: its status and the bytes read past it.
async fn read_head(client: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(len)) = resp.parse(&buf) {
            return (resp.code.unwrap_or(0), buf[len..].to_vec());
        }
        let n = client.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before a response head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `n` bytes of body as one chunk.
fn chunk(n: usize) -> Vec<u8> {
    let mut raw = format!("{n:x}\r\n").into_bytes();
    raw.resize(raw.len() + n, b'c');
    raw.extend_from_slice(b"\r\n");
    raw
}

/// The request is logged and counted once, as the `200` it was answered with.
async fn logged_and_counted(gw: &tollgate::Gateway, log: &std::path::Path, request: &str) {
    let lines = support::log_lines(log, 1).await;
    assert!(
        lines[0].contains(&format!("\"{request}\" 200 ")),
        "{lines:?}"
    );
    let admin = gw.admin_addr().expect("admin configured");
    let series = "tollgate_requests_total{site=\"-\",location=\"/\",status=\"200\"} 1";
    let reply = within(5, support::send(admin, support::get("/metrics"))).await;
    assert!(reply.body.contains(series), "{}", reply.body);
}

/// nginx 1.22 (`proxy_request_buffering off`) does the same: the response is cut off, the
/// connection closed, the request logged with the 200 it was sent.
#[tokio::test]
async fn a_chunked_body_growing_past_the_limit_after_the_response_began_closes_the_connection() {
    let _shared = support::shared();
    let (early, ok) = (EarlyUpstream::start().await, RawUpstream::ok().await);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&early_config(early.addr, ok.addr, &log));
    let limit = 64 * 1024;
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    let mut raw =
        b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    raw.extend_from_slice(&chunk(1000));
    client.write_all(&raw).await.unwrap();
    // The upstream's answer reaches the client while the body is still coming.
    let (status, mut rest) = within(5, read_head(&mut client)).await;
    assert_eq!(status, 200);
    // Then the body goes on past the limit (and would end cleanly).
    let mut more = Vec::new();
    for _ in 0..10 {
        more.extend_from_slice(&chunk(8000));
    }
    more.extend_from_slice(b"0\r\n\r\n");
    let _ = tokio::time::timeout(Duration::from_secs(5), client.write_all(&more)).await;
    // The connection is closed, the response cut off without its last chunk.
    let mut tail = [0u8; 4096];
    let closed = within(5, async {
        loop {
            match client.read(&mut tail).await {
                Ok(0) | Err(_) => return,
                Ok(n) => rest.extend_from_slice(&tail[..n]),
            }
        }
    });
    closed.await;
    assert!(!rest.ends_with(b"0\r\n\r\n"), "the response ended cleanly");
    let got = early_body_bytes(&early).await;
    assert!(got <= limit, "the upstream got {got} bytes of body");
    assert!(got > 0, "nothing of the body streamed to the upstream");
    // The gateway serves on.
    let reply = within(5, support::get_text(addr(&gw), "/ok/")).await;
    assert_eq!(reply.status, 200);
    logged_and_counted(&gw, &log, "POST / HTTP/1.1").await;
}

#[tokio::test]
async fn an_http2_body_growing_past_the_limit_after_the_response_began_resets_the_stream() {
    let _shared = support::shared();
    let (early, ok) = (EarlyUpstream::start().await, RawUpstream::ok().await);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&early_config(early.addr, ok.addr, &log));
    let limit = 64 * 1024;
    let stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    // DATA frames without a length, sent as the test says.
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        let data = rx.recv().await?;
        Some((Ok::<_, hyper::Error>(hyper::body::Frame::data(data)), rx))
    });
    tx.send(Bytes::from(vec![b'h'; 1000])).await.unwrap();
    let request = h2_post(StreamBody::new(frames).boxed());
    let response = within(5, sender.send_request(request)).await.unwrap();
    // The upstream's answer reaches the client while the body is still coming.
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let first = within(5, body.frame()).await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "early");
    // Then the body goes on past the limit: the stream is reset.
    for _ in 0..10 {
        tx.send(Bytes::from(vec![b'h'; 8000])).await.unwrap();
    }
    let rest = within(5, body.collect()).await;
    let reset = rest.err().and_then(|err| {
        let cause = std::error::Error::source(&err)?;
        cause.downcast_ref::<h2::Error>()?.reason()
    });
    // RST_STREAM INTERNAL_ERROR, as nginx 1.22 resets it too.
    assert_eq!(
        reset,
        Some(h2::Reason::INTERNAL_ERROR),
        "the stream was not reset"
    );
    drop(tx);
    let got = early_body_bytes(&early).await;
    assert!(got <= limit, "the upstream got {got} bytes of body");
    assert!(got > 0, "nothing of the body streamed to the upstream");
    // Only the stream: the connection serves on.
    let get = http::Request::get("http://example.test/ok/")
        .body(support::empty())
        .unwrap();
    within(5, sender.ready()).await.unwrap();
    let reply = within(5, sender.send_request(get)).await.unwrap();
    assert_eq!(reply.status(), 200);
    logged_and_counted(&gw, &log, "POST / HTTP/2.0").await;
}

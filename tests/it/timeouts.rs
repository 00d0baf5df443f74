//! Client-side limits: header timeout (408), header size (431), keep-alive and body
//! timeouts, all through the real gateway with a raw TCP client.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::raw::read_response;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn config(up: SocketAddr) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
client_header_timeout = "300ms"
client_body_timeout = "300ms"
keepalive_timeout = "400ms"
max_header_bytes = "4k"
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
"#
    )
}

/// Reads until EOF (3 s of silence fail the test); returns what arrived, how long the
/// close took, and how long the connection was quiet before it closed.
async fn read_to_close(stream: &mut TcpStream) -> (String, Duration, Duration) {
    let start = Instant::now();
    let mut last = start;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(3), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buf[..n]);
                last = Instant::now();
            }
            Err(_) => panic!("connection not closed within 3 s"),
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    (text, start.elapsed(), last.elapsed())
}

#[tokio::test]
async fn half_sent_header_gets_408_and_close() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\nX-Slow: ")
        .await
        .unwrap();
    let (response, took, _) = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response:?}");
    // Timed from after the client's own connect and write: the server's 300 ms began
    // earlier, by as much as a busy machine delays the client.
    assert!(
        took >= Duration::from_millis(150),
        "closed too early: {took:?}"
    );
    assert_eq!(up.count(), 0);
}

#[tokio::test]
async fn silent_connection_is_closed_without_a_response() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let (response, took, _) = read_to_close(&mut stream).await;
    assert_eq!(response, "");
    // Timed from after the client's own connect: the server's 300 ms began earlier, by
    // as much as a busy machine delays the client.
    assert!(
        took >= Duration::from_millis(150),
        "closed too early: {took:?}"
    );
}

#[tokio::test]
async fn idle_keepalive_connection_is_closed_after_keepalive_timeout() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let reply = read_response(&mut stream).await.expect("a response");
    assert_eq!(reply.status, 200);
    // The connection stays usable for a second request within the keep-alive time.
    tokio::time::sleep(Duration::from_millis(150)).await;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let reply = read_response(&mut stream).await.expect("a response");
    assert_eq!(reply.status, 200);
    let (rest, took, _) = read_to_close(&mut stream).await;
    assert_eq!(rest, "", "no 408 for an idle connection");
    // The server's 400 ms began as it sent the answer, before the client read it.
    assert!(
        took >= Duration::from_millis(250),
        "closed too early: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "closed too late: {took:?}"
    );
}

#[tokio::test]
async fn header_larger_than_max_header_bytes_gets_431() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let big = "a".repeat(6000);
    let request = format!("GET / HTTP/1.1\r\nHost: example.test\r\nX-Big: {big}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let (response, _, _) = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 431"), "{response:?}");
    assert_eq!(up.count(), 0);
}

#[tokio::test]
async fn header_within_max_header_bytes_passes() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let req = http::Request::get("/")
        .header("host", "example.test")
        .header("x-big", "a".repeat(3000))
        .body(empty())
        .unwrap();
    assert_eq!(within(5, send(addr(&gw), req)).await.status, 200);
}

#[tokio::test]
async fn stalled_request_body_gets_408() {
    let _shared = support::shared();
    let up = Upstream::start(|req| async move {
        use http_body_util::BodyExt;
        match req.into_body().collect().await {
            Ok(_) => text(200, "got it"),
            Err(_) => text(400, "broken body"),
        }
    })
    .await;
    let gw = gateway(&config(up.addr));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100\r\n\r\nonly a part",
        )
        .await
        .unwrap();
    let (response, took, _) = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response:?}");
    // As above: the server's 300 ms began before the client's clock.
    assert!(took >= Duration::from_millis(150), "{took:?}");
}

#[tokio::test]
async fn slow_but_steady_body_is_not_cut_off() {
    let _shared = support::shared();
    let up = Upstream::start(|req| async move {
        use http_body_util::BodyExt;
        let n = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes().len())
            .unwrap_or(0);
        text(200, &n.to_string())
    })
    .await;
    // With no floor on the average rate (client_body_min_rate, tested in slow_clients.rs),
    // only the pause between reads counts.
    let config = config(up.addr).replace("[server]\n", "[server]\nclient_body_min_rate = 0\n");
    let gw = gateway(&config);
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n")
        .await
        .unwrap();
    // 10 bytes over ~1 s: longer than client_body_timeout in total, never between reads.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(b"x").await.unwrap();
    }
    let mut buf = [0u8; 4096];
    let n = within(3, stream.read(&mut buf)).await.unwrap();
    let response = String::from_utf8_lossy(&buf[..n]);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("10"), "{response}");
}

#[tokio::test]
async fn http2_header_list_is_bounded_too() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("http://example.test/")
        .header("x-big", "a".repeat(6000))
        .body(empty())
        .unwrap();
    let response = within(5, sender.send_request(req))
        .await
        .expect("an answer, not a reset");
    assert_eq!(response.status(), 431);
    assert_eq!(up.count(), 0);
}

/// A burst of pipelined requests, each answered at once, then silence: the keep-alive
/// timer still ends the connection. The bursts (60 to 300 requests, each on its own
/// connection) go past the 128 operations a task may do in one poll (tokio's budget); the
/// unit test in `server/timeouts.rs` pins the timer poll that budget refuses.
#[tokio::test]
async fn a_burst_of_answers_leaves_the_keepalive_timer_armed() {
    let _shared = support::shared();
    let gw = gateway(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
keepalive_timeout = "400ms"
[log]
access = "off"
[[location]]
match = "/"
return = { status = 204 }
"#,
    );
    let addr = addr(&gw);
    let bursts = (60..=300).map(|n| {
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let one = "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n";
            stream.write_all(one.repeat(n).as_bytes()).await.unwrap();
            let (answers, _, quiet) = read_to_close(&mut stream).await;
            assert_eq!(answers.matches("HTTP/1.1 204").count(), n);
            (n, quiet)
        })
    });
    for burst in bursts.collect::<Vec<_>>() {
        let (n, quiet) = within(10, burst).await.unwrap();
        assert!(
            quiet < Duration::from_millis(1500),
            "{n}: closed {quiet:?} after the last answer"
        );
    }
}

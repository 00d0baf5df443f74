//! `client_body_timeout`, `send_timeout`, `read_timeout` and `connect_timeout` set on a
//! site or a location: the chosen location's value is the one in force, its site's
//! when it has none, else the server's or the upstream group's. Short timeouts against
//! defaults far longer, so that the one in force shows in when the answer comes.

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::raw::RawUpstream;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A site with `site_keys` in front of `up` (`servers` item `server`): `/own` sets
/// `own_keys`, `/` sets nothing.
fn config(server: &str, site_keys: &str, own_keys: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{server}"]
[[site]]
{site_keys}
[[site.location]]
match = "/"
upstream = "app"
[[site.location]]
match = "/own"
upstream = "app"
{own_keys}
"#
    )
}

/// An upstream that answers 200 after `delay`.
async fn slow(delay: Duration) -> Upstream {
    Upstream::start(move |_req| async move {
        tokio::time::sleep(delay).await;
        text(200, "late")
    })
    .await
}

/// The status of a GET of `path` and how long it took.
async fn timed_get(gw: &tollgate::Gateway, path: &str) -> (u16, Duration) {
    let started = Instant::now();
    let reply = within(10, send(addr(gw), get(path))).await;
    (reply.status.as_u16(), started.elapsed())
}

#[tokio::test]
async fn a_locations_read_timeout_replaces_its_groups() {
    let _shared = support::shared();
    let up = slow(Duration::from_millis(1200)).await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        "",
        r#"read_timeout = "200ms""#,
    ));
    let (status, took) = timed_get(&gw, "/own").await;
    assert_eq!(status, 504);
    assert!(took < Duration::from_millis(1000), "{took:?}");
    // The group's 60 s elsewhere.
    assert_eq!(timed_get(&gw, "/").await.0, 200);
}

#[tokio::test]
async fn a_sites_read_timeout_holds_in_its_locations_unless_they_set_their_own() {
    let _shared = support::shared();
    let up = slow(Duration::from_millis(1200)).await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        r#"read_timeout = "200ms""#,
        r#"read_timeout = "5s""#,
    ));
    let (status, took) = timed_get(&gw, "/").await;
    assert_eq!(status, 504);
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_eq!(timed_get(&gw, "/own").await.0, 200);
}

#[tokio::test]
async fn a_locations_connect_timeout_replaces_its_groups() {
    let _shared = support::shared();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    // Accepts and never answers the ClientHello: the TLS handshake stalls.
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let upstream = format!("https://{up}");
    let toml = config(&upstream, "", r#"connect_timeout = "300ms""#).replace(
        "[[site]]",
        "connect_timeout = \"8s\"\nmax_fails = 0\n[[site]]",
    );
    let gw = gateway(&toml);
    let (status, took) = timed_get(&gw, "/own").await;
    assert_eq!(status, 504);
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The group's 8 s elsewhere: still connecting when the own one has long given up.
    let stalled = tokio::time::timeout(Duration::from_millis(1500), timed_get(&gw, "/")).await;
    assert!(
        stalled.is_err(),
        "answered within the group's connect_timeout"
    );
    task.abort();
}

/// A POST to `path` whose body stops after a part: what came back, and when.
async fn stalled_body(gw: &tollgate::Gateway, path: &str, wait: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(addr(gw)).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100\r\n\r\nonly a part"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Ok(Err(_)) => Some(String::new()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_locations_client_body_timeout_replaces_the_servers() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        "",
        r#"client_body_timeout = "300ms""#,
    ));
    let started = Instant::now();
    let answer = stalled_body(&gw, "/own", Duration::from_secs(5)).await;
    let answer = answer.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The server's 60 s elsewhere.
    let answer = stalled_body(&gw, "/", Duration::from_millis(1200)).await;
    assert_eq!(answer, None);
}

/// An upstream answering every request with 32 MiB, far more than the socket buffers
/// between it and a client that does not read.
async fn big_upstream() -> RawUpstream {
    RawUpstream::start(|_| {
        let body = vec![b'x'; 32 << 20];
        let mut reply =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        reply.extend_from_slice(&body);
        reply
    })
    .await
}

/// Waits until the upstream has seen a connection closed; `None` if none within `wait`.
async fn closed_within(up: &RawUpstream, wait: Duration) -> Option<Duration> {
    let start = Instant::now();
    while up.closed() == 0 {
        if start.elapsed() > wait {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Some(start.elapsed())
}

#[tokio::test]
async fn a_locations_send_timeout_cuts_an_http1_client_that_stops_reading() {
    let _shared = support::shared();
    let up = big_upstream().await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        r#"send_timeout = "400ms""#,
        "",
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(b"GET /own HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let took = closed_within(&up, Duration::from_secs(5)).await;
    let took = took.expect("cut off within 5 s (the server's is 60 s)");
    assert!(
        took >= Duration::from_millis(300),
        "cut too early: {took:?}"
    );
    assert!(support::raw::closes(&mut client).await);
}

#[tokio::test]
async fn a_locations_send_timeout_resets_an_http2_stream_whose_window_stays_shut() {
    let _shared = support::shared();
    let up = big_upstream().await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        "",
        r#"send_timeout = "400ms""#,
    ));
    let stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(stream)
        .await
        .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get("http://example.test/own")
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = within(5, response).await.expect("response head");
    assert_eq!(response.status(), 200);
    let took = closed_within(&up, Duration::from_secs(5)).await;
    let took = took.expect("reset within 5 s (the server's is 60 s)");
    assert!(
        took >= Duration::from_millis(300),
        "cut too early: {took:?}"
    );
    let mut body = response.into_body();
    let end = within(5, body.data()).await;
    let err = end.expect("the stream ends").expect_err("with a reset");
    assert_eq!(err.reason(), Some(h2::Reason::CANCEL), "{err}");
}

#[tokio::test]
async fn without_a_send_timeout_of_its_own_a_location_keeps_the_servers() {
    let _shared = support::shared();
    let up = big_upstream().await;
    let gw = gateway(&config(
        &up.addr.to_string(),
        "",
        r#"send_timeout = "300ms""#,
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(closed_within(&up, Duration::from_millis(1200)).await, None);
}

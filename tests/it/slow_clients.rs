//! Clients that hold on without doing their part: one that stops reading its response
//! (HTTP/1.1, and HTTP/2 with a shut flow-control window) is cut off after
//! `send_timeout` and its upstream connection dropped; a slow upload is buffered whole
//! before any upstream connection is made (in memory here; past the buffer, in a file:
//! `request_buffering.rs`), and a body trickled below `client_body_min_rate` ends in 408.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::raw::{read_response, RawUpstream};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn config(up: SocketAddr, extra_server: &str) -> String {
    proxying(up, extra_server)
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

/// Waits until the upstream has seen `n` of its connections closed; how long it took.
async fn upstream_closed(up: &RawUpstream, n: usize, within: Duration) -> Duration {
    let start = Instant::now();
    while up.closed() < n {
        assert!(
            start.elapsed() < within,
            "upstream connections closed: {} of {n}",
            up.closed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn an_http1_client_that_stops_reading_is_cut_off_after_send_timeout() {
    let _shared = support::shared();
    let up = big_upstream().await;
    let gw = gateway(&config(up.addr, r#"send_timeout = "400ms""#));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
            .await
            .unwrap();
        clients.push(client);
    }
    let took = upstream_closed(&up, 3, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(300),
        "cut too early: {took:?}"
    );
    assert_eq!(up.accepted(), 3);
    // The client connections are gone too: what is left to read ends.
    for mut client in clients {
        assert!(support::raw::closes(&mut client).await);
    }
}

#[tokio::test]
async fn an_http1_client_that_reads_slowly_but_steadily_is_served_whole() {
    let _shared = support::shared();
    let up = RawUpstream::start(|_| {
        let body = vec![b'y'; 4 << 20];
        let mut reply =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        reply.extend_from_slice(&body);
        reply
    })
    .await;
    let gw = gateway(&config(up.addr, r#"send_timeout = "500ms""#));
    // A small receive window, so that the 4 MiB take many of the client's pauses.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(128 << 10).unwrap();
    let mut client = socket.connect(addr(&gw)).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    // Pauses shorter than send_timeout, for far longer than send_timeout in all; after
    // each, what has arrived is read, up to 256 KiB.
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    while total < (4 << 20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        within(5, client.readable()).await.unwrap();
        let before = total;
        while total - before < (256 << 10) {
            match client.try_read(&mut buf[..256 << 10]) {
                Ok(0) => panic!("closed after {total} bytes"),
                Ok(n) => total += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) => panic!("{err} after {total} bytes"),
            }
        }
    }
    assert!(
        start.elapsed() > Duration::from_millis(750),
        "{:?}",
        start.elapsed()
    );
}

/// An HTTP/2 client over prior knowledge whose streams get a window of 0 bytes.
async fn shut_window_client(gw: &tollgate::Gateway) -> h2::client::SendRequest<Bytes> {
    let stream = TcpStream::connect(addr(gw)).await.unwrap();
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake(stream)
        .await
        .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

fn h2_get() -> http::Request<()> {
    http::Request::get("http://example.test/").body(()).unwrap()
}

#[tokio::test]
async fn an_http2_stream_whose_window_stays_shut_is_reset_after_send_timeout() {
    let _shared = support::shared();
    let up = big_upstream().await;
    let gw = gateway(&config(up.addr, r#"send_timeout = "400ms""#));
    let mut client = shut_window_client(&gw).await;
    let mut bodies = Vec::new();
    for _ in 0..3 {
        client = client.ready().await.unwrap();
        let (response, _) = client.send_request(h2_get(), true).unwrap();
        let response = within(5, response).await.expect("response head");
        assert_eq!(response.status(), 200);
        bodies.push(response.into_body());
    }
    let took = upstream_closed(&up, 3, Duration::from_secs(5)).await;
    assert!(
        took >= Duration::from_millis(300),
        "cut too early: {took:?}"
    );
    for mut body in bodies {
        let end = within(5, body.data()).await;
        let err = end.expect("the stream ends").expect_err("with a reset");
        assert_eq!(err.reason(), Some(h2::Reason::CANCEL), "{err}");
    }
    // The connection itself goes on serving.
    let (response, _) = client.send_request(h2_get(), true).unwrap();
    assert_eq!(within(5, response).await.unwrap().status(), 200);
}

#[tokio::test]
async fn an_http2_stream_waiting_on_a_slow_upstream_is_not_cut_off() {
    let _shared = support::shared();
    // The upstream pauses longer than send_timeout between its two halves.
    let up = Upstream::start(|_req| async {
        let (tx, body) = tokio::sync::mpsc::channel::<Bytes>(2);
        tokio::spawn(async move {
            let _ = tx.send(Bytes::from_static(b"first ")).await;
            tokio::time::sleep(Duration::from_millis(800)).await;
            let _ = tx.send(Bytes::from_static(b"second")).await;
        });
        let stream = futures_util::stream::unfold(body, |mut rx| async move {
            let chunk = rx.recv().await?;
            Some((Ok::<_, hyper::Error>(hyper::body::Frame::data(chunk)), rx))
        });
        let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(stream));
        http::Response::new(body)
    })
    .await;
    let gw = gateway(&config(up.addr, r#"send_timeout = "300ms""#));
    let reply = within(5, send_h2(addr(&gw), get("/"))).await;
    assert_eq!(
        (reply.status.as_u16(), reply.body.as_str()),
        (200, "first second")
    );
    let reply = within(5, send(addr(&gw), get("/"))).await;
    assert_eq!(
        (reply.status.as_u16(), reply.body.as_str()),
        (200, "first second")
    );
}

#[tokio::test]
async fn a_slow_small_upload_reaches_no_upstream_until_it_is_complete() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let mut uploads = Vec::new();
    for _ in 0..20 {
        let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
        client
            .write_all(b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 10\r\n\r\n12345")
            .await
            .unwrap();
        uploads.push(client);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        up.accepted(),
        0,
        "an upstream connection was opened for a partial body"
    );
    for client in &mut uploads {
        client.write_all(b"67890").await.unwrap();
    }
    for client in &mut uploads {
        let reply = read_response(client).await.expect("a response");
        assert_eq!(reply.status, 200);
    }
    assert_eq!(up.requests(), 20);
    // Sent whole, with its length: the upstream saw no chunked framing.
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.contains("content-length: 10\r\n"), "{seen}");
    assert!(seen.contains("\r\n\r\n1234567890"), "{seen}");
}

#[tokio::test]
async fn a_chunked_upload_within_the_buffer_is_sent_with_its_length() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(
            b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 200);
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.contains("content-length: 7\r\n\r\nabcdefg"), "{seen}");
    assert!(!seen.contains("transfer-encoding"), "{seen}");
}

#[tokio::test]
async fn without_request_buffering_a_body_larger_than_the_buffer_streams_to_the_upstream() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(
        up.addr,
        r#"client_body_buffer_size = "1k"
request_buffering = "off""#,
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 3000\r\n\r\n";
    client.write_all(head).await.unwrap();
    client.write_all(&[b'z'; 2000]).await.unwrap();
    // Past the buffer: the upstream gets the head and what came so far.
    let start = Instant::now();
    while up.accepted() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no upstream connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.write_all(&[b'z'; 1000]).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 200);
    assert_eq!(up.requests(), 1);
}

#[tokio::test]
async fn a_body_trickled_below_the_minimum_rate_ends_in_408() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(
        up.addr,
        r#"client_body_timeout = "300ms"
client_body_min_rate = "100""#,
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100000\r\n\r\n")
        .await
        .unwrap();
    // One byte every 100 ms: never a pause of client_body_timeout, but 10 bytes/s.
    let start = Instant::now();
    let reply = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if client.write_all(b"x").await.is_err() || start.elapsed() > Duration::from_secs(4) {
            break read_response(&mut client).await;
        }
        let mut probe = [0u8; 1];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(1), client.peek(&mut probe)).await
        {
            if n > 0 {
                break read_response(&mut client).await;
            }
        }
    };
    let reply = reply.expect("a response");
    assert_eq!(reply.status, 408, "{reply:?}");
    let took = start.elapsed();
    // Byte N is due 300 ms + N/100 s after the head: at 10 bytes/s it falls behind
    // after about 0.33 s.
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(
        up.accepted(),
        0,
        "a trickled body below the buffer size reached the upstream"
    );
}

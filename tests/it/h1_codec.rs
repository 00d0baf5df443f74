//! tollgate's own HTTP/1.1 codec (`server/h1`), driven with raw bytes through the real
//! gateway: pipelined requests, HTTP/1.0's keep-alive rules, bodies that must not be sent,
//! answers whose length is unknown, chunked uploads cut across writes, and a client that
//! goes away while its request waits on the upstream.

use crate::support;

use std::time::Duration;

use support::raw::{closes, ok_response, read_response, RawUpstream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An upstream serving each connection it accepts with `serve`.
async fn upstream<F, Fut>(serve: F) -> std::net::SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

/// Reads until a whole head is in (and what came with it); `false` if the peer closed first.
async fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return false,
        }
    }
    true
}

/// An upstream that answers every connection's first request with `response`, then
/// closes it (the end of a body without a length).
async fn closing_upstream(response: &'static [u8]) -> std::net::SocketAddr {
    upstream(move |mut stream| async move {
        if read_head(&mut stream).await {
            let _ = stream.write_all(response).await;
        }
    })
    .await
}

/// A gateway in front of an upstream that answers `200 ok` to everything.
async fn ok_gateway() -> (RawUpstream, tollgate::Gateway) {
    let up = RawUpstream::ok().await;
    let gw = support::gateway(&support::proxying(up.addr, ""));
    (up, gw)
}

/// Sends `GET /` on `client` and expects its 200.
async fn get_ok(client: &mut TcpStream) {
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(client).await.expect("an answer").status, 200);
}

async fn connect(gw: &tollgate::Gateway) -> TcpStream {
    TcpStream::connect(support::addr(gw)).await.unwrap()
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_each_forwarded_once() {
    let _shared = support::shared();
    let up = RawUpstream::start(|head| {
        let line = String::from_utf8_lossy(head);
        let path = line.split(' ').nth(1).unwrap_or("?").to_string();
        ok_response(&path)
    })
    .await;
    let gw = support::gateway(&support::proxying(up.addr, ""));
    let mut client = connect(&gw).await;
    let mut raw = Vec::new();
    for path in ["/a", "/b", "/c"] {
        raw.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    client.write_all(&raw).await.unwrap();
    for path in ["/a", "/b", "/c"] {
        let reply = read_response(&mut client).await.expect("an answer");
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (200, path),
            "{}",
            reply.head
        );
    }
    assert_eq!(up.requests(), 3);
}

#[tokio::test]
async fn http10_closes_unless_it_asks_for_keep_alive() {
    let _shared = support::shared();
    let (_up, gw) = ok_gateway().await;
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.0\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let reply = read_response(&mut client).await.expect("an answer");
    assert!(
        reply.head.starts_with("HTTP/1.0 200 OK\r\n"),
        "{}",
        reply.head
    );
    assert!(
        closes(&mut client).await,
        "HTTP/1.0 without keep-alive closes"
    );

    let mut client = connect(&gw).await;
    let ask = b"GET / HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n";
    for _ in 0..2 {
        client.write_all(ask).await.unwrap();
        let reply = read_response(&mut client).await.expect("an answer");
        assert!(
            reply.head.starts_with("HTTP/1.0 200 OK\r\n"),
            "{}",
            reply.head
        );
        assert!(
            reply
                .head
                .to_ascii_lowercase()
                .contains("connection: keep-alive\r\n"),
            "{}",
            reply.head
        );
    }
}

#[tokio::test]
async fn a_head_request_gets_the_length_and_no_body() {
    let _shared = support::shared();
    let up = RawUpstream::start(|head| match head.starts_with(b"HEAD") {
        true => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec(),
        false => ok_response("next"),
    })
    .await;
    let gw = support::gateway(&support::proxying(up.addr, ""));
    let mut client = connect(&gw).await;
    let ask = b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\nGET /next HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    client.write_all(ask).await.unwrap();
    let mut all = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut all));
    read.await.unwrap().unwrap();
    let all = String::from_utf8_lossy(&all).to_ascii_lowercase();
    // The HEAD's answer says 5 and sends nothing, so the next answer follows its head at once.
    let (first, rest) = all.split_once("\r\n\r\n").unwrap();
    assert!(first.contains("content-length: 5"), "{all}");
    assert!(rest.starts_with("http/1.1 200 ok\r\n"), "{all}");
    assert!(rest.ends_with("\r\n\r\nnext"), "{all}");
}

#[tokio::test]
async fn an_answer_of_unknown_length_is_chunked_for_http11_and_closes_http10() {
    let _shared = support::shared();
    let up = closing_upstream(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end").await;
    let gw = support::gateway(&support::proxying(up, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    client.read_to_end(&mut all).await.unwrap();
    let all = String::from_utf8_lossy(&all).to_ascii_lowercase();
    assert!(all.contains("transfer-encoding: chunked\r\n"), "{all}");
    assert!(
        all.ends_with("\r\n\r\nd\r\nuntil the end\r\n0\r\n\r\n"),
        "{all}"
    );

    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut all));
    read.await
        .expect("the connection closes to end the body")
        .unwrap();
    let all = String::from_utf8_lossy(&all).to_ascii_lowercase();
    assert!(
        !all.contains("chunked") && !all.contains("keep-alive"),
        "{all}"
    );
    assert!(all.ends_with("\r\n\r\nuntil the end"), "{all}");
}

#[tokio::test]
async fn a_chunked_upload_cut_anywhere_arrives_whole() {
    let _shared = support::shared();
    let (up, gw) = ok_gateway().await;
    let mut client = connect(&gw).await;
    let raw = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
                5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
    // One byte per write, each after a pause: every cut the decoder can meet.
    client.set_nodelay(true).unwrap();
    for byte in raw {
        client.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let reply = read_response(&mut client).await.expect("an answer");
    assert_eq!(reply.status, 200);
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.ends_with("\r\n\r\nhello, world"), "{seen}");
    assert!(seen.contains("content-length: 12\r\n"), "{seen}");
}

#[tokio::test]
async fn a_client_that_goes_away_ends_its_request_upstream() {
    let _shared = support::shared();
    // An upstream that never answers: the request waits until the client leaves.
    let up = RawUpstream::start(|_| Vec::new()).await;
    let gw = support::gateway(&support::proxying(up.addr, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let waited = tokio::time::Instant::now() + Duration::from_secs(5);
    while up.requests() == 0 && tokio::time::Instant::now() < waited {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(up.requests(), 1);
    drop(client);
    while up.closed() == 0 && tokio::time::Instant::now() < waited {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        up.closed(),
        1,
        "the upstream connection of the abandoned request closed"
    );
}

#[tokio::test]
async fn a_head_over_max_header_bytes_gets_431_and_a_request_line_over_max_uri_bytes_414() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = support::gateway(&support::proxying(
        up.addr,
        "max_header_bytes = \"2k\"\nmax_uri_bytes = \"1k\"",
    ));
    let mut client = connect(&gw).await;
    let big = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(4000)
    );
    let _ = client.write_all(big.as_bytes()).await;
    let reply = read_response(&mut client).await.expect("an answer");
    assert_eq!(reply.status, 431, "{}", reply.head);
    assert!(closes(&mut client).await);
    // Told before the head ends: the line alone is too long.
    let mut client = connect(&gw).await;
    let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(1100));
    client.write_all(long.as_bytes()).await.unwrap();
    let reply = read_response(&mut client).await.expect("an answer");
    assert_eq!(reply.status, 414, "{}", reply.head);
    assert_eq!(up.accepted(), 0);
}

#[tokio::test]
async fn an_answer_that_leaves_the_body_unread_says_close_and_lingers() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let toml = support::proxying(up.addr, "").replace(
        "[[location]]\nmatch = \"/\"\nupstream = \"app\"\n",
        "[zones.one]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\nlimit = [{ zone = \"one\" }]\n",
    );
    assert!(toml.contains("limit = "), "{toml}");
    let gw = support::gateway(&toml);
    let mut client = connect(&gw).await;
    get_ok(&mut client).await;
    // A body announced and only begun: the 429 leaves it unread.
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n";
    client.write_all(head).await.unwrap();
    client.write_all(&[b'x'; 64 * 1024]).await.unwrap();
    let reply = read_response(&mut client).await.expect("an answer");
    assert_eq!(reply.status, 429);
    assert!(
        reply
            .head
            .to_ascii_lowercase()
            .contains("connection: close\r\n"),
        "{}",
        reply.head
    );
    // The client goes on sending for a while and is not reset meanwhile.
    for _ in 0..8 {
        if client.write_all(&[b'x'; 16 * 1024]).await.is_err() {
            break;
        }
    }
    assert!(closes(&mut client).await);
    assert_eq!(up.requests(), 1);
}

#[tokio::test]
async fn broken_chunk_framing_behind_an_answer_that_reads_no_body_ends_only_its_connection() {
    let _shared = support::shared();
    let (_up, gw) = ok_gateway().await;
    for broken in [
        &b"1\r\nx\r\nZZ\r\n"[..],
        b"5\r\nhello\r\nZZ\r\nGET / HTTP/1.1\r\n\r\n",
    ] {
        let mut client = connect(&gw).await;
        // No Host: a 400 that reads no body, then the body's framing breaks.
        let mut raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        raw.extend_from_slice(broken);
        client.write_all(&raw).await.unwrap();
        let reply = read_response(&mut client).await.expect("an answer");
        assert_eq!(reply.status, 400, "{}", reply.head);
        assert!(closes(&mut client).await);
    }
    // The worker still serves.
    let mut client = connect(&gw).await;
    get_ok(&mut client).await;
}

#[tokio::test]
async fn an_answer_before_the_body_is_all_read_says_close() {
    let _shared = support::shared();
    // Answers as soon as a head is in, then reads (and drops) whatever follows.
    let addr = upstream(|mut stream| async move {
        if read_head(&mut stream).await {
            let early = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly";
            let _ = stream.write_all(early).await;
            let mut buf = [0u8; 4096];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
    })
    .await;
    // Streamed: with the body read whole first, the upstream would see it all.
    let gw = support::gateway(&support::proxying(addr, "request_buffering = \"off\""));
    let mut client = connect(&gw).await;
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 40000\r\n\r\n";
    client.write_all(head).await.unwrap();
    client.write_all(&[b'x'; 20000]).await.unwrap();
    let reply = read_response(&mut client).await.expect("an answer");
    assert_eq!((reply.status, reply.body.as_str()), (200, "early"));
    assert!(
        reply
            .head
            .to_ascii_lowercase()
            .contains("connection: close\r\n"),
        "{}",
        reply.head
    );
    assert!(closes(&mut client).await);
}

#[tokio::test]
async fn an_upstream_length_beside_its_transfer_coding_does_not_reach_the_client() {
    let _shared = support::shared();
    let up = RawUpstream::start(|_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            .to_vec()
    })
    .await;
    let gw = support::gateway(&support::proxying(up.addr, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut all));
    read.await.unwrap().unwrap();
    let all = String::from_utf8_lossy(&all).to_ascii_lowercase();
    assert!(all.starts_with("http/1.1 200 ok\r\n"), "{all}");
    assert!(!all.contains("content-length: 5"), "{all}");
    assert!(all.ends_with("\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), "{all}");
}

#[tokio::test]
async fn a_head_begun_while_the_last_request_was_in_flight_is_held_to_the_header_timeout() {
    let _shared = support::shared();
    // Answers each request 300 ms after its head, and says when one is in.
    let arrived = std::sync::Arc::new(tokio::sync::Notify::new());
    let heard = arrived.clone();
    let addr = upstream(move |mut stream| {
        let heard = heard.clone();
        async move {
            let mut buf = [0u8; 4096];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {
                heard.notify_one();
                tokio::time::sleep(Duration::from_millis(300)).await;
                if stream.write_all(&ok_response("slow")).await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    let server = "client_header_timeout = \"1s\"\nkeepalive_timeout = \"60s\"";
    let gw = support::gateway(&support::proxying(addr, server));
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    support::within(5, arrived.notified()).await;
    // The start of the next head, while the first request waits on the upstream.
    client.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    let first = read_response(&mut client).await.expect("an answer");
    assert_eq!(first.body, "slow");
    let started = tokio::time::Instant::now();
    let second = read_response(&mut client).await.expect("the 408");
    assert_eq!(second.status, 408);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

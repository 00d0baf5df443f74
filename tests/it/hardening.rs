//! The edge against hostile clients, with raw bytes through the real gateway: upgrades
//! that would tunnel past the rules, spoofing header names, hosts and targets, and the
//! statuses nginx gives to what it refuses.

use crate::support;

use std::net::SocketAddr;

use support::raw::{ok_response, read_response, RawUpstream};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// `/` proxied, and `/secret` denied to everyone.
fn config(up: SocketAddr, extra_server: &str) -> String {
    proxying(up, extra_server)
        + "[[location]]\nmatch = \"/secret\"\nupstream = \"app\"\naccess = [\"deny all\"]\n"
}

async fn connect(gw: &tollgate::Gateway) -> TcpStream {
    TcpStream::connect(addr(gw)).await.unwrap()
}

/// An upstream that speaks h2c when asked: it answers `Upgrade: h2c` with 101 and then
/// serves whatever comes on that connection (here: every request, `secret` included).
async fn h2c_upstream() -> RawUpstream {
    RawUpstream::start(|head| {
        let head = String::from_utf8_lossy(head).to_ascii_lowercase();
        if head.contains("upgrade: h2c") {
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                .to_vec()
        } else if head.starts_with("get /secret") {
            ok_response("the secret")
        } else {
            ok_response("plain")
        }
    })
    .await
}

#[tokio::test]
async fn an_h2c_upgrade_is_not_forwarded_and_deny_all_still_holds_after_it() {
    let _shared = support::shared();
    let up = h2c_upstream().await;
    let gw = gateway(&config(up.addr, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
              Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
        )
        .await
        .unwrap();
    let first = read_response(&mut client).await.expect("a response");
    assert_eq!((first.status, first.body.as_str()), (200, "plain"));
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(!seen.contains("upgrade"), "forwarded: {seen}");
    assert!(!seen.contains("http2-settings"), "forwarded: {seen}");

    client
        .write_all(b"GET /secret HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let second = read_response(&mut client).await.expect("a response");
    assert_eq!(second.status, 403, "{second:?}");
    assert_eq!(up.requests(), 1);
}

#[tokio::test]
async fn a_101_to_a_request_that_did_not_ask_for_websocket_is_a_502() {
    let _shared = support::shared();
    let up = RawUpstream::start(|_| {
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".to_vec()
    })
    .await;
    let gw = gateway(&config(up.addr, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 502);
    client
        .write_all(b"GET /secret HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    let second = read_response(&mut client).await.expect("a response");
    assert_eq!(second.status, 403);
}

#[tokio::test]
async fn a_websocket_handshake_answered_with_another_protocol_is_a_502() {
    let _shared = support::shared();
    let up = RawUpstream::start(|_| {
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".to_vec()
    })
    .await;
    let gw = gateway(&config(up.addr, ""));
    let mut client = connect(&gw).await;
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\n\
              Upgrade: websocket, h2c\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 502, "{reply:?}");
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.contains("upgrade: websocket\r\n"), "{seen}");
}

/// Sends `raw` on a new connection and reads one response.
async fn exchange(gw: &tollgate::Gateway, raw: &[u8]) -> support::raw::RawResponse {
    let mut client = connect(gw).await;
    client.write_all(raw).await.unwrap();
    read_response(&mut client).await.expect("a response")
}

#[tokio::test]
async fn header_names_with_underscores_never_reach_the_upstream() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let reply = exchange(
        &gw,
        b"GET / HTTP/1.1\r\nHost: example.test\r\nX_Forwarded_For: 6.6.6.6\r\n\
          X-Forwarded-For: 7.7.7.7\r\nX_Api_Key: k\r\nX.Dotted: 1\r\nX-Fine: 1\r\n\r\n",
    )
    .await;
    assert_eq!(reply.status, 200);
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(!seen.contains("x_forwarded_for"), "{seen}");
    assert!(!seen.contains("x_api_key"), "{seen}");
    assert!(!seen.contains("6.6.6.6"), "{seen}");
    assert!(!seen.contains("x.dotted"), "{seen}");
    assert!(seen.contains("x-fine: 1"), "{seen}");
    // The client is not a trusted proxy: its own X-Forwarded-For is replaced too.
    assert!(seen.contains("x-forwarded-for: 127.0.0.1\r\n"), "{seen}");
}

#[tokio::test]
async fn underscores_in_headers_passes_them_on_when_switched_on() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, "underscores_in_headers = true"));
    let reply = exchange(
        &gw,
        b"GET / HTTP/1.1\r\nHost: example.test\r\nX_Custom: 1\r\nX.Dotted: 1\r\n\r\n",
    )
    .await;
    assert_eq!(reply.status, 200);
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.contains("x_custom: 1"), "{seen}");
    assert!(!seen.contains("x.dotted"), "{seen}");
}

#[tokio::test]
async fn an_invalid_host_is_a_400_and_closes() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    for host in [&b"a b/c"[..], b"a\x01b", b"a:8x", b"a..b", b"", b"user@a"] {
        let mut raw = b"GET / HTTP/1.1\r\nHost: ".to_vec();
        raw.extend_from_slice(host);
        raw.extend_from_slice(b"\r\n\r\n");
        let mut client = connect(&gw).await;
        client.write_all(&raw).await.unwrap();
        let reply = read_response(&mut client).await.expect("a response");
        assert_eq!(reply.status, 400, "{:?}", String::from_utf8_lossy(host));
        assert!(support::raw::closes(&mut client).await);
    }
    assert_eq!(up.requests(), 0);
}

#[tokio::test]
async fn an_absolute_form_target_names_the_host_for_limits_and_the_upstream() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let toml = format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[zones.per_host]
key = "$host"
rate = "1r/m"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
upstream = "app"
limit = [{{ zone = "per_host" }}]
"#,
        up.addr
    );
    let gw = gateway(&toml);
    let to = |host: &str| {
        format!("GET http://{host}/x HTTP/1.1\r\nHost: same.example\r\n\r\n").into_bytes()
    };
    assert_eq!(exchange(&gw, &to("one.example")).await.status, 200);
    assert_eq!(exchange(&gw, &to("two.example:8080")).await.status, 200);
    assert_eq!(exchange(&gw, &to("one.example")).await.status, 429);
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    assert!(seen.starts_with("get /x http/1.1\r\n"), "{seen}");
    assert!(seen.contains("host: two.example:8080\r\n"), "{seen}");
    assert!(
        seen.contains("x-forwarded-host: two.example:8080\r\n"),
        "{seen}"
    );
    assert!(!seen.contains("same.example"), "{seen}");
}

#[tokio::test]
async fn a_path_that_decodes_to_no_utf8_is_routed_and_forwarded_as_sent() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let reply = exchange(&gw, b"GET /%ff%fe HTTP/1.1\r\nHost: example.test\r\n\r\n").await;
    assert_eq!(reply.status, 200);
    let seen = String::from_utf8_lossy(&up.bytes()).into_owned();
    assert!(seen.starts_with("GET /%ff%fe HTTP/1.1\r\n"), "{seen}");
    let denied = exchange(
        &gw,
        b"GET /secret/%ff HTTP/1.1\r\nHost: example.test\r\n\r\n",
    )
    .await;
    assert_eq!(denied.status, 403);
}

#[tokio::test]
async fn a_uri_longer_than_max_uri_bytes_is_414_and_never_forwarded() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let mut long = b"GET /".to_vec();
    long.extend(std::iter::repeat_n(b'a', 100 * 1024));
    long.extend_from_slice(b" HTTP/1.1\r\nHost: example.test\r\n\r\n");
    let mut client = connect(&gw).await;
    // The gateway answers before it has read everything: the write may fail late.
    let _ = client.write_all(&long).await;
    let reply = read_response(&mut client)
        .await
        .expect("a 414 before the close");
    assert_eq!((reply.status, reply.body.as_str()), (414, ""));
    assert_eq!(up.requests(), 0);

    let mut fits = b"GET /".to_vec();
    fits.extend(std::iter::repeat_n(b'a', 8000));
    fits.extend_from_slice(b" HTTP/1.1\r\nHost: example.test\r\n\r\n");
    assert_eq!(exchange(&gw, &fits).await.status, 200);
}

#[tokio::test]
async fn max_headers_bounds_the_count_with_a_documented_default_of_256() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let with = |n: usize| {
        let mut raw = b"GET / HTTP/1.1\r\nHost: example.test\r\n".to_vec();
        for i in 1..n {
            raw.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        raw
    };
    assert_eq!(exchange(&gw, &with(200)).await.status, 200);
    assert_eq!(exchange(&gw, &with(256)).await.status, 200);
    assert_eq!(exchange(&gw, &with(257)).await.status, 431);

    let gw = gateway(&config(up.addr, "max_headers = 20"));
    assert_eq!(exchange(&gw, &with(20)).await.status, 200);
    assert_eq!(exchange(&gw, &with(21)).await.status, 431);
}

#[tokio::test]
async fn trace_and_connect_are_405_and_never_forwarded() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let trace = exchange(&gw, b"TRACE / HTTP/1.1\r\nHost: example.test\r\n\r\n").await;
    assert_eq!(trace.status, 405);
    let connect = exchange(
        &gw,
        b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n",
    )
    .await;
    assert_eq!(connect.status, 405);
    assert_eq!(up.requests(), 0);
}

/// Every frame the gateway sends before it closes: (type, stream, payload).
async fn frames_until_close(client: &mut TcpStream) -> Vec<(u8, u32, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    within(5, client.read_to_end(&mut bytes)).await.unwrap();
    let mut frames = Vec::new();
    let mut rest = &bytes[..];
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        let payload = rest.get(9..9 + len).expect("whole frames").to_vec();
        frames.push((rest[3], stream, payload));
        rest = &rest[9 + len..];
    }
    assert!(rest.is_empty(), "trailing bytes {rest:?} in {bytes:?}");
    frames
}

#[tokio::test]
async fn a_broken_http2_preface_gets_goaway_protocol_error() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let magic = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let first_frame = |header: [u8; 9]| [magic.clone(), header.to_vec()].concat();
    let cases = [
        (
            "a broken magic",
            b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".to_vec(),
        ),
        ("a PING first", first_frame([0, 0, 0, 6, 0, 0, 0, 0, 0])),
        (
            "SETTINGS on stream 1",
            first_frame([0, 0, 0, 4, 0, 0, 0, 0, 1]),
        ),
        ("a SETTINGS ack", first_frame([0, 0, 0, 4, 1, 0, 0, 0, 0])),
        ("garbage", first_frame([0xff; 9])),
    ];
    for (what, bytes) in cases {
        let mut client = connect(&gw).await;
        client.write_all(&bytes).await.unwrap();
        let frames = frames_until_close(&mut client).await;
        let goaway = frames.iter().find(|(kind, _, _)| *kind == 7);
        let Some((_, 0, payload)) = goaway else {
            panic!("{what}: no GOAWAY on stream 0 in {frames:?}");
        };
        assert_eq!(payload[4..8], [0, 0, 0, 1], "{what}: not PROTOCOL_ERROR");
        assert_eq!(
            frames[0].0, 4,
            "{what}: the server preface (SETTINGS) comes first"
        );
    }
    assert_eq!(up.accepted(), 0);
    // A good preface is served.
    let reply = within(5, send_h2(addr(&gw), get("/"))).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_long_body_line_on_a_kept_alive_connection_is_no_request_line() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, ""));
    let mut client = connect(&gw).await;
    // 20,000 bytes with no line end, in reads of their own: were they taken for a head,
    // they would be a 414.
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 20000\r\n\r\n";
    for _ in 0..2 {
        client.write_all(head).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        client.write_all(&[b'a'; 20_000]).await.unwrap();
        let reply = read_response(&mut client).await.expect("a response");
        assert_eq!(reply.status, 200);
    }
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        read_response(&mut client).await.expect("a response").status,
        200
    );
    assert_eq!(up.requests(), 3);
}

/// A 413 for a declared body the client goes on sending: the connection ends with a
/// lingering close, as nginx's. The answer is sent and the write side shut, then what
/// the client still sends is read and dropped, so its upload meets no reset (a reset
/// can destroy an answer not yet read) and it sees the answer and a clean end.
#[tokio::test]
async fn a_refusal_before_the_body_is_read_lingers_while_the_client_sends() {
    use tokio::io::AsyncReadExt;
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr, "client_max_body_size = \"1k\""));
    let mut stream = connect(&gw).await;
    let head = b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1000000\r\n\r\n";
    stream.write_all(head).await.unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    while !received.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = within(5, stream.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed before the answer");
        received.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&received).into_owned();
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    // The answer is out and the gateway has closed its side; the upload goes on.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    for _ in 0..8 {
        let sent = stream.write_all(&[b'x'; 64 * 1024]).await;
        assert!(sent.is_ok(), "the upload met a reset: {sent:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stream.shutdown().await.unwrap();
    let end = within(5, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(err) => return Err(err),
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the connection was reset: {end:?}");
    assert_eq!(up.count(), 0);
}

/// RFC 9113 §8.1.1: an HTTP/2 request whose DATA run past its `content-length` is
/// malformed, a stream error. The upstream must never get it as a complete request: the
/// body's last declared byte is held until the client ends the stream, so that the
/// excess (here 5 more bytes, 300 ms later) resets the stream instead of the first five
/// being answered as a whole request.
#[tokio::test]
async fn an_http2_body_longer_than_its_content_length_never_reaches_the_upstream_whole() {
    let _shared = support::shared();
    // Streamed (`client_body_buffer_size = 0`, no request buffering) and buffered.
    for server in [
        "client_body_buffer_size = 0\nrequest_buffering = \"off\"",
        "",
    ] {
        excess_data_is_reset(server).await;
    }
}

async fn excess_data_is_reset(server: &str) {
    use tokio::io::AsyncReadExt;
    let up = RawUpstream::ok().await;
    let gw = gateway(&proxying(up.addr, server));
    let mut client = connect(&gw).await;
    // POST, http, /, :authority a.test, content-length 5 (literals without indexing).
    let block = [
        &[0x83, 0x86, 0x84, 0x01, 6][..],
        b"a.test",
        &[0x0f, 0x0d, 1],
        b"5",
    ]
    .concat();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(0x4, 0, 0, &[]));
    hello.extend(h2_frame(0x1, 0x4, 1, &block));
    hello.extend(h2_frame(0x0, 0, 1, b"hello"));
    client.write_all(&hello).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(up.requests(), 0, "the upstream got the request whole");
    client
        .write_all(&h2_frame(0x0, 0x1, 1, b"world"))
        .await
        .unwrap();
    let mut bytes = Vec::new();
    let reset = within(5, async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = client.read(&mut chunk).await.unwrap_or(0);
            bytes.extend_from_slice(&chunk[..n]);
            // RST_STREAM (type 3) on stream 1 with PROTOCOL_ERROR (1).
            let wanted = [&[0, 0, 4, 3, 0, 0, 0, 0, 1][..], &[0, 0, 0, 1]].concat();
            if n == 0 || bytes.windows(wanted.len()).any(|w| w == wanted) {
                return n > 0;
            }
        }
    })
    .await;
    assert!(reset, "no RST_STREAM PROTOCOL_ERROR in {bytes:?}");
    assert_eq!(up.requests(), 0);
}

//! Forwarding through the real gateway: bodies, forwarded headers, hop-by-hop.

use crate::support;

use support::raw::{read_response, RawUpstream};
use support::*;

fn config(up: std::net::SocketAddr) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "= /demo"
return = {{ status = 200, body = "hello from tollgate\n" }}
"#
    )
}

#[tokio::test]
async fn get_is_forwarded_and_answered() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let reply = within(5, get_text(addr(&gw), "/hello?x=1")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok from app");
    let seen = up.last();
    assert_eq!(seen.uri, "/hello?x=1");
    assert_eq!(seen.headers["host"], "example.test");
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen.headers["x-real-ip"], "127.0.0.1");
    assert_eq!(seen.headers["x-forwarded-proto"], "http");
    assert_eq!(seen.headers["x-forwarded-host"], "example.test");
}

#[tokio::test]
async fn return_location_answers_without_upstream() {
    let _shared = support::shared();
    let gw = gateway(&config(closed_port()));
    let reply = within(5, get_text(addr(&gw), "/demo")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "hello from tollgate\n");
}

fn trusted_config(up: std::net::SocketAddr, recursive: bool) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.0/8", "10.0.0.0/8"]
header = "X-Forwarded-For"
recursive = {recursive}
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

#[tokio::test]
async fn spoofed_forwarded_for_from_untrusted_peer_is_replaced() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let req = http::Request::get("/")
        .header("host", "example.test")
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-real-ip", "6.6.6.6")
        .header("x-forwarded-proto", "https")
        .body(empty())
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 200);
    let seen = up.last();
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen.headers["x-real-ip"], "127.0.0.1");
    assert_eq!(seen.headers["x-forwarded-proto"], "http");
}

#[tokio::test]
async fn trusted_proxy_chain_resolves_the_client_and_is_extended() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&trusted_config(up.addr, true));
    let req = http::Request::get("/")
        .header("host", "example.test")
        .header("x-forwarded-for", "203.0.113.9, 10.1.2.3")
        .body(empty())
        .unwrap();
    within(5, send(addr(&gw), req)).await;
    let seen = up.last();
    // 10.1.2.3 is trusted, so the walk from the right stops at 203.0.113.9.
    assert_eq!(seen.headers["x-real-ip"], "203.0.113.9");
    assert_eq!(
        seen.headers["x-forwarded-for"],
        "203.0.113.9, 10.1.2.3, 127.0.0.1"
    );
}

#[tokio::test]
async fn without_recursion_the_rightmost_address_is_the_client() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&trusted_config(up.addr, false));
    let req = http::Request::get("/")
        .header("host", "example.test")
        .header("x-forwarded-for", "203.0.113.9, 10.1.2.3")
        .body(empty())
        .unwrap();
    within(5, send(addr(&gw), req)).await;
    assert_eq!(up.last().headers["x-real-ip"], "10.1.2.3");
}

#[tokio::test]
async fn hop_by_hop_headers_are_stripped_both_ways() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        let mut response = text(200, "ok");
        let h = response.headers_mut();
        h.insert("connection", "x-secret-hop".parse().unwrap());
        h.insert("x-secret-hop", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-end-to-end", "kept".parse().unwrap());
        response
    })
    .await;
    let gw = gateway(&config(up.addr));
    let req = http::Request::get("/")
        .header("host", "example.test")
        .header("connection", "keep-alive, x-client-hop")
        .header("x-client-hop", "1")
        .header("keep-alive", "timeout=5")
        .header("proxy-connection", "keep-alive")
        .header("te", "trailers")
        .header("x-end-to-end", "kept")
        .body(empty())
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    let seen = up.last();
    for name in ["x-client-hop", "keep-alive", "proxy-connection", "te"] {
        assert!(
            !seen.headers.contains_key(name),
            "{name} reached the upstream"
        );
    }
    assert_eq!(seen.headers["x-end-to-end"], "kept");
    assert!(!reply.headers.contains_key("x-secret-hop"));
    assert!(!reply.headers.contains_key("keep-alive"));
    assert_eq!(reply.headers["x-end-to-end"], "kept");
}

/// The same through raw bytes, in the cases a client and an upstream may write names in:
/// nothing hop-by-hop, and none of the client's forwarding headers, gets through.
#[tokio::test]
async fn hop_by_hop_and_forwarding_headers_in_any_case_are_taken_out_of_raw_bytes() {
    use tokio::io::AsyncWriteExt;
    let _shared = support::shared();
    let up = RawUpstream::start(|_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCONNECTION: X-Secret\r\nX-Secret: 1\r\n\
          KEEP-ALIVE: timeout=5\r\nTrailer: x-sum\r\nX-End: kept\r\n\r\nok"
            .to_vec()
    })
    .await;
    let gw = gateway(&config(up.addr));
    let mut client = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: example.test\r\n\
              CONNECTION: Keep-Alive, X-Client-Hop, X-FORWARDED-HOST\r\nX-Client-Hop: 1\r\n\
              Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n\
              HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nUpgrade: h2c\r\n\
              X-FORWARDED-FOR: 6.6.6.6\r\nx-real-ip: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n\
              X-Forwarded-Host: evil.test\r\nX-End: kept\r\n\r\n",
        )
        .await
        .unwrap();
    let reply = within(5, read_response(&mut client))
        .await
        .expect("an answer");
    assert_eq!(reply.status, 200);
    let reply_head = reply.head.to_ascii_lowercase();
    for name in ["x-secret", "keep-alive", "trailer"] {
        assert!(
            !reply_head.contains(&format!("\n{name}:")),
            "{name} reached the client"
        );
    }
    assert!(reply_head.contains("\nx-end: kept"));
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    for name in [
        "connection",
        "x-client-hop",
        "keep-alive",
        "proxy-connection",
        "te",
        "http2-settings",
        "upgrade",
    ] {
        assert!(
            !seen.contains(&format!("\n{name}:")),
            "{name} reached the upstream"
        );
    }
    for (name, value) in [
        ("x-forwarded-for", "127.0.0.1"),
        ("x-real-ip", "127.0.0.1"),
        ("x-forwarded-proto", "http"),
        ("x-forwarded-host", "example.test"),
    ] {
        assert_eq!(
            seen.matches(&format!("\n{name}:")).count(),
            1,
            "{name} once: {seen}"
        );
        assert!(
            seen.contains(&format!("\n{name}: {value}\r")),
            "{name}: {seen}"
        );
    }
    assert!(seen.contains("\nx-end: kept"));
}

#[tokio::test]
async fn request_and_response_bodies_stream_through() {
    let _shared = support::shared();
    use http_body_util::BodyExt;
    let up = Upstream::start(|req| async move {
        // Echo the body back as it arrives.
        let (_, body) = req.into_parts();
        let mut response = http::Response::new(body.boxed());
        *response.status_mut() = http::StatusCode::CREATED;
        response
    })
    .await;
    let gw = gateway(&config(up.addr));
    let payload = "x".repeat(300_000);
    let req = http::Request::post("/upload")
        .header("host", "example.test")
        .body(full(payload.clone()))
        .unwrap();
    let reply = within(10, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.body.len(), payload.len());
    assert_eq!(up.last().headers["content-length"], "300000");
}

#[tokio::test]
async fn chunked_request_framing_is_rebuilt_not_copied() {
    let _shared = support::shared();
    let up = Upstream::start(|req| async move {
        use http_body_util::BodyExt;
        let n = req.into_body().collect().await.unwrap().to_bytes().len();
        text(200, &n.to_string())
    })
    .await;
    let gw = gateway(&config(up.addr));
    // A raw chunked request: the upstream must see a well-framed body of 11 bytes.
    let raw = "POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let response = within(5, raw_exchange(addr(&gw), raw.as_bytes())).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("11"), "{response}");
    let seen = up.last();
    let te = seen
        .headers
        .get("transfer-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(te.as_deref() == Some("chunked") || seen.headers.contains_key("content-length"));
}

/// Writes raw bytes, reads until the server closes or 2 s pass.
async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(std::time::Duration::from_millis(500), stream.read(&mut buf))
            .await
        {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn http2_request_reaches_an_http1_upstream() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let req = http::Request::get("http://example.test/h2?q=1")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .body(empty())
        .unwrap();
    let reply = within(5, send_h2(addr(&gw), req)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.version, http::Version::HTTP_2);
    assert_eq!(reply.body, "ok from app");
    let seen = up.last();
    assert_eq!(seen.version, http::Version::HTTP_11);
    assert_eq!(seen.uri, "/h2?q=1");
    assert_eq!(seen.headers["host"], "example.test");
    assert_eq!(seen.headers["cookie"], "a=1; b=2");
}

#[tokio::test]
async fn unknown_path_is_404_and_bad_path_is_400() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let toml = format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
[log]
access = "off"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/api/"
upstream = "app"
"#,
        up.addr
    );
    let gw = gateway(&toml);
    assert_eq!(within(5, get_text(addr(&gw), "/other")).await.status, 404);
    assert_eq!(
        within(5, get_text(addr(&gw), "/api/../../etc"))
            .await
            .status,
        400
    );
    assert_eq!(
        within(5, get_text(addr(&gw), "/api/%2e%2e/x")).await.status,
        404
    );
    assert_eq!(within(5, get_text(addr(&gw), "/api/x")).await.status, 200);
    assert_eq!(up.count(), 1);
}

#[tokio::test]
async fn every_listen_address_serves_ipv4_and_ipv6() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0", "[::1]:0"]
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
    let (v4, v6) = (gw.local_addrs()[0], gw.local_addrs()[1]);
    assert!(v4.is_ipv4() && v6.is_ipv6());
    assert_eq!(within(5, get_text(v4, "/")).await.status, 200);
    assert_eq!(up.last().headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(within(5, get_text(v6, "/")).await.status, 200);
    assert_eq!(up.last().headers["x-forwarded-for"], "::1");
    let h2 = http::Request::get(format!("http://[::1]:{}/", v6.port()))
        .body(empty())
        .unwrap();
    assert_eq!(within(5, send_h2(v6, h2)).await.status, 200);
}

#[tokio::test]
async fn keepalive_connection_carries_many_requests() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    for i in 0..20 {
        sender.ready().await.unwrap();
        let response = within(5, sender.send_request(get(&format!("/n/{i}"))))
            .await
            .unwrap();
        let reply = read(response).await;
        assert_eq!(reply.status, 200);
    }
    assert_eq!(up.count(), 20);
}

#[tokio::test]
async fn missing_or_duplicate_host_is_400_as_nginx() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let none = raw_exchange(addr(&gw), b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(none.starts_with("HTTP/1.1 400"), "{none}");
    let two = raw_exchange(
        addr(&gw),
        b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
    )
    .await;
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    let http10 = raw_exchange(addr(&gw), b"GET / HTTP/1.0\r\n\r\n").await;
    assert!(
        http10.starts_with("HTTP/1.0 200") || http10.starts_with("HTTP/1.1 200"),
        "{http10}"
    );
    assert_eq!(up.count(), 1);
}

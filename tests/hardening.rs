//! The edge against hostile clients, with raw bytes through the real gateway: upgrades
//! that would tunnel past the rules, spoofing header names, hosts and targets, and the
//! statuses nginx gives to what it refuses.

mod support;

use std::net::SocketAddr;

use support::raw::{ok_response, read_response, RawUpstream};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn config(up: SocketAddr, extra_server: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
{extra_server}
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "/secret"
upstream = "app"
access = ["deny all"]
"#
    )
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

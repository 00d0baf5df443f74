//! WebSocket upgrades are tunnelled through the gateway.

use crate::support;

use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use support::*;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// An upstream that accepts WebSocket upgrades and echoes every message back.
async fn echo_upstream() -> Upstream {
    Upstream::start(|mut req| async move {
        let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
            return text(400, "not a websocket");
        };
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let upgraded = upgrade.await.expect("upstream side upgraded");
            let mut ws =
                WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
            while let Some(Ok(message)) = ws.next().await {
                if message.is_close() {
                    break;
                }
                if ws.send(message).await.is_err() {
                    break;
                }
            }
        });
        let mut response = text(101, "");
        let h = response.headers_mut();
        h.insert("upgrade", "websocket".parse().unwrap());
        h.insert("connection", "upgrade".parse().unwrap());
        h.insert(
            "sec-websocket-accept",
            derive_accept_key(key.as_bytes()).parse().unwrap(),
        );
        *response.body_mut() = empty();
        response
    })
    .await
}

/// A WebSocket on `/ws` through the gateway, its handshake answered 101.
async fn open_ws(
    gw: &tollgate::Gateway,
) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect(addr(gw)).await.unwrap();
    let url = format!("ws://{}/ws", addr(gw));
    let (ws, response) = within(5, tokio_tungstenite::client_async(url, stream))
        .await
        .expect("websocket handshake through the gateway");
    assert_eq!(response.status(), 101);
    ws
}

#[tokio::test]
async fn websocket_echo_through_the_gateway() {
    let _shared = support::shared();
    let up = echo_upstream().await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/ws"
upstream = "app"
"#,
        up.addr
    ));
    let mut ws = open_ws(&gw).await;
    for i in 0..5 {
        let sent = format!("message {i}");
        within(5, ws.send(Message::text(sent.clone())))
            .await
            .unwrap();
        let echoed = within(5, ws.next()).await.unwrap().unwrap();
        assert_eq!(echoed.into_text().unwrap().as_str(), sent);
    }
    let big = vec![7u8; 200_000];
    within(5, ws.send(Message::binary(big.clone())))
        .await
        .unwrap();
    let echoed = within(5, ws.next()).await.unwrap().unwrap();
    assert_eq!(echoed.into_data().as_ref(), &big[..]);
    within(5, ws.close(None)).await.unwrap();
    assert_eq!(up.last().headers["upgrade"], "websocket");
}

#[tokio::test]
async fn an_open_tunnel_counts_as_a_request_in_flight() {
    let _shared = support::shared();
    let up = echo_upstream().await;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[zones.conns]
key = "$binary_remote_addr"
algorithm = "concurrency"
max = 1
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "conns" }}]
upstream = "app"
"#,
        up.addr
    ));
    let mut ws = open_ws(&gw).await;
    within(5, ws.send(Message::text("hi"))).await.unwrap();
    within(5, ws.next()).await.unwrap().unwrap();
    // The tunnel is open: the client's one slot is taken.
    assert_eq!(get_text(addr(&gw), "/ws").await.status, 429);
    within(5, ws.close(None)).await.unwrap();
    drop(ws);
    // Closed: the slot is given back (the tunnel ends a moment after the close).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let status = get_text(addr(&gw), "/ws").await.status;
        if status == 400 {
            break; // the upstream answered: not a websocket request
        }
        assert_eq!(status, 429);
        assert!(
            std::time::Instant::now() < deadline,
            "the tunnel kept its slot"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

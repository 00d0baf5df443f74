//! Keep-alive: reusing a connection, and noticing one the server has closed.

use std::time::Duration;

use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[tokio::test]
async fn two_sequential_requests_share_one_connection() {
    let (addr, server) = server(|mut stream| async move {
        let first = read_request(&mut stream).await;
        write_split(
            &mut stream,
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfi", b"rst"],
        )
        .await;
        let second = read_request(&mut stream).await;
        write_split(
            &mut stream,
            &[b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n"],
        )
        .await;
        let _ = stream.read(&mut [0u8; 1]).await;
        (first.head, second.head)
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/one")).await;
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"first");
    let mut conn = response.body_mut().take_reusable().unwrap();
    assert!(conn.is_reusable());
    let mut response = exchange(conn, get("/two")).await;
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"second");
    let mut conn = response.body_mut().take_reusable().unwrap();
    assert!(conn.is_reusable());
    drop(conn);
    let (first, second) = server.await.unwrap();
    assert!(first.starts_with("GET /one "));
    assert!(second.starts_with("GET /two "));
}

#[tokio::test]
async fn idle_connection_closed_by_the_server_is_not_reusable() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        // Keep-alive timeout on the server side.
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    let mut conn = response.body_mut().take_reusable().unwrap();
    until_not_reusable(&mut conn).await;
    // And sending on it anyway gives the request back untouched.
    match conn.send(get("/again"), LONG, None).await {
        Err(SendError::Unsent(req, _)) => assert_eq!(req.uri(), "/again"),
        other => panic!("expected Unsent, got {other:?}"),
    }
}

#[tokio::test]
async fn unsolicited_bytes_on_an_idle_connection_forbid_reuse() {
    let (idle, idle_now) = tokio::sync::oneshot::channel::<()>();
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        // Once the exchange is over and the connection idle.
        let _ = idle_now.await;
        stream
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    let mut conn = response.body_mut().take_reusable().unwrap();
    let _ = idle.send(());
    until_not_reusable(&mut conn).await;
}

#[tokio::test]
async fn reset_connection_returns_the_request_unsent_with_its_body_untouched() {
    let (addr, server) = server(|stream| async move {
        // An abortive close: the client's next write fails at once.
        socket2::SockRef::from(&stream)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(stream);
    })
    .await;
    let conn = connect(addr).await;
    server.await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let body = TestBody::ready(vec![Bytes::from("payload")], Some(7));
    let req = Request::post("/retry-me").body(body).unwrap();
    match conn.send(req, LONG, None).await {
        Err(SendError::Unsent(req, _)) => {
            assert_eq!(req.uri(), "/retry-me");
            let mut body = req.into_body();
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap(), "payload");
        }
        other => panic!("expected Unsent, got {other:?}"),
    }
}

#[tokio::test]
async fn fresh_connection_is_reusable_before_its_first_request() {
    let (addr, _server) = answering(&[b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]).await;
    let mut conn = connect(addr).await;
    assert!(conn.is_reusable());
    let mut response = exchange(conn, get("/")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"ok");
}

#[tokio::test]
async fn write_failure_before_any_byte_returns_the_request_unsent() {
    let (addr, _server) = server(|mut stream| async move {
        let _ = stream.read(&mut [0u8; 64]).await;
    })
    .await;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Our own write side is shut: the first write fails while reads would still wait.
    socket2::SockRef::from(&stream)
        .shutdown(std::net::Shutdown::Write)
        .unwrap();
    match UpstreamConn::new(stream)
        .send(get("/first"), LONG, None)
        .await
    {
        Err(SendError::Unsent(req, err)) => {
            assert_eq!(req.uri(), "/first");
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
        }
        other => panic!("expected Unsent, got {other:?}"),
    }
}

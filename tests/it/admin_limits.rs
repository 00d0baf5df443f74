//! What bounds the admin API's connections: `[server]`'s header and keep-alive timeouts,
//! and `[admin] max_connections`. Raw bytes, so that nothing but the gateway closes.

use crate::support;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::raw::{closes, read_response};
use support::*;

fn config(admin: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
client_header_timeout = "500ms"
keepalive_timeout = "700ms"
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
{admin}
[[location]]
match = "/"
return = {{ status = 200 }}
"#
    )
}

/// Everything the gateway sends until it closes; panics after 5 s.
async fn until_closed(stream: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the admin API kept the connection 5 s"),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

#[tokio::test]
async fn a_partial_head_to_the_admin_api_gets_408_at_client_header_timeout() {
    let _shared = support::shared();
    let gw = gateway(&config(""));
    let admin = gw.admin_addr().expect("admin configured");
    let mut partial = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(admin).await.unwrap();
        stream
            .write_all(b"GET /status HTTP/1.1\r\nHost: admin\r\n")
            .await
            .unwrap();
        partial.push(stream);
    }
    for stream in &mut partial {
        let (said, after) = until_closed(stream).await;
        assert!(said.starts_with("HTTP/1.1 408 "), "{said:?}");
        assert!(after < Duration::from_secs(2), "closed after {after:?}");
    }
    // A connection that says nothing is closed too, at the same limit.
    let mut silent = TcpStream::connect(admin).await.unwrap();
    let (said, _) = until_closed(&mut silent).await;
    assert_eq!(said, "");
}

#[tokio::test]
async fn an_idle_admin_connection_is_closed_at_keepalive_timeout() {
    let _shared = support::shared();
    let gw = gateway(&config(""));
    let admin = gw.admin_addr().expect("admin configured");
    let mut stream = TcpStream::connect(admin).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
        .await
        .unwrap();
    let answer = read_response(&mut stream).await.expect("an answer");
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
    let (said, after) = until_closed(&mut stream).await;
    assert_eq!(said, "");
    assert!(after < Duration::from_secs(2), "closed after {after:?}");
}

#[tokio::test]
async fn admin_connections_beyond_max_connections_are_closed_at_once() {
    let _shared = support::shared();
    let gw = gateway(&config("max_connections = 4"));
    let admin = gw.admin_addr().expect("admin configured");
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(admin).await.unwrap());
    }
    // Accepted in order: the four are in before the fifth.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut fifth = TcpStream::connect(admin).await.unwrap();
    let start = Instant::now();
    assert!(closes(&mut fifth).await, "the fifth was kept");
    assert!(start.elapsed() < Duration::from_millis(400));
    // The four held are served; once one closes, a new one is.
    let first = &mut held[0];
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(first).await.map(|a| a.status), Some(200));
    drop(held.remove(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let healthz = within(5, send(admin, get("/healthz"))).await;
    assert_eq!(healthz.status, 200);
    assert_eq!(within(5, get_text(addr(&gw), "/")).await.status, 200);
}

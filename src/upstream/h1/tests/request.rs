//! Writing requests: framing of bodies, early responses, failing client bodies.

use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Reads a chunked body from `stream` (after `already`), strictly, to the last chunk.
async fn read_chunked(stream: &mut TcpStream, already: Vec<u8>) -> Vec<u8> {
    let mut wire = already;
    let mut buf = [0u8; 4096];
    while !wire.ends_with(b"0\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "EOF inside the chunked body");
        wire.extend_from_slice(&buf[..n]);
    }
    let mut body = Vec::new();
    let mut rest = &wire[..];
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            assert_eq!(rest, b"\r\n");
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n");
        rest = &rest[size + 2..];
    }
}

#[tokio::test]
async fn unknown_length_body_is_sent_chunked_and_arrives_intact() {
    let (addr, server) = server(|mut stream| async move {
        let req = read_request(&mut stream).await;
        let body = read_chunked(&mut stream, req.rest).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
        (req.head, body)
    })
    .await;
    let (tx, body) = TestBody::channel(4, None);
    let feeder = tokio::spawn(async move {
        for piece in ["first ", "", "second ", "third"] {
            tx.send(Ok(Bytes::from(piece))).await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let req = Request::post("/upload").body(body).unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.body_mut().take_reusable().is_some());
    feeder.await.unwrap();
    let (head, body) = server.await.unwrap();
    assert_eq!(
        head,
        "POST /upload HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(body, b"first second third");
}

#[tokio::test]
async fn known_length_body_goes_with_content_length_right_behind_the_head() {
    let (addr, server) = server(|mut stream| async move {
        let mut req = read_request(&mut stream).await;
        while req.rest.len() < 10 {
            let mut buf = [0u8; 64];
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0);
            req.rest.extend_from_slice(&buf[..n]);
        }
        stream
            .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
        req
    })
    .await;
    let body = TestBody::ready(vec![Bytes::from("0123"), Bytes::from("456789")], Some(10));
    let req = Request::put("/thing")
        .header("x-a", "b")
        .body(body)
        .unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(response.body_mut().take_reusable().is_some());
    let req = server.await.unwrap();
    assert_eq!(
        req.head,
        "PUT /thing HTTP/1.1\r\nx-a: b\r\ncontent-length: 10\r\n\r\n"
    );
    assert_eq!(req.rest, b"0123456789");
}

#[tokio::test]
async fn empty_post_announces_a_zero_length() {
    let (addr, server) = answering(&[b"HTTP/1.1 204 No Content\r\n\r\n"]).await;
    let req = Request::post("/ping").body(RequestBody::Empty).unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert!(response.body_mut().take_reusable().is_some());
    assert_eq!(
        server.await.unwrap(),
        "POST /ping HTTP/1.1\r\ncontent-length: 0\r\n\r\n"
    );
}

#[tokio::test]
async fn body_longer_than_announced_is_refused() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        let _ = stream.read(&mut [0u8; 64]).await;
    })
    .await;
    let body = TestBody::ready(vec![Bytes::from("too long")], Some(3));
    let req = Request::post("/").body(body).unwrap();
    let err = failure(connect(addr).await, req).await;
    assert!(
        matches!(err, SendError::Failed(Error::RequestLength, _)),
        "{err:?}"
    );
}

#[tokio::test]
async fn early_413_stops_a_large_upload_without_deadlock() {
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let (addr, server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 8\r\n\r\ntoo big\n")
            .await
            .unwrap();
        // Never read the body: the client's writes fill the socket buffers and block.
        // Held until the test is done, or 500 ms, which a client waiting for the
        // server would see.
        let _ = tokio::time::timeout(Duration::from_millis(500), released).await;
    })
    .await;
    let (tx, body) = TestBody::channel(64, Some(64 << 20));
    let feeder = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; 1 << 20]);
        for _ in 0..64 {
            if tx.send(Ok(chunk.clone())).await.is_err() {
                return;
            }
        }
    });
    let req = Request::post("/upload").body(body).unwrap();
    let started = std::time::Instant::now();
    let mut response = exchange(connect(addr).await, req).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"too big\n");
    assert!(response.body_mut().take_reusable().is_none());
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "should not wait for the server"
    );
    drop(response);
    feeder.await.unwrap();
    let _ = release.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn early_2xx_keeps_the_upload_going_from_the_response_body() {
    // An echo server that answers at once and streams back what it reads.
    let (addr, _server) = server(|mut stream| async move {
        let req = read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        let body = read_chunked(&mut stream, req.rest).await;
        let echo = format!(
            "{:x}\r\n{}\r\n0\r\n\r\n",
            body.len(),
            String::from_utf8(body).unwrap()
        );
        stream.write_all(echo.as_bytes()).await.unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let (tx, body) = TestBody::channel(4, None);
    let req = Request::post("/echo").body(body).unwrap();
    let (answered, answer_in) = tokio::sync::oneshot::channel::<()>();
    let send = tokio::spawn(async move {
        let mut response = exchange(connect(addr).await, req).await;
        let _ = answered.send(());
        let body = read_all(response.body_mut()).await;
        (body, response.body_mut().take_reusable().is_some())
    });
    // The answer is in before any byte of the body has been given.
    answer_in.await.expect("an answer before the body");
    tx.send(Ok(Bytes::from("one "))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    tx.send(Ok(Bytes::from("two"))).await.unwrap();
    drop(tx);
    let (body, reusable) = send.await.unwrap();
    assert_eq!(body.unwrap(), b"one two");
    assert!(!reusable, "an exchange answered early is not reused");
}

#[tokio::test]
async fn failing_client_body_is_the_clients_fault() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        let _ = stream.read(&mut [0u8; 64]).await;
    })
    .await;
    let (tx, body) = TestBody::channel(2, None);
    tx.send(Ok(Bytes::from("part"))).await.unwrap();
    tx.send(Err(BodyError::Timeout)).await.unwrap();
    let req = Request::post("/").body(body).unwrap();
    let err = failure(connect(addr).await, req).await;
    assert!(
        matches!(err, SendError::ClientBody(BodyError::Timeout)),
        "{err:?}"
    );
}

#[tokio::test]
async fn request_asking_to_close_is_not_reused() {
    let (addr, _server) = answering(&[b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"]).await;
    let req = Request::get("/")
        .header("connection", "close")
        .body(RequestBody::Empty)
        .unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert!(response.body().is_end_stream());
    assert!(response.body_mut().take_reusable().is_none());
}

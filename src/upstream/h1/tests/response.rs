//! Reading responses: framing, interim responses, upgrades, and malformed input.

use http::{Method, StatusCode, Version};
use http_body::Body as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[tokio::test]
async fn content_length_body_arrives_whole_and_the_connection_is_kept() {
    let (addr, server) = answering(&[
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-le",
        b"ngth: 11\r\n\r\nhello",
        b" world",
    ])
    .await;
    let mut response = exchange(connect(addr).await, get("/path?q=1")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_11);
    assert_eq!(response.headers()["content-type"], "text/plain");
    assert_eq!(response.body().size_hint().exact(), Some(11));
    let body = response.body_mut();
    assert_eq!(read_all(body).await.unwrap(), b"hello world");
    assert!(body.is_end_stream());
    assert!(body.take_reusable().is_some());
    drop(response);
    let head = server.await.unwrap();
    assert!(
        head.starts_with("GET /path?q=1 HTTP/1.1\r\nhost: upstream.test\r\n"),
        "{head}"
    );
}

#[tokio::test]
async fn chunked_body_split_mid_size_line_and_mid_crlf_decodes() {
    let (addr, _server) = answering(&[
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1",
        b"0\r\n0123456789abcdef\r",
        b"\n5;ext=1\r\nhel",
        b"lo\r\n0",
        b"\r\n\r",
        b"\n",
    ])
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    let body = response.body_mut();
    assert_eq!(body.size_hint().exact(), None);
    assert_eq!(read_all(body).await.unwrap(), b"0123456789abcdefhello");
    assert!(body.take_reusable().is_some());
}

#[tokio::test]
async fn chunk_end_is_seen_with_the_last_data_when_buffered() {
    let (addr, _server) =
        answering(&[b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"])
            .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    let body = response.body_mut();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "abc");
    assert!(
        body.is_end_stream(),
        "the end should be known without another poll"
    );
    assert!(body.take_reusable().is_some());
}

#[tokio::test]
async fn trailers_are_read_and_discarded() {
    let (addr, _server) = answering(&[
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nx-checksum: 1",
        b"23\r\nx-other: y\r\n\r\n",
    ])
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"body");
    assert!(response.body_mut().take_reusable().is_some());
}

#[tokio::test]
async fn eof_delimited_body_is_read_to_the_close_and_not_reused() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        write_split(&mut stream, &[b"HTTP/1.1 200 OK\r\n\r\nall of", b" it"]).await;
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"all of it");
    assert!(response.body_mut().take_reusable().is_none());
}

#[tokio::test]
async fn head_response_has_no_body_despite_its_content_length() {
    let (addr, _server) = answering(&[b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n"]).await;
    let req = Request::head("/").body(RequestBody::Empty).unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert_eq!(response.headers()["content-length"], "10");
    assert!(response.body().is_end_stream());
    assert!(response.body_mut().take_reusable().is_some());
}

#[tokio::test]
async fn no_content_and_not_modified_have_no_body() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n")
            .await
            .unwrap();
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n")
            .await
            .unwrap();
        let _ = stream.read(&mut [0u8; 16]).await;
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(response.body().is_end_stream());
    let conn = response.body_mut().take_reusable().unwrap();
    let mut response = exchange(conn, get("/")).await;
    assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"");
    assert!(response.body_mut().take_reusable().is_some());
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let (addr, _server) = answering(&[
        b"HTTP/1.1 100 Continue\r\n\r",
        b"\nHTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\n",
        b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok",
    ])
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(response.headers().get("link").is_none());
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"ok");
}

#[tokio::test]
async fn switching_protocols_hands_over_the_stream_with_bytes_read_ahead() {
    let (addr, server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\nearly")
            .await
            .unwrap();
        let mut got = [0u8; 4];
        stream.read_exact(&mut got).await.unwrap();
        stream.write_all(b" late").await.unwrap();
        got
    })
    .await;
    let req = Request::get("/ws")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .body(RequestBody::Empty)
        .unwrap();
    let Ok(Exchange::Upgraded(head, mut stream)) = connect(addr).await.send(req, LONG, None).await
    else {
        panic!("expected an upgrade");
    };
    assert_eq!(head.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(head.headers()["upgrade"], "websocket");
    stream.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 10];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"early late");
    assert_eq!(&server.await.unwrap(), b"ping");
}

#[tokio::test]
async fn connection_close_and_http_1_0_are_not_reused() {
    const CLOSE: &[&[u8]] =
        &[b"HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 1\r\n\r\nx"];
    const OLD: &[&[u8]] = &[b"HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\nx"];
    for answer in [CLOSE, OLD] {
        let (addr, _server) = answering(answer).await;
        let mut response = exchange(connect(addr).await, get("/")).await;
        assert_eq!(read_all(response.body_mut()).await.unwrap(), b"x");
        assert!(response.body_mut().take_reusable().is_none());
    }
}

#[tokio::test]
async fn bytes_past_the_response_forbid_reuse() {
    let (addr, _server) =
        answering(&[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nxGARBAGE"]).await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"x");
    assert!(response.body_mut().take_reusable().is_none());
}

#[tokio::test]
async fn garbage_instead_of_a_response_fails_the_exchange() {
    let (addr, _server) = answering(&[b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]).await;
    let err = failure(connect(addr).await, get("/")).await;
    assert!(
        matches!(err, SendError::Failed(Error::Head(_), _)),
        "{err:?}"
    );
}

#[tokio::test]
async fn oversized_heads_and_too_many_headers_fail() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nx-big: ")
            .await
            .unwrap();
        let filler = vec![b'a'; 8 * 1024];
        for _ in 0..10 {
            if stream.write_all(&filler).await.is_err() {
                break;
            }
        }
    })
    .await;
    let err = failure(connect(addr).await, get("/")).await;
    assert!(
        matches!(err, SendError::Failed(Error::HeadTooLarge, _)),
        "{err:?}"
    );

    let mut many = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..200 {
        many.push_str(&format!("x-h{i}: {i}\r\n"));
    }
    many.push_str("\r\n");
    let many: &'static [u8] = Vec::leak(many.into_bytes());
    let (addr, _server) = answering(Vec::leak(vec![many])).await;
    let err = failure(connect(addr).await, get("/")).await;
    assert!(
        matches!(err, SendError::Failed(Error::TooManyHeaders, _)),
        "{err:?}"
    );
}

#[tokio::test]
async fn malformed_chunks_are_body_errors() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"[..],
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcde\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
    ] {
        let answer: &'static [&'static [u8]] = Vec::leak(vec![answer]);
        let (addr, _server) = answering(answer).await;
        let mut response = exchange(connect(addr).await, get("/")).await;
        let err = read_all(response.body_mut()).await.unwrap_err();
        assert!(matches!(err, Error::Chunked(_)), "{err:?}");
        assert!(response.body_mut().take_reusable().is_none());
    }
}

#[tokio::test]
async fn truncated_bodies_are_errors_not_clean_ends() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"[..],
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
    ] {
        let (addr, _server) = server(move |mut stream| async move {
            read_request(&mut stream).await;
            stream.write_all(answer).await.unwrap();
        })
        .await;
        let mut response = exchange(connect(addr).await, get("/")).await;
        let err = read_all(response.body_mut()).await.unwrap_err();
        assert!(matches!(err, Error::IncompleteBody), "{err:?}");
    }
}

#[tokio::test]
async fn a_close_before_any_response_byte_is_reported_as_such() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
    })
    .await;
    let err = failure(connect(addr).await, get("/")).await;
    assert!(
        matches!(err, SendError::Failed(Error::Closed, _)),
        "{err:?}"
    );

    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-")
            .await
            .unwrap();
    })
    .await;
    let err = failure(connect(addr).await, get("/")).await;
    assert!(
        matches!(err, SendError::Failed(Error::IncompleteHead, _)),
        "{err:?}"
    );
}

#[tokio::test]
async fn request_method_decides_head_framing_per_request() {
    let (addr, server) = answering(&[b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"]).await;
    let req = Request::builder()
        .method(Method::DELETE)
        .uri("/item/1")
        .body(RequestBody::Empty)
        .unwrap();
    let mut response = exchange(connect(addr).await, req).await;
    assert!(response.body().is_end_stream());
    assert!(response.body_mut().take_reusable().is_some());
    drop(response);
    assert_eq!(server.await.unwrap(), "DELETE /item/1 HTTP/1.1\r\n\r\n");
}

#[tokio::test]
async fn response_trickling_in_one_byte_at_a_time_decodes() {
    const WIRE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx-a: 1\r\n\
        transfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n1\r\nd\r\n0\r\nt: v\r\n\r\n";
    let (addr, _server) = server(|mut stream| async move {
        stream.set_nodelay(true).unwrap();
        read_request(&mut stream).await;
        for byte in WIRE.chunks(1) {
            stream.write_all(byte).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let mut response = exchange(connect(addr).await, get("/")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-a"], "1");
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"abcd");
    assert!(response.body_mut().take_reusable().is_some());
}

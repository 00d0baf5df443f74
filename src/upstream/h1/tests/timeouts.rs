//! `read_timeout`: for the response head, and between two reads of the body.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[tokio::test]
async fn silent_upstream_times_out() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let started = Instant::now();
    let result = connect(addr)
        .await
        .send(get("/"), Duration::from_millis(150), None)
        .await;
    assert!(matches!(result, Err(SendError::Timeout(_))), "{result:?}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < LONG,
        "{waited:?}"
    );
}

#[tokio::test]
async fn body_idle_past_read_timeout_is_an_error() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nfirst")
            .await
            .unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let result = connect(addr)
        .await
        .send(get("/"), Duration::from_millis(150), None)
        .await;
    let Ok(Exchange::Response(mut response)) = result else {
        panic!("expected a response: {result:?}");
    };
    let body = response.body_mut();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "first");
    let started = Instant::now();
    let err = body.frame().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(body.take_reusable().is_none());
}

#[tokio::test]
async fn steady_body_outlives_read_timeout_in_total() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stream.write_all(b"1\r\nx\r\n").await.unwrap();
        }
        stream.write_all(b"0\r\n\r\n").await.unwrap();
        let _ = stream.read(&mut [0u8; 1]).await;
    })
    .await;
    let result = connect(addr)
        .await
        .send(get("/"), Duration::from_millis(150), None)
        .await;
    let Ok(Exchange::Response(mut response)) = result else {
        panic!("expected a response: {result:?}");
    };
    assert_eq!(read_all(response.body_mut()).await.unwrap(), b"xxxxxx");
    assert!(response.body_mut().take_reusable().is_some());
}

#[tokio::test]
async fn upstream_that_stops_reading_the_upload_times_out() {
    let (addr, _server) = server(|mut stream| async move {
        read_request(&mut stream).await;
        tokio::time::sleep(LONG).await;
    })
    .await;
    let (tx, body) = TestBody::channel(64, None);
    let feeder = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b'x'; 1 << 20]);
        while tx.send(Ok(chunk.clone())).await.is_ok() {}
    });
    let req = Request::post("/").body(body).unwrap();
    let progress = crate::wire::body::Progress::new();
    let result = connect(addr)
        .await
        .send(req, Duration::from_millis(200), Some(&progress))
        .await;
    assert!(matches!(result, Err(SendError::Timeout(_))), "{result:?}");
    // The request, and with it the body's receiving end, comes back in the error.
    drop(result);
    feeder.await.unwrap();
}

//! `request_buffering` (nginx `proxy_request_buffering`), on by default: a body larger
//! than `client_body_buffer_size` is read whole, the rest of it into a file with no name
//! in `client_body_temp_path`, before any upstream connection is made, and is sent with
//! its `Content-Length` however the client framed it. A slow, stalled or oversized
//! upload never reaches the upstream; with `"off"` the body streams as it comes.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use support::raw::{read_response, RawUpstream};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The gateway in front of `up`, bodies over 1k past memory, spooled under `temp`.
fn config(up: SocketAddr, temp: &Path, extra_server: &str) -> String {
    let server = format!(
        "client_body_buffer_size = \"1k\"\nclient_body_temp_path = \"{}\"\n{extra_server}",
        temp.display()
    );
    proxying(up, &server)
}

/// `len` bytes that a lost, doubled or misplaced chunk would show.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The one request `up` received: its head (lower case) and its body.
fn received(up: &RawUpstream) -> (String, Vec<u8>) {
    let bytes = up.bytes();
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a request head")
        + 4;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    (head, bytes[end..].to_vec())
}

/// `POST /` with `Content-Length: len`, the head alone.
fn head(len: usize) -> String {
    format!("POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: {len}\r\n\r\n")
}

/// Nothing is left in `dir` (the files a body goes to have no name).
fn empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "left in client_body_temp_path: {left:?}");
}

/// A chunked body of `body`, in chunks of `chunk`.
fn chunked(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut raw = Vec::new();
    for piece in body.chunks(chunk) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

/// Waits until `up` has accepted a connection (at most 3 s).
async fn connected(up: &RawUpstream) {
    let start = Instant::now();
    while up.accepted() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "no upstream connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_slow_upload_larger_than_the_buffer_holds_no_upstream_connection() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    // Nothing here but the buffer size: the default is what is tested (and this test
    // runs as it is on a gateway without `request_buffering`, where it fails).
    let gw = gateway(&proxying(up.addr, r#"client_body_buffer_size = "1k""#));
    let body = pattern(3000);
    let mut uploads = Vec::new();
    for _ in 0..20 {
        let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
        client.write_all(head(3000).as_bytes()).await.unwrap();
        client.write_all(&body[..2000]).await.unwrap();
        uploads.push(client);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        (up.accepted(), up.requests()),
        (0, 0),
        "an upstream connection was opened for a partial body"
    );
    for client in &mut uploads {
        client.write_all(&body[2000..]).await.unwrap();
    }
    for client in &mut uploads {
        let reply = read_response(client).await.expect("a response");
        assert_eq!(reply.status, 200);
    }
    assert_eq!(up.requests(), 20);
}

#[tokio::test]
async fn a_spooled_body_arrives_whole_with_its_length() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, temp.path(), ""));
    let body = pattern(300_000);
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client.write_all(head(body.len()).as_bytes()).await.unwrap();
    client.write_all(&body[..100_000]).await.unwrap();
    // Mid-upload, past the buffer: the file has no name to find.
    tokio::time::sleep(Duration::from_millis(100)).await;
    empty(temp.path());
    assert_eq!(up.accepted(), 0);
    client.write_all(&body[100_000..]).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 200);
    let (head, got) = received(&up);
    assert!(head.contains("content-length: 300000\r\n"), "{head}");
    assert!(
        got == body,
        "the body changed on its way ({} bytes)",
        got.len()
    );
    empty(temp.path());
}

#[tokio::test]
async fn a_chunked_body_larger_than_the_buffer_is_sent_with_a_length() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, temp.path(), ""));
    let body = pattern(100_000);
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n";
    client.write_all(head).await.unwrap();
    client.write_all(&chunked(&body, 7000)).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 200);
    let (head, got) = received(&up);
    assert!(head.contains("content-length: 100000\r\n"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(
        got == body,
        "the body changed on its way ({} bytes)",
        got.len()
    );
    empty(temp.path());
}

/// An HTTP/2 `POST /` whose body comes in `chunk`-byte frames, with a
/// `content-length` or without one.
fn h2_post(body: &[u8], chunk: usize, with_length: bool) -> http::Request<support::Body> {
    let frames: Vec<_> = body
        .chunks(chunk)
        .map(|c| Ok::<_, hyper::Error>(hyper::body::Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let mut req = http::Request::post("http://example.test/");
    if with_length {
        req = req.header("content-length", body.len());
    }
    let stream = StreamBody::new(futures_util::stream::iter(frames));
    req.body(stream.boxed()).unwrap()
}

#[tokio::test]
async fn an_http2_body_larger_than_the_buffer_arrives_whole_with_its_length() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let body = pattern(200_000);
    for with_length in [true, false] {
        let up = RawUpstream::ok().await;
        let gw = gateway(&config(up.addr, temp.path(), ""));
        let reply = within(5, send_h2(addr(&gw), h2_post(&body, 10_000, with_length))).await;
        assert_eq!(reply.status, 200, "with a length: {with_length}");
        let (head, got) = received(&up);
        assert!(head.contains("content-length: 200000\r\n"), "{head}");
        assert!(!head.contains("transfer-encoding"), "{head}");
        assert!(got == body, "the body changed ({} bytes)", got.len());
    }
    empty(temp.path());
}

#[tokio::test]
async fn expect_100_continue_is_answered_and_the_body_spooled() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, temp.path(), ""));
    let body = pattern(50_000);
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: example.test\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    let mut interim = [0u8; 25];
    within(3, client.read_exact(&mut interim)).await.unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    client.write_all(&body).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    assert_eq!(reply.status, 200);
    let (head, got) = received(&up);
    assert!(!head.contains("expect"), "{head}");
    assert!(got == body, "the body changed ({} bytes)", got.len());
}

#[tokio::test]
async fn a_stalled_upload_gets_408_and_the_upstream_sees_nothing() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(
        up.addr,
        temp.path(),
        "client_body_timeout = \"300ms\"",
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client.write_all(head(30_000).as_bytes()).await.unwrap();
    client.write_all(&pattern(20_000)).await.unwrap();
    let start = Instant::now();
    let reply = within(3, read_response(&mut client))
        .await
        .expect("a response");
    assert_eq!(reply.status, 408, "{reply:?}");
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    assert!(reply
        .head
        .to_ascii_lowercase()
        .contains("connection: close"));
    assert_eq!((up.accepted(), up.requests()), (0, 0));
    empty(temp.path());
}

#[tokio::test]
async fn a_chunked_upload_past_the_limit_gets_413_and_the_upstream_sees_nothing() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(
        up.addr,
        temp.path(),
        "client_max_body_size = \"64k\"",
    ));
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    let head = b"POST / HTTP/1.1\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n";
    client.write_all(head).await.unwrap();
    // A write cut short by the gateway's close is no failure.
    let _ = client.write_all(&chunked(&pattern(100_000), 4000)).await;
    let reply = within(3, read_response(&mut client))
        .await
        .expect("a response");
    assert_eq!(reply.status, 413, "{reply:?}");
    // HTTP/2 without a length: the same.
    let reply = within(
        5,
        send_h2(addr(&gw), h2_post(&pattern(100_000), 8000, false)),
    )
    .await;
    assert_eq!(reply.status, 413);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!((up.accepted(), up.requests()), (0, 0));
    empty(temp.path());
}

#[tokio::test]
async fn a_client_gone_mid_upload_leaves_no_file_and_no_upstream_request() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, temp.path(), ""));
    for _ in 0..5 {
        let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
        client.write_all(head(100_000).as_bytes()).await.unwrap();
        client.write_all(&pattern(60_000)).await.unwrap();
        drop(client);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(up.accepted(), 0);
    empty(temp.path());
    // The gateway goes on serving.
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client.write_all(head(5000).as_bytes()).await.unwrap();
    client.write_all(&pattern(5000)).await.unwrap();
    assert_eq!(
        read_response(&mut client).await.map(|r| r.status),
        Some(200)
    );
}

#[tokio::test]
async fn the_temp_path_is_made_when_the_gateway_starts() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let deeper = temp.path().join("a/b");
    let up = RawUpstream::ok().await;
    let _gw = gateway(&config(up.addr, &deeper, ""));
    assert!(deeper.is_dir());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&deeper).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
}

/// A server that reads 80,000 bytes of each request (past the first 64 KiB of its
/// body the gateway sends), then closes unanswered; how many connections it took.
async fn closing_server() -> (SocketAddr, tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::Relaxed);
            let mut part = vec![0; 80_000];
            let _ = stream.read_exact(&mut part).await;
        }
    });
    (addr, task, count)
}

#[tokio::test]
async fn a_spooled_body_goes_whole_to_the_next_server_after_a_failure() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let (broken, task, tried) = closing_server().await;
    let up = RawUpstream::ok().await;
    let text = config(broken, temp.path(), "").replace(
        &format!("servers = [\"{broken}\"]"),
        &format!("servers = [\"{broken}\", \"{}\"]", up.addr),
    );
    let gw = gateway(&text);
    let body = pattern(100_000);
    for _ in 0..2 {
        let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
        let head = format!(
            "PUT / HTTP/1.1\r\nHost: example.test\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        client.write_all(head.as_bytes()).await.unwrap();
        client.write_all(&body).await.unwrap();
        let reply = read_response(&mut client).await.expect("a response");
        assert_eq!(reply.status, 200);
    }
    task.abort();
    assert!(
        tried.load(Ordering::Relaxed) >= 1,
        "the broken server was never tried"
    );
    assert_eq!(up.requests(), 2);
    let bytes = up.bytes();
    let sent = bytes.windows(body.len()).filter(|w| *w == body.as_slice());
    assert_eq!(sent.count(), 2, "a retried body was not sent whole");
}

#[tokio::test]
async fn with_buffering_off_a_larger_body_streams_and_a_location_may_choose() {
    let _shared = support::shared();
    let temp = tempfile::tempdir().unwrap();
    let up = RawUpstream::ok().await;
    let mut text = config(up.addr, temp.path(), "request_buffering = \"off\"");
    text.push_str(
        "[[location]]\nmatch = \"/whole/\"\nupstream = \"app\"\nrequest_buffering = \"on\"\n",
    );
    let gw = gateway(&text);
    let body = pattern(3000);
    let whole_head = head(3000).replace("POST / ", "POST /whole/ ");
    let mut whole = TcpStream::connect(addr(&gw)).await.unwrap();
    whole.write_all(whole_head.as_bytes()).await.unwrap();
    whole.write_all(&body[..2000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(up.accepted(), 0, "the buffering location connected early");
    let mut live = TcpStream::connect(addr(&gw)).await.unwrap();
    live.write_all(head(3000).as_bytes()).await.unwrap();
    live.write_all(&body[..2000]).await.unwrap();
    // Past the buffer: the upstream gets the head and what came so far.
    connected(&up).await;
    for client in [&mut live, &mut whole] {
        client.write_all(&body[2000..]).await.unwrap();
        assert_eq!(read_response(client).await.map(|r| r.status), Some(200));
    }
    assert_eq!(up.requests(), 2);
}

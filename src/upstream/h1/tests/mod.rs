//! Exchanges against raw TCP servers on 127.0.0.1:0 that send exact bytes, split at
//! awkward places with small pauses; and (`props`, `strict`) the head and chunked
//! decoders held to strict RFC 9112 recognisers over valid, mutated and random bytes.

mod props;
mod props_chunked;
mod request;
mod response;
mod reuse;
mod strict;
mod timeouts;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Body, Error, Exchange, SendError, UpstreamConn};
use crate::wire::body::{BodyError, Progress, RequestBody};

const LONG: Duration = Duration::from_secs(5);

impl UpstreamConn {
    /// [`UpstreamConn::send_with`] with no extra headers.
    async fn send<B>(
        self,
        req: Request<B>,
        read_timeout: Duration,
        progress: Option<&Progress>,
    ) -> Result<Exchange, SendError<B>>
    where
        B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
    {
        self.send_with(req, &[], read_timeout, progress).await
    }
}

/// Accepts one connection and runs `script` on it; the handle returns what it returns.
async fn server<F, Fut, T>(script: F) -> (SocketAddr, JoinHandle<T>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        script(stream).await
    });
    (addr, task)
}

/// A request as received: its head (up to the empty line) and the bytes after it.
struct Received {
    head: String,
    rest: Vec<u8>,
}

async fn read_request(stream: &mut TcpStream) -> Received {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = seen.split_off(end + 4);
            return Received {
                head: String::from_utf8(seen).unwrap(),
                rest,
            };
        }
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "EOF before the end of the request head");
        seen.extend_from_slice(&chunk[..n]);
    }
}

/// Writes `pieces` one by one with a pause between, so that each arrives on its own.
async fn write_split(stream: &mut TcpStream, pieces: &[&[u8]]) {
    for piece in pieces {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

/// A server that reads one request head and answers with `pieces`, then holds the
/// connection open until the client closes it.
async fn answering(pieces: &'static [&'static [u8]]) -> (SocketAddr, JoinHandle<String>) {
    server(move |mut stream| async move {
        let req = read_request(&mut stream).await;
        write_split(&mut stream, pieces).await;
        let _ = stream.read(&mut [0u8; 16]).await;
        req.head
    })
    .await
}

/// Waits until `conn` is no longer reusable, what the server did having crossed the
/// loopback; fails after [`LONG`]. The short sleeps let the runtime take in the socket's
/// readiness, which the check reads.
async fn until_not_reusable(conn: &mut UpstreamConn) {
    let deadline = tokio::time::Instant::now() + LONG;
    while conn.is_reusable() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still reusable after {LONG:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn connect(addr: SocketAddr) -> UpstreamConn {
    UpstreamConn::connect(addr, None, LONG).await.unwrap()
}

fn get(path: &str) -> Request<RequestBody> {
    Request::get(path)
        .header("host", "upstream.test")
        .body(RequestBody::Empty)
        .unwrap()
}

/// Sends and expects a normal response.
async fn exchange<B>(conn: UpstreamConn, req: Request<B>) -> Response<Body>
where
    B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
{
    match conn.send(req, LONG, None).await {
        Ok(Exchange::Response(response)) => response,
        Ok(Exchange::Upgraded(head, _)) => panic!("unexpected upgrade: {head:?}"),
        Err(err) => panic!("exchange failed: {err:?}"),
    }
}

async fn failure<B>(conn: UpstreamConn, req: Request<B>) -> SendError<B>
where
    B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
{
    match conn.send(req, LONG, None).await {
        Ok(exchange) => panic!("expected a failure, got {exchange:?}"),
        Err(err) => err,
    }
}

/// Reads a body to its end.
async fn read_all(body: &mut Body) -> Result<Vec<u8>, Error> {
    let mut all = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            all.extend_from_slice(&data);
        }
    }
    Ok(all)
}

/// A request body fed by the test through a channel, with an optional exact size.
struct TestBody {
    rx: mpsc::Receiver<Result<Bytes, BodyError>>,
    exact: Option<u64>,
}

impl TestBody {
    /// A body that yields `frames` (all ready at once) and ends.
    fn ready(frames: Vec<Bytes>, exact: Option<u64>) -> TestBody {
        let (tx, body) = TestBody::channel(frames.len().max(1), exact);
        for frame in frames {
            tx.try_send(Ok(frame)).unwrap();
        }
        body
    }

    fn channel(
        capacity: usize,
        exact: Option<u64>,
    ) -> (mpsc::Sender<Result<Bytes, BodyError>>, TestBody) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, TestBody { rx, exact })
    }
}

impl HttpBody for TestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        self.exact
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

#[test]
fn public_types_can_cross_threads() {
    fn send<T: Send + 'static>() {}
    send::<UpstreamConn>();
    send::<Body>();
    send::<super::Upgraded>();
    send::<super::Error>();
    fn send_future<F: Future + Send>(_: F) {}
    let progress = crate::wire::body::Progress::new();
    let _ = |conn: UpstreamConn| {
        send_future(conn.send(get("/"), LONG, Some(&progress)));
    };
}

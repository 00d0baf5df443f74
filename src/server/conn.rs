//! One client connection: sniff HTTP/1.1 or HTTP/2 (prior knowledge), serve it with
//! hyper, hand each request to the pipeline of the current snapshot, and close
//! gracefully when the worker drains.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::beside::Beside;
use super::h1;
use super::preface::{self, Sniffed};
use super::send_timeout::{SendWatch, StreamExec};
use super::timeouts::{ConnLimits, ConnState, RequestGuard, TimedIo};
use crate::proxy::response::Unanswered;
use crate::proxy::{Conn, Logged};
use crate::state::GatewayState;
use crate::wire::body::{BodyError, ClientBody};

/// Serves one accepted connection until it closes or the worker's drain ends it.
/// `conn_state` is new, made as the connection's first byte may arrive (after the TLS
/// handshake), and the worker may shed it ([`ConnState::shed`]).
/// `h2_agreed`: TLS's ALPN agreed on `h2`, so only HTTP/2 may follow (RFC 9113 §3.3).
pub async fn serve<T>(
    stream: T,
    conn: Conn,
    conn_state: Arc<ConnState>,
    state: Arc<GatewayState>,
    mut shutdown: watch::Receiver<bool>,
    h2_agreed: bool,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let settings = state.snapshot.load().conn;
    let limits = ConnLimits {
        header: settings.client_header_timeout,
        keepalive: settings.keepalive_timeout,
        send: settings.send_timeout,
    };
    let mut io = TimedIo::new(stream, conn_state.clone(), limits);
    let (h2, read) = match sniff(&mut io, h2_agreed).await {
        Ok(Some(sniffed)) => sniffed,
        Ok(None) => return,
        Err(err) => {
            tracing::debug!(peer = %conn.peer, error = %err, "connection closed before a request");
            return;
        }
    };
    if !h2 {
        let draining = AtomicBool::new(false);
        let setup = h1::Setup {
            conn: &conn,
            state: &state,
            conn_state: &conn_state,
            limits: h1::HeadLimits {
                max_line: settings.max_uri_bytes,
                max_bytes: settings.max_header_bytes,
                max_headers: settings.max_headers,
            },
            draining: &draining,
        };
        drive_own(h1::serve(io, read, setup), &draining, &mut shutdown).await;
        return;
    }
    io.replay(read.freeze(), true);
    let conn = Arc::new(conn);
    let peer = conn.peer;
    let service = service_fn(move |req: Request<Incoming>| {
        let guard = conn_state.begin();
        let state = state.clone();
        let conn_state = conn_state.clone();
        let conn = conn.clone();
        async move {
            let snapshot = state.snapshot.load_full();
            let response = snapshot
                .pipeline
                .handle(req.map(ClientBody::H2), &conn)
                .await;
            settle(&response, &conn_state, true)?;
            let (mut parts, mut body) = response.into_parts();
            body.lines_into(&mut parts.headers);
            let response = Response::from_parts(parts, body);
            Ok::<_, Unanswered>(response.map(|inner| Guarded {
                inner,
                watch: SendWatch::current(),
                _guard: guard,
            }))
        }
    });
    let io = TokioIo::new(io);
    let exec = StreamExec {
        send_timeout: settings.send_timeout,
    };
    let mut builder = http2::Builder::new(exec);
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.http2_max_concurrent_streams)
        .max_header_list_size(settings.max_header_bytes as u32);
    let result = drive(builder.serve_connection(io, service), &mut shutdown).await;
    if let Err(err) = result {
        tracing::debug!(%peer, error = %err, "connection ended with an error");
    }
}

/// What the connection makes of an answer before sending it: a 101 turns it into a
/// tunnel, an HTTP/1.x answer that closes it lingers ([`closes`]), and a `return 444` is
/// not sent at all. Dropping that response logs the request; the error makes hyper close
/// the connection (HTTP/1.1) or reset the stream (HTTP/2) unanswered.
pub(super) fn settle(
    response: &Response<Logged>,
    state: &ConnState,
    h2: bool,
) -> Result<(), Unanswered> {
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        state.set_upgraded();
    }
    if !h2 && !response.headers().is_empty() && closes(response.headers()) {
        state.linger_on_close();
    }
    match response.extensions().get::<Unanswered>() {
        Some(_) => Err(Unanswered),
        None => Ok(()),
    }
}

/// Whether an HTTP/1.x answer ends its connection (`Connection: close`: tollgate's
/// refusals, which may leave the request's body unread).
fn closes(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"))
}

/// Polls the connection; when the drain starts, asks it to finish what it is doing
/// (HTTP/1.1: close after the current response; HTTP/2: GOAWAY) and polls on.
async fn drive<C: Graceful>(
    conn: C,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
    tokio::pin!(conn);
    let drain = shutdown.wait_for(|stop| *stop);
    tokio::pin!(drain);
    let mut drain = Beside::new(drain);
    let ended = poll_fn(|cx| {
        if let Poll::Ready(result) = conn.as_mut().poll(cx) {
            return Poll::Ready(Some(result));
        }
        drain.poll_if_due(cx).map(|_| None)
    })
    .await;
    if let Some(result) = ended {
        return result;
    }
    conn.as_mut().graceful_shutdown();
    conn.await
}

/// Polls an HTTP/1.1 connection of tollgate's own; when the drain starts, sets `draining`
/// (it then finishes the answer under way and takes no further request) and polls on.
async fn drive_own(
    served: impl Future<Output = ()>,
    draining: &AtomicBool,
    shutdown: &mut watch::Receiver<bool>,
) {
    let mut served = pin!(served);
    let drain = pin!(shutdown.wait_for(|stop| *stop));
    let mut drain = Beside::new(drain);
    poll_fn(|cx| loop {
        if served.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if draining.load(Ordering::Relaxed) || drain.poll_if_due(cx).is_pending() {
            return Poll::Pending;
        }
        draining.store(true, Ordering::Relaxed);
    })
    .await;
}

/// A hyper server connection that can be asked to finish gracefully.
trait Graceful: Future<Output = Result<(), hyper::Error>> {
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, S, B> Graceful for http2::Connection<I, S, StreamExec>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    StreamExec: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        http2::Connection::graceful_shutdown(self);
    }
}

/// Reads until the first bytes tell HTTP/2 from HTTP/1.1 (see [`preface`]).
/// `Ok(None)`: the client closed (or timed out) before sending anything, or sent a
/// broken HTTP/2 preface, which has been answered with GOAWAY. After ALPN agreed on
/// `h2` (`h2_agreed`), anything but the HTTP/2 preface is a broken one: RFC 9113 §3.3
/// lets only HTTP/2 follow, so HTTP/1.1 bytes get GOAWAY PROTOCOL_ERROR, not an answer.
async fn sniff<T>(io: &mut TimedIo<T>, h2_agreed: bool) -> std::io::Result<Option<(bool, BytesMut)>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        if io.read_buf(&mut buf).await? == 0 {
            return Ok(None);
        }
        let h2 = match preface::sniff(&buf) {
            Sniffed::More => continue,
            Sniffed::Http1 if !h2_agreed => false,
            Sniffed::Http2 => true,
            Sniffed::Http1 | Sniffed::Broken => {
                io.write_all(&preface::GOAWAY).await?;
                io.shutdown().await?;
                return Ok(None);
            }
        };
        return Ok(Some((h2, buf)));
    }
}

/// A response body that keeps its connection counted as busy until it ends, and on
/// HTTP/2 tells its stream's `send_timeout` watch how each poll went.
struct Guarded {
    inner: Logged,
    watch: Option<Arc<SendWatch>>,
    _guard: RequestGuard,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Some(watch) = &this.watch {
            watch.polled(polled.is_pending());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

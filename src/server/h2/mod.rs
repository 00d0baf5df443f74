//! HTTP/2 connections, served by hyper: each stream's request goes to the pipeline of the
//! snapshot in force, a rendered answer's header lines go into the map hyper encodes, and
//! each stream's body is held to `send_timeout` ([`send_timeout`]). When the worker
//! drains, the connection sends GOAWAY and finishes the streams under way.

mod send_timeout;

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::header::{Entry, SERVER};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::answer::settle;
use super::beside::Beside;
use super::timeouts::{ConnState, RequestGuard, TimedIo};
use crate::proxy::timeouts::SendTimeout;
use crate::proxy::{Conn, Logged};
use crate::snapshot::ConnSettings;
use crate::state::GatewayState;
use crate::wire::body::{BodyError, ClientBody};
use crate::wire::Protocol;
use send_timeout::{SendWatch, StreamExec};

/// What a connection serves with.
pub(super) struct Setup {
    pub conn: Arc<Conn>,
    pub state: Arc<GatewayState>,
    pub conn_state: Arc<ConnState>,
    /// The connection settings of the snapshot in force when it was accepted.
    pub settings: ConnSettings,
}

/// Serves streams on `io` until the client closes, the connection fails, or the worker's
/// drain ends it. `read` holds bytes already read from it (the preface, at least).
pub(super) async fn serve<T>(
    mut io: Box<TimedIo<T>>,
    read: BytesMut,
    setup: Setup,
    shutdown: &mut watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    io.replay(read.freeze(), Protocol::Http2);
    let Setup {
        conn,
        state,
        conn_state,
        settings,
    } = setup;
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
                .handle(req.map(ClientBody::Http2), &conn)
                .await;
            // An unanswered stream is reset as nginx resets it (`NGX_HTTP_CLOSE` marks its
            // stream timed out, so its RST_STREAM says PROTOCOL_ERROR).
            settle(&response, &conn_state, Protocol::Http2)
                .map_err(|_| h2::Error::from(h2::Reason::PROTOCOL_ERROR))?;
            let watch = SendWatch::current();
            if let (Some(watch), Some(own)) = (&watch, response.extensions().get::<SendTimeout>()) {
                watch.own_timeout(own.0);
            }
            let (mut parts, mut body) = response.into_parts();
            body.lines_into(&mut parts.headers);
            if let Some(alt_svc) = &conn.alt_svc {
                parts.headers.entry(http::header::ALT_SVC).or_insert(alt_svc.clone());
            }
            // `server_header`, unless the answer has its own (hyper adds the `Date`).
            if let Some(server) = &snapshot.pipeline.server_header {
                if let Entry::Vacant(entry) = parts.headers.entry(SERVER) {
                    entry.insert(server.clone());
                }
            }
            super::answer::measure_head(parts.status, &parts.headers, true, &mut body);
            let response = Response::from_parts(parts, body);
            Ok::<_, h2::Error>(response.map(|inner| Guarded {
                inner,
                watch,
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
    // Pinned here and lent, not moved: a future moved into another async fn is kept twice.
    let conn = pin!(builder.serve_connection(io, service));
    let result = drive(conn, shutdown).await;
    if let Err(err) = result {
        tracing::debug!(%peer, error = %err, "connection ended with an error");
    }
}

/// Polls the connection; when the drain starts, asks it to finish what it is doing
/// (GOAWAY) and polls on.
async fn drive<C: Graceful>(
    mut conn: Pin<&mut C>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
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

/// A response body that keeps its connection counted as busy until it ends, and tells
/// its stream's `send_timeout` watch how each poll went.
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

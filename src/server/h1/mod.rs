//! HTTP/1.1 connections, served by tollgate's own codec rather than hyper's: requests in
//! turn (pipelined ones too), each head parsed into the `http` types the pipeline takes
//! ([`head`]), its body decoded only as the pipeline reads it ([`upload`]), the answer
//! framed ([`response`]) and written with as few copies and writes as it allows
//! ([`outbox`]).
//!
//! One task owns the socket: while the pipeline works on a request, the connection feeds
//! it the body it asks for, and otherwise watches for the client going away (which drops
//! the request, as nginx ends a request whose client closed). The read buffer, the write
//! buffer and the header map are the connection's, reused by pipelined requests; between
//! requests a keep-alive connection lets them go, as nginx does, and waits for the next
//! request holding no buffer ([`Connection::let_go`]). When the worker drains, the answer
//! under way is finished and no further request taken.

mod head;
mod outbox;
#[cfg(test)]
mod props;
mod response;
mod spare;
mod upload;

pub(super) use spare::trim as trim_spares;

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::BytesMut;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

pub(super) use head::HeadLimits;
pub(super) use upload::poll_read_waiting;

use super::answer::settle;
use super::beside::Beside;
use super::timeouts::{ConnState, TimedIo};
use super::zero_copy::{self, ZeroCopy};
use crate::proxy::timeouts::SendTimeout;
use crate::proxy::tunnel::Handover;
use crate::proxy::{Conn, Logged};
use crate::state::GatewayState;
use crate::wire::body::ClientBody;
use crate::wire::h1::Names;
use crate::wire::Protocol;
use head::{Head, Malformed};
use outbox::Outbox;
use response::{chunk_framing, frame_end, frame_piece, Asked, Framing, LAST_CHUNK};
use upload::{Pumped, Upload};

/// Most bytes of buffer room a connection keeps between two requests.
const KEPT_IDLE: usize = 16 * 1024;

/// What a connection serves with.
pub(super) struct Setup<'a> {
    pub conn: &'a Conn,
    pub state: &'a GatewayState,
    pub conn_state: &'a Arc<ConnState>,
    pub limits: HeadLimits,
}

/// Serves requests on `io` until the client closes, a limit ends it, the worker drains
/// (`shutdown`), or an upgrade hands it over. `read` holds bytes already read from it.
pub(super) async fn serve<T>(
    io: Box<TimedIo<T>>,
    read: BytesMut,
    setup: Setup<'_>,
    shutdown: &mut watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + ZeroCopy + Send + 'static,
{
    // Set when the worker drains: the connection finishes the answer under way and
    // takes no further request.
    let draining = AtomicBool::new(false);
    // Pinned here and lent, not moved: a future moved into another async fn is kept twice.
    let served = pin!(serve_requests(io, read, &setup, &draining));
    drive(served, &draining, shutdown).await;
}

/// Polls the connection; when the drain starts, sets `draining` and polls on.
async fn drive(
    mut served: Pin<&mut impl Future<Output = ()>>,
    draining: &AtomicBool,
    shutdown: &mut watch::Receiver<bool>,
) {
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

async fn serve_requests<T>(
    io: Box<TimedIo<T>>,
    read: BytesMut,
    setup: &Setup<'_>,
    draining: &AtomicBool,
)
where
    T: AsyncRead + AsyncWrite + Unpin + ZeroCopy + Send + 'static,
{
    let mut conn = Connection {
        io,
        read,
        out: Outbox::default(),
        headers: HeaderMap::new(),
        names: Names::default(),
        limits: setup.limits,
        answered: 0,
    };
    loop {
        match conn.exchange(setup, draining).await {
            Next::Request => {}
            Next::Close => break,
            Next::Upgrade(handover) => {
                let mut io = conn.io;
                // What the client sent after its handshake is the tunnel's.
                io.replay(conn.read.split().freeze(), Protocol::Http1);
                handover.hand_over(io);
                return;
            }
        }
    }
    // A lingering close where an answer left a body unread (`ConnState`).
    let _ = conn.io.shutdown().await;
}

struct Connection<T> {
    io: Box<TimedIo<T>>,
    read: BytesMut,
    out: Outbox,
    /// An empty map for the next head (the last answer's, cleared).
    headers: HeaderMap,
    /// The last heads' header names, which the next ones likely repeat.
    names: Names,
    limits: HeadLimits,
    /// Requests answered on this connection (up to two: whether it has carried more
    /// than one is all that is asked of it).
    answered: u8,
}

/// After one exchange.
enum Next {
    Request,
    Close,
    Upgrade(Handover),
}

/// Why no head came.
enum NoHead {
    Malformed(Malformed),
    /// The connection failed or a limit ended it (any answer is already sent).
    Failed,
}

impl<T: AsyncRead + AsyncWrite + Unpin + ZeroCopy> Connection<T> {
    /// One request and its answer: the head is waited for here, the rest in [`Self::answer`].
    async fn exchange(&mut self, setup: &Setup<'_>, draining: &AtomicBool) -> Next {
        if !self.read.is_empty() {
            setup.conn_state.head_begun();
        }
        // The head, like the answer below, stays in its slot (moving it costs copies).
        let mut head = None;
        match poll_fn(|cx| self.poll_head(cx, draining, setup.conn_state, &mut head)).await {
            Ok(()) => {}
            Err(NoHead::Failed) => return Next::Close,
            Err(NoHead::Malformed(malformed)) => {
                tracing::debug!(peer = %setup.conn.peer, ?malformed, "malformed request head");
                setup.conn_state.linger_on_close();
                let snapshot = setup.state.snapshot.load();
                let server = snapshot.pipeline.server_header.as_ref();
                let answer = response::with_server(malformed.response(), server);
                drop(snapshot);
                let _ = self.io.write_all(&answer).await;
                return Next::Close;
            }
        }
        let Some(head) = &mut head else {
            return Next::Close;
        };
        // Boxed: held in this future, the pipeline's state would make every connection's
        // task as large as the largest request's, idle or not. One allocation per request.
        Box::pin(self.answer(head, setup, draining)).await
    }

    /// The request of a head read, answered.
    async fn answer(&mut self, head: &mut Head, setup: &Setup<'_>, draining: &AtomicBool) -> Next {
        let _guard = setup.conn_state.begin();
        let asked = Asked::of(&head.method, head.version, head.keep_alive);
        let (body, mut upload) = Upload::new(head.framing, head.expect_continue);
        let mut request = request(head, body);
        let handover = head.upgrade.then(|| upgrade(&mut request));
        let snapshot = setup.state.snapshot.load_full();
        // The answer stays in this slot until it is sent (moving it costs copies). Made
        // after `_guard`, it is dropped before it: the answer's end (its log line, its
        // upstream connection back to the pool) comes before the connection is idle.
        let mut slot = None;
        {
            let mut answer = pin!(snapshot.pipeline.handle(request, setup.conn));
            poll_fn(|cx| self.poll_answer(cx, answer.as_mut(), &mut upload, &mut slot)).await;
        }
        // None: the client went away; dropping the request ended it.
        let Some(response) = &mut slot else {
            return Next::Close;
        };
        if settle(response, setup.conn_state, Protocol::Http1).is_err() {
            return Next::Close;
        }
        if let Some(alt_svc) = &setup.conn.alt_svc {
            response.headers_mut().entry(http::header::ALT_SVC).or_insert(alt_svc.clone());
        }
        let status = response.status();
        upload.discard_buffered(&mut self.read);
        // A body not read to its end by now (abandoned, or still streaming up) ends the
        // connection after this answer, which says so.
        let asked = Asked {
            keep_alive: asked.keep_alive && !draining.load(Ordering::Relaxed) && upload.is_done(),
            ..asked
        };
        let server = snapshot.pipeline.server_header.as_ref();
        let own_send = response.extensions().get::<SendTimeout>().map(|s| s.0);
        if own_send.is_some() {
            self.io.answer_send_timeout(own_send);
        }
        let zero_copy = snapshot.conn.sendfile;
        let kept = self.send(response, asked, &mut upload, (server, zero_copy)).await;
        if own_send.is_some() {
            // The connection's again for what it writes next (a refusal of the next head).
            self.io.answer_send_timeout(None);
        }
        if !upload.is_done() {
            // The client may still be sending the body: the close lingers, so that it
            // reads the answer rather than a reset.
            setup.conn_state.linger_on_close();
        }
        match (kept, handover) {
            // The tunnel takes the bytes after the head: only once any body is all read.
            (Ok(_), Some(handover))
                if status == StatusCode::SWITCHING_PROTOCOLS && upload.is_done() =>
            {
                Next::Upgrade(handover)
            }
            // Only a request that asked for an upgrade gets one.
            _ if status == StatusCode::SWITCHING_PROTOCOLS => Next::Close,
            (Ok(true), _) if upload.is_done() => {
                self.go_idle(setup.conn_state);
                Next::Request
            }
            _ => Next::Close,
        }
    }

    /// Between requests: a buffer that a large answer grew is let go. Unless the next
    /// head is here already (pipelining), a connection that has carried one request lets
    /// its buffers go at once ([`Connection::let_go`]): most that wait after one request
    /// wait long (an API client's one call, a browser's spare connection), and an idle
    /// connection, as nginx's, holds none. One that has carried more keeps them for the
    /// next request and tells the worker that it waits holding them; the worker asks it
    /// to let them go once it has waited half a second ([`ConnState::ask_let_go`]). A
    /// busy keep-alive connection thus takes and gives nothing between two requests.
    fn go_idle(&mut self, state: &ConnState) {
        self.answered = self.answered.saturating_add(1).min(2);
        self.out.shrink_to(KEPT_IDLE);
        if !self.read.is_empty() {
            return;
        }
        if self.answered == 1 {
            self.let_go();
        } else {
            state.holds_buffers();
        }
    }

    /// Lets the read and write buffers and the header map go: the read buffer to the
    /// worker's spares, which the next read takes from ([`poll_read_waiting`]), the
    /// others freed (the next request makes them again).
    fn let_go(&mut self) {
        spare::give_read(std::mem::take(&mut self.read));
        self.out.let_go();
        self.headers = HeaderMap::new();
    }

    /// Reads until a whole head is in the buffer, parsed into `slot`; `slot` is left
    /// empty when the client closed (or a timeout ended the connection quietly), or the
    /// worker drains before the next head has begun (one begun is read and answered,
    /// with `Connection: close`).
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        draining: &AtomicBool,
        state: &ConnState,
        slot: &mut Option<Head>,
    ) -> Poll<Result<(), NoHead>> {
        loop {
            if self.read.is_empty() && draining.load(Ordering::Relaxed) {
                return Poll::Ready(Ok(()));
            }
            if self.read.is_empty() && state.let_go_asked() {
                self.let_go();
            }
            if !self.read.is_empty() {
                let parsed = head::parse(
                    &mut self.read,
                    self.limits,
                    &mut self.headers,
                    &mut self.names,
                );
                match parsed {
                    Ok(Some(head)) => {
                        *slot = Some(head);
                        return Poll::Ready(Ok(()));
                    }
                    Ok(None) => {}
                    Err(malformed) => return Poll::Ready(Err(NoHead::Malformed(malformed))),
                }
            }
            match std::task::ready!(poll_read_waiting(&mut self.io, &mut self.read, cx)) {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(_) => {}
                Err(_) => return Poll::Ready(Err(NoHead::Failed)),
            }
        }
    }

    /// Drives the pipeline to its answer, put in `slot`, feeding it the body it asks for;
    /// ready with `slot` empty if the client went away first.
    fn poll_answer<F: Future<Output = Response<Logged>>>(
        &mut self,
        cx: &mut Context<'_>,
        mut answer: Pin<&mut F>,
        upload: &mut Upload,
        slot: &mut Option<Response<Logged>>,
    ) -> Poll<()> {
        loop {
            if let Poll::Ready(response) = answer.as_mut().poll(cx) {
                *slot = Some(response);
                return Poll::Ready(());
            }
            match upload.poll_pump(cx, &mut self.io, &mut self.read, &mut self.out) {
                Pumped::Fed => continue,
                Pumped::Waiting => return Poll::Pending,
                Pumped::Idle => {}
            }
            if upload.is_over() && self.gone(cx) {
                return Poll::Ready(());
            }
            return Poll::Pending;
        }
    }

    /// Whether the client closed (or broke) the connection while its request is under
    /// way. Bytes that come are the next request's, kept, and then nothing more is
    /// watched.
    fn gone(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.read.is_empty() {
            return false;
        }
        let read = poll_read_waiting(&mut self.io, &mut self.read, cx);
        matches!(read, Poll::Ready(Ok(0) | Err(_)))
    }

    /// Writes the answer; `Ok(true)` if the connection can carry another request. Its
    /// header map, emptied, is kept for the next head.
    async fn send(
        &mut self,
        response: &mut Response<Logged>,
        asked: Asked,
        upload: &mut Upload,
        (server, zero_copy): (Option<&http::HeaderValue>, bool),
    ) -> Result<bool, ()> {
        let written = response::write_answer(self.out.small(), response, asked, server);
        let headers = response.headers_mut();
        // An empty map (a 429's) has nothing to clear, and clearing walks its whole index.
        if !headers.is_empty() {
            headers.clear();
        }
        std::mem::swap(&mut self.headers, headers);
        let mut sending = Sending {
            body: response.body_mut(),
            framing: written.framing,
            ended: written.framing == Framing::Nothing,
            zero_copy,
        };
        poll_fn(|cx| self.poll_send(cx, &mut sending, upload)).await?;
        Ok(written.keep_alive && written.framing != Framing::Close)
    }

    /// Writes the queued bytes and the body as it comes, then flushes.
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        sending: &mut Sending<'_>,
        upload: &mut Upload,
    ) -> Poll<Result<(), ()>> {
        loop {
            if sending.ended || self.out.is_full() {
                std::task::ready!(self.out.poll_drain(&mut self.io, cx)).map_err(drop)?;
            }
            if sending.ended {
                return Pin::new(&mut self.io).poll_flush(cx).map_err(drop);
            }
            if sending.zero_copy && std::task::ready!(self.poll_zero_copy(cx, sending))? {
                continue;
            }
            match Pin::new(&mut *sending.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(piece) = frame.into_data() else {
                        continue;
                    };
                    if let (Framing::Chunked, 1..) = (sending.framing, piece.len()) {
                        sending.body.add_framing(chunk_framing(piece.len()));
                    }
                    let small = self.out.small();
                    match frame_piece(&mut sending.framing, piece, small) {
                        Ok(Some((large, suffix))) => self.out.set_large(large, suffix),
                        Ok(None) => {}
                        Err(_) => return Poll::Ready(Err(())),
                    }
                }
                Poll::Ready(Some(Err(err))) => {
                    tracing::debug!(error = %err, "response body failed");
                    return Poll::Ready(Err(()));
                }
                Poll::Ready(None) => {
                    if sending.framing == Framing::Chunked {
                        sending.body.add_framing(LAST_CHUNK.len() as u64);
                    }
                    frame_end(sending.framing, self.out.small()).map_err(drop)?;
                    sending.ended = true;
                }
                Poll::Pending => {
                    if upload.poll_pump(cx, &mut self.io, &mut self.read, &mut self.out)
                        == Pumped::Fed
                    {
                        continue;
                    }
                    std::task::ready!(self.out.poll_drain(&mut self.io, cx)).map_err(drop)?;
                    std::task::ready!(Pin::new(&mut self.io).poll_flush(cx)).map_err(drop)?;
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin + ZeroCopy> Connection<T> {
    /// Sends part of a file body with `sendfile` once what is queued (the head) is
    /// written: `true` when some went, `false` when the body is not a file sent whole
    /// with a length (multipart, compressed, chunked) or the stream cannot, and the body
    /// is read as any other.
    fn poll_zero_copy(&mut self, cx: &mut Context<'_>, sending: &mut Sending<'_>) -> Poll<Result<bool, ()>> {
        let Framing::Length(left) = &mut sending.framing else {
            return Poll::Ready(Ok(false));
        };
        let Some(file) = sending.body.file_mut() else {
            return Poll::Ready(Ok(false));
        };
        let Some((fd, mut offset, end)) = file.span() else {
            return Poll::Ready(Ok(false));
        };
        // The head goes with the body's first bytes (one segment, as nginx's tcp_nopush).
        while let Some(head) = self.out.pending_small() {
            let Some(sent) = self.io.poll_send_more(cx, head) else {
                break;
            };
            match std::task::ready!(sent) {
                Ok(0) | Err(_) => return Poll::Ready(Err(())),
                Ok(n) => self.out.written(n),
            }
        }
        std::task::ready!(self.out.poll_drain(&mut self.io, cx)).map_err(drop)?;
        let count = (end - offset).min(*left).min(zero_copy::MAX_CHUNK);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let sent = match self.io.poll_sendfile(cx, fd, &mut offset, count) {
            None => {
                sending.zero_copy = false;
                return Poll::Ready(Ok(false));
            }
            Some(polled) => std::task::ready!(polled),
        };
        match sent {
            Ok(0) => {
                tracing::debug!("the file shrank while it was sent");
                Poll::Ready(Err(()))
            }
            Ok(n) => {
                let n = n as u64;
                file.advance(n);
                *left -= n.min(*left);
                sending.body.add_sent(n);
                Poll::Ready(Ok(true))
            }
            Err(err) => {
                tracing::debug!(error = %err, "sendfile failed");
                Poll::Ready(Err(()))
            }
        }
    }
}

/// An answer's body on its way out.
struct Sending<'a> {
    body: &'a mut Logged,
    framing: Framing,
    ended: bool,
    /// A file body may go by `sendfile` (`[server] sendfile`, and the stream can).
    zero_copy: bool,
}

/// The pipeline's request for a head (whose parts it takes) and its body.
fn request(head: &mut Head, body: ClientBody) -> Request<ClientBody> {
    let mut request = Request::new(body);
    *request.method_mut() = std::mem::take(&mut head.method);
    *request.uri_mut() = std::mem::take(&mut head.uri);
    *request.version_mut() = head.version;
    *request.headers_mut() = std::mem::take(&mut head.headers);
    request
}

/// A request that asks for an upgrade: the handover of the connection after a 101.
fn upgrade(request: &mut Request<ClientBody>) -> Handover {
    let (handover, upgrade) = Handover::new();
    request.extensions_mut().insert(upgrade);
    handover
}

//! One upstream connection and the exchange on it: the request is written and the
//! response head read by the calling task itself, reading and writing side by side so
//! that an early response (a 413 to a big upload) is seen while the body still goes out.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body as HttpBody;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::body::{Body, RestOf};
use super::decode::{self, Head};
use super::encode::{self, Outbox, Upload, UploadError};
use super::stream::Stream;
use super::{Error, Exchange, SendError, Upgraded};
use crate::upstream::pool::ConnectError;
use crate::upstream::tls::ServerTls;
use crate::wire::body::{BodyError, Progress};
use crate::wire::h1::Names;

/// Read buffer size: most response heads and small bodies arrive in one read.
const READ_BUF: usize = 8 * 1024;
/// Below this much free room, the read buffer is topped up before reading.
const MIN_SPARE: usize = 2 * 1024;

/// An HTTP/1.1 connection to an upstream server, idle between exchanges. `Send`; it can
/// sit in a pool and be used by any task, one exchange at a time.
///
/// Boxed once when connected: a request's futures, results and response body move
/// the connection several times per exchange, and a pointer is cheaper to move than
/// the socket and its buffers (measured: fewer instructions per proxied request).
pub struct UpstreamConn(pub(super) Box<Parts>);

pub(super) struct Parts {
    pub(super) stream: Stream,
    /// Bytes read and not yet consumed. Its allocation is reused across exchanges once
    /// the previous response's slices of it have been dropped.
    pub(super) buf: BytesMut,
    /// The request's framing bytes; its allocation is reused as well.
    pub(super) out: Outbox,
    /// The `read_timeout` clock of heads and bodies, made at the first read that has to
    /// wait and kept for the connection's life: moving a registered timer later only
    /// updates it, where making and dropping one per exchange inserts it into the
    /// runtime's timer wheel and takes it out again (callgrind: about 450 instructions
    /// per proxied request). A connection stays on its worker's runtime (pools are per
    /// worker), the one its timer belongs to. While the connection idles in its pool the
    /// timer stays registered: when its last deadline passes, it wakes the task that last
    /// used the connection once, for nothing.
    timer: Option<Pin<Box<Sleep>>>,
    /// The header names of the last responses, which the next ones likely repeat.
    names: Names,
    /// An empty header map for the next response head: the last request's, cleared,
    /// so that maps go round instead of being made and dropped per exchange.
    spare: HeaderMap,
}

impl Parts {
    /// The read timer, set to go off at `deadline`.
    pub(super) fn arm(&mut self, deadline: Instant) -> Pin<&mut Sleep> {
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.armed()
    }

    /// The read timer as last armed ([`Parts::arm`] made it, or it is made here to go
    /// off at once).
    pub(super) fn armed(&mut self) -> Pin<&mut Sleep> {
        self.timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now())))
            .as_mut()
    }
}

impl fmt::Debug for UpstreamConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamConn")
            .field("peer", &self.0.stream.peer_addr().ok())
            .field("buffered", &self.0.buf.len())
            .finish()
    }
}

impl UpstreamConn {
    /// Connects, with `TCP_NODELAY` (small requests and responses must not wait for
    /// Nagle), then with `tls` shakes hands; both within `timeout`.
    pub async fn connect(
        addr: SocketAddr,
        tls: Option<&ServerTls>,
        timeout: Duration,
    ) -> Result<UpstreamConn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let timed_out = |handshake| ConnectError::Timeout {
            addr,
            after: timeout,
            handshake,
        };
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(source)) => return Err(ConnectError::Io { addr, source }),
            Err(_) => return Err(timed_out(false)),
        };
        let Some(tls) = tls else {
            return Ok(UpstreamConn::new(tcp));
        };
        let _ = tcp.set_nodelay(true);
        match tokio::time::timeout_at(deadline, tls.handshake(tcp)).await {
            Ok(Ok(stream)) => Ok(UpstreamConn::with_stream(Stream::Tls(Box::new(stream)))),
            Ok(Err(source)) => Err(ConnectError::Tls {
                addr,
                name: tls.name().into_owned(),
                source,
            }),
            Err(_) => Err(timed_out(true)),
        }
    }

    /// Wraps an already connected socket (sets `TCP_NODELAY`).
    pub fn new(tcp: TcpStream) -> UpstreamConn {
        let _ = tcp.set_nodelay(true);
        UpstreamConn::with_stream(Stream::Plain(tcp))
    }

    /// Wraps an already connected stream, plain or TLS.
    pub fn with_stream(stream: Stream) -> UpstreamConn {
        UpstreamConn(Box::new(Parts {
            stream,
            buf: BytesMut::with_capacity(READ_BUF),
            out: Outbox::default(),
            timer: None,
            names: Names::default(),
            spare: HeaderMap::new(),
        }))
    }

    /// Cheap check before reusing an idle connection: false if the server closed it or
    /// sent something unasked (often a 408 before closing). No await and, unless the
    /// reactor has seen the socket become readable, no syscall: a close that the reactor
    /// has not noticed yet passes, and [`UpstreamConn::send`] then fails with [`Error::Closed`].
    /// A connection found not reusable may have lost the byte looked at: drop it.
    pub fn is_reusable(&mut self) -> bool {
        self.0.buf.is_empty() && self.0.out.is_empty() && self.0.stream.probe().is_none()
    }

    /// Sends `req` and reads the response head.
    ///
    /// Framing: a body of exact size N goes with `content-length: N` (`content-length:
    /// 0` for an empty POST, PUT or PATCH), one of unknown size chunked; the caller has
    /// removed the client's own framing headers. The head and the first body frame, if
    /// it is ready, leave in one `writev`.
    ///
    /// `read_timeout`: the upstream must not be silent that long. With `progress` (a
    /// body being uploaded), the clock restarts with each frame read from the client,
    /// and time spent waiting on the client never counts (`client_body_timeout` is the
    /// body's own business).
    ///
    /// A response that comes while the body is still going out (413) stops the upload
    /// and is returned; the connection will not be reused. A 2xx that comes early keeps
    /// the upload going from the response body (a streaming server reads as it answers).
    pub async fn send<B>(
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

    /// [`UpstreamConn::send`], with `extra` headers written after the request's own (the
    /// forwarding headers, kept out of the request's map so that it never grows).
    pub async fn send_with<B>(
        mut self,
        mut req: Request<B>,
        extra: &[(HeaderName, HeaderValue)],
        read_timeout: Duration,
        progress: Option<&Progress>,
    ) -> Result<Exchange, SendError<B>>
    where
        B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
    {
        if let Some(err) = self.stale() {
            return Err(SendError::Unsent(req, err));
        }
        let head_request = req.method() == Method::HEAD;
        let mut upload = encode::start(&req, extra, &mut self.0.out);
        let mut write_failed = None;
        let deadline = HeadDeadline {
            read_timeout,
            progress,
        };
        let mut armed = false;
        let outcome = poll_fn(|cx| {
            let body = req.body_mut();
            let polled = self.poll_head(body, &mut upload, &mut write_failed, head_request, cx);
            if polled.is_ready() {
                return polled;
            }
            // The clock starts at the first wait: a head that is there at once needs none.
            let timer = if std::mem::replace(&mut armed, true) {
                self.0.armed()
            } else {
                self.0.arm(deadline.first())
            };
            if deadline.expired(timer, cx) {
                return Poll::Ready(Err(NoHead::Timeout));
            }
            Poll::Pending
        })
        .await;
        let head = match outcome {
            Ok(head) => head,
            Err(NoHead::Unsent(err)) => return Err(SendError::Unsent(req, err)),
            Err(NoHead::Failed(err)) => return Err(SendError::Failed(err, req)),
            Err(NoHead::ClientBody(err)) => return Err(SendError::ClientBody(err)),
            Err(NoHead::Timeout) => return Err(SendError::Timeout(req)),
        };
        Ok(self.respond(head, req, upload, write_failed.is_some(), read_timeout))
    }

    /// Turns a parsed head into the exchange's outcome, giving the connection to the
    /// upgraded stream or to the response body.
    fn respond<B>(
        mut self,
        head: Head,
        mut req: Request<B>,
        upload: Upload,
        write_failed: bool,
        read_timeout: Duration,
    ) -> Exchange
    where
        B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
    {
        let mut spare = std::mem::take(req.headers_mut());
        spare.clear();
        self.0.spare = spare;
        let mut response = Response::new(());
        *response.status_mut() = head.status;
        *response.version_mut() = head.version;
        *response.headers_mut() = head.headers;
        if head.status == StatusCode::SWITCHING_PROTOCOLS {
            let read_ahead = self.0.buf.split().freeze();
            let Parts { stream, .. } = *self.0;
            return Exchange::Upgraded(response, Upgraded::new(stream, read_ahead));
        }
        let complete = upload.is_complete(&self.0.out);
        let reusable = head.keep_alive && complete && !upload.close;
        // RFC 9112 §9.5: stop sending when the server answers early and does not want
        // the rest; a 2xx that keeps the connection open may still be reading.
        let rest = (!complete && !write_failed && head.keep_alive && head.status.is_success())
            .then(|| RestOf {
                body: req.into_body(),
                upload,
            });
        let body = Body::new(self, head.framing, reusable, read_timeout, rest);
        Exchange::Response(response.map(|()| body))
    }

    /// Why this connection must not carry a request, if it must not.
    fn stale(&mut self) -> Option<io::Error> {
        if !self.0.buf.is_empty() {
            return Some(io::Error::new(
                io::ErrorKind::InvalidData,
                "unread bytes on an idle upstream connection",
            ));
        }
        self.0.stream.probe()
    }

    /// Drives the upload and reads until a final response head (or a 101) is parsed.
    fn poll_head<B>(
        &mut self,
        body: &mut B,
        upload: &mut Upload,
        write_failed: &mut Option<io::Error>,
        head_request: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Head, NoHead>>
    where
        B: HttpBody<Data = Bytes, Error = BodyError> + Unpin,
    {
        loop {
            if !self.0.buf.is_empty() {
                let parts = &mut *self.0;
                match decode::parse(
                    &mut parts.buf,
                    head_request,
                    &mut parts.names,
                    &mut parts.spare,
                ) {
                    Ok(Some(head)) => return Poll::Ready(Ok(head)),
                    Ok(None) => {}
                    Err(err) => return Poll::Ready(Err(NoHead::Failed(err))),
                }
            }
            if write_failed.is_none() && !upload.is_complete(&self.0.out) {
                let parts = &mut *self.0;
                match upload.poll(Pin::new(&mut *body), &mut parts.stream, &mut parts.out, cx) {
                    Poll::Ready(Ok(())) | Poll::Pending => {}
                    Poll::Ready(Err(UploadError::Client(err))) => {
                        return Poll::Ready(Err(NoHead::ClientBody(err)))
                    }
                    Poll::Ready(Err(UploadError::Length)) => {
                        return Poll::Ready(Err(NoHead::Failed(Error::RequestLength)))
                    }
                    Poll::Ready(Err(UploadError::Io(err))) if !upload.wrote && !upload.touched => {
                        return Poll::Ready(Err(NoHead::Unsent(err)))
                    }
                    // The server may have answered before closing: read on.
                    Poll::Ready(Err(UploadError::Io(err))) => *write_failed = Some(err),
                }
            }
            match self.poll_read(cx) {
                Poll::Ready(Ok(0)) => {
                    let err = match write_failed.take() {
                        Some(err) => Error::Io(err),
                        None if self.0.buf.is_empty() => Error::Closed,
                        None => Error::IncompleteHead,
                    };
                    return Poll::Ready(Err(NoHead::Failed(err)));
                }
                Poll::Ready(Ok(_)) => {}
                // A server that closes a kept-alive connection just as a request reaches it
                // closes with the request unread, and the kernel answers that with a reset
                // instead of EOF: before any byte of an answer, the same close.
                Poll::Ready(Err(err))
                    if self.0.buf.is_empty() && write_failed.is_none() && is_reset(&err) =>
                {
                    return Poll::Ready(Err(NoHead::Failed(Error::Closed)))
                }
                Poll::Ready(Err(err)) => return Poll::Ready(Err(NoHead::Failed(Error::Io(err)))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Reads what the socket has into `buf`; `Ok(0)` is EOF. The buffer grows only when
    /// less than [`MIN_SPARE`] is free (a head that does not fit doubles it).
    pub(super) fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.0.buf.capacity() - self.0.buf.len() < MIN_SPARE {
            let len = self.0.buf.len();
            self.0.buf.reserve(READ_BUF.max(len));
        }
        // `read_buf` fills the spare capacity without initializing it first, and clears
        // the socket's readiness on a short read, saving the EAGAIN syscall.
        let parts = &mut *self.0;
        let read = std::pin::pin!(parts.stream.read_buf(&mut parts.buf));
        read.poll(cx)
    }
}

/// Whether a read failed because the server reset the connection (`EPIPE` when the reset
/// came after its FIN), or closed a TLS connection without its `close_notify`.
fn is_reset(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof
    )
}

/// How an exchange ended without a head.
enum NoHead {
    Unsent(io::Error),
    Failed(Error),
    ClientBody(BodyError),
    Timeout,
}

/// How long the upstream may stay silent before its response head: `read_timeout`,
/// counted from the last body frame read from the client when a body is uploaded.
struct HeadDeadline<'a> {
    read_timeout: Duration,
    progress: Option<&'a Progress>,
}

impl HeadDeadline<'_> {
    fn first(&self) -> Instant {
        match self.progress {
            Some(progress) => progress.deadline(self.read_timeout),
            None => Instant::from_std(crate::clock::now()) + self.read_timeout,
        }
    }

    /// True once the upstream has been quiet for `read_timeout`, counting from the
    /// last body frame and never while the body waits on the client.
    fn expired(&self, mut sleep: Pin<&mut Sleep>, cx: &mut Context<'_>) -> bool {
        loop {
            if sleep.as_mut().poll(cx).is_pending() {
                return false;
            }
            let Some(progress) = self.progress else {
                return true;
            };
            let now = Instant::now();
            let deadline = progress.deadline(self.read_timeout);
            if deadline > now {
                sleep.as_mut().reset(deadline);
            } else if progress.waiting_on_client() {
                // The client is the slow one; look again a little later.
                sleep
                    .as_mut()
                    .reset(now + Duration::from_millis(100).min(self.read_timeout));
            } else {
                return true;
            }
        }
    }
}

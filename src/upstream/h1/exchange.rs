//! The exchange on an upstream connection: the request is written and the response head
//! read by the calling task itself, reading and writing side by side so that an early
//! response (a 413 to a big upload) is seen while the body still goes out.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body as HttpBody;
use tokio::time::{Instant, Sleep};

use super::body::{Body, RestOf};
use super::conn::{Parts, UpstreamConn};
use super::decode::{self, Head};
use super::encode::{self, Upload, UploadError};
use super::{Error, Exchange, SendError, Upgraded};
use crate::wire::body::{BodyError, Progress};

impl UpstreamConn {
    /// Sends `req` and reads the response head; `extra` headers are written after the
    /// request's own (the forwarding headers, kept out of the request's map so that it
    /// never grows).
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
    pub(crate) async fn send_with<B>(
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
            // Part of the head has come: the rest may wait for its ACK.
            let read = if self.0.buf.is_empty() {
                self.poll_read(cx)
            } else {
                self.poll_read_more(cx)
            };
            match read {
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

//! The response body, read straight from the upstream socket when the client side polls
//! it, with `read_timeout` between two reads; once read whole on a keep-alive connection,
//! it gives the connection back through [`Body::take_reusable`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Instant;

use super::conn::UpstreamConn;
use super::decode::ResponseFraming;
use super::encode::{Outbox, Upload, UploadError};
use super::stream::Stream;
use super::Error;
use crate::wire::body::BodyError;
use crate::wire::h1::chunked::{Decoder, Step};

/// What is left of the response body to read, by its framing.
#[derive(Debug)]
enum Remaining {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Decoder),
    /// Until the server closes.
    Eof,
    /// Read whole, or failed.
    Done,
}

/// The rest of a request upload that goes on beside the response (a server that answered
/// 2xx before reading the whole request body).
pub(super) struct RestOf<B> {
    pub(super) body: B,
    pub(super) upload: Upload,
}

/// [`RestOf`] with its body type erased, so that [`Body`] is not generic.
trait Rest: Send {
    fn poll(
        &mut self,
        stream: &mut Stream,
        out: &mut Outbox,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), UploadError>>;
}

impl<B> Rest for RestOf<B>
where
    B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send,
{
    fn poll(
        &mut self,
        stream: &mut Stream,
        out: &mut Outbox,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), UploadError>> {
        self.upload.poll(Pin::new(&mut self.body), stream, out, cx)
    }
}

/// A response body streaming from its upstream connection. `Send`, not generic.
pub(crate) struct Body {
    /// `None` once handed back, or closed (after an error, or at the end of a body
    /// whose connection cannot be reused).
    conn: Option<UpstreamConn>,
    remaining: Remaining,
    /// The exchange allows reuse once the body has been read whole.
    reusable: bool,
    /// An error found while looking ahead, reported on the next poll.
    failed: Option<Error>,
    rest: Option<Box<dyn Rest>>,
    timeout: Duration,
    /// The connection's timer is armed only when a read has to wait: a body that is
    /// always ready costs no timer at all.
    progressed: bool,
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Body")
            .field("remaining", &self.remaining)
            .field("reusable", &self.reusable)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl Body {
    pub(super) fn new<B>(
        conn: UpstreamConn,
        framing: ResponseFraming,
        reusable: bool,
        timeout: Duration,
        rest: Option<RestOf<B>>,
    ) -> Body
    where
        B: HttpBody<Data = Bytes, Error = BodyError> + Unpin + Send + 'static,
    {
        let mut body = Body {
            conn: Some(conn),
            remaining: match framing {
                ResponseFraming::Empty => Remaining::Done,
                ResponseFraming::Length(n) => Remaining::Length(n),
                ResponseFraming::Chunked => Remaining::Chunked(Decoder::new()),
                ResponseFraming::Eof => Remaining::Eof,
            },
            reusable,
            failed: None,
            rest: rest.map(|rest| Box::new(rest) as Box<dyn Rest>),
            timeout,
            progressed: true,
        };
        body.settle();
        body
    }

    /// The connection, if the body has been read whole and the exchange allows reuse:
    /// HTTP/1.1 without `Connection: close` (or 1.0 with `keep-alive`) both ways, a
    /// length or chunked framing read to its end, the request fully written, and nothing
    /// left over in the buffer. Call it when the body is dropped; `None` means the
    /// connection has been (or will be, with the body) closed.
    pub(crate) fn take_reusable(&mut self) -> Option<UpstreamConn> {
        if !matches!(self.remaining, Remaining::Done) || !self.reusable || self.rest.is_some() {
            return None;
        }
        self.conn
            .take()
            .filter(|conn| conn.0.buf.is_empty() && conn.0.out.is_empty())
    }

    /// At the end, closes a connection that cannot be reused (no need to hold a socket
    /// until the body is dropped).
    fn settle(&mut self) {
        let leftover = self.conn.as_ref().is_some_and(|c| !c.0.buf.is_empty());
        if matches!(self.remaining, Remaining::Done)
            && (!self.reusable || self.rest.is_some() || leftover)
        {
            self.conn = None;
            // An upload still going on is abandoned with its connection.
            self.rest = None;
            self.reusable = false;
        }
    }

    fn fail(&mut self, err: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.conn = None;
        self.remaining = Remaining::Done;
        self.reusable = false;
        self.rest = None;
        Poll::Ready(Some(Err(err)))
    }

    /// Writes more of a request that is still uploading; only the client's own body
    /// failing is an error (if the server stopped reading, its response says the rest).
    fn drive_rest(&mut self, cx: &mut Context<'_>) -> Result<(), Error> {
        let (Some(rest), Some(conn)) = (self.rest.as_mut(), self.conn.as_mut()) else {
            return Ok(());
        };
        let parts = &mut *conn.0;
        match rest.poll(&mut parts.stream, &mut parts.out, cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(Err(UploadError::Client(err))) => Err(Error::ClientBody(err)),
            Poll::Ready(_) => {
                // Done, or abandoned: either way the connection will not be reused.
                self.rest = None;
                self.reusable = false;
                Ok(())
            }
        }
    }

    /// The next piece of data, `None` at the end.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Poll::Ready(Ok(None));
            };
            match &mut self.remaining {
                Remaining::Done => return Poll::Ready(Ok(None)),
                Remaining::Length(remaining) if !conn.0.buf.is_empty() => {
                    let n = (*remaining).min(conn.0.buf.len() as u64);
                    *remaining -= n;
                    if *remaining == 0 {
                        self.remaining = Remaining::Done;
                    }
                    return Poll::Ready(Ok(Some(conn.0.buf.split_to(n as usize).freeze())));
                }
                Remaining::Length(_) => {}
                Remaining::Chunked(decoder) => match decoder.decode(&mut conn.0.buf)? {
                    Step::Data(data) => {
                        // See the end now if it is buffered, so that the last frame
                        // comes with `is_end_stream`.
                        match decoder.skip_framing(&mut conn.0.buf) {
                            Err(err) => self.failed = Some(err.into()),
                            Ok(()) if decoder.is_done() => self.remaining = Remaining::Done,
                            Ok(()) => {}
                        }
                        return Poll::Ready(Ok(Some(data)));
                    }
                    Step::Done => {
                        self.remaining = Remaining::Done;
                        return Poll::Ready(Ok(None));
                    }
                    Step::NeedMore => {}
                },
                Remaining::Eof if !conn.0.buf.is_empty() => {
                    return Poll::Ready(Ok(Some(conn.0.buf.split().freeze())));
                }
                Remaining::Eof => {}
            }
            match ready!(conn.poll_read_more(cx)) {
                Ok(0) if matches!(self.remaining, Remaining::Eof) => {
                    self.remaining = Remaining::Done;
                    return Poll::Ready(Ok(None));
                }
                // A body cut short is an error, never a clean end.
                Ok(0) => return Poll::Ready(Err(Error::IncompleteBody)),
                Ok(_) => {}
                Err(err) => return Poll::Ready(Err(Error::Io(err))),
            }
        }
    }

    /// True once nothing has come for `timeout` since the last frame.
    fn idle_too_long(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let timer = if std::mem::replace(&mut self.progressed, false) {
            conn.0
                .arm(Instant::from_std(crate::clock::now()) + self.timeout)
        } else {
            conn.0.armed()
        };
        timer.poll(cx).is_ready()
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        if let Some(err) = this.failed.take() {
            return this.fail(err);
        }
        if let Err(err) = this.drive_rest(cx) {
            return this.fail(err);
        }
        match this.poll_data(cx) {
            Poll::Ready(Ok(Some(data))) => {
                this.progressed = true;
                this.settle();
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Ok(None)) => {
                this.settle();
                Poll::Ready(None)
            }
            Poll::Ready(Err(err)) => this.fail(err),
            Poll::Pending if this.idle_too_long(cx) => this.fail(Error::Timeout),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.remaining, Remaining::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Remaining::Length(n) => SizeHint::with_exact(n),
            Remaining::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

//! The request on the wire: the head as given plus the framing we choose, and the body
//! streamed frame by frame, either as is (`content-length`) or chunk-encoded.
//!
//! Framing bytes (head, chunk-size lines) go into one reusable buffer; body data is never
//! copied: each frame is written with a `writev` of [framing, data, CRLF]. The body is
//! polled once before the first write so that a small request goes out in one syscall.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::header::CONNECTION;
use http::{HeaderName, HeaderValue};
use http::{Method, Request};
use http_body::Body as HttpBody;
use tokio::io::AsyncWrite;

use super::stream::Stream;
use crate::wire::body::BodyError;
use crate::wire::h1::{has_token, push_decimal, push_hex};

/// Bytes waiting to be written, in order: `pre`, `data`, `post`.
#[derive(Default)]
pub(super) struct Outbox {
    /// Head and chunk-size lines; its allocation is kept for the connection's life.
    pre: Vec<u8>,
    pos: usize,
    /// One body frame, sent without a copy.
    data: Bytes,
    /// What follows the frame: CRLF after a chunk, or the last chunk.
    post: &'static [u8],
    /// Written bytes may still sit in the stream (TLS records the socket did not take
    /// yet) until it is flushed.
    unflushed: bool,
}

impl Outbox {
    /// Nothing left to write, nor to flush.
    pub(super) fn is_empty(&self) -> bool {
        self.pos == self.pre.len()
            && self.data.is_empty()
            && self.post.is_empty()
            && !self.unflushed
    }

    /// More may be queued only behind `pre` (data and post follow it on the wire).
    fn can_queue(&self) -> bool {
        self.data.is_empty() && self.post.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.pre.clear();
        self.pos = 0;
        self.data = Bytes::new();
        self.post = b"";
        self.unflushed = false;
    }

    /// Writes everything queued, then flushes the stream; `wrote` turns true with the
    /// first byte that leaves.
    pub(super) fn poll_flush(
        &mut self,
        stream: &mut Stream,
        cx: &mut Context<'_>,
        wrote: &mut bool,
    ) -> Poll<io::Result<()>> {
        while self.pos != self.pre.len() || !self.data.is_empty() || !self.post.is_empty() {
            let slices = [
                IoSlice::new(&self.pre[self.pos..]),
                IoSlice::new(&self.data),
                IoSlice::new(self.post),
            ];
            let n = ready!(Pin::new(&mut *stream).poll_write_vectored(cx, &slices))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *wrote = true;
            self.unflushed = true;
            self.advance(n);
        }
        if self.unflushed {
            ready!(Pin::new(&mut *stream).poll_flush(cx))?;
            self.unflushed = false;
        }
        Poll::Ready(Ok(()))
    }

    fn advance(&mut self, mut n: usize) {
        let from_pre = n.min(self.pre.len() - self.pos);
        self.pos += from_pre;
        n -= from_pre;
        if self.pos == self.pre.len() {
            self.pre.clear();
            self.pos = 0;
        }
        let from_data = n.min(self.data.len());
        self.data.advance(from_data);
        n -= from_data;
        self.post = self.post.get(n..).unwrap_or_default();
    }
}

/// How the request body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestFraming {
    /// No body.
    Empty,
    /// `content-length`: this many bytes still to come.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
}

/// Why the upload stopped.
#[derive(Debug)]
pub(super) enum UploadError {
    /// The client's body failed.
    Client(BodyError),
    /// The body yielded more or fewer bytes than its exact size hint promised.
    Length,
    /// Writing to the upstream failed.
    Io(io::Error),
}

/// The state of one request's upload.
pub(super) struct Upload {
    framing: RequestFraming,
    /// Every byte of the request is queued (the body ended or there is none).
    ended: bool,
    /// The body's declared length is all queued, but the body has not said it ended:
    /// its last bytes wait for the end (see [`Upload::poll_end`]).
    awaiting_end: bool,
    /// A frame or the end was taken from the body: it can no longer be resent as is.
    pub(super) touched: bool,
    /// At least one byte reached the socket.
    pub(super) wrote: bool,
    /// The request itself asked for `Connection: close`.
    pub(super) close: bool,
}

/// Methods whose empty body is still announced with `content-length: 0`, as most
/// clients do (RFC 9110 §8.6: a body is expected for them).
fn announces_empty_body(method: &Method) -> bool {
    *method == Method::POST || *method == Method::PUT || *method == Method::PATCH
}

/// Queues the request head (request line, the caller's headers as given, then our
/// framing header) and returns the upload state for the body.
pub(super) fn start<B: HttpBody>(
    req: &Request<B>,
    extra: &[(HeaderName, HeaderValue)],
    out: &mut Outbox,
) -> Upload {
    let body = req.body();
    let framing = match body.size_hint().exact() {
        _ if body.is_end_stream() => RequestFraming::Empty,
        Some(0) => RequestFraming::Empty,
        Some(n) => RequestFraming::Length(n),
        None => RequestFraming::Chunked,
    };
    out.clear();
    let pre = &mut out.pre;
    pre.extend_from_slice(req.method().as_str().as_bytes());
    pre.push(b' ');
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    pre.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    pre.extend_from_slice(b" HTTP/1.1\r\n");
    let mut close = false;
    let extra = extra.iter().map(|(name, value)| (name, value));
    for (name, value) in req.headers().iter().chain(extra) {
        if *name == CONNECTION {
            close |= has_token(value.as_bytes(), b"close");
        }
        pre.extend_from_slice(name.as_str().as_bytes());
        pre.extend_from_slice(b": ");
        pre.extend_from_slice(value.as_bytes());
        pre.extend_from_slice(b"\r\n");
    }
    match framing {
        RequestFraming::Empty if announces_empty_body(req.method()) => {
            pre.extend_from_slice(b"content-length: 0\r\n");
        }
        RequestFraming::Empty => {}
        RequestFraming::Length(n) => {
            pre.extend_from_slice(b"content-length: ");
            push_decimal(pre, n);
            pre.extend_from_slice(b"\r\n");
        }
        RequestFraming::Chunked => pre.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    pre.extend_from_slice(b"\r\n");
    Upload {
        framing,
        ended: framing == RequestFraming::Empty,
        awaiting_end: false,
        touched: false,
        wrote: false,
        close,
    }
}

impl Upload {
    /// Every byte of the request has been written.
    pub(super) fn is_complete(&self, out: &Outbox) -> bool {
        self.ended && out.is_empty()
    }

    /// Writes the request: queued bytes, then body frames as they come, one `writev` per
    /// frame. Ready(Ok) once all of it is written; Pending while waiting on the body or on
    /// the socket (both wakers are registered).
    pub(super) fn poll<B>(
        &mut self,
        mut body: Pin<&mut B>,
        stream: &mut Stream,
        out: &mut Outbox,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), UploadError>>
    where
        B: HttpBody<Data = Bytes, Error = BodyError>,
    {
        let mut body_pending = false;
        loop {
            if self.awaiting_end {
                ready!(self.poll_end(body.as_mut(), out, cx))?;
            }
            if !self.ended && !body_pending && out.can_queue() {
                match body.as_mut().poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        self.touched = true;
                        if let Ok(data) = frame.into_data() {
                            self.queue(data, body.is_end_stream(), out)?;
                        }
                        continue;
                    }
                    Poll::Ready(Some(Err(err))) => {
                        self.touched = true;
                        return Poll::Ready(Err(UploadError::Client(err)));
                    }
                    Poll::Ready(None) => {
                        self.touched = true;
                        self.finish(out)?;
                        continue;
                    }
                    Poll::Pending => body_pending = true,
                }
            }
            if out.is_empty() {
                return if self.ended {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                };
            }
            ready!(out.poll_flush(stream, cx, &mut self.wrote)).map_err(UploadError::Io)?;
        }
    }

    /// Waits for the end of a body whose declared length is all queued, before its last
    /// bytes are written: an upstream never gets as a whole a request whose client goes
    /// on sending. More data is an error (RFC 9113 §8.1.1: DATA past `content-length`
    /// make an HTTP/2 request malformed; h2 resets the stream too). Trailers are dropped.
    fn poll_end<B>(
        &mut self,
        mut body: Pin<&mut B>,
        out: &mut Outbox,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), UploadError>>
    where
        B: HttpBody<Data = Bytes, Error = BodyError>,
    {
        loop {
            match ready!(body.as_mut().poll_frame(cx)) {
                None => {
                    self.awaiting_end = false;
                    return Poll::Ready(self.finish(out));
                }
                Some(Ok(frame)) if frame.data_ref().is_some_and(|data| !data.is_empty()) => {
                    return Poll::Ready(Err(UploadError::Length));
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Poll::Ready(Err(UploadError::Client(err))),
            }
        }
    }

    /// Queues one data frame; `last` when the body says it has ended with it.
    fn queue(&mut self, data: Bytes, last: bool, out: &mut Outbox) -> Result<(), UploadError> {
        // Trailer frames are dropped (they are hop-by-hop for a proxy unless negotiated).
        let len = data.len() as u64;
        match self.framing {
            RequestFraming::Length(remaining) => {
                let remaining = remaining.checked_sub(len).ok_or(UploadError::Length)?;
                self.framing = RequestFraming::Length(remaining);
                out.data = data;
                if last {
                    self.finish(out)?;
                } else {
                    self.awaiting_end = remaining == 0;
                }
            }
            RequestFraming::Chunked if len == 0 => {
                // An empty chunk would end the body on the wire.
                if last {
                    self.finish(out)?;
                }
            }
            RequestFraming::Chunked => {
                push_hex(&mut out.pre, len);
                out.pre.extend_from_slice(b"\r\n");
                out.data = data;
                out.post = if last { b"\r\n0\r\n\r\n" } else { b"\r\n" };
                self.ended = last;
            }
            RequestFraming::Empty => return Err(UploadError::Length),
        }
        Ok(())
    }

    /// The body ended: check its length, or queue the last chunk.
    fn finish(&mut self, out: &mut Outbox) -> Result<(), UploadError> {
        match self.framing {
            RequestFraming::Length(0) | RequestFraming::Empty => {}
            RequestFraming::Length(_) => return Err(UploadError::Length),
            RequestFraming::Chunked if out.post.is_empty() => {
                out.pre.extend_from_slice(b"0\r\n\r\n")
            }
            // The last frame's post already carries the last chunk.
            RequestFraming::Chunked => {}
        }
        self.ended = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_carries_headers_as_given_then_our_framing() {
        let req = Request::post("/submit?x=1")
            .header("host", "app")
            .header("x-two", "a")
            .header("x-two", "b")
            .header("connection", "keep-alive, Close")
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap_or_default();
        let mut out = Outbox::default();
        let upload = start(&req, &[], &mut out);
        assert!(upload.close);
        assert!(upload.ended);
        assert_eq!(
            String::from_utf8_lossy(&out.pre),
            "POST /submit?x=1 HTTP/1.1\r\nhost: app\r\nx-two: a\r\nx-two: b\r\n\
             connection: keep-alive, Close\r\ncontent-length: 0\r\n\r\n"
        );
    }

    #[test]
    fn bodiless_get_announces_no_length() {
        let req =
            Request::get("http://ignored.example/").body(http_body_util::Empty::<Bytes>::new());
        let req = req.unwrap_or_default();
        let mut out = Outbox::default();
        let upload = start(&req, &[], &mut out);
        assert!(!upload.close);
        assert_eq!(out.pre, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn advance_walks_pre_then_data_then_post() {
        let mut out = Outbox::default();
        out.pre.extend_from_slice(b"5\r\n");
        out.data = Bytes::from_static(b"hello");
        out.post = b"\r\n";
        out.advance(2);
        assert_eq!(&out.pre[out.pos..], b"\n");
        out.advance(3);
        assert!(out.pre.is_empty());
        assert_eq!(&out.data[..], b"llo");
        out.advance(4);
        assert_eq!(out.post, b"\n");
        out.advance(1);
        assert!(out.is_empty());
    }
}

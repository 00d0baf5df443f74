//! The client's request body as the pipeline reads it. An HTTP/2 body is hyper's stream,
//! an HTTP/3 body h3's request stream ([`H3Body`]);
//! an HTTP/1.1 body is decoded by its connection (`server/h1`), which alone reads the
//! socket, and handed over here a piece at a time through a [`Feed`], only when the
//! reader asks for one (so an upload is read no faster than it is sent on).

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// A request's body, whichever protocol brought it (a variant per [`Protocol`]).
///
/// [`Protocol`]: crate::wire::Protocol
pub enum ClientBody {
    /// None: no `Content-Length` (or 0) and not chunked.
    Empty,
    /// Decoded by its HTTP/1.1 connection and fed here ([`feed`]).
    Http1(Fed),
    /// hyper's HTTP/2 stream.
    Http2(Incoming),
    /// h3's HTTP/3 request stream, its receiving half.
    Http3(Box<H3Body>),
}

/// An HTTP/3 request's body: the receiving half of its stream, and the length its
/// `Content-Length` declared (for `client_max_body_size` before any byte is read).
pub struct H3Body {
    stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    declared: Option<u64>,
    done: bool,
}

impl H3Body {
    /// The body of `stream`, declared `declared` bytes long (when said).
    pub fn new(stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>, declared: Option<u64>) -> H3Body {
        H3Body {
            stream,
            declared,
            done: false,
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.stream.poll_recv_data(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(mut data))) => {
                let len = bytes::Buf::remaining(&data);
                let bytes = bytes::Buf::copy_to_bytes(&mut data, len);
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Poll::Ready(Ok(None)) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Err(err)) => {
                self.done = true;
                Poll::Ready(Some(Err(ClientBodyError::Http3(Box::new(err)))))
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.declared {
            Some(length) => SizeHint::with_exact(length),
            None => SizeHint::default(),
        }
    }
}

/// Why a client's body broke off.
#[derive(Debug)]
pub enum ClientBodyError {
    /// HTTP/2: the stream was reset, or its connection failed.
    Http2(hyper::Error),
    /// HTTP/3: the stream was reset, or its connection failed.
    Http3(Box<h3::error::StreamError>),
    /// HTTP/1.1: the connection closed or failed before the body's end.
    Closed,
    /// HTTP/1.1: the chunked framing broke its grammar (the connection ends with it).
    Framing(&'static str),
}

impl fmt::Display for ClientBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientBodyError::Http2(err) => write!(f, "{err}"),
            ClientBodyError::Http3(err) => write!(f, "{err}"),
            ClientBodyError::Closed => f.write_str("connection closed before the body's end"),
            ClientBodyError::Framing(what) => write!(f, "malformed chunked body: {what}"),
        }
    }
}

impl StdError for ClientBodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ClientBodyError::Http2(err) => Some(err),
            ClientBodyError::Http3(err) => Some(err),
            _ => None,
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        match self.get_mut() {
            ClientBody::Empty => Poll::Ready(None),
            ClientBody::Http1(fed) => fed.poll_frame(cx),
            ClientBody::Http2(body) => Pin::new(body)
                .poll_frame(cx)
                .map_err(ClientBodyError::Http2),
            ClientBody::Http3(body) => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::Http1(fed) => fed.is_end_stream(),
            ClientBody::Http2(body) => body.is_end_stream(),
            ClientBody::Http3(body) => body.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Empty => SizeHint::with_exact(0),
            ClientBody::Http1(fed) => fed.size_hint(),
            ClientBody::Http2(body) => body.size_hint(),
            ClientBody::Http3(body) => body.size_hint(),
        }
    }
}

/// What passes from the connection to the body's reader: at most one piece at a time.
#[derive(Default)]
struct Slot {
    piece: Option<Bytes>,
    /// How the body ended, once it has (taken by the reader after the last piece).
    end: Option<Result<(), ClientBodyError>>,
    /// The reader found the slot empty and waits.
    wanted: bool,
    waker: Option<Waker>,
    /// The reader dropped the body.
    gone: bool,
}

/// The reader's end: an HTTP/1.1 request's body.
pub struct Fed {
    slot: Arc<Mutex<Slot>>,
    /// A `Content-Length` body: the bytes still to come.
    remaining: Option<u64>,
    ended: bool,
}

/// The connection's end of an HTTP/1.1 body.
pub(crate) struct Feed {
    slot: Arc<Mutex<Slot>>,
}

/// A body's two ends; `length` is its `Content-Length`, `None` for chunked.
pub(crate) fn feed(length: Option<u64>) -> (Feed, Fed) {
    let slot = Arc::new(Mutex::new(Slot::default()));
    let fed = Fed {
        slot: slot.clone(),
        remaining: length,
        ended: false,
    };
    (Feed { slot }, fed)
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // Nothing panics while holding it; a poisoned slot is still consistent.
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Fed {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let mut slot = lock(&self.slot);
        if let Some(piece) = slot.piece.take() {
            slot.wanted = false;
            if let Some(remaining) = &mut self.remaining {
                *remaining = remaining.saturating_sub(piece.len() as u64);
            }
            return Poll::Ready(Some(Ok(Frame::data(piece))));
        }
        if let Some(end) = slot.end.take() {
            self.ended = true;
            return Poll::Ready(end.err().map(Err));
        }
        slot.wanted = true;
        match &slot.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        if self.ended || self.remaining == Some(0) {
            return true;
        }
        let slot = lock(&self.slot);
        slot.piece.is_none() && matches!(slot.end, Some(Ok(())))
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(remaining) => SizeHint::with_exact(remaining),
            None => SizeHint::default(),
        }
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        lock(&self.slot).gone = true;
    }
}

impl Feed {
    /// The reader waits for a piece that is not there yet.
    pub(crate) fn wanted(&self) -> bool {
        let slot = lock(&self.slot);
        slot.wanted && slot.piece.is_none() && slot.end.is_none() && !slot.gone
    }

    /// The reader dropped the body before its end.
    pub(crate) fn gone(&self) -> bool {
        lock(&self.slot).gone
    }

    /// Hands the reader its next piece.
    pub(crate) fn push(&self, piece: Bytes) {
        let mut slot = lock(&self.slot);
        slot.piece = Some(piece);
        Self::wake(slot);
    }

    /// The body ended (well, or with `Err`).
    pub(crate) fn finish(&self, end: Result<(), ClientBodyError>) {
        let mut slot = lock(&self.slot);
        slot.end = Some(end);
        Self::wake(slot);
    }

    fn wake(mut slot: MutexGuard<'_, Slot>) {
        let waker = slot.wanted.then(|| slot.waker.take()).flatten();
        slot.wanted = false;
        drop(slot);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    #[tokio::test]
    async fn pieces_come_out_in_order_and_the_end_after_the_last() {
        let (feed, fed) = feed(None);
        let mut body = ClientBody::Http1(fed);
        let waiting = poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx).is_pending()));
        assert!(waiting.await, "nothing fed yet");
        assert!(feed.wanted());
        feed.push(Bytes::from_static(b"ab"));
        assert!(!feed.wanted());
        let frame = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), "ab");
        feed.finish(Ok(()));
        assert!(body.is_end_stream());
        assert!(poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .is_none());
        drop(body);
        assert!(feed.gone());
    }

    #[tokio::test]
    async fn a_length_body_knows_its_end_with_its_last_piece() {
        let (feed, fed) = feed(Some(3));
        let mut body = ClientBody::Http1(fed);
        assert_eq!(body.size_hint().exact(), Some(3));
        feed.push(Bytes::from_static(b"abc"));
        let frame = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        assert!(frame.unwrap().is_ok());
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn a_broken_body_ends_with_its_error() {
        let (feed, fed) = feed(None);
        let mut body = ClientBody::Http1(fed);
        feed.finish(Err(ClientBodyError::Closed));
        let frame = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        assert!(matches!(frame, Some(Err(ClientBodyError::Closed))));
    }
}

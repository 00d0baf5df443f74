//! A response body compressed as it streams (`compress`): gzip, brotli or zstd.
//!
//! The inner body is read as the client takes the output, never whole: output goes out in
//! chunks of at least [`CHUNK`] bytes, or smaller at a flush and at the end. When the inner
//! body has nothing more for now (a slow upstream), what was fed in is flushed (a sync
//! flush, which every decoder can decode up to) and handed on, so the client sees the
//! answer as it comes; nginx instead holds its output until `gzip_buffers` fill. Held per
//! stream: the coder (made at the first read, so a HEAD's body, never read, costs none;
//! dropped once the stream ends) and at most [`OUT_CAPACITY`] bytes of output.
//!
//! The inner body's trailers are passed on after the encoded data; its errors are passed
//! on as they are; a coder's error is [`BodyError::Encode`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::BodyError;
use crate::config::Encoding;

mod coder;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(test)]
mod tests;

use coder::{Coder, Op};

/// Output is handed on once this much is ready: a few TLS records' worth, so writes stay
/// large and their count per byte low.
const CHUNK: usize = 16 * 1024;
/// The output buffer's capacity: below [`CHUNK`] before each step of the coder, so a step
/// always has at least `CHUNK` bytes to write into, and never grows it.
const OUT_CAPACITY: usize = 2 * CHUNK;

/// `inner`'s bytes, compressed with `coding`.
pub(crate) struct Encoded<B> {
    inner: B,
    coding: Encoding,
    /// The inner body's exact length when it knew it at the start: sizes the window.
    length: Option<u64>,
    /// Made at the first step; dropped when the stream ends or fails.
    coder: Option<Coder>,
    /// Output not yet handed on; its capacity is taken at the first step.
    out: Vec<u8>,
    /// Data of the inner body not yet all taken by the coder.
    input: Bytes,
    phase: Phase,
    /// The inner body's trailers, sent after the last data.
    trailers: Option<HeaderMap>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the inner body; `fed`: input went into the coder since its last flush.
    Reading { fed: bool },
    /// Feeding `input` to the coder.
    Feeding,
    /// Flushing the coder: the inner body had nothing more for now.
    Flushing,
    /// Ending the stream: the inner body ended.
    Finishing,
    /// The encoded stream is all out; the trailers, if any, follow.
    Trailers,
    Done,
}

type Polled = Poll<Option<Result<Frame<Bytes>, BodyError>>>;

impl<B> Encoded<B>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    pub(crate) fn new(inner: B, coding: Encoding) -> Encoded<B> {
        let length = inner.size_hint().exact();
        Encoded {
            inner,
            coding,
            length,
            coder: None,
            out: Vec::new(),
            input: Bytes::new(),
            phase: Phase::Reading { fed: false },
            trailers: None,
        }
    }

    /// One step of the coder, making it first if need be: `Process` feeds it `input`.
    /// Whether the step is done (see [`coder::Step`]).
    fn code(&mut self, op: Op) -> io::Result<bool> {
        let coder = match &mut self.coder {
            Some(coder) => coder,
            slot @ None => slot.insert(Coder::new(self.coding, self.length)?),
        };
        if self.out.capacity() == 0 {
            self.out.reserve_exact(OUT_CAPACITY);
        }
        let input: &[u8] = if op == Op::Process { &self.input } else { &[] };
        let written = self.out.len();
        let step = coder.step(op, input, &mut self.out)?;
        if !step.done && step.consumed == 0 && self.out.len() == written {
            // Every coder moves with this much room; one that does not would spin.
            return Err(io::Error::other("the coder made no progress"));
        }
        self.input.advance(step.consumed.min(self.input.len()));
        Ok(step.done)
    }

    /// The output so far, as a data frame.
    fn chunk(&mut self) -> Polled {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(std::mem::take(&mut self.out))))))
    }

    /// The stream ends with `err`; the coder's memory goes at once.
    fn fail(&mut self, err: BodyError) -> Polled {
        self.phase = Phase::Done;
        self.coder = None;
        self.input = Bytes::new();
        Poll::Ready(Some(Err(err)))
    }

    /// Reads the inner body once: `Some` when that gives this body's answer to the poll.
    fn read(&mut self, cx: &mut Context<'_>, fed: bool) -> Option<Polled> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) if data.is_empty() => {}
                Ok(data) => {
                    self.input = data;
                    self.phase = Phase::Feeding;
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        self.trailers = Some(trailers);
                    }
                }
            },
            Poll::Ready(Some(Err(err))) => return Some(self.fail(err)),
            Poll::Ready(None) => self.phase = Phase::Finishing,
            Poll::Pending if fed => self.phase = Phase::Flushing,
            Poll::Pending if !self.out.is_empty() => return Some(self.chunk()),
            Poll::Pending => return Some(Poll::Pending),
        }
        None
    }
}

impl<B> Body for Encoded<B>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        loop {
            if this.out.len() >= CHUNK {
                return this.chunk();
            }
            let (op, next) = match this.phase {
                Phase::Reading { fed } => match this.read(cx, fed) {
                    Some(polled) => return polled,
                    None => continue,
                },
                Phase::Feeding => (Op::Process, Phase::Reading { fed: true }),
                Phase::Flushing => (Op::Flush, Phase::Reading { fed: false }),
                Phase::Finishing => (Op::Finish, Phase::Trailers),
                Phase::Trailers => {
                    this.phase = Phase::Done;
                    this.out = Vec::new();
                    match this.trailers.take() {
                        Some(trailers) => return Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
                        None => continue,
                    }
                }
                Phase::Done => return Poll::Ready(None),
            };
            match this.code(op) {
                Ok(false) => {}
                Ok(true) => {
                    this.phase = next;
                    if next == Phase::Trailers {
                        this.coder = None;
                    }
                    // A flush or the end hands on what it made, however little.
                    if op != Op::Process && !this.out.is_empty() {
                        return this.chunk();
                    }
                }
                Err(err) => return this.fail(BodyError::Encode(err)),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Unknown: the compressed length is known only at the end (HTTP/1.1 chunks it).
    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

//! The coders as the integration tests and benches drive them (the `testing` feature):
//! from outside the crate, which cannot name [`Encoding`], its own.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::Encoded;
use crate::config::Encoding;
use crate::wire::body::BodyError;

/// Encodes `input` with the coding named `token` (`gzip`, `br`, `zstd`) as an answer's
/// body is: read in frames of `frame` bytes, each followed by a pause of the inner body
/// (which flushes the coder) when `pauses`, from an inner body that tells its length when
/// `known`. Returns the encoded length; the output is dropped chunk by chunk, as a
/// connection that writes it would.
pub fn encoded_len(
    token: &str,
    input: &Bytes,
    frame: usize,
    pauses: bool,
    known: bool,
) -> Result<u64, BodyError> {
    let coding = match token {
        "gzip" => Encoding::Gzip,
        "br" => Encoding::Br,
        "zstd" => Encoding::Zstd,
        _ => return Err(BodyError::Encode(std::io::Error::other("no such coding"))),
    };
    let inner = Frames {
        input: input.clone(),
        frame: frame.max(1),
        pauses,
        paused: true,
        known,
    };
    let mut body = Encoded::new(inner, coding);
    let mut cx = Context::from_waker(Waker::noop());
    let mut len = 0;
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => return Ok(len),
            Poll::Ready(Some(Ok(frame))) => {
                len += frame.data_ref().map_or(0, |data| data.len() as u64);
            }
            Poll::Ready(Some(Err(err))) => return Err(err),
            Poll::Pending => {}
        }
    }
}

/// `input` in frames, with a pause before each but the first when `pauses`.
struct Frames {
    input: Bytes,
    frame: usize,
    pauses: bool,
    paused: bool,
    known: bool,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.input.is_empty() {
            return Poll::Ready(None);
        }
        if this.pauses && !std::mem::replace(&mut this.paused, true) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.paused = false;
        let frame = this.input.split_to(this.frame.min(this.input.len()));
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn size_hint(&self) -> SizeHint {
        match self.known {
            true => SizeHint::with_exact(self.input.len() as u64),
            false => SizeHint::default(),
        }
    }
}

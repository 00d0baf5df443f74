//! The body of a response on its way to the client: tollgate's own answer, or the
//! upstream's body streaming through.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::encode::Encoded;
use super::file::FileBody;
use super::{BodyError, Rendered};

/// The body of a response sent to the client. `U` is the upstream's body, which this
/// module (below `upstream`) does not name: `upstream::ResponseBody` is this enum with
/// `upstream::h1::Body`, its one instance, so nothing is dispatched at run time.
// The upstream variant is the common case and the large one; boxing it would cost an
// allocation per proxied request to save bytes on the rarer ones.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ResponseBody<U> {
    Empty,
    /// A body made by tollgate itself (`return`, error pages).
    Full(Option<Bytes>),
    /// An answer of tollgate's whose header lines are written out already (a 429).
    Rendered(Rendered),
    /// The upstream's body, read from its connection as the client takes it (the
    /// connection applies `read_timeout` between reads).
    Upstream(U),
    /// A file of a `root` or `alias` location.
    File(FileBody),
    /// Any of the others, compressed as it streams (`compress`).
    Encoded(Box<Encoded<ResponseBody<U>>>),
}

impl<U> ResponseBody<U> {
    /// Appends the header lines of a [`Rendered`] answer (none for any other).
    pub(crate) fn write_lines(&self, out: &mut Vec<u8>) {
        if let ResponseBody::Rendered(rendered) = self {
            rendered.write_lines(out);
        }
    }

    /// Appends the whole body, if it is tollgate's own (or a file's) and not yet taken, and at most
    /// `most` bytes long: its length, or `None` (nothing written) for any other.
    pub(crate) fn write_whole(&mut self, out: &mut Vec<u8>, most: u64) -> Option<u64> {
        match self {
            ResponseBody::Rendered(rendered) if rendered.len() <= most => {
                Some(rendered.write_body(out))
            }
            ResponseBody::Full(Some(bytes)) if bytes.len() as u64 <= most => {
                out.extend_from_slice(bytes);
                let written = bytes.len() as u64;
                *self = ResponseBody::Empty;
                Some(written)
            }
            ResponseBody::Empty | ResponseBody::Full(None) => Some(0),
            // A small file goes out in the head's write; the handle (and its open-file
            // slot) is given back at once.
            ResponseBody::File(file) => {
                let written = file.write_whole(out, most)?;
                *self = ResponseBody::Empty;
                Some(written)
            }
            _ => None,
        }
    }

    /// The file this body sends as it is (not compressed), if it is one.
    pub(crate) fn file_mut(&mut self) -> Option<&mut FileBody> {
        match self {
            ResponseBody::File(file) => Some(file),
            _ => None,
        }
    }

    pub(crate) fn full(bytes: impl Into<Bytes>) -> ResponseBody<U> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            ResponseBody::Empty
        } else {
            ResponseBody::Full(Some(bytes))
        }
    }
}

impl<U> Body for ResponseBody<U>
where
    U: Body<Data = Bytes> + Unpin,
    U::Error: Into<BodyError>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ResponseBody::Empty => Poll::Ready(None),
            ResponseBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Rendered(rendered) => {
                Poll::Ready(rendered.next_piece().map(|b| Ok(Frame::data(b))))
            }
            ResponseBody::Upstream(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            ResponseBody::File(body) => Pin::new(body).poll_frame(cx),
            ResponseBody::Encoded(body) => Pin::new(&mut **body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Empty => true,
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::Rendered(rendered) => rendered.is_empty(),
            ResponseBody::Upstream(body) => body.is_end_stream(),
            ResponseBody::File(body) => body.is_end_stream(),
            ResponseBody::Encoded(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Empty => SizeHint::with_exact(0),
            ResponseBody::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ResponseBody::Rendered(rendered) => SizeHint::with_exact(rendered.len()),
            ResponseBody::Upstream(body) => body.size_hint(),
            ResponseBody::File(body) => body.size_hint(),
            ResponseBody::Encoded(body) => body.size_hint(),
        }
    }
}

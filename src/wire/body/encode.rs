//! A response body compressed as it streams (`compress`): gzip, brotli or zstd.
// Interfaces only: issue 36's compression fills this in.
#![allow(dead_code)]

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::BodyError;
use crate::config::Encoding;

/// `inner`'s bytes, compressed with `coding`.
pub(crate) struct Encoded<B> {
    inner: B,
    coding: Encoding,
}

impl<B> Encoded<B> {
    pub(crate) fn new(inner: B, coding: Encoding) -> Encoded<B> {
        Encoded { inner, coding }
    }
}

impl<B> Body for Encoded<B>
where
    B: Body<Data = Bytes, Error = BodyError> + Unpin,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

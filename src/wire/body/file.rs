//! A file served as a response body (`root`/`alias` locations): read in chunks from an
//! open handle, never whole, up to the length taken when it was opened.
// Interfaces only: issue 36's file serving fills this in.
#![allow(dead_code)]

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::BodyError;

/// An open file's bytes `pos..end` (one range, or the parts of a multipart answer).
pub(crate) struct FileBody {
    file: std::fs::File,
    pos: u64,
    end: u64,
}

impl FileBody {
    pub(crate) fn new(file: std::fs::File, pos: u64, end: u64) -> FileBody {
        FileBody { file, pos, end }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.pos >= self.end
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.end.saturating_sub(self.pos))
    }
}

//! A file served as a response body (`root`/`alias` locations): read in chunks from an
//! open handle, never whole, up to the length taken when it was opened; one range of it,
//! or the parts of a `multipart/byteranges` answer (RFC 9110 §14.6) in nginx's layout.

use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::BodyError;

/// The most read from the file for one frame: large enough for few reads, small enough
/// that a connection holds little memory for it.
const CHUNK: u64 = 64 * 1024;

/// An open file's bytes: one range, or the parts of a multipart answer. The length is
/// fixed when the answer is made (from `fstat`): a file that grows meanwhile is not sent
/// past it, one that shrinks ends the body with an error, so the connection closes
/// rather than send fewer bytes than its head promised.
pub(crate) struct FileBody {
    file: std::fs::File,
    /// The next byte of the range being sent.
    pos: u64,
    /// The end (exclusive) of the range being sent.
    end: u64,
    /// Boxed: a multipart answer is rare, and the body is kept as small as the others.
    parts: Option<Box<Parts>>,
    /// Bytes still to send, all parts and boundaries counted: the exact size hint.
    left: u64,
    /// The open-file slot this answer holds until it is dropped.
    _permit: Permit,
}

impl FileBody {
    /// The bytes `start..end` of `file`.
    pub(crate) fn new(file: std::fs::File, start: u64, end: u64, permit: Permit) -> FileBody {
        FileBody {
            file,
            pos: start,
            end,
            parts: None,
            left: end.saturating_sub(start),
            _permit: permit,
        }
    }

    /// The parts `parts` lays out, read from `file`.
    pub(crate) fn multipart(file: std::fs::File, parts: Parts, permit: Permit) -> FileBody {
        FileBody {
            file,
            pos: 0,
            end: 0,
            left: parts.len(),
            parts: Some(Box::new(parts)),
            _permit: permit,
        }
    }

    /// Appends the whole body when it is one range of at most `most` bytes: its length,
    /// or `None` (nothing appended) for a multipart body, a larger one, or a read that
    /// failed or came short (the streaming path then reports it).
    pub(crate) fn write_whole(&mut self, out: &mut Vec<u8>, most: u64) -> Option<u64> {
        if self.parts.is_some() || self.left > most {
            return None;
        }
        let len = usize::try_from(self.left).ok()?;
        let from = out.len();
        out.resize(from + len, 0);
        if self.file.read_exact_at(&mut out[from..], self.pos).is_err() {
            out.truncate(from);
            return None;
        }
        self.pos = self.end;
        self.left = 0;
        Some(len as u64)
    }

    /// The open file and the rest of the range being sent (`pos..end`), for a caller
    /// that sends it itself (`sendfile`); `None` for a multipart body or when the range
    /// is sent.
    pub(crate) fn span(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64, u64)> {
        use std::os::fd::AsFd;
        (self.parts.is_none() && self.pos < self.end).then(|| (self.file.as_fd(), self.pos, self.end))
    }

    /// Counts `n` bytes of the span as sent by the caller.
    pub(crate) fn advance(&mut self, n: u64) {
        self.pos = (self.pos + n).min(self.end);
        self.left = self.left.saturating_sub(n);
    }

    /// The next chunk of the range being sent.
    fn read_chunk(&mut self) -> Result<Bytes, BodyError> {
        let want = (self.end - self.pos).min(CHUNK) as usize;
        let mut buf = vec![0; want];
        let read = loop {
            match self.file.read_at(&mut buf, self.pos) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Ok(0) => Err(truncated()),
            Ok(n) => {
                buf.truncate(n);
                self.pos += n as u64;
                self.left = self.left.saturating_sub(n as u64);
                Ok(Bytes::from(buf))
            }
            Err(err) => Err(BodyError::File(err)),
        }
    }

    /// Stops after a failure: nothing more is sent.
    fn stop(&mut self) {
        self.pos = self.end;
        self.parts = None;
        self.left = 0;
    }
}

fn truncated() -> BodyError {
    BodyError::File(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the file shrank while it was sent",
    ))
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.pos < this.end {
            let chunk = this.read_chunk();
            if chunk.is_err() {
                this.stop();
            }
            return Poll::Ready(Some(chunk.map(Frame::data)));
        }
        let Some(parts) = &mut this.parts else {
            return Poll::Ready(None);
        };
        let Some((piece, range)) = parts.next_piece() else {
            this.parts = None;
            return Poll::Ready(None);
        };
        if let Some((start, end)) = range {
            (this.pos, this.end) = (start, end);
        }
        this.left = this.left.saturating_sub(piece.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

/// A `multipart/byteranges` body's layout, as nginx writes it: each part is CRLF
/// `--BOUNDARY` CRLF `Content-Type: T` CRLF `Content-Range: bytes S-E/LEN` CRLF CRLF and
/// the bytes; the body ends with CRLF `--BOUNDARY--` CRLF. The part headers are made as
/// they are sent, so a request for many ranges costs 16 bytes a range until then.
pub(crate) struct Parts {
    /// CRLF `--B` CRLF `Content-Type: T` CRLF `Content-Range: bytes `.
    head: Bytes,
    boundary: String,
    /// The whole file's length, the `/LEN` of each part.
    total: u64,
    /// The ranges, `(start, end)` with `end` exclusive, in the order asked.
    ranges: Vec<(u64, u64)>,
    /// The next part whose header is due; `ranges.len()`: the closing boundary is.
    next: usize,
    ended: bool,
}

impl Parts {
    /// `boundary` (digits) separates the parts of `content_type` (the file's, if known).
    pub(crate) fn new(
        boundary: String,
        content_type: Option<&[u8]>,
        total: u64,
        ranges: Vec<(u64, u64)>,
    ) -> Parts {
        let mut head = Vec::with_capacity(96);
        head.extend_from_slice(b"\r\n--");
        head.extend_from_slice(boundary.as_bytes());
        head.extend_from_slice(b"\r\n");
        if let Some(content_type) = content_type {
            head.extend_from_slice(b"Content-Type: ");
            head.extend_from_slice(content_type);
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"Content-Range: bytes ");
        Parts {
            head: Bytes::from(head),
            boundary,
            total,
            ranges,
            next: 0,
            ended: false,
        }
    }

    /// The body's whole length: what `Content-Length` says.
    pub(crate) fn len(&self) -> u64 {
        let parts: u64 = (self.ranges.iter())
            .map(|&(start, end)| {
                let line = self.range_line(start, end).len() as u64;
                self.head.len() as u64 + line + (end - start)
            })
            .sum();
        parts + self.closing().len() as u64
    }

    /// `S-E/LEN` CRLF CRLF.
    fn range_line(&self, start: u64, end: u64) -> String {
        format!("{start}-{}/{}\r\n\r\n", end.saturating_sub(1), self.total)
    }

    fn closing(&self) -> String {
        format!("\r\n--{}--\r\n", self.boundary)
    }

    /// The next header to send, with the range whose bytes follow it; `None` when the
    /// closing boundary has been sent.
    fn next_piece(&mut self) -> Option<(Bytes, Option<(u64, u64)>)> {
        if let Some(&(start, end)) = self.ranges.get(self.next) {
            self.next += 1;
            let mut piece = Vec::with_capacity(self.head.len() + 48);
            piece.extend_from_slice(&self.head);
            piece.extend_from_slice(self.range_line(start, end).as_bytes());
            return Some((Bytes::from(piece), Some((start, end))));
        }
        if self.ended {
            return None;
        }
        self.ended = true;
        Some((Bytes::from(self.closing()), None))
    }
}

/// One of the open files the bound allows, given back when the body holding it drops.
/// The count is shared by every location of every generation (`proxy::files::OpenFiles`
/// holds it); it lives here because the body holds the permit.
#[derive(Debug)]
pub(crate) struct Permit(Arc<AtomicUsize>);

impl Permit {
    /// A slot of `open`'s, when fewer than `limit` are taken.
    pub(crate) fn take(open: &Arc<AtomicUsize>, limit: usize) -> Option<Permit> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < limit).then_some(n + 1)
        })
        .ok()?;
        Some(Permit(open.clone()))
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests;

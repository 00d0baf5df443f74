//! A request's body as its connection reads it: decoded (`Content-Length` or chunked)
//! from the read buffer and handed to the pipeline's reader ([`Feed`]) a piece at a time,
//! only while the reader asks for more, so a client's upload comes in no faster than it
//! goes out. `Expect: 100-continue` is answered when the body is first asked for.

use std::future::Future;
use std::io;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::head::Framing;
use super::outbox::Outbox;
use super::spare::READ_BUF;
use crate::wire::body::client::{feed, Feed};
use crate::wire::body::{ClientBody, ClientBodyError};
use crate::wire::h1::chunked::{Decoder, Malformed, Step};

/// Less free room than this in the read buffer is made more of before a read.
pub(super) const MIN_SPARE: usize = 1024;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

enum Decoding {
    Length(u64),
    Chunked(Decoder),
}

/// The connection's side of one request's body.
pub(super) struct Upload {
    feed: Option<Feed>,
    decoding: Decoding,
    continue_due: bool,
    /// The body has been read to its end (or there is none).
    done: bool,
    /// It broke off (a framing error, or the client closed): nothing more can be read.
    broken: bool,
    /// A framing fault met after data that went out first: the next piece is this error.
    fault: Option<&'static str>,
}

/// What one [`Upload::poll_pump`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pumped {
    /// Gave the reader something (a piece, the end, an error): poll it again.
    Fed,
    /// The reader waits and the socket has nothing yet.
    Waiting,
    /// Nothing to do: no body, the body is over, or nobody asks.
    Idle,
}

impl Upload {
    /// The pipeline's body and the connection's side of it.
    pub(super) fn new(framing: Framing, expect_continue: bool) -> (ClientBody, Upload) {
        let (decoding, length) = match framing {
            Framing::None => return (ClientBody::Empty, Upload::none()),
            Framing::Length(length) => (Decoding::Length(length), Some(length)),
            Framing::Chunked => (Decoding::Chunked(Decoder::new()), None),
        };
        let (feed, fed) = feed(length);
        let upload = Upload {
            feed: Some(feed),
            decoding,
            continue_due: expect_continue,
            done: false,
            broken: false,
            fault: None,
        };
        (ClientBody::Http1(fed), upload)
    }

    fn none() -> Upload {
        Upload {
            feed: None,
            decoding: Decoding::Length(0),
            continue_due: false,
            done: true,
            broken: false,
            fault: None,
        }
    }

    /// The body was read to its end: the connection can carry another request.
    pub(super) fn is_done(&self) -> bool {
        self.done && !self.broken
    }

    /// The connection reads nothing for this body any more: no body, read to its end, or
    /// broken off.
    pub(super) fn is_over(&self) -> bool {
        self.done
    }

    /// When the reader has dropped the body before its end: takes what of the rest is
    /// already buffered, so that the connection can go on if that was all of it.
    pub(super) fn discard_buffered(&mut self, read: &mut BytesMut) {
        let abandoned = self.feed.as_ref().is_some_and(Feed::gone);
        while abandoned && !self.done {
            match self.decode(read) {
                Some(Ok(_)) => {}
                Some(Err(_)) => {
                    self.broken = true;
                    self.done = true;
                }
                None => return,
            }
        }
    }

    /// Feeds the reader if it waits: from the buffer, else from the socket.
    pub(super) fn poll_pump<T: AsyncRead + tokio::io::AsyncWrite + Unpin>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut T,
        read: &mut BytesMut,
        out: &mut Outbox,
    ) -> Pumped {
        let Some(feed) = &self.feed else {
            return Pumped::Idle;
        };
        if self.done || !feed.wanted() {
            return Pumped::Idle;
        }
        if std::mem::take(&mut self.continue_due) && read.is_empty() {
            out.small().extend_from_slice(CONTINUE);
        }
        if !out.is_empty() {
            if let Poll::Ready(Err(_)) = out.poll_drain(io, cx) {
                return self.fail(ClientBodyError::Closed);
            }
        }
        loop {
            match self.decode(read) {
                Some(Ok(piece)) => {
                    self.feed_piece(piece);
                    return Pumped::Fed;
                }
                Some(Err(what)) => return self.fail(ClientBodyError::Framing(what)),
                None if self.done => {
                    self.finish(Ok(()));
                    return Pumped::Fed;
                }
                None => {}
            }
            match poll_read(io, read, cx) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    return self.fail(ClientBodyError::Closed)
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Pending => return Pumped::Waiting,
            }
        }
    }

    fn feed_piece(&mut self, piece: Bytes) {
        if let Some(feed) = &self.feed {
            feed.push(piece);
            if self.done {
                feed.finish(Ok(()));
            }
        }
    }

    fn finish(&mut self, end: Result<(), ClientBodyError>) {
        if let Some(feed) = &self.feed {
            feed.finish(end);
        }
    }

    fn fail(&mut self, err: ClientBodyError) -> Pumped {
        self.done = true;
        self.broken = true;
        self.finish(Err(err));
        Pumped::Fed
    }

    /// The next piece in the buffer; `None` when more must be read (or the end came:
    /// then `done` is set).
    fn decode(&mut self, read: &mut BytesMut) -> Option<Result<Bytes, &'static str>> {
        match &mut self.decoding {
            Decoding::Length(0) => {
                self.done = true;
                None
            }
            Decoding::Length(left) => {
                if read.is_empty() {
                    return None;
                }
                let n = (*left).min(read.len() as u64);
                *left -= n;
                self.done = *left == 0;
                Some(Ok(read.split_to(n as usize).freeze()))
            }
            Decoding::Chunked(decoder) => {
                if let Some(what) = self.fault.take() {
                    return Some(Err(what));
                }
                let mut data = Joined::default();
                let fault = loop {
                    let step = match decoder.decode(read) {
                        Ok(step) => step,
                        Err(Malformed(what)) => break Some(what),
                    };
                    let more = matches!(step, Step::Data(_));
                    if let Step::Data(piece) = step {
                        data.push(piece);
                    }
                    // The end is seen with the last piece when its framing is there.
                    if let Err(Malformed(what)) = decoder.skip_framing(read) {
                        break Some(what);
                    }
                    self.done = decoder.is_done();
                    // Small chunks already buffered go out as one piece: a client that
                    // sends a byte per chunk costs a hand-off per read, not one per chunk.
                    if !more || self.done || data.len() >= READ_BUF {
                        break None;
                    }
                };
                match (data.take(), fault) {
                    (Some(piece), fault) => {
                        // A fault after some data comes with the next call.
                        self.fault = fault;
                        Some(Ok(piece))
                    }
                    (None, Some(what)) => Some(Err(what)),
                    (None, None) => None,
                }
            }
        }
    }
}

/// Pieces of a chunked body taken in one go: the first as it is, more joined in a copy.
#[derive(Default)]
struct Joined {
    first: Option<Bytes>,
    joined: Option<BytesMut>,
}

impl Joined {
    fn push(&mut self, piece: Bytes) {
        match (&mut self.joined, self.first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&piece),
            (None, Some(first)) => {
                let mut joined = BytesMut::with_capacity(first.len() + piece.len());
                joined.extend_from_slice(&first);
                joined.extend_from_slice(&piece);
                self.joined = Some(joined);
            }
            (None, None) => self.first = Some(piece),
        }
    }

    fn len(&self) -> usize {
        match (&self.joined, &self.first) {
            (Some(joined), _) => joined.len(),
            (None, Some(first)) => first.len(),
            (None, None) => 0,
        }
    }

    fn take(self) -> Option<Bytes> {
        match self.joined {
            Some(joined) => Some(joined.freeze()),
            None => self.first,
        }
    }
}

#[cfg(test)]
impl Upload {
    /// [`Upload::decode`], for the property tests.
    pub(super) fn decode_for_test(
        &mut self,
        read: &mut BytesMut,
    ) -> Option<Result<Bytes, &'static str>> {
        self.decode(read)
    }
}

/// Reads what the socket has into `read`, making room first if little is left.
pub(super) fn poll_read<T: AsyncRead + Unpin>(
    io: &mut T,
    read: &mut BytesMut,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    if read.capacity() - read.len() < MIN_SPARE {
        read.reserve(READ_BUF);
    }
    std::pin::pin!(io.read_buf(read)).poll(cx)
}

/// Reads as [`poll_read`], but a connection waiting for a request with no buffer (a new
/// one, or one that let its buffer go: `Connection::let_go`) takes one of the worker's
/// spares (`spare`) for the read, and gives it back if nothing came: waiting costs no
/// buffer, as nginx's keep-alive connections wait without one.
pub(in crate::server) fn poll_read_waiting<T: AsyncRead + Unpin>(
    io: &mut T,
    read: &mut BytesMut,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    if !read.is_empty() || read.capacity() >= MIN_SPARE {
        return poll_read(io, read, cx);
    }
    let mut buffer = super::spare::read_buffer();
    let polled = poll_read(io, &mut buffer, cx);
    if buffer.is_empty() {
        super::spare::give_read(buffer);
    } else {
        *read = buffer;
    }
    polled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(framing: Framing, wire: &[u8]) -> (Vec<Result<bytes::Bytes, &'static str>>, bool) {
        let (_body, mut upload) = Upload::new(framing, false);
        let mut read = BytesMut::from(wire);
        let mut out = Vec::new();
        while let Some(piece) = upload.decode(&mut read) {
            let failed = piece.is_err();
            out.push(piece);
            if failed {
                break;
            }
        }
        (out, upload.done)
    }

    #[test]
    fn small_chunks_already_here_come_out_as_one_piece() {
        let (out, done) = pieces(
            Framing::Chunked,
            b"1\r\na\r\n1\r\nb\r\n2;x=y\r\ncd\r\n0\r\n\r\n",
        );
        assert_eq!(out, [Ok(bytes::Bytes::from_static(b"abcd"))]);
        assert!(done);
    }

    #[test]
    fn a_fault_after_some_chunks_comes_after_their_data() {
        let (out, done) = pieces(Framing::Chunked, b"1\r\na\r\n1\r\nbX\r\n");
        assert_eq!(
            out,
            [
                Ok(bytes::Bytes::from_static(b"ab")),
                Err("no CRLF after chunk data")
            ]
        );
        assert!(!done);
    }

    #[test]
    fn trailers_past_their_limit_fail_the_body_after_its_data() {
        let mut wire = b"1\r\na\r\n1\r\nb\r\n0\r\n".to_vec();
        for _ in 0..17 {
            wire.extend_from_slice(format!("X-T: {}\r\n", "t".repeat(4000)).as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        let (out, done) = pieces(Framing::Chunked, &wire);
        assert_eq!(
            out,
            [
                Ok(bytes::Bytes::from_static(b"ab")),
                Err("trailers too large")
            ]
        );
        assert!(!done);
    }

    #[test]
    fn a_length_body_ends_with_its_last_byte() {
        let (out, done) = pieces(Framing::Length(3), b"abcGET");
        assert_eq!(out, [Ok(bytes::Bytes::from_static(b"abc"))]);
        assert!(done);
    }

    #[test]
    fn a_discarded_body_with_broken_framing_ends() {
        let (body, mut upload) = Upload::new(Framing::Chunked, false);
        drop(body);
        let mut read = BytesMut::from(&b"1\r\nx\r\nZZ\r\n"[..]);
        upload.discard_buffered(&mut read);
        assert!(upload.is_over() && !upload.is_done());
    }
}

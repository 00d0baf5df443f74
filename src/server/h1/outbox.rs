//! What a connection has to write: small bytes gathered in one buffer (heads, chunk
//! lines, small body pieces), and at most one large body piece, written from its own
//! bytes rather than copied, with the suffix that follows it. One write (vectored where
//! the stream takes it) carries as much of it as the socket takes.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::AsyncWrite;

/// Gathered bytes past this are written before more are taken.
pub(super) const FLUSH_AT: usize = 64 * 1024;
/// The gathering buffer's room when it is made: a proxied answer's head and a small body.
const WRITE_ROOM: usize = 512;

#[derive(Default)]
pub(super) struct Outbox {
    small: Vec<u8>,
    /// How much of `small` has been written.
    small_at: usize,
    large: Bytes,
    suffix: &'static [u8],
}

impl Outbox {
    /// Where small bytes are gathered; made again, with room for a usual head, once let
    /// go ([`Outbox::let_go`]).
    pub(super) fn small(&mut self) -> &mut Vec<u8> {
        if self.small.capacity() == 0 {
            self.small = Vec::with_capacity(WRITE_ROOM);
        }
        &mut self.small
    }

    /// Frees the gathering buffer if all of it has been written.
    pub(super) fn let_go(&mut self) {
        if self.is_empty() {
            self.small = Vec::new();
            self.small_at = 0;
        }
    }

    /// Queues a large piece (and its suffix) after the small bytes gathered so far.
    /// Only one at a time: [`Outbox::poll_drain`] must have emptied the box before.
    pub(super) fn set_large(&mut self, piece: Bytes, suffix: &'static [u8]) {
        debug_assert!(self.large.is_empty() && self.suffix.is_empty());
        self.large = piece;
        self.suffix = suffix;
    }

    /// Lets the gathering buffer go if it is empty and has grown past `room`.
    pub(super) fn shrink_to(&mut self, room: usize) {
        if self.is_empty() && self.small.capacity() > room {
            self.small = Vec::new();
            self.small_at = 0;
        }
    }

    /// Whether it holds so much that it must be written before it takes more.
    pub(super) fn is_full(&self) -> bool {
        !self.large.is_empty() || self.small.len() - self.small_at >= FLUSH_AT
    }

    pub(super) fn is_empty(&self) -> bool {
        self.small_at == self.small.len() && self.large.is_empty() && self.suffix.is_empty()
    }

    /// The small bytes still queued, when nothing else is (a head waiting for its body).
    pub(super) fn pending_small(&self) -> Option<&[u8]> {
        let pending = &self.small[self.small_at..];
        let only_small = self.large.is_empty() && self.suffix.is_empty();
        (only_small && !pending.is_empty()).then_some(pending)
    }

    /// Counts `n` queued bytes as written by the caller.
    pub(super) fn written(&mut self, n: usize) {
        self.advance(n);
    }

    /// Writes everything queued; ready once all of it went (or the write failed).
    pub(super) fn poll_drain<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while !self.is_empty() {
            let n = if self.large.is_empty() && self.suffix.is_empty() {
                std::task::ready!(Pin::new(&mut *io).poll_write(cx, &self.small[self.small_at..]))?
            } else {
                let slices = [
                    IoSlice::new(&self.small[self.small_at..]),
                    IoSlice::new(&self.large),
                    IoSlice::new(self.suffix),
                ];
                std::task::ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.advance(n);
        }
        self.small.clear();
        self.small_at = 0;
        Poll::Ready(Ok(()))
    }

    fn advance(&mut self, mut n: usize) {
        let small = (self.small.len() - self.small_at).min(n);
        self.small_at += small;
        n -= small;
        let large = self.large.len().min(n);
        self.large.advance(large);
        n -= large;
        self.suffix = &self.suffix[n.min(self.suffix.len())..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;

    /// Takes at most `step` bytes per write.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let n = buf.len().min(this.step);
            this.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_grown_buffer_is_let_go_once_empty_and_freed_only_once_written() {
        let mut out = Outbox::default();
        out.small().extend_from_slice(&[b'x'; FLUSH_AT]);
        out.shrink_to(16 * 1024);
        assert!(out.small.capacity() >= FLUSH_AT, "not while it holds bytes");
        let mut io = Trickle {
            got: Vec::new(),
            step: usize::MAX,
        };
        poll_fn(|cx| out.poll_drain(&mut io, cx)).await.unwrap();
        out.shrink_to(16 * 1024);
        assert_eq!(out.small.capacity(), 0);
        out.small().extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        out.let_go();
        assert!(out.small.capacity() > 0, "not while it holds bytes");
        poll_fn(|cx| out.poll_drain(&mut io, cx)).await.unwrap();
        out.let_go();
        assert_eq!(out.small.capacity(), 0);
    }

    #[tokio::test]
    async fn small_large_and_suffix_go_out_in_order_however_the_writes_are_cut() {
        for step in [1, 3, 7, 1000] {
            let mut out = Outbox::default();
            let mut io = Trickle {
                got: Vec::new(),
                step,
            };
            out.small().extend_from_slice(b"head\r\n");
            out.set_large(Bytes::from_static(b"LARGE"), b"\r\n");
            assert!(out.is_full());
            poll_fn(|cx| out.poll_drain(&mut io, cx)).await.unwrap();
            assert!(out.is_empty());
            out.small().extend_from_slice(b"0\r\n\r\n");
            poll_fn(|cx| out.poll_drain(&mut io, cx)).await.unwrap();
            assert_eq!(io.got, b"head\r\nLARGE\r\n0\r\n\r\n", "step {step}");
        }
    }
}

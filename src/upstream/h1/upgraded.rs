//! The upstream stream after `101 Switching Protocols`: bytes that arrived with the head
//! come first, then the stream itself (plain or TLS).

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::Stream;

/// A raw, upgraded upstream connection for a tunnel.
pub(crate) struct Upgraded {
    stream: Stream,
    /// Read past the 101's head, not yet handed out.
    read_ahead: Bytes,
}

impl Upgraded {
    pub(super) fn new(stream: Stream, read_ahead: Bytes) -> Upgraded {
        Upgraded { stream, read_ahead }
    }
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgraded")
            .field("peer", &self.stream.peer_addr().ok())
            .field("read_ahead", &self.read_ahead.len())
            .finish()
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read_ahead.is_empty() {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        }
        let n = this.read_ahead.len().min(buf.remaining());
        buf.put_slice(&this.read_ahead[..n]);
        this.read_ahead.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

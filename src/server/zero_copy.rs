//! `sendfile` (`[server] sendfile`, on by default as in Debian's nginx.conf): a file's
//! bytes go from the page cache to a plain TCP socket without passing through the
//! gateway's memory. A TLS connection (whose bytes must be encrypted here) copies, as
//! nginx does without kernel TLS.

use std::io;
use std::os::fd::BorrowedFd;
use std::task::{Context, Poll};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most one `sendfile` call sends (nginx's `sendfile_max_chunk` default since 1.21.4):
/// a fast client on a large file gives the worker back between calls.
pub(super) const MAX_CHUNK: u64 = 2 << 20;

/// A connection's stream, as far as sending a file down it goes.
pub(crate) trait ZeroCopy {
    /// Sends up to `count` bytes of `file` from `*offset` (moved past what was sent);
    /// `None` when this stream cannot send a file without copying it.
    fn poll_sendfile(
        &mut self,
        _cx: &mut Context<'_>,
        _file: BorrowedFd<'_>,
        _offset: &mut u64,
        _count: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        None
    }

    /// Writes `buf` saying more follows (`MSG_MORE`, what nginx's `tcp_nopush` does with
    /// a cork): a file answer's head goes out in one segment with the start of its body,
    /// not alone. `None` when this stream cannot.
    fn poll_send_more(&mut self, _cx: &mut Context<'_>, _buf: &[u8]) -> Option<Poll<io::Result<usize>>> {
        None
    }
}

impl ZeroCopy for TcpStream {
    fn poll_send_more(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Option<Poll<io::Result<usize>>> {
        Some(send_more(self, cx, buf))
    }

    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        Some(sendfile(self, cx, file, offset, count))
    }
}

/// One `send` with `MSG_MORE` when the socket can take bytes; pending when it cannot.
fn send_more(socket: &TcpStream, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(socket.poll_write_ready(cx))?;
        let sent = socket.try_io(Interest::WRITABLE, || {
            rustix::net::send(socket, buf, rustix::net::SendFlags::MORE).map_err(io::Error::from)
        });
        match sent {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            other => return Poll::Ready(other),
        }
    }
}

/// One `sendfile` when the socket can take bytes; pending (the socket's readiness
/// cleared) when it cannot.
fn sendfile(
    socket: &TcpStream,
    cx: &mut Context<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(socket.poll_write_ready(cx))?;
        let sent = socket.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(socket, file, Some(&mut *offset), count).map_err(io::Error::from)
        });
        match sent {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            other => return Poll::Ready(other),
        }
    }
}

impl<S> ZeroCopy for Box<tokio_rustls::server::TlsStream<S>> {}


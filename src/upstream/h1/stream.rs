//! The byte stream under an upstream connection: plain TCP, or TLS over TCP.
//!
//! An enum rather than a trait object: the plain path stays a direct call on the
//! `TcpStream` behind one branch, and allocates nothing. The TLS state is boxed so that
//! it does not make every plain connection's allocation as large as rustls's.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A connection's transport.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Plain(tcp) => tcp.peer_addr(),
            Stream::Tls(tls) => tls.get_ref().0.peer_addr(),
        }
    }

    /// A non-blocking look at an idle connection: `None` if nothing is there to read.
    ///
    /// Plain TCP is looked at with one `try_read`. A TLS connection is polled once with a
    /// no-op waker (the connection is idle, nobody waits on it): records that carry no
    /// data (a session ticket) are taken in and leave it usable, a `close_notify` or a
    /// TCP close makes it unusable, as does any data the server sends unasked.
    pub(super) fn probe(&mut self) -> Option<io::Error> {
        let mut byte = [0u8; 1];
        let read = match self {
            Stream::Plain(tcp) => tcp.try_read(&mut byte),
            Stream::Tls(tls) => {
                let mut cx = Context::from_waker(Waker::noop());
                let mut buf = ReadBuf::new(&mut byte);
                match Pin::new(&mut **tls).poll_read(&mut cx, &mut buf) {
                    Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                    Poll::Ready(Ok(())) => Ok(buf.filled().len()),
                    Poll::Ready(Err(err)) => Err(err),
                }
            }
        };
        match read {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => None,
            Err(err) => Some(err),
            Ok(0) => Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "upstream closed the idle connection",
            )),
            Ok(_) => Some(io::Error::new(
                io::ErrorKind::InvalidData,
                "upstream sent bytes on an idle connection",
            )),
        }
    }
}

impl Stream {
    /// Acknowledges at once what has arrived (`TCP_QUICKACK`), instead of after the
    /// kernel's delayed-ACK timer (up to 40 ms on Linux). A server that writes a response
    /// in two small writes with Nagle's algorithm on holds the second until the first is
    /// acknowledged, and on a kept-alive connection nothing else would carry that ACK
    /// soon: without this, such a response takes ~40 ms more (nginx's upstream keepalive
    /// waits so too). Elsewhere than Linux, nothing.
    pub(super) fn ack_now(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let tcp = match self {
                Stream::Plain(tcp) => tcp,
                Stream::Tls(tls) => tls.get_ref().0,
            };
            // Best effort: the worst a failure costs is the delay.
            let _ = socket2::SockRef::from(tcp).set_tcp_quickack(true);
        }
    }
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => match Pin::new(&mut **tls).poll_read(cx, buf) {
                // TCP closed without TLS's close_notify, which many servers skip: an end
                // like any other, as nginx takes it. A body with a length or chunks
                // still knows it was cut short; one read until close cannot know
                // either way, as over plain TCP.
                Poll::Ready(Err(err)) if err.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                polled => polled,
            },
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    /// TLS may hold encrypted bytes that a write accepted but the socket did not take
    /// yet: a request is on its way only once flushed. TCP holds nothing.
    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(_) => Poll::Ready(Ok(())),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(&mut **tls).poll_shutdown(cx),
        }
    }
}

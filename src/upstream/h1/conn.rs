//! One upstream connection: connecting (TCP, then TLS if the server speaks it), the read
//! buffer and timer its exchanges share, and the cheap checks before one is reused. The
//! exchange itself is `exchange`'s; the response body reads on from here (`body`).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use http::HeaderMap;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::encode::Outbox;
use super::stream::Stream;
use crate::upstream::tls::ServerTls;
use crate::wire::h1::Names;

/// Read buffer size: most response heads and small bodies arrive in one read.
const READ_BUF: usize = 8 * 1024;
/// Below this much free room, the read buffer is topped up before reading.
const MIN_SPARE: usize = 2 * 1024;

/// An HTTP/1.1 connection to an upstream server, idle between exchanges. `Send`; it can
/// sit in a pool and be used by any task, one exchange at a time.
///
/// Boxed once when connected: a request's futures, results and response body move
/// the connection several times per exchange, and a pointer is cheaper to move than
/// the socket and its buffers (measured: fewer instructions per proxied request).
pub struct UpstreamConn(pub(super) Box<Parts>);

pub(super) struct Parts {
    pub(super) stream: Stream,
    /// Bytes read and not yet consumed. Its allocation is reused across exchanges once
    /// the previous response's slices of it have been dropped.
    pub(super) buf: BytesMut,
    /// The request's framing bytes; its allocation is reused as well.
    pub(super) out: Outbox,
    /// The `read_timeout` clock of heads and bodies, made at the first read that has to
    /// wait and kept for the connection's life: moving a registered timer later only
    /// updates it, where making and dropping one per exchange inserts it into the
    /// runtime's timer wheel and takes it out again (callgrind: about 450 instructions
    /// per proxied request). A connection stays on its worker's runtime (pools are per
    /// worker), the one its timer belongs to. While the connection idles in its pool the
    /// timer stays registered: when its last deadline passes, it wakes the task that last
    /// used the connection once, for nothing.
    timer: Option<Pin<Box<Sleep>>>,
    /// The header names of the last responses, which the next ones likely repeat.
    pub(super) names: Names,
    /// An empty header map for the next response head: the last request's, cleared,
    /// so that maps go round instead of being made and dropped per exchange.
    pub(super) spare: HeaderMap,
}

impl Parts {
    /// The read timer, set to go off at `deadline`.
    pub(super) fn arm(&mut self, deadline: Instant) -> Pin<&mut Sleep> {
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.armed()
    }

    /// The read timer as last armed ([`Parts::arm`] made it, or it is made here to go
    /// off at once).
    pub(super) fn armed(&mut self) -> Pin<&mut Sleep> {
        self.timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now())))
            .as_mut()
    }
}

impl fmt::Debug for UpstreamConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamConn")
            .field("peer", &self.0.stream.peer_addr().ok())
            .field("buffered", &self.0.buf.len())
            .finish()
    }
}

impl UpstreamConn {
    /// Connects, with `TCP_NODELAY` (small requests and responses must not wait for
    /// Nagle), then with `tls` shakes hands; both within `timeout`.
    pub async fn connect(
        addr: SocketAddr,
        tls: Option<&ServerTls>,
        timeout: Duration,
    ) -> Result<UpstreamConn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let timed_out = |handshake| ConnectError::Timeout {
            addr,
            after: timeout,
            handshake,
        };
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(source)) => return Err(ConnectError::Io { addr, source }),
            Err(_) => return Err(timed_out(false)),
        };
        let Some(tls) = tls else {
            return Ok(UpstreamConn::new(tcp));
        };
        let _ = tcp.set_nodelay(true);
        match tokio::time::timeout_at(deadline, tls.handshake(tcp)).await {
            Ok(Ok(stream)) => Ok(UpstreamConn::with_stream(Stream::Tls(Box::new(stream)))),
            Ok(Err(source)) => Err(ConnectError::Tls {
                addr,
                name: tls.name().into_owned(),
                source,
            }),
            Err(_) => Err(timed_out(true)),
        }
    }

    /// Wraps an already connected socket (sets `TCP_NODELAY`).
    pub(crate) fn new(tcp: TcpStream) -> UpstreamConn {
        let _ = tcp.set_nodelay(true);
        UpstreamConn::with_stream(Stream::Plain(tcp))
    }

    /// Wraps an already connected stream, plain or TLS.
    pub(crate) fn with_stream(stream: Stream) -> UpstreamConn {
        UpstreamConn(Box::new(Parts {
            stream,
            buf: BytesMut::with_capacity(READ_BUF),
            out: Outbox::default(),
            timer: None,
            names: Names::default(),
            spare: HeaderMap::new(),
        }))
    }

    /// Cheap check before reusing an idle connection: false if the server closed it or
    /// sent something unasked (often a 408 before closing). No await and, unless the
    /// reactor has seen the socket become readable, no syscall: a close that the reactor
    /// has not noticed yet passes, and [`UpstreamConn::send_with`] then fails with
    /// [`Error::Closed`]. A connection found not reusable may have lost the byte looked
    /// at: drop it.
    ///
    /// [`Error::Closed`]: super::Error::Closed
    pub(crate) fn is_reusable(&mut self) -> bool {
        self.0.buf.is_empty() && self.0.out.is_empty() && self.0.stream.probe().is_none()
    }

    /// Frees the read buffer (unless it holds bytes) and the spare header map of a
    /// connection left idle; the next exchange allocates them again.
    pub(crate) fn shed_buffers(&mut self) {
        if self.0.buf.is_empty() {
            self.0.buf = BytesMut::new();
        }
        self.0.spare = HeaderMap::new();
    }

    /// The read buffer's room (tests of the pool's trim).
    #[cfg(test)]
    pub(crate) fn read_room(&self) -> usize {
        self.0.buf.capacity()
    }

    /// Why this connection must not carry a request, if it must not.
    pub(super) fn stale(&mut self) -> Option<io::Error> {
        if !self.0.buf.is_empty() {
            return Some(io::Error::new(
                io::ErrorKind::InvalidData,
                "unread bytes on an idle upstream connection",
            ));
        }
        self.0.stream.probe()
    }

    /// Reads what the socket has into `buf`; `Ok(0)` is EOF. The buffer grows only when
    /// less than [`MIN_SPARE`] is free (a head that does not fit doubles it).
    pub(super) fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.0.buf.capacity() - self.0.buf.len() < MIN_SPARE {
            let len = self.0.buf.len();
            self.0.buf.reserve(READ_BUF.max(len));
        }
        // `read_buf` fills the spare capacity without initializing it first, and clears
        // the socket's readiness on a short read, saving the EAGAIN syscall.
        let parts = &mut *self.0;
        let read = std::pin::pin!(parts.stream.read_buf(&mut parts.buf));
        read.poll(cx)
    }

    /// [`UpstreamConn::poll_read`] in the middle of a response (part of its head, or its
    /// body, still to come): before waiting, what has come is acknowledged at once
    /// ([`Stream::ack_now`]), so a server whose next write waits for that ACK need not.
    /// A response read whole in one go never gets here, and costs no syscall more.
    pub(super) fn poll_read_more(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let read = self.poll_read(cx);
        if read.is_pending() {
            self.0.stream.ack_now();
        }
        read
    }
}

/// Why no connection could be had. No byte of the request has been sent.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TCP connect, or the TLS handshake after it, took longer than
    /// `connect_timeout`.
    #[error(
        "connect to {addr} timed out after {after:?}{}",
        if *handshake { " (in the TLS handshake)" } else { "" }
    )]
    Timeout {
        addr: SocketAddr,
        after: Duration,
        handshake: bool,
    },
    #[error("connect to {addr} failed: {source}")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The TLS handshake failed: the certificate did not verify for `name`, the server
    /// refused ours, or it does not speak TLS.
    #[error("TLS handshake with {addr} ({name}) failed: {source}")]
    Tls {
        addr: SocketAddr,
        name: String,
        source: std::io::Error,
    },
}

//! A lean HTTP/1.1 client connection to an upstream server, driven entirely by the task
//! that uses it: the request future writes and reads the socket itself, and the response
//! body reads straight from the socket when the client side polls it. No spawned
//! connection task, no channels, no wake-ups between tasks (nginx's one event loop, in
//! tokio terms). One exchange at a time, no pipelining.
//!
//! # Layout
//! - `conn`: connecting, the buffers and timer a connection keeps, the cheap reuse check.
//! - `exchange`: [`UpstreamConn::send_with`] (request out, response head in, the `read_timeout`
//!   clock).
//! - `encode`: the request head and body framing (`content-length` or chunked) and
//!   the write queue that sends head and first body bytes in one `writev`.
//! - `decode`: the response head (httparse) and how its body is delimited (RFC 9112 §6.3).
//! - `body`: the response [`Body`], which hands the connection back once read whole.
//! - `upgraded`: the raw stream after a `101 Switching Protocols`.
//! - `stream`: the transport, plain TCP or TLS ([`crate::upstream::tls`]).
//!
//! # Use
//! ```text
//! let conn = UpstreamConn::connect(addr, tls, connect_timeout).await?; // or one from the idle pool
//! match conn.send(request, read_timeout, progress.as_deref()).await {
//!     Ok(Exchange::Response(response)) => {
//!         // Stream `response`; when its body is dropped:
//!         if let Some(conn) = body.take_reusable() { /* back to the idle pool */ }
//!     }
//!     Ok(Exchange::Upgraded(head, stream)) => { /* tunnel */ }
//!     Err(SendError::Unsent(request, _)) => { /* send it elsewhere, unchanged */ }
//!     Err(_) => { /* 502 / 504 / 408 */ }
//! }
//! ```
//!
//! Every limit is a constant below (the chunked decoder's are `wire::h1::chunked`'s);
//! every protocol decision cites RFC 9112.

mod body;
mod conn;
mod decode;
mod encode;
mod exchange;
mod stream;
mod upgraded;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;

use http::{Request, Response};

pub(crate) use body::Body;
pub use conn::{ConnectError, UpstreamConn};
pub(crate) use upgraded::Upgraded;

use crate::wire::body::{BodyError, RequestBody};
use crate::wire::h1::chunked;

/// Largest response head accepted, status line included (a bigger one is a 502).
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header fields accepted in a response head.
pub(crate) const MAX_HEADERS: usize = 128;

/// What came back for a request.
#[derive(Debug)]
pub(crate) enum Exchange {
    /// A final response; its body streams from the connection, which the body gives
    /// back through [`Body::take_reusable`] once read whole.
    Response(Response<Body>),
    /// `101 Switching Protocols`: the raw stream, with any bytes already read past the
    /// head, for a tunnel.
    Upgraded(Response<()>, Upgraded),
}

/// Why [`UpstreamConn::send_with`] produced no response. The connection is gone in every case.
// Unboxed on purpose: `Result<Exchange, SendError>` is as large as `Exchange` anyway, and
// boxing would allocate on the retry path.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SendError<B = RequestBody> {
    /// No byte was written and the body was not touched: the request can be sent
    /// elsewhere unchanged (typically a pooled connection the server had closed).
    Unsent(Request<B>, io::Error),
    /// At least part of the request was written, then the exchange failed. The
    /// request comes back as it is now: with an empty body it can be sent again
    /// unchanged (no copy of it needs to be kept for a retry); a body may have been
    /// partly sent.
    Failed(Error, Request<B>),
    /// The upstream said nothing for `read_timeout`; the request comes back as with
    /// `Failed`.
    Timeout(Request<B>),
    /// Our request body (the client's) failed: the client is to blame, not the upstream.
    ClientBody(BodyError),
}

impl<B> fmt::Debug for SendError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Unsent(req, err) => f
                .debug_tuple("Unsent")
                .field(&format_args!("{} {}", req.method(), req.uri()))
                .field(err)
                .finish(),
            SendError::Failed(err, _) => f.debug_tuple("Failed").field(err).finish(),
            SendError::Timeout(_) => f.write_str("Timeout"),
            SendError::ClientBody(err) => f.debug_tuple("ClientBody").field(err).finish(),
        }
    }
}

impl<B> fmt::Display for SendError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Unsent(_, err) => write!(f, "request not sent: {err}"),
            SendError::Failed(err, _) => err.fmt(f),
            SendError::Timeout(_) => f.write_str("upstream timed out"),
            SendError::ClientBody(err) => write!(f, "client request body failed: {err}"),
        }
    }
}

impl<B> std::error::Error for SendError<B> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Unsent(_, err) => Some(err),
            SendError::Failed(err, _) => Some(err),
            SendError::Timeout(_) => None,
            SendError::ClientBody(err) => Some(err),
        }
    }
}

/// A failed exchange or response body, upstream's fault unless said otherwise.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("upstream connection failed: {0}")]
    Io(#[from] io::Error),
    /// EOF (or a reset) before any byte of a response: on a kept-alive connection,
    /// usually the server closing it just as the request went out.
    #[error("upstream closed the connection before responding")]
    Closed,
    #[error("upstream closed the connection in the middle of the response head")]
    IncompleteHead,
    #[error("upstream closed the connection before the response body ended")]
    IncompleteBody,
    #[error("malformed response head: {0}")]
    Head(&'static str),
    #[error("response head larger than {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    #[error("more than {MAX_HEADERS} response header fields")]
    TooManyHeaders,
    #[error("invalid Content-Length in response")]
    ContentLength,
    #[error("malformed chunked body: {0}")]
    Chunked(&'static str),
    /// No body bytes for `read_timeout` (as `proxy_read_timeout` between two reads).
    #[error("upstream response body timed out between two reads")]
    Timeout,
    /// The request body did not match the length it announced.
    #[error("request body length does not match its size hint")]
    RequestLength,
    /// The client's body failed while it was still streaming up beside the response
    /// (a server that answered 2xx before reading the whole request).
    #[error("client request body failed: {0}")]
    ClientBody(BodyError),
}

/// The response body's failure as the client's side sees it.
impl From<Error> for BodyError {
    fn from(err: Error) -> BodyError {
        BodyError::Upstream(Box::new(err))
    }
}

impl From<chunked::Malformed> for Error {
    fn from(malformed: chunked::Malformed) -> Error {
        Error::Chunked(malformed.0)
    }
}

impl Error {
    /// Whether TLS failed under the exchange: an alert from the server, as TLS 1.3 sends
    /// after its handshake when it refuses the client's certificate (or none was sent).
    pub(crate) fn is_tls(&self) -> bool {
        let Error::Io(err) = self else {
            return false;
        };
        err.get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
    }
}

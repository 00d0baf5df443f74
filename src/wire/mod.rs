//! The wire pieces both sides of the gateway use: the client side (`server`) and the
//! upstream side (`upstream`), with `proxy` between them. Nothing here knows either
//! side: it imports nothing of `server`, `upstream`, `proxy`, `snapshot`, `admin` or
//! `state` (`tests/it/architecture.rs` keeps it so).
//!
//! - [`h1`]: HTTP/1.1 codec parts: chunked decoding, token lists, numbers, header names.
//! - [`body`]: the bodies that cross the gateway: the client's as the pipeline reads it,
//!   the request body sent upstream (in memory, spooled to a file, or streamed), and the
//!   response body sent back (tollgate's own answers, rendered 429s, the upstream's).
//! - `proxy_protocol`: the PROXY protocol header (v1 and v2) a load balancer puts before
//!   a connection to say whose it is.

pub(crate) mod body;
pub(crate) mod h1;
pub(crate) mod proxy_protocol;

/// The coders of `compress`, for the integration tests and benches.
#[cfg(feature = "testing")]
pub use body::encode::testing as encode;

/// The HTTP a client connection speaks, told by its first bytes (after TLS's ALPN, which
/// may leave only HTTP/2): one variant per protocol, each served by its own module of
/// `server`, and the client's body ([`body::ClientBody`]) comes in a variant of the
/// same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.0 and HTTP/1.1, served by tollgate's own codec.
    Http1,
    /// HTTP/2, served by hyper.
    Http2,
    /// HTTP/3 over QUIC, served by h3 (`server/h3.rs`).
    Http3,
}

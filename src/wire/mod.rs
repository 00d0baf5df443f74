//! The wire pieces both sides of the gateway use: the client side (`server`) and the
//! upstream side (`upstream`), with `proxy` between them. Nothing here knows either
//! side: it imports nothing of `server`, `upstream`, `proxy`, `snapshot`, `admin` or
//! `state` (`tests/it/architecture.rs` keeps it so).
//!
//! - [`h1`]: HTTP/1.1 codec parts: chunked decoding, token lists, numbers, header names.
//! - [`body`]: the bodies that cross the gateway: the client's as the pipeline reads it,
//!   the request body sent upstream (in memory, spooled to a file, or streamed), and the
//!   response body sent back (tollgate's own answers, rendered 429s, the upstream's).

pub mod body;
pub mod h1;

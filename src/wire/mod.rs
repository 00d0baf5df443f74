//! The wire pieces both sides of the gateway use: the client side (`server`) and the
//! upstream side (`upstream`), with `proxy` between them. Nothing here knows either
//! side: it imports nothing of `server`, `upstream`, `proxy`, `snapshot`, `admin` or
//! `state` (`tests/it/architecture.rs` keeps it so).
//!
//! - [`h1`]: HTTP/1.1 codec parts: chunked decoding, token lists, numbers, header names.

pub mod h1;

//! HTTP/1.1 codec parts that both sides speak with: the client side (`server/h1`) and
//! the upstream side (`upstream::h1`). Each side keeps its own heads and connection; what
//! is here is the grammar they share (RFC 9112, RFC 9110 §5.6).
//!
//! - [`chunked`]: the chunked transfer coding's decoder.
//! - `tokens`: tokens and token lists ([`has_token`]).
//! - `digits`: decimal and hex numbers written straight into a buffer.
//! - `names`: header names kept from one head to the next ([`Names`]).

pub(crate) mod chunked;
mod digits;
mod names;
mod tokens;

pub(crate) use digits::{push_decimal, push_hex, write_decimal};
pub(crate) use names::Names;
pub(crate) use tokens::{has_token, is_tchar, is_token, tokens};

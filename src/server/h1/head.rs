//! An HTTP/1.1 request head, parsed (httparse) from the front of the connection's read
//! buffer into the `http` types the pipeline takes, with what the connection needs to
//! know of it: how its body is framed, whether the client keeps the connection, whether
//! it waits for `100 Continue`, whether it asks for an upgrade.
//!
//! The head's bytes are split off the buffer and shared by the header values and the
//! target, never copied: once the request is over, the buffer is the only owner of its
//! memory again and reuses it for the next head.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{
    HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, TRANSFER_ENCODING, UPGRADE,
};
use http::{HeaderMap, Method, Uri, Version};

use crate::wire::h1::{has_token, Names};

/// How a request's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The client keeps the connection after this exchange (HTTP/1.1 unless it says
    /// `close`; HTTP/1.0 only with `keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1: the client waits for a go before its body.
    pub expect_continue: bool,
    /// HTTP/1.1 with an `Upgrade` header.
    pub upgrade: bool,
}

/// Why a head is refused; the answer is sent and the connection closed. What hyper (and
/// other parsers) would let pass but nginx refuses is refused here too, above all the
/// framing that lets two HTTP parsers disagree about where a request ends (request
/// smuggling):
///
/// | what | answer |
/// |---|---|
/// | a request line longer than `max_uri_bytes` (told before the head is complete) | `414` |
/// | a head longer than `max_header_bytes`, or more than `max_headers` fields | `431` |
/// | `Content-Length` and `Transfer-Encoding` together (RFC 9112 §6.1) | `400` |
/// | a second `Content-Length` or `Transfer-Encoding` line | `400` |
/// | a `Content-Length` that is not 1 to 19 digits | `400` |
/// | `Transfer-Encoding` on HTTP/1.0 | `400` |
/// | a transfer coding other than plain `chunked` (`gzip, chunked`, `identity`) | `501` |
/// | anything else that is no valid head | `400` |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Malformed {
    UriTooLong,
    TooLarge,
    UnknownCoding,
    Bad(&'static str),
}

impl Malformed {
    /// The whole answer (its `Date` is left out: the connection ends with it).
    pub(super) fn response(self) -> &'static [u8] {
        match self {
            Malformed::UriTooLong => {
                b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            }
            Malformed::UnknownCoding => {
                b"HTTP/1.1 501 Not Implemented\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            }
            Malformed::TooLarge => {
                b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            }
            Malformed::Bad(_) => {
                b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            }
        }
    }
}

/// The server's limits on heads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadLimits {
    /// Longest request line (`max_uri_bytes`).
    pub max_line: usize,
    pub max_bytes: usize,
    pub max_headers: usize,
}

/// Fields parsed on the stack; a head with more (up to `max_headers`) is parsed again
/// with heap arrays.
const FEW: usize = 32;

const NO_SPAN: Span = Span {
    name: (0, 0),
    value: (0, 0),
};

/// Parses the head at the front of `buf`: `Ok(None)` while it is incomplete. `headers`
/// is an empty map to fill (the connection's, reused). On success the head's bytes have
/// been taken off `buf`.
pub(super) fn parse(
    buf: &mut BytesMut,
    limits: HeadLimits,
    headers: &mut HeaderMap,
    names: &mut Names,
) -> Result<Option<Head>, Malformed> {
    check_line(buf, limits.max_line)?;
    let mut spans = [NO_SPAN; FEW];
    let few = &mut spans[..limits.max_headers.min(FEW)];
    let line = match locate(buf, limits, few)? {
        Located::Partial => return Ok(None),
        Located::Complete(line) => line,
        Located::TooMany if limits.max_headers > FEW => {
            let mut spans = vec![NO_SPAN; limits.max_headers];
            return match locate(buf, limits, &mut spans)? {
                Located::Partial => Ok(None),
                Located::Complete(line) => {
                    let count = line.count;
                    build(buf, line, &spans[..count], headers, names).map(Some)
                }
                Located::TooMany => Err(Malformed::TooLarge),
            };
        }
        Located::TooMany => return Err(Malformed::TooLarge),
    };
    let count = line.count;
    build(buf, line, &spans[..count], headers, names).map(Some)
}

/// `414` as soon as the request line is known to be longer than `max_line`, whether or not
/// the rest of the head is there (empty lines before it are skipped, as RFC 9112 §2.2
/// allows).
fn check_line(buf: &[u8], max_line: usize) -> Result<(), Malformed> {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line = &buf[start..];
    let len = memchr::memchr(b'\n', line).unwrap_or(line.len());
    // `+ 1`: the line's CR.
    if len > max_line + 1 {
        return Err(Malformed::UriTooLong);
    }
    Ok(())
}

/// Where a parsed field lies in the head's bytes: offsets into a head no longer than
/// `max_header_bytes` (at most 1 MiB), so 32 bits hold them and the fields' array that
/// every parse clears is half the size.
#[derive(Clone, Copy)]
struct Span {
    name: (u32, u32),
    value: (u32, u32),
}

/// A complete head's request line, its length and its number of fields.
struct Line {
    len: usize,
    method: Method,
    target: (usize, usize),
    version: Version,
    count: usize,
}

/// What [`locate`] found.
enum Located {
    Partial,
    Complete(Line),
    /// More fields than `spans` has room for.
    TooMany,
}

/// Finds a complete head in `buf`, with its fields' places in `spans` (as many as may be).
fn locate(buf: &[u8], limits: HeadLimits, spans: &mut [Span]) -> Result<Located, Malformed> {
    let mut fields = [MaybeUninit::uninit(); FEW];
    let mut more = Vec::new();
    let fields = if spans.len() <= FEW {
        &mut fields[..spans.len()]
    } else {
        more.resize(spans.len(), MaybeUninit::uninit());
        &mut more[..]
    };
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, fields) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > limits.max_bytes => {
            return Err(Malformed::TooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(Located::Partial),
        Err(httparse::Error::TooManyHeaders) => return Ok(Located::TooMany),
        Err(httparse::Error::Version) => return Err(Malformed::Bad("HTTP version")),
        Err(httparse::Error::HeaderName | httparse::Error::HeaderValue) => {
            return Err(Malformed::Bad("header field"))
        }
        Err(_) => return Err(Malformed::Bad("request line")),
    };
    if len > limits.max_bytes {
        return Err(Malformed::TooLarge);
    }
    let base = buf.as_ptr() as usize;
    let at = |part: &[u8]| {
        let start = part.as_ptr() as usize - base;
        (start, start + part.len())
    };
    let method = req.method.unwrap_or_default();
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| Malformed::Bad("method"))?;
    let target = at(req.path.unwrap_or_default().as_bytes());
    let version = match req.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let count = req.headers.len();
    let at32 = |part: &[u8]| {
        let (start, end) = at(part);
        (start as u32, end as u32)
    };
    for (field, span) in req.headers.iter().zip(spans.iter_mut()) {
        *span = Span {
            name: at32(field.name.as_bytes()),
            value: at32(field.value),
        };
    }
    Ok(Located::Complete(Line {
        len,
        method,
        target,
        version,
        count,
    }))
}

/// Takes the head off `buf` into the `http` types.
fn build(
    buf: &mut BytesMut,
    line: Line,
    spans: &[Span],
    headers: &mut HeaderMap,
    names: &mut Names,
) -> Result<Head, Malformed> {
    let Line {
        len,
        method,
        target,
        version,
        count,
    } = line;
    let bytes = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(bytes.slice(target.0..target.1))
        .map_err(|_| Malformed::Bad("request target"))?;
    let mut head = Head {
        method,
        uri,
        version,
        headers: std::mem::take(headers),
        framing: Framing::None,
        keep_alive: version == Version::HTTP_11,
        expect_continue: false,
        upgrade: false,
    };
    let mut framing = Framings::default();
    head.headers.reserve(count);
    for (at, field) in spans.iter().enumerate() {
        let name = names
            .name(at, &bytes[field.name.0 as usize..field.name.1 as usize])
            .map_err(|_| Malformed::Bad("header name"))?;
        let value = field.value.0 as usize..field.value.1 as usize;
        let value = HeaderValue::from_maybe_shared(bytes.slice(value))
            .map_err(|_| Malformed::Bad("header value"))?;
        note(&mut head, &mut framing, &name, &value)?;
        head.headers.append(name, value);
    }
    head.framing = framing.decide(version)?;
    Ok(head)
}

/// The framing headers seen so far.
#[derive(Default)]
struct Framings {
    length: Option<u64>,
    chunked: bool,
    close: bool,
}

impl Framings {
    fn decide(self, version: Version) -> Result<Framing, Malformed> {
        match (self.length, self.chunked) {
            (_, true) if version == Version::HTTP_10 => {
                Err(Malformed::Bad("Transfer-Encoding on HTTP/1.0"))
            }
            (_, true) => Ok(Framing::Chunked),
            (Some(0), false) | (None, false) => Ok(Framing::None),
            (Some(length), false) => Ok(Framing::Length(length)),
        }
    }
}

/// Takes in what one field says about the connection and the body.
fn note(
    head: &mut Head,
    framing: &mut Framings,
    name: &HeaderName,
    value: &HeaderValue,
) -> Result<(), Malformed> {
    let value = value.as_bytes();
    // Judged in the order the fields come, so the first fault found is the one answered.
    if name == CONTENT_LENGTH {
        if framing.length.is_some() {
            return Err(Malformed::Bad("Content-Length repeated"));
        }
        framing.length = Some(content_length(value).ok_or(Malformed::Bad("Content-Length"))?);
        if framing.chunked {
            return Err(Malformed::Bad("Content-Length with Transfer-Encoding"));
        }
    } else if name == TRANSFER_ENCODING {
        if std::mem::replace(&mut framing.chunked, true) {
            return Err(Malformed::Bad("Transfer-Encoding repeated"));
        }
        if !value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            return Err(Malformed::UnknownCoding);
        }
        if framing.length.is_some() {
            return Err(Malformed::Bad("Content-Length with Transfer-Encoding"));
        }
    } else if name == CONNECTION {
        if framing.close || has_token(value, b"close") {
            framing.close = true;
            head.keep_alive = false;
        } else if head.version == Version::HTTP_10 && has_token(value, b"keep-alive") {
            head.keep_alive = true;
        }
    } else if name == EXPECT {
        head.expect_continue =
            head.version == Version::HTTP_11 && value.eq_ignore_ascii_case(b"100-continue");
    } else if name == UPGRADE {
        head.upgrade = head.version == Version::HTTP_11;
    }
    Ok(())
}

/// 1 to 19 decimal digits (no sign, no list): anything else is no length.
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

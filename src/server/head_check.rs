//! A look at each HTTP/1.1 request head as its bytes arrive, before hyper parses it, for
//! what hyper would accept but nginx refuses, above all the framing that lets two HTTP
//! parsers disagree about where a request ends (request smuggling):
//!
//! | what | answer |
//! |---|---|
//! | a request line longer than `max_uri_bytes` | `414` |
//! | `Content-Length` and `Transfer-Encoding` together (RFC 9112 §6.1) | `400` |
//! | a second `Content-Length` or `Transfer-Encoding` line | `400` |
//! | a `Content-Length` that is not 1 to 19 digits | `400` |
//! | a transfer coding other than plain `chunked` (`gzip, chunked`, `identity`) | `501` |
//!
//! hyper on its own lets `Transfer-Encoding` win over `Content-Length` (and hides the
//! latter), decodes `gzip, chunked` as chunked and silently drops the gzip, and answers a
//! long URI with 431. The refusal is decided before hyper has the whole head, so no
//! request reaches the pipeline, and the connection is closed after the answer.
//!
//! To know where each head starts, the connection's bytes are followed from its first
//! one: a head, then its body (so many bytes for a `Content-Length`, chunk by chunk for
//! `chunked`), then the next head. So pipelined heads are checked as well, and body
//! bytes are never taken for a head. Where hyper would refuse the framing (a chunk
//! size that is no number), the connection is about to end, and nothing more is looked
//! at.

use std::fmt;

/// How much of a line is kept when a read ends in its middle: enough for any valid
/// `Content-Length` or `Transfer-Encoding` line, which are the only ones looked into.
const KEEP: usize = 256;

/// Why a request head is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UriTooLong,
    /// `Content-Length` with `Transfer-Encoding`.
    BothFramings,
    /// A framing header given twice.
    Repeated,
    BadLength,
    UnknownCoding,
}

impl Refusal {
    /// The whole response sent before the connection closes.
    pub fn response(self) -> &'static [u8] {
        match self {
            Refusal::UriTooLong => {
                b"HTTP/1.1 414 URI Too Long\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            }
            Refusal::UnknownCoding => {
                b"HTTP/1.1 501 Not Implemented\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            }
            Refusal::BothFramings | Refusal::Repeated | Refusal::BadLength => {
                b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::UriTooLong => "request line longer than max_uri_bytes",
            Refusal::BothFramings => "request has both Content-Length and Transfer-Encoding",
            Refusal::Repeated => "request repeats Content-Length or Transfer-Encoding",
            Refusal::BadLength => "request has an invalid Content-Length",
            Refusal::UnknownCoding => "request has a transfer coding other than chunked",
        })
    }
}

impl std::error::Error for Refusal {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing more is looked at: the framing is one hyper will refuse.
    Off,
    RequestLine,
    Fields,
    /// So many bytes of a body with a `Content-Length` still to come.
    Body(u64),
    /// A chunked body: the chunk-size line is next.
    ChunkSize,
    /// So many bytes of a chunk's data still to come, then its line end.
    ChunkData(u64),
    ChunkEnd,
    /// The trailer section, which ends with an empty line.
    Trailers,
}

/// The incremental look at one connection's request stream.
#[derive(Debug)]
pub struct HeadCheck {
    max_request_line: usize,
    state: State,
    /// The start of a line a read ended in the middle of (at most [`KEEP`] bytes).
    partial: Vec<u8>,
    /// The whole length of that line so far.
    partial_len: usize,
    /// The current head's `Content-Length`, once seen.
    content_length: Option<u64>,
    transfer_encoding: bool,
}

impl HeadCheck {
    /// Ready for the connection's first byte.
    pub fn new(max_request_line: usize) -> HeadCheck {
        HeadCheck {
            max_request_line,
            state: State::RequestLine,
            partial: Vec::new(),
            partial_len: 0,
            content_length: None,
            transfer_encoding: false,
        }
    }

    /// Whether bytes are still looked at (else [`HeadCheck::feed`] does nothing).
    pub fn scanning(&self) -> bool {
        self.state != State::Off
    }

    /// Follows the next bytes of the connection; a head that is to be refused says why.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), Refusal> {
        while !bytes.is_empty() {
            match self.state {
                State::Off => return Ok(()),
                State::Body(left) | State::ChunkData(left) => {
                    let taken = bytes.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    bytes = &bytes[taken..];
                    let left = left - taken as u64;
                    self.state = match (self.state, left) {
                        (State::Body(_), 0) => State::RequestLine,
                        (State::Body(_), left) => State::Body(left),
                        (_, 0) => State::ChunkEnd,
                        (_, left) => State::ChunkData(left),
                    };
                }
                _ => bytes = self.lines(bytes)?,
            }
        }
        Ok(())
    }

    /// Takes the lines at the front of `bytes` while the state is one of lines; the
    /// rest. One search over the read for the line ends: this runs for every request.
    fn lines<'b>(&mut self, bytes: &'b [u8]) -> Result<&'b [u8], Refusal> {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', bytes) {
            let piece = &bytes[start..end];
            start = end + 1;
            if self.partial_len == 0 {
                self.line(piece, piece.len())?;
            } else {
                self.hold(piece)?;
                let line = std::mem::take(&mut self.partial);
                let len = std::mem::replace(&mut self.partial_len, 0);
                self.line(&line, len)?;
                self.partial = line;
                self.partial.clear();
            }
            if matches!(
                self.state,
                State::Off | State::Body(_) | State::ChunkData(_)
            ) {
                return Ok(&bytes[start..]);
            }
        }
        self.hold(&bytes[start..])?;
        Ok(&[])
    }

    /// Keeps the start of a line that continues in a later read.
    fn hold(&mut self, piece: &[u8]) -> Result<(), Refusal> {
        self.partial_len += piece.len();
        // `+ 1`: the line's CR may be among the bytes held.
        if self.state == State::RequestLine && self.partial_len > self.max_request_line + 1 {
            return Err(Refusal::UriTooLong);
        }
        let room = KEEP.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&piece[..piece.len().min(room)]);
        Ok(())
    }

    /// One whole line without its LF; `line` may be only the first [`KEEP`] bytes of
    /// a longer one of `len` bytes.
    fn line(&mut self, line: &[u8], len: usize) -> Result<(), Refusal> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.state = match self.state {
            // Empty lines before the request line are skipped (RFC 9112 §2.2).
            State::RequestLine if line.is_empty() => State::RequestLine,
            State::RequestLine if len > self.max_request_line + 1 => {
                return Err(Refusal::UriTooLong)
            }
            State::RequestLine => {
                self.content_length = None;
                self.transfer_encoding = false;
                State::Fields
            }
            State::Fields if line.is_empty() => match (self.transfer_encoding, self.content_length)
            {
                (true, _) => State::ChunkSize,
                (false, Some(length)) if length > 0 => State::Body(length),
                (false, _) => State::RequestLine,
            },
            State::Fields => {
                self.field(line, len)?;
                State::Fields
            }
            State::ChunkSize => match chunk_size(line) {
                Some(0) => State::Trailers,
                Some(size) => State::ChunkData(size),
                None => State::Off,
            },
            State::ChunkEnd if line.is_empty() => State::ChunkSize,
            State::Trailers if line.is_empty() => State::RequestLine,
            State::Trailers => State::Trailers,
            State::ChunkEnd | State::Off | State::Body(_) | State::ChunkData(_) => State::Off,
        };
        Ok(())
    }

    fn field(&mut self, line: &[u8], len: usize) -> Result<(), Refusal> {
        // Only `Content-Length` and `Transfer-Encoding` are looked into.
        if !matches!(line.first(), Some(b'c' | b'C' | b't' | b'T')) {
            return Ok(());
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            // A name this long is none of ours; hyper judges the rest of the line.
            return Ok(());
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        // Judged alike whether a read split the line or not: a framing line this long
        // is no valid one (its value is 1 to 19 digits, or `chunked`).
        let cut = len > KEEP;
        if name.eq_ignore_ascii_case(b"content-length") {
            if self.content_length.is_some() {
                return Err(Refusal::Repeated);
            }
            let digits =
                !value.is_empty() && value.len() <= 19 && value.iter().all(u8::is_ascii_digit);
            let length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            match length {
                Some(length) if digits && !cut => self.content_length = Some(length),
                _ => return Err(Refusal::BadLength),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if std::mem::replace(&mut self.transfer_encoding, true) {
                return Err(Refusal::Repeated);
            }
            if cut || !value.eq_ignore_ascii_case(b"chunked") {
                return Err(Refusal::UnknownCoding);
            }
        } else {
            return Ok(());
        }
        if self.content_length.is_some() && self.transfer_encoding {
            return Err(Refusal::BothFramings);
        }
        Ok(())
    }
}

/// A chunk-size line's size (hex digits, then perhaps extensions), or `None` where hyper
/// would refuse it (RFC 9112 §7.1).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line
        .iter()
        .position(|&b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if digits == 0 || digits > 16 {
        return None;
    }
    let text = std::str::from_utf8(&line[..digits]).ok()?;
    u64::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(head: &[u8]) -> Result<(), Refusal> {
        HeadCheck::new(8192).feed(head)
    }

    /// The same bytes fed one at a time, and in two pieces at every split point.
    fn check_split(head: &[u8]) -> Result<(), Refusal> {
        let whole = check(head);
        let mut bytewise = HeadCheck::new(8192);
        let by_byte = head.iter().try_for_each(|b| bytewise.feed(&[*b]));
        assert_eq!(
            by_byte,
            whole,
            "byte by byte: {:?}",
            String::from_utf8_lossy(head)
        );
        for at in 0..head.len() {
            let mut two = HeadCheck::new(8192);
            let split = two.feed(&head[..at]).and_then(|()| two.feed(&head[at..]));
            assert_eq!(split, whole, "split at {at}");
        }
        whole
    }

    #[test]
    fn ordinary_heads_pass_whole_and_in_pieces() {
        for head in [
            &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  Chunked \r\n\r\n0\r\n\r\n",
            b"GET / HTTP/1.1\nHost: a\nCookie: c=1\n\n",
            b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            assert_eq!(check_split(head), Ok(()));
        }
    }

    #[test]
    fn both_framings_are_refused_in_either_order() {
        let cl_te = b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        let te_cl = b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(check_split(cl_te), Err(Refusal::BothFramings));
        assert_eq!(check_split(te_cl), Err(Refusal::BothFramings));
    }

    #[test]
    fn codings_other_than_chunked_are_not_implemented() {
        for coding in [
            "gzip, chunked",
            "identity, chunked",
            "gzip",
            "chunked, chunked",
            "chunked;x=1",
        ] {
            let head = format!("POST / HTTP/1.1\r\nTransfer-Encoding: {coding}\r\n\r\n");
            assert_eq!(
                check_split(head.as_bytes()),
                Err(Refusal::UnknownCoding),
                "{coding}"
            );
        }
    }

    #[test]
    fn repeated_or_malformed_lengths_are_refused() {
        let twice = b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(check_split(twice), Err(Refusal::Repeated));
        let te_twice =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(check_split(te_twice), Err(Refusal::Repeated));
        for value in ["+2", "0x2", "2, 2", "-1", "", "12345678901234567890", "2 2"] {
            let head = format!("POST / HTTP/1.1\r\nContent-Length: {value}\r\n\r\n");
            assert_eq!(
                check_split(head.as_bytes()),
                Err(Refusal::BadLength),
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_long_framing_line_is_judged_by_its_start() {
        let spaces = " ".repeat(KEEP);
        let head = format!("POST / HTTP/1.1\r\nTransfer-Encoding: chunked{spaces}\r\n\r\n");
        assert_eq!(check_split(head.as_bytes()), Err(Refusal::UnknownCoding));
        let other = format!("GET / HTTP/1.1\r\nX-Long: {}\r\n\r\n", "v".repeat(3 * KEEP));
        assert_eq!(check_split(other.as_bytes()), Ok(()));
    }

    #[test]
    fn a_request_line_longer_than_the_limit_is_414_before_its_end_arrives() {
        let mut check = HeadCheck::new(100);
        assert_eq!(check.feed(b"GET /"), Ok(()));
        // 101 bytes may still be 100 and a CR; one more cannot be.
        assert_eq!(check.feed(&[b'a'; 96]), Ok(()));
        assert_eq!(check.feed(b"a"), Err(Refusal::UriTooLong));
        let mut exact = HeadCheck::new(100);
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100 - 14));
        assert_eq!(exact.feed(line.as_bytes()), Ok(()));
        let mut over = HeadCheck::new(100);
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(101 - 14));
        assert_eq!(over.feed(line.as_bytes()), Err(Refusal::UriTooLong));
    }

    #[test]
    fn body_bytes_are_never_taken_for_a_head() {
        // A body that looks like framing, and one with a line longer than max_uri_bytes.
        let mut head = b"POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\n".to_vec();
        head.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n0123456789");
        assert_eq!(check_split(&head), Ok(()));
        let mut long = b"POST / HTTP/1.1\r\nContent-Length: 9000\r\n\r\n".to_vec();
        long.extend(std::iter::repeat_n(b'a', 9000));
        long.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(HeadCheck::new(8192).feed(&long), Ok(()));
    }

    #[test]
    fn pipelined_heads_are_checked_after_bodies_of_either_framing() {
        let smuggled =
            b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut after_get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n".to_vec();
        after_get.extend_from_slice(smuggled);
        assert_eq!(check_split(&after_get), Err(Refusal::BothFramings));
        let mut after_length = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".to_vec();
        after_length.extend_from_slice(smuggled);
        assert_eq!(check_split(&after_length), Err(Refusal::BothFramings));
        let mut after_chunks = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
            3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n"
            .to_vec();
        assert_eq!(check_split(&after_chunks), Ok(()));
        after_chunks.extend_from_slice(smuggled);
        assert_eq!(check_split(&after_chunks), Err(Refusal::BothFramings));
    }

    #[test]
    fn a_chunked_framing_hyper_refuses_ends_the_look() {
        let mut check = HeadCheck::new(8192);
        let head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(check.feed(head), Ok(()));
        assert!(!check.scanning());
        assert_eq!(
            check.feed(b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Ok(())
        );
    }
}

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
//! Only a head that starts on a fresh or idle connection is looked at: where a client
//! pipelines, the heads that arrive while a request is in flight cannot be found without
//! framing the bodies in between, and hyper's own rules apply to them (it then frames
//! by `Transfer-Encoding` alone and closes the connection after the response, which
//! RFC 9112 §6.1 allows and which cannot smuggle a request either).

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
    /// Between heads (or in a body): nothing is looked at.
    Off,
    RequestLine,
    Fields,
}

/// The incremental look at one connection's request heads.
#[derive(Debug)]
pub struct HeadCheck {
    max_request_line: usize,
    state: State,
    /// The start of a line a read ended in the middle of (at most [`KEEP`] bytes).
    partial: Vec<u8>,
    /// The whole length of that line so far.
    partial_len: usize,
    content_length: bool,
    transfer_encoding: bool,
}

impl HeadCheck {
    pub fn new(max_request_line: usize) -> HeadCheck {
        HeadCheck {
            max_request_line,
            state: State::Off,
            partial: Vec::new(),
            partial_len: 0,
            content_length: false,
            transfer_encoding: false,
        }
    }

    /// The first bytes of a new request head are about to be fed.
    pub fn start(&mut self) {
        self.state = State::RequestLine;
        self.partial.clear();
        self.partial_len = 0;
        self.content_length = false;
        self.transfer_encoding = false;
    }

    /// Whether a head is being looked at (else [`HeadCheck::feed`] does nothing).
    pub fn scanning(&self) -> bool {
        self.state != State::Off
    }

    /// Looks at the next bytes of the connection; stops at the end of the head.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), Refusal> {
        // One search over the read for all its line ends: this runs for every request.
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', bytes) {
            if self.state == State::Off {
                return Ok(());
            }
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
        }
        if self.state == State::Off || start == bytes.len() {
            return Ok(());
        }
        self.hold(&bytes[start..])
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
        match self.state {
            State::Off => Ok(()),
            // Empty lines before the request line are skipped (RFC 9112 §2.2).
            State::RequestLine if line.is_empty() => Ok(()),
            State::RequestLine if len > self.max_request_line + 1 => Err(Refusal::UriTooLong),
            State::RequestLine => {
                self.state = State::Fields;
                Ok(())
            }
            State::Fields if line.is_empty() => {
                self.state = State::Off;
                Ok(())
            }
            State::Fields => self.field(line, len),
        }
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
            if std::mem::replace(&mut self.content_length, true) {
                return Err(Refusal::Repeated);
            }
            let digits =
                !value.is_empty() && value.len() <= 19 && value.iter().all(u8::is_ascii_digit);
            if cut || !digits {
                return Err(Refusal::BadLength);
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
        if self.content_length && self.transfer_encoding {
            return Err(Refusal::BothFramings);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(head: &[u8]) -> Result<(), Refusal> {
        let mut check = HeadCheck::new(8192);
        check.start();
        check.feed(head)
    }

    /// The same bytes fed one at a time, and in two pieces at every split point.
    fn check_split(head: &[u8]) -> Result<(), Refusal> {
        let whole = check(head);
        let mut bytewise = HeadCheck::new(8192);
        bytewise.start();
        let by_byte = head.iter().try_for_each(|b| bytewise.feed(&[*b]));
        assert_eq!(
            by_byte,
            whole,
            "byte by byte: {:?}",
            String::from_utf8_lossy(head)
        );
        for at in 0..head.len() {
            let mut two = HeadCheck::new(8192);
            two.start();
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
        check.start();
        assert_eq!(check.feed(b"GET /"), Ok(()));
        // 101 bytes may still be 100 and a CR; one more cannot be.
        assert_eq!(check.feed(&[b'a'; 96]), Ok(()));
        assert_eq!(check.feed(b"a"), Err(Refusal::UriTooLong));
        let mut exact = HeadCheck::new(100);
        exact.start();
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100 - 14));
        assert_eq!(exact.feed(line.as_bytes()), Ok(()));
        let mut over = HeadCheck::new(100);
        over.start();
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(101 - 14));
        assert_eq!(over.feed(line.as_bytes()), Err(Refusal::UriTooLong));
    }

    #[test]
    fn nothing_after_the_head_is_looked_at() {
        let mut check = HeadCheck::new(8192);
        check.start();
        let head =
            b"POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(check.feed(head), Ok(()));
        assert!(!check.scanning());
    }
}

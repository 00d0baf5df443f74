//! The chunked transfer coding (RFC 9112 §7.1), decoded from a connection's read buffer:
//! an upstream's response bodies (`upstream::h1`), and clients' request bodies
//! (`server/h1`).
//!
//! Strict on purpose, since a lenient chunk parser is how response splitting starts: hex
//! sizes with overflow checks, every line ended by CRLF (no bare LF or CR), lines bounded
//! by [`MAX_CHUNK_LINE`], extensions checked against their grammar then ignored, trailers
//! checked to be field lines then discarded, up to [`MAX_TRAILER_BYTES`]. A line that
//! fits no grammar is a sign that we and the peer no longer agree where a chunk ends.
//! Data comes out as slices of the buffer, never copied.

use bytes::{Buf, Bytes, BytesMut};

use super::is_tchar;

/// Longest chunk-size line or trailer line of a chunked body.
pub(crate) const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Most trailer bytes accepted after the last chunk (they are read and discarded).
pub(crate) const MAX_TRAILER_BYTES: usize = 64 * 1024;

/// The chunked framing broke its grammar, as the text says: the peer and we no longer
/// agree where a chunk ends, so the connection cannot carry on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed chunked body: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: this many data bytes still to come.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
    Done,
}

/// One step of decoding.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Data(Bytes),
    /// The buffer holds no further complete piece: read more.
    NeedMore,
    /// The last chunk and the trailers have been read.
    Done,
}

#[derive(Debug)]
pub(crate) struct Decoder {
    state: State,
    trailer_bytes: usize,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new()
    }
}

impl Decoder {
    pub(crate) fn new() -> Decoder {
        Decoder {
            state: State::Size,
            trailer_bytes: 0,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the front of `buf` until a piece of data, the end, or a need for
    /// more bytes.
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, Malformed> {
        loop {
            if let State::Data(remaining) = self.state {
                if buf.is_empty() {
                    return Ok(Step::NeedMore);
                }
                let n = remaining.min(buf.len() as u64);
                self.state = match remaining - n {
                    0 => State::DataEnd,
                    left => State::Data(left),
                };
                return Ok(Step::Data(buf.split_to(n as usize).freeze()));
            }
            match self.skip_one(buf)? {
                Some(Step::NeedMore) => return Ok(Step::NeedMore),
                Some(Step::Done) => return Ok(Step::Done),
                _ => {}
            }
        }
    }

    /// Consumes framing already in `buf` (CRLF, size lines, trailers) without taking any
    /// data, so that the end of the body is seen with its last data frame.
    pub(crate) fn skip_framing(&mut self, buf: &mut BytesMut) -> Result<(), Malformed> {
        while !matches!(self.state, State::Data(_) | State::Done) {
            if let Some(Step::NeedMore) = self.skip_one(buf)? {
                break;
            }
        }
        Ok(())
    }

    /// One framing element; `Some(NeedMore)` if it is not all there yet.
    fn skip_one(&mut self, buf: &mut BytesMut) -> Result<Option<Step>, Malformed> {
        match self.state {
            State::Data(_) => Ok(None),
            State::Done => Ok(Some(Step::Done)),
            State::DataEnd => match buf.get(..2) {
                Some(b"\r\n") => {
                    buf.advance(2);
                    self.state = State::Size;
                    Ok(None)
                }
                Some(_) => Err(Malformed("no CRLF after chunk data")),
                None if buf.first().is_some_and(|&b| b != b'\r') => {
                    Err(Malformed("no CRLF after chunk data"))
                }
                None => Ok(Some(Step::NeedMore)),
            },
            State::Size => {
                let Some(end) = line_end(buf)? else {
                    return Ok(Some(Step::NeedMore));
                };
                let size = parse_size(&buf[..end])?;
                buf.advance(end + 2);
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::Data(size)
                };
                Ok(None)
            }
            State::Trailers => {
                let Some(end) = line_end(buf)? else {
                    return Ok(Some(Step::NeedMore));
                };
                if end > 0 && !is_field_line(&buf[..end]) {
                    return Err(Malformed("malformed trailer"));
                }
                buf.advance(end + 2);
                if end == 0 {
                    self.state = State::Done;
                    return Ok(Some(Step::Done));
                }
                self.trailer_bytes += end + 2;
                if self.trailer_bytes > MAX_TRAILER_BYTES {
                    return Err(Malformed("trailers too large"));
                }
                Ok(None)
            }
        }
    }
}

/// Where the CRLF of the line at the front of `buf` starts, if the whole line is there.
fn line_end(buf: &[u8]) -> Result<Option<usize>, Malformed> {
    let window = &buf[..buf.len().min(MAX_CHUNK_LINE)];
    match window.iter().position(|&b| b == b'\n') {
        Some(0) => Err(Malformed("bare LF")),
        Some(lf) if window[lf - 1] == b'\r' => Ok(Some(lf - 1)),
        Some(_) => Err(Malformed("bare LF")),
        None if buf.len() >= MAX_CHUNK_LINE => Err(Malformed("line too long")),
        None => Ok(None),
    }
}

/// `chunk-size [ chunk-ext ]`, without its CRLF; extensions are checked, then ignored.
fn parse_size(line: &[u8]) -> Result<u64, Malformed> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(Malformed("bad chunk size"));
    }
    let mut size = 0u64;
    for &b in &line[..digits] {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(digit)))
            .ok_or(Malformed("chunk size overflows"))?;
    }
    if extensions(&line[digits..]).is_none() {
        return Err(Malformed("bad chunk extension"));
    }
    Ok(size)
}

/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`, with
/// `chunk-ext-val = token / quoted-string` (§7.1.1); BWS is SP and HTAB only. `Some` if
/// `ext` is exactly that.
fn extensions(mut ext: &[u8]) -> Option<()> {
    while !ext.is_empty() {
        let name = skip_bws(skip_bws(ext).strip_prefix(b";")?);
        let after = skip_token(name)?;
        ext = match skip_bws(after).strip_prefix(b"=") {
            Some(value) => skip_value(skip_bws(value))?,
            None => after,
        };
    }
    Some(())
}

fn skip_bws(bytes: &[u8]) -> &[u8] {
    let n = bytes
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    &bytes[n..]
}

/// What follows the `token` at the front of `bytes`.
fn skip_token(bytes: &[u8]) -> Option<&[u8]> {
    let n = bytes.iter().take_while(|&&b| is_tchar(b)).count();
    (n > 0).then(|| &bytes[n..])
}

/// What follows the token or `quoted-string` (RFC 9110 §5.6.4) at the front of `bytes`.
fn skip_value(bytes: &[u8]) -> Option<&[u8]> {
    let Some(mut rest) = bytes.strip_prefix(b"\"") else {
        return skip_token(bytes);
    };
    // qdtext and quoted-pair both hold HTAB, SP, VCHAR and obs-text, that is no control
    // character but HTAB; qdtext excludes the quote and the backslash.
    let text = |b: u8| b == b'\t' || !b.is_ascii_control();
    loop {
        rest = match rest {
            [b'"', after @ ..] => return Some(after),
            [b'\\', quoted, after @ ..] if text(*quoted) => after,
            [b, after @ ..] if *b != b'\\' && text(*b) => after,
            _ => return None,
        };
    }
}

/// `field-line = field-name ":" OWS field-value OWS` (RFC 9112 §5): a token, the colon
/// straight after it, and no control character but HTAB.
fn is_field_line(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    colon > 0
        && line[..colon].iter().all(|&b| is_tchar(b))
        && line[colon + 1..]
            .iter()
            .all(|&b| b == b'\t' || !b.is_ascii_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in two parts split at `at` and collects data until the end.
    /// `Err(None)`: the body ended early.
    fn decode_split(wire: &[u8], at: usize) -> Result<(Vec<u8>, Vec<u8>), Option<Malformed>> {
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::from(&wire[..at]);
        let mut rest = &wire[at..];
        let mut body = Vec::new();
        loop {
            match decoder.decode(&mut buf).map_err(Some)? {
                Step::Data(data) => body.extend_from_slice(&data),
                Step::Done => return Ok((body, [&buf[..], rest].concat())),
                Step::NeedMore if rest.is_empty() => return Err(None),
                Step::NeedMore => {
                    buf.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
    }

    const WIRE: &[u8] =
        b"5\r\nhello\r\n1;name=\"v\"\r\n \r\nA \t;x\r\n0123456789\r\n000\r\nx-t: 1\r\n\r\nNEXT";

    #[test]
    fn any_split_point_decodes_the_same() {
        for at in 0..=WIRE.len() {
            let (body, rest) = decode_split(WIRE, at).unwrap();
            assert_eq!(body, b"hello 0123456789", "split at {at}");
            assert_eq!(rest, b"NEXT", "split at {at}");
        }
    }

    #[test]
    fn skip_framing_reaches_the_end_without_taking_data() {
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::from(&b"3\r\nabc\r\n0\r\n\r\n"[..]);
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            Step::Data(Bytes::from_static(b"abc"))
        );
        decoder.skip_framing(&mut buf).unwrap();
        assert!(decoder.is_done());
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::from(&b"3\r\nabc\r\n2\r\nde"[..]);
        decoder.decode(&mut buf).unwrap();
        decoder.skip_framing(&mut buf).unwrap();
        assert_eq!(&buf[..], b"de");
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            Step::Data(Bytes::from_static(b"de"))
        );
    }

    #[test]
    fn malformed_framing_is_an_error() {
        for wire in [
            &b"5\r\nhelloXX0\r\n\r\n"[..],
            b"5\r\nhello\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"g\r\n",
            b"\r\n",
            b" 5\r\nhello\r\n0\r\n\r\n",
            b"5 x\r\nhello\r\n0\r\n\r\n",
            b"-5\r\n",
            b"1ffffffffffffffff\r\n",
            b"5;a\rb\r\nhello\r\n0\r\n\r\n",
            b"0\r\nx-t: 1\n\r\n",
            b"5 \r\nhello\r\n0\r\n\r\n",
        ] {
            assert!(
                matches!(decode_split(wire, wire.len()), Err(Some(Malformed(_)))),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn extensions_and_trailers_must_fit_their_grammar() {
        for wire in [
            &b"5\r;a\r\nhello\r\n0\r\n\r\n"[..],
            b"5\x0c;a\r\nhello\r\n0\r\n\r\n",
            b"5;a,b\r\nhello\r\n0\r\n\r\n",
            b"5;a b\r\nhello\r\n0\r\n\r\n",
            b"5;a \r\nhello\r\n0\r\n\r\n",
            b"5;a=\r\nhello\r\n0\r\n\r\n",
            b"5;=b\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"b\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"b\\\"\r\nhello\r\n0\r\n\r\n",
            b"5;;\r\nhello\r\n0\r\n\r\n",
            b"0;\x7f\r\n\r\n",
            b"0\r\nx-t 1\r\n\r\n",
            b"0\r\nx-t : 1\r\n\r\n",
            b"0\r\n: 1\r\n\r\n",
            b"0\r\nx-t: 1\r\n folded\r\n\r\n",
            b"0\r\nnot a field\r\n\r\n",
        ] {
            assert!(
                matches!(decode_split(wire, wire.len()), Err(Some(Malformed(_)))),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let wire = b"5 ;a = \"q\\\"\" ;\tb=c\r\nhello\r\n0;z\r\nx-t:\r\ny: \"\x80\"\r\n\r\n";
        assert_eq!(decode_split(wire, 9).unwrap().0, b"hello");
    }

    #[test]
    fn lines_and_trailers_are_bounded() {
        let long = format!("5;{}\r\nhello\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE));
        assert!(matches!(
            decode_split(long.as_bytes(), 10),
            Err(Some(Malformed(_)))
        ));
        let mut trailers = String::from("0\r\n");
        while trailers.len() <= MAX_TRAILER_BYTES {
            trailers.push_str("x-trailer: 0123456789\r\n");
        }
        trailers.push_str("\r\n");
        assert!(matches!(
            decode_split(trailers.as_bytes(), 3),
            Err(Some(Malformed(_)))
        ));
        let largest = b"ffffffffffffffff\r\n";
        let mut decoder = Decoder::new();
        let mut buf = BytesMut::from(&largest[..]);
        assert_eq!(decoder.decode(&mut buf).unwrap(), Step::NeedMore);
        assert_eq!(decoder.state, State::Data(u64::MAX));
    }
}

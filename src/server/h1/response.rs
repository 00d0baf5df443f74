//! An answer's head as HTTP/1.1 bytes, and how its body is framed on the wire: the
//! answer's own `Content-Length`, else the body's known length, else chunked (close-
//! delimited to an HTTP/1.0 client). Bodies that must not be sent (to `HEAD`, with a
//! 1xx, 204 or 304) are not.

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, SERVER, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Version};
use http_body::Body;

use super::super::date;
use crate::proxy::Logged;
use crate::wire::h1::{has_token, push_hex, write_decimal};

/// What the request asked that shapes its answer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Asked {
    pub head: bool,
    pub http10: bool,
    /// The connection may stay open after this answer (the client's wish, and no drain).
    pub keep_alive: bool,
}

impl Asked {
    pub(super) fn of(method: &Method, version: Version, keep_alive: bool) -> Asked {
        Asked {
            head: method == Method::HEAD,
            http10: version == Version::HTTP_10,
            keep_alive,
        }
    }
}

/// How the body goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// Nothing is sent (and the body is not read).
    Nothing,
    /// Exactly so many bytes.
    Length(u64),
    Chunked,
    /// Until the connection closes.
    Close,
}

/// The written head: how the body follows, and whether the connection stays open.
#[derive(Clone, Copy, Debug)]
pub(super) struct Written {
    pub framing: Framing,
    pub keep_alive: bool,
}

/// Writes the answer's head to `out` ([`write_head`]) and, when its body is tollgate's
/// own and small, the body after it: the answer then goes out in one write, and its body
/// is not read again ([`Framing::Nothing`] is returned).
pub(super) fn write_answer(
    out: &mut Vec<u8>,
    response: &mut Response<Logged>,
    asked: Asked,
    server: Option<&HeaderValue>,
) -> Written {
    let length = response.body().size_hint().exact();
    let body = response.body();
    let lines = |out: &mut Vec<u8>| body.write_lines(out);
    let status = (response.status(), lines);
    let before = out.len();
    let mut written = write_head(out, status, response.headers(), length, asked, server);
    response.body_mut().head_sent((out.len() - before) as u64);
    if let Framing::Length(n @ 1..) = written.framing {
        if response.body_mut().write_whole(out, n.min(COPY_UP_TO as u64)) {
            written.framing = Framing::Nothing;
        }
    }
    written
}

/// Writes the head of an answer with `status`, `lines` (which appends the header lines
/// written beforehand, as they are) and `headers` to `out`; `length` is the body's exact
/// length when known. `server` (`server_header`) and the `Date` are written unless the
/// answer has its own (an upstream's, passed with `pass_headers`).
pub(super) fn write_head(
    out: &mut Vec<u8>,
    (status, lines): (StatusCode, impl FnOnce(&mut Vec<u8>)),
    headers: &HeaderMap,
    length: Option<u64>,
    asked: Asked,
    server: Option<&HeaderValue>,
) -> Written {
    write_status_line(out, status, asked.http10);
    lines(out);
    let said = copy_headers(out, headers, status, length, asked);
    let framing = write_framing(out, status, length, said.length, asked);
    // An HTTP/1.0 body without a length ends with the connection.
    let keep_alive = asked.keep_alive && !said.close && framing != Framing::Close;
    write_connection(out, status, keep_alive, &said, asked.http10);
    if let (false, Some(server)) = (said.server, server) {
        out.extend_from_slice(b"server: ");
        out.extend_from_slice(server.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !said.date {
        date::write_header(out);
    }
    out.extend_from_slice(b"\r\n");
    Written {
        framing,
        keep_alive,
    }
}

/// An answer written out beforehand (a malformed head's 400, 414, 431, 501), with
/// `server` and the `Date` after its status line.
pub(super) fn with_server(answer: &[u8], server: Option<&HeaderValue>) -> Vec<u8> {
    let line = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(answer.len(), |at| at + 2);
    let mut out = Vec::with_capacity(answer.len() + 64);
    out.extend_from_slice(&answer[..line]);
    if let Some(server) = server {
        out.extend_from_slice(b"server: ");
        out.extend_from_slice(server.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    date::write_header(&mut out);
    out.extend_from_slice(&answer[line..]);
    out
}

/// What an answer's own header fields said that its head depends on.
#[derive(Default)]
struct Said {
    /// A `Content-Length` that was passed on.
    length: Option<u64>,
    date: bool,
    server: bool,
    /// `Connection: close`.
    close: bool,
    /// `Connection: keep-alive`.
    keep_alive: bool,
}

fn write_status_line(out: &mut Vec<u8>, status: StatusCode, http10: bool) {
    if let (false, Some(line)) = (http10, common_status_line(status)) {
        out.extend_from_slice(line);
        return;
    }
    out.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The HTTP/1.1 status lines of the answers most given (a proxied 200, a 429 under a
/// flood), whole: one copy rather than five pieces.
fn common_status_line(status: StatusCode) -> Option<&'static [u8]> {
    Some(match status.as_u16() {
        200 => b"HTTP/1.1 200 OK\r\n",
        429 => b"HTTP/1.1 429 Too Many Requests\r\n",
        503 => b"HTTP/1.1 503 Service Unavailable\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        304 => b"HTTP/1.1 304 Not Modified\r\n",
        _ => return None,
    })
}

/// Copies the answer's header fields to `out`, but for those the connection decides:
/// `Transfer-Encoding` always, `Content-Length` where the body's own length goes out
/// instead or none may.
fn copy_headers(
    out: &mut Vec<u8>,
    headers: &HeaderMap,
    status: StatusCode,
    length: Option<u64>,
    asked: Asked,
) -> Said {
    // None in a 1xx or 204 (RFC 9110 §8.6).
    let no_length = status.is_informational() || status == StatusCode::NO_CONTENT;
    let mut said = Said::default();
    for (name, value) in headers {
        if name == TRANSFER_ENCODING {
            // The framing is this connection's to choose.
            continue;
        }
        if name == CONTENT_LENGTH {
            // The body's own length, when it knows it, is what goes out (a HEAD's empty
            // body says nothing of it).
            let known = length.is_some() && !asked.head;
            if said.length.is_some() || known || no_length {
                continue;
            }
            said.length = std::str::from_utf8(value.as_bytes())
                .ok()
                .and_then(|v| v.parse::<u64>().ok());
            if said.length.is_none() {
                continue;
            }
        } else if name == CONNECTION {
            said.close |= has_token(value.as_bytes(), b"close");
            said.keep_alive |= has_token(value.as_bytes(), b"keep-alive");
        } else if name == DATE {
            said.date = true;
        } else if name == SERVER {
            said.server = true;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    said
}

/// Chooses how the body follows and writes the header that says so, unless `declared`
/// (the answer's own `Content-Length`, passed on) says it already.
fn write_framing(
    out: &mut Vec<u8>,
    status: StatusCode,
    length: Option<u64>,
    declared: Option<u64>,
    asked: Asked,
) -> Framing {
    let no_body = asked.head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        Framing::Nothing
    } else if no_body {
        if declared.is_none() && asked.head {
            if let Some(length) = length.filter(|&n| n > 0) {
                write_length(out, length);
            }
        }
        Framing::Nothing
    } else if let Some(length) = length.or(declared) {
        if declared.is_none() {
            write_length(out, length);
        }
        Framing::Length(length)
    } else if asked.http10 {
        Framing::Close
    } else {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        Framing::Chunked
    }
}

/// The `Connection` header the answer needs and did not carry: `close` on HTTP/1.1 when
/// the connection ends, `keep-alive` on HTTP/1.0 when it does not.
fn write_connection(
    out: &mut Vec<u8>,
    status: StatusCode,
    keep_alive: bool,
    said: &Said,
    http10: bool,
) {
    if !keep_alive && !said.close && !http10 && status != StatusCode::SWITCHING_PROTOCOLS {
        out.extend_from_slice(b"connection: close\r\n");
    }
    if keep_alive && http10 && !said.keep_alive {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
}

/// `content-length: N`, put together on the stack and copied once.
fn write_length(out: &mut Vec<u8>, length: u64) {
    const NAME: &[u8] = b"content-length: ";
    let mut line = [0u8; NAME.len() + 20 + 2];
    line[..NAME.len()].copy_from_slice(NAME);
    let end = NAME.len() + write_decimal(&mut line[NAME.len()..], length);
    line[end..end + 2].copy_from_slice(b"\r\n");
    out.extend_from_slice(&line[..end + 2]);
}

/// A body piece too large to be copied into the write buffer is written from its own
/// bytes (`outbox`); the limit below which it is copied.
pub(super) const COPY_UP_TO: usize = 8 * 1024;

/// Frames one piece of body: `small` gets what is copied (chunk size line, the piece if
/// small, its CRLF), and a large piece comes back to be written by itself, followed by
/// the returned suffix. `Err` if the piece goes past the declared length.
pub(super) fn frame_piece(
    framing: &mut Framing,
    piece: Bytes,
    small: &mut Vec<u8>,
) -> Result<Option<(Bytes, &'static [u8])>, TooLong> {
    if piece.is_empty() {
        return Ok(None);
    }
    let suffix: &'static [u8] = match framing {
        Framing::Nothing => return Ok(None),
        Framing::Length(left) => {
            let n = piece.len() as u64;
            if n > *left {
                return Err(TooLong);
            }
            *left -= n;
            b""
        }
        Framing::Chunked => {
            push_hex(small, piece.len() as u64);
            small.extend_from_slice(b"\r\n");
            b"\r\n"
        }
        Framing::Close => b"",
    };
    if piece.len() <= COPY_UP_TO {
        small.extend_from_slice(&piece);
        small.extend_from_slice(suffix);
        return Ok(None);
    }
    Ok(Some((piece, suffix)))
}

/// The last chunk of a chunked body, with no trailers.
pub(super) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The bytes [`frame_piece`] adds around a chunk of `len` bytes (not empty): its size in
/// hex, CRLF, and the CRLF after it (`$bytes_sent` counts them).
pub(super) fn chunk_framing(len: usize) -> u64 {
    let hex_digits = (u64::BITS - (len as u64).leading_zeros()).div_ceil(4);
    u64::from(hex_digits.max(1)) + 4
}

/// The end of the body on the wire; `Err` if fewer bytes came than declared.
pub(super) fn frame_end(framing: Framing, small: &mut Vec<u8>) -> Result<(), TooLong> {
    match framing {
        Framing::Chunked => {
            small.extend_from_slice(LAST_CHUNK);
            Ok(())
        }
        Framing::Length(left) if left > 0 => Err(TooLong),
        _ => Ok(()),
    }
}

/// A body that does not match its declared length: the connection cannot carry on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooLong;

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn head(
        status: u16,
        headers: &[(&str, &str)],
        length: Option<u64>,
        asked: Asked,
    ) -> (String, Written) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let mut out = Vec::new();
        let status = StatusCode::from_u16(status).unwrap();
        let server = HeaderValue::from_static("tollgate");
        let written = write_head(&mut out, (status, |_: &mut Vec<u8>| {}), &map, length, asked, Some(&server));
        let text = String::from_utf8(out).unwrap();
        let cut = |text: String, line: &str| {
            text.find(line).map_or(text.clone(), |at| {
                let end = text[at..].find("\r\n").unwrap() + at + 2;
                format!("{}{}", &text[..at], &text[end..])
            })
        };
        (cut(cut(text, "date: "), "server: tollgate\r\n"), written)
    }

    const GET11: Asked = Asked {
        head: false,
        http10: false,
        keep_alive: true,
    };

    #[test]
    fn a_known_length_is_written_and_kept_to() {
        let (text, written) = head(200, &[("x-a", "1")], Some(5), GET11);
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\n\r\n"
        );
        assert_eq!(written.framing, Framing::Length(5));
        assert!(written.keep_alive);
    }

    #[test]
    fn an_unknown_length_is_chunked_for_http11_and_closes_http10() {
        let (text, written) = head(200, &[], None, GET11);
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        assert_eq!(written.framing, Framing::Chunked);
        let asked = Asked {
            http10: true,
            keep_alive: true,
            ..GET11
        };
        let (text, written) = head(200, &[], None, asked);
        assert_eq!(text, "HTTP/1.0 200 OK\r\n\r\n");
        assert_eq!(written.framing, Framing::Close);
        assert!(!written.keep_alive);
    }

    #[test]
    fn a_declared_length_wins_and_a_transfer_encoding_is_dropped() {
        let headers = [("content-length", "3"), ("transfer-encoding", "chunked")];
        let (text, written) = head(200, &headers, None, GET11);
        assert_eq!(text, "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n");
        assert_eq!(written.framing, Framing::Length(3));
    }

    #[test]
    fn the_body_s_own_length_wins_over_a_header_that_disagrees() {
        let (text, written) = head(200, &[("content-length", "5")], Some(3), GET11);
        assert_eq!(text, "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n");
        assert_eq!(written.framing, Framing::Length(3));
        let (text, _) = head(204, &[("content-length", "5")], None, GET11);
        assert_eq!(text, "HTTP/1.1 204 No Content\r\n\r\n");
        let asked = Asked {
            head: true,
            ..GET11
        };
        let (text, _) = head(200, &[("content-length", "5")], Some(0), asked);
        assert_eq!(text, "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n");
    }

    #[test]
    fn no_body_goes_with_head_204_and_304() {
        let asked = Asked {
            head: true,
            ..GET11
        };
        let (text, written) = head(200, &[], Some(7), asked);
        assert_eq!(text, "HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\n");
        assert_eq!(written.framing, Framing::Nothing);
        for status in [204, 304] {
            let (text, written) = head(status, &[], Some(0), GET11);
            assert!(!text.contains("content-length"), "{text}");
            assert_eq!(written.framing, Framing::Nothing);
        }
    }

    #[test]
    fn closing_is_said_on_http11_and_keeping_on_http10() {
        let asked = Asked {
            keep_alive: false,
            ..GET11
        };
        let (text, _) = head(200, &[], Some(0), asked);
        assert!(text.contains("connection: close\r\n"), "{text}");
        let (text, written) = head(429, &[("connection", "close")], Some(0), GET11);
        assert_eq!(text.matches("connection").count(), 1, "{text}");
        assert!(!written.keep_alive);
        let asked = Asked {
            http10: true,
            ..GET11
        };
        let (text, written) = head(200, &[], Some(0), asked);
        assert!(text.contains("connection: keep-alive\r\n"), "{text}");
        assert!(written.keep_alive);
    }

    #[test]
    fn tollgates_server_goes_out_unless_the_answer_has_one() {
        let server = HeaderValue::from_static("tollgate");
        let mut out = Vec::new();
        let status = (StatusCode::OK, |_: &mut Vec<u8>| {});
        write_head(&mut out, status, &HeaderMap::new(), Some(0), GET11, Some(&server));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("server: tollgate\r\n").count(), 1, "{text}");
        let mut map = HeaderMap::new();
        map.insert(SERVER, HeaderValue::from_static("Apache"));
        let mut out = Vec::new();
        write_head(&mut out, status, &map, Some(0), GET11, Some(&server));
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("tollgate"), "{text}");
        let mut out = Vec::new();
        write_head(&mut out, status, &HeaderMap::new(), Some(0), GET11, None);
        assert!(!String::from_utf8(out).unwrap().contains("server"));
    }

    #[test]
    fn an_answer_written_beforehand_gets_the_server_and_date_after_its_status_line() {
        let answer = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n";
        let server = HeaderValue::from_static("edge");
        let text = String::from_utf8(with_server(answer, Some(&server))).unwrap();
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\nserver: edge\r\ndate: "), "{text}");
        assert!(text.ends_with("\r\nconnection: close\r\n\r\n"), "{text}");
        let text = String::from_utf8(with_server(answer, None)).unwrap();
        assert!(!text.contains("server"), "{text}");
    }

    #[test]
    fn the_common_status_lines_are_the_ones_written_piece_by_piece() {
        for code in [200, 204, 304, 404, 429, 503, 599] {
            let status = StatusCode::from_u16(code).unwrap();
            let mut out = Vec::new();
            write_status_line(&mut out, status, false);
            let reason = status.canonical_reason().unwrap_or("<none>");
            assert_eq!(out, format!("HTTP/1.1 {code} {reason}\r\n").as_bytes());
            out.clear();
            write_status_line(&mut out, status, true);
            assert_eq!(out, format!("HTTP/1.0 {code} {reason}\r\n").as_bytes());
        }
        for length in [0, 7, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            write_length(&mut out, length);
            assert_eq!(out, format!("content-length: {length}\r\n").as_bytes());
        }
    }

    #[test]
    fn pieces_are_framed_and_lengths_kept_to() {
        let mut small = Vec::new();
        let mut framing = Framing::Chunked;
        let big = Bytes::from(vec![b'x'; COPY_UP_TO + 1]);
        assert_eq!(
            frame_piece(&mut framing, Bytes::from_static(b"abc"), &mut small),
            Ok(None)
        );
        let large = frame_piece(&mut framing, big.clone(), &mut small).unwrap();
        assert_eq!(large, Some((big, &b"\r\n"[..])));
        frame_end(framing, &mut small).unwrap();
        assert_eq!(small, b"3\r\nabc\r\n2001\r\n0\r\n\r\n");
        let mut framing = Framing::Length(2);
        let mut small = Vec::new();
        assert_eq!(
            frame_piece(&mut framing, Bytes::from_static(b"abc"), &mut small),
            Err(TooLong)
        );
        let mut framing = Framing::Length(4);
        frame_piece(&mut framing, Bytes::from_static(b"abc"), &mut small).unwrap();
        assert_eq!(frame_end(framing, &mut small), Err(TooLong));
    }

    #[test]
    fn chunk_framing_is_what_frame_piece_adds() {
        for len in [1, 15, 16, 255, 256, 4097, COPY_UP_TO] {
            let mut small = Vec::new();
            frame_piece(&mut Framing::Chunked, Bytes::from(vec![b'x'; len]), &mut small).unwrap();
            assert_eq!(chunk_framing(len), (small.len() - len) as u64, "{len}");
        }
    }
}

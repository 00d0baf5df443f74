//! The response head: parsed with httparse straight from the read buffer, header values
//! kept as zero-copy slices of it, and the body's framing decided by RFC 9112 §6.3.

use std::mem::MaybeUninit;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode, Version};

use super::{Error, MAX_HEADERS, MAX_HEAD_BYTES};
use crate::wire::h1::{is_token, tokens, Names};

/// Room left in a response's header map for the headers the proxy adds to it on its way
/// to the client (the two draft rate-limit headers), so that adding them does not regrow
/// the map: a reallocation and a rehash of every header, per limited response.
const ADDED_ON_THE_WAY_BACK: usize = 2;

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ResponseFraming {
    /// No body: HEAD, 1xx, 204, 304, or `content-length: 0`.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the server closes the connection.
    Eof,
}

/// A parsed final response head (or a 101).
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) version: Version,
    pub(super) headers: HeaderMap,
    pub(super) framing: ResponseFraming,
    /// The response allows the connection to carry another exchange (its version and
    /// `Connection`, and a framing that ends without a close).
    pub(super) keep_alive: bool,
}

/// What the framing headers said, gathered while the head is parsed.
#[derive(Default)]
struct FramingHeaders {
    content_length: Option<u64>,
    transfer_encoding: bool,
    chunked: bool,
    close: bool,
    keep_alive: bool,
}

/// Offsets of one header's name and value in the head, so that the values can become
/// slices of the frozen head once httparse's borrow of the buffer has ended.
type Span = [u32; 4];

/// Parses a final response head from the front of `buf`, skipping (and consuming) any
/// 1xx interim responses before it except 101. `None` while the head is incomplete; the
/// head's bytes are split off `buf`, which then holds only what follows it.
pub(super) fn parse(
    buf: &mut BytesMut,
    head_request: bool,
    names: &mut Names,
    spare: &mut HeaderMap,
) -> Result<Option<Head>, Error> {
    loop {
        let mut spans: [Span; MAX_HEADERS] = [[0; 4]; MAX_HEADERS];
        let Some(Measured {
            len,
            code,
            minor,
            count,
            fields,
        }) = measure(buf, &mut spans)?
        else {
            return Ok(None);
        };
        if (100..200).contains(&code) && code != 101 {
            // 100 Continue, 102 Processing, 103 Early Hints: not for the client here.
            buf.advance(len);
            continue;
        }
        let status = StatusCode::from_u16(code).map_err(|_| Error::Head("status code"))?;
        let version = if minor == 1 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        };
        let head = buf.split_to(len).freeze();
        // The connection's spare map (empty), with room made for what this head and the
        // way back add.
        let mut headers = std::mem::take(spare);
        headers.reserve(count + ADDED_ON_THE_WAY_BACK);
        for (at, span) in spans.iter().take(count).enumerate() {
            let (name, value) = header_at(&head, span, at, names)?;
            headers.append(name, value);
        }
        let framing = response_framing(status, version, head_request, &fields)?;
        if fields.transfer_encoding && fields.content_length.is_some() {
            // The body is read by its transfer coding; the length it also claims is no
            // part of the message (RFC 9112 §6.3) and must not travel on with it.
            headers.remove(http::header::CONTENT_LENGTH);
        }
        let keep_alive = match version {
            Version::HTTP_11 => !fields.close,
            _ => fields.keep_alive && !fields.close,
        } && framing != ResponseFraming::Eof
            // Both framings at once smells of smuggling: read it, then close (§6.3).
            && !(fields.transfer_encoding && fields.content_length.is_some());
        return Ok(Some(Head {
            status,
            version,
            headers,
            framing,
            keep_alive,
        }));
    }
}

/// A complete head as httparse saw it, before its values are sliced out of the buffer.
struct Measured {
    /// The head's length, status line and final CRLF included.
    len: usize,
    /// The status code, as sent.
    code: u16,
    /// The minor HTTP version (`HTTP/1.x`).
    minor: u8,
    /// How many header fields there are (the first `count` spans).
    count: usize,
    /// What the framing header fields said.
    fields: FramingHeaders,
}

/// Runs httparse over `buf`, noting each header's [`Span`] in `spans`: the complete
/// head, or `None` for a partial one within the size limit.
fn measure(buf: &[u8], spans: &mut [Span; MAX_HEADERS]) -> Result<Option<Measured>, Error> {
    let mut slots: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut slots,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD_BYTES => len,
        Ok(httparse::Status::Complete(_)) => return Err(Error::HeadTooLarge),
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
            return Err(Error::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::TooManyHeaders),
        Err(err) => return Err(Error::Head(parse_error(err))),
    };
    let (Some(code), Some(minor)) = (response.code, response.version) else {
        return Err(Error::Head("status line"));
    };
    if !crlf_lines_only(&buf[..len]) {
        return Err(Error::Head("line ending"));
    }
    let base = buf.as_ptr() as usize;
    let mut fields = FramingHeaders::default();
    for (span, header) in spans.iter_mut().zip(response.headers.iter()) {
        let name = header.name.as_bytes();
        let value = header.value;
        // Offsets within a head of at most 64 KiB always fit in u32; `header_at`
        // checks them against the head again, so nothing here can panic.
        *span = [
            (name.as_ptr() as usize).wrapping_sub(base) as u32,
            name.len() as u32,
            (value.as_ptr() as usize).wrapping_sub(base) as u32,
            value.len() as u32,
        ];
        fields.note(name, value)?;
    }
    Ok(Some(Measured {
        len,
        code,
        minor,
        count: response.headers.len(),
        fields,
    }))
}

/// Every line of `head` ends in CRLF and the first is the status line. httparse also
/// takes a bare LF as a line end, and skips empty lines before the status line; RFC 9112
/// §2.2 allows the first to any recipient and the second to servers only. We take neither,
/// as the chunked decoder does not: an upstream app that lets an LF into a header value
/// would otherwise have us split its response where its own server did not. httparse has
/// already refused a CR without its LF, so looking at every LF is enough.
fn crlf_lines_only(head: &[u8]) -> bool {
    // No early exit, so the compiler can look at many bytes per instruction: this
    // runs for every response.
    let bare_lf = head.windows(2).fold(false, |bare, pair| {
        bare | ((pair[1] == b'\n') & (pair[0] != b'\r'))
    });
    !matches!(head.first(), Some(b'\r' | b'\n')) && !bare_lf
}

fn header_at(
    head: &Bytes,
    span: &Span,
    at: usize,
    names: &mut Names,
) -> Result<(HeaderName, HeaderValue), Error> {
    let [name_at, name_len, value_at, value_len] = span.map(|n| n as usize);
    let name = head
        .get(name_at..name_at + name_len)
        .ok_or(Error::Head("header offsets"))?;
    let name = names
        .name(at, name)
        .map_err(|_| Error::Head("header name"))?;
    let value = head
        .get(value_at..value_at + value_len)
        .ok_or(Error::Head("header offsets"))?;
    // A slice of the head (a reference count), not a copy.
    let value = HeaderValue::from_maybe_shared(head.slice_ref(value))
        .map_err(|_| Error::Head("header value"))?;
    Ok((name, value))
}

impl FramingHeaders {
    fn note(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(value).ok_or(Error::ContentLength)?;
            // Repeated values must agree (RFC 9110 §8.6).
            if self.content_length.is_some_and(|seen| seen != n) {
                return Err(Error::ContentLength);
            }
            self.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_encoding = true;
            let mut last = None;
            for element in tokens(value) {
                last = Some(coding_name(element).ok_or(Error::Head("transfer-encoding"))?);
            }
            // Only the final coding decides (§6.3): a line with codings replaces the verdict.
            if let Some(last) = last {
                self.chunked = last.eq_ignore_ascii_case(b"chunked");
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in tokens(value) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        Ok(())
    }
}

/// RFC 9112 §6.3, in its order.
fn response_framing(
    status: StatusCode,
    version: Version,
    head_request: bool,
    fields: &FramingHeaders,
) -> Result<ResponseFraming, Error> {
    if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(ResponseFraming::Empty);
    }
    if fields.transfer_encoding {
        if version == Version::HTTP_10 {
            // §6.1: faulty framing in HTTP/1.0.
            return Err(Error::Head("transfer-encoding in an HTTP/1.0 response"));
        }
        return Ok(if fields.chunked {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::Eof
        });
    }
    Ok(match fields.content_length {
        Some(0) => ResponseFraming::Empty,
        Some(n) => ResponseFraming::Length(n),
        None => ResponseFraming::Eof,
    })
}

/// A Content-Length field value: digits, or a list of identical digit strings
/// (`5, 5`). `None` for anything else, overflow included.
fn parse_content_length(value: &[u8]) -> Option<u64> {
    let mut result = None;
    for item in value.split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = item.iter().try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })?;
        if result.is_some_and(|seen| seen != n) {
            return None;
        }
        result = Some(n);
    }
    result
}

/// The name of one `transfer-coding = token *( OWS ";" OWS token BWS "=" BWS token )`
/// (RFC 9112 §7), `None` if it is anything else: a coding we cannot name is a framing we
/// cannot know. Quoted parameter values are refused rather than parsed: no registered
/// transfer coding takes parameters, and a comma inside quotes would already have been
/// split by [`tokens`]. httparse has refused control characters other than HTAB, so
/// trimming ASCII whitespace trims OWS.
fn coding_name(element: &[u8]) -> Option<&[u8]> {
    let mut parts = element.split(|&b| b == b';');
    let name = parts.next()?.trim_ascii();
    let params_ok = parts.all(|param| {
        param.iter().position(|&b| b == b'=').is_some_and(|eq| {
            is_token(param[..eq].trim_ascii()) && is_token(param[eq + 1..].trim_ascii())
        })
    });
    (is_token(name) && params_ok).then_some(name)
}

fn parse_error(err: httparse::Error) -> &'static str {
    match err {
        httparse::Error::HeaderName => "header name",
        httparse::Error::HeaderValue => "header value",
        httparse::Error::NewLine => "line ending",
        httparse::Error::Status => "status",
        httparse::Error::Token => "token",
        httparse::Error::Version => "version",
        httparse::Error::TooManyHeaders => "too many headers",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str, head_request: bool) -> Result<Option<Head>, Error> {
        parse(
            &mut BytesMut::from(text.as_bytes()),
            head_request,
            &mut Names::default(),
            &mut HeaderMap::new(),
        )
    }

    /// A complete head taken off `buf` by a connection with nothing kept yet.
    fn parse_fresh(buf: &mut BytesMut) -> Head {
        parse(buf, false, &mut Names::default(), &mut HeaderMap::new())
            .unwrap()
            .unwrap()
    }

    fn framing(text: &str) -> (ResponseFraming, bool) {
        let head = head(text, false).unwrap().unwrap();
        (head.framing, head.keep_alive)
    }

    #[test]
    fn framing_follows_rfc_9112_section_6_3() {
        use ResponseFraming::*;
        let cases = [
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
                (Length(5), true),
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\nContent-Length: 5\r\n\r\n",
                (Length(5), true),
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
                (Empty, true),
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                (Chunked, true),
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, CHUNKED\r\n\r\n",
                (Chunked, true),
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
                (Chunked, false),
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n",
                (Eof, false),
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", (Eof, false)),
            (
                "HTTP/1.1 204 No Content\r\ncontent-length: 7\r\n\r\n",
                (Empty, true),
            ),
            (
                "HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n",
                (Empty, true),
            ),
            (
                "HTTP/1.1 200 OK\r\nconnection: x, close\r\ncontent-length: 1\r\n\r\n",
                (Length(1), false),
            ),
            (
                "HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n",
                (Length(1), false),
            ),
            (
                "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n",
                (Length(1), true),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(framing(text), expected, "{text:?}");
        }
    }

    #[test]
    fn head_request_has_no_body_whatever_the_length() {
        let head = head("HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, ResponseFraming::Empty);
        assert!(head.keep_alive);
    }

    #[test]
    fn bad_lengths_are_errors() {
        for text in [
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0x10\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: \r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
        ] {
            assert!(
                matches!(head(text, false), Err(Error::ContentLength)),
                "{text:?}"
            );
        }
        let te_in_10 = "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(matches!(head(te_in_10, false), Err(Error::Head(_))));
    }

    #[test]
    fn transfer_codings_that_are_not_tokens_are_refused() {
        for value in [
            "identConnection:0",
            "chunked, \"gzip\"",
            "gzip;q=\"1,chunked\"",
            "chunked;",
            "chunked;q",
            "chunked;=1",
            "chun ked",
        ] {
            for status in ["200 OK", "204 No Content"] {
                let text = format!("HTTP/1.1 {status}\r\ntransfer-encoding: {value}\r\n\r\n");
                assert!(
                    matches!(head(&text, false), Err(Error::Head("transfer-encoding"))),
                    "{text:?}"
                );
            }
        }
        let (framing, _) =
            framing("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip ; level = 9, chunked\r\n\r\n");
        assert_eq!(framing, ResponseFraming::Chunked);
    }

    #[test]
    fn bare_lf_and_empty_lines_before_the_status_line_are_refused() {
        for text in [
            "HTTP/1.1 200 OK\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0\n\r\n",
            "HTTP/1.1 200 OK\r\nx-a: 1\nx-b: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\n\n",
            "HTTP/1.1 200 OK\n\n",
            "\r\nHTTP/1.1 200 OK\r\n\r\n",
            "\nHTTP/1.1 200 OK\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
        ] {
            assert!(
                matches!(head(text, false), Err(Error::Head("line ending"))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn interim_responses_are_skipped_but_101_is_kept() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"[..],
        );
        let head = parse_fresh(&mut buf);
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(&buf[..], b"hi");
        let mut buf =
            BytesMut::from(&b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\nraw"[..]);
        let head = parse_fresh(&mut buf);
        assert_eq!(head.status, StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(&buf[..], b"raw");
    }

    #[test]
    fn headers_keep_order_and_repeats() {
        let head = head(
            "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Y: z\r\nset-cookie: b=2\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        let cookies: Vec<_> = head.headers.get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(head.headers["x-y"], "z");
    }

    #[test]
    fn partial_heads_wait_and_oversized_ones_fail() {
        assert!(head("HTTP/1.1 200 OK\r\ncontent-le", false)
            .unwrap()
            .is_none());
        let big = format!("HTTP/1.1 200 OK\r\nx-big: {}", "a".repeat(MAX_HEAD_BYTES));
        assert!(matches!(head(&big, false), Err(Error::HeadTooLarge)));
        let big = format!("{big}\r\n\r\n");
        assert!(matches!(head(&big, false), Err(Error::HeadTooLarge)));
        let mut many = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("x-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert!(matches!(head(&many, false), Err(Error::TooManyHeaders)));
        assert!(matches!(
            head("HTTP/1.1 200 OK\r\n\r\n\0garbage", false),
            Ok(Some(_))
        ));
        assert!(matches!(
            head("HTTX/1.1 200 OK\r\n\r\n", false),
            Err(Error::Head(_))
        ));
        assert!(matches!(
            head("HTTP/1.1 200 OK\r\nbad header\r\n\r\n", false),
            Err(Error::Head(_))
        ));
    }
}

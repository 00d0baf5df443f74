//! Strict RFC 9112 recognisers, slow and plain on purpose, that the property tests hold the
//! decoders to: each follows the ABNF it cites and accepts nothing else, save the one
//! tolerance written at `status_line`. Both also keep the decoder's documented limits, so
//! that "the oracle accepts it" includes "it is within bounds".

use super::super::decode::ResponseFraming;
use crate::wire::h1::chunked::{MAX_CHUNK_LINE, MAX_TRAILER_BYTES};

/// What a strict reader makes of a response head.
#[derive(Debug)]
pub(super) struct StrictHead {
    /// Bytes taken, interim responses skipped before it included.
    pub(super) len: usize,
    pub(super) status: u16,
    /// The minor digit of `HTTP/1.x`.
    pub(super) minor: u8,
    /// Names lower-cased and values without their surrounding OWS, in order.
    pub(super) fields: Vec<(String, Vec<u8>)>,
    pub(super) kind: ResponseFraming,
}

/// The final response head (or 101) at the front of `wire`, after any 100, 102 or 103
/// as the decoder skips them; `None` when malformed or not all there.
pub(super) fn response(wire: &[u8], head_request: bool) -> Option<StrictHead> {
    let mut at = 0;
    loop {
        let (lines, next) = head_lines(wire, at)?;
        let (status_line, field_lines) = lines.split_first()?;
        let (minor, status) = status_line_parts(status_line)?;
        let fields = field_lines
            .iter()
            .map(|line| field_line(line))
            .collect::<Option<Vec<_>>>()?;
        let kind = framing(&fields, minor, status, head_request)?;
        if (100..200).contains(&status) && status != 101 {
            at = next;
            continue;
        }
        return Some(StrictHead {
            len: next,
            status,
            minor,
            fields,
            kind,
        });
    }
}

/// The lines of the head starting at `at` up to the empty line (RFC 9112 §2.1:
/// `start-line *( field-line CRLF ) CRLF`), and where the head ends. No empty line may
/// come before the start line: RFC 9112 §2.2 lets a *server* skip those before a
/// request-line, nothing lets a client skip them before a status-line.
fn head_lines(wire: &[u8], mut at: usize) -> Option<(Vec<&[u8]>, usize)> {
    let mut lines = Vec::new();
    loop {
        let (line, next) = crlf_line(wire, at)?;
        if line.is_empty() {
            return (!lines.is_empty()).then_some((lines, next));
        }
        lines.push(line);
        at = next;
    }
}

/// The line starting at `at` and where the next one starts. Lines end with CRLF only: a
/// bare CR or LF anywhere fails the line. RFC 9112 §2.2 lets a recipient take a bare LF as
/// a line end, but this gateway does not (the chunked decoder never did): an upstream app
/// that lets an LF into a header value would otherwise have us split its response.
fn crlf_line(wire: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = wire.get(at..)?;
    let end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    let line = &rest[..end];
    if line.iter().any(|&b| b == b'\r' || b == b'\n') {
        return None;
    }
    Some((line, at + end + 2))
}

/// `status-line = HTTP-version SP status-code SP [ reason-phrase ]` (RFC 9112 §4), with
/// `HTTP-version = "HTTP/" DIGIT "." DIGIT` (§2.3; major 1 only, another is another
/// protocol) and a code of 100 to 999 (RFC 9110 §15 defines no class 0). Tolerated: a line that ends right after the code, without its
/// SP. nginx and hyper take it, all it loses is an empty reason, and it moves no boundary.
fn status_line_parts(line: &[u8]) -> Option<(u8, u16)> {
    let [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor, b' ', code @ ..] = line else {
        return None;
    };
    let (digits, rest) = code.split_at_checked(3)?;
    if !minor.is_ascii_digit() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = digits
        .iter()
        .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let reason_ok = match rest {
        [] => true,
        [b' ', reason @ ..] => reason.iter().all(|&b| field_char(b)),
        _ => false,
    };
    (reason_ok && status >= 100).then_some((minor - b'0', status))
}

/// `field-line = field-name ":" OWS field-value OWS` (RFC 9112 §5): no whitespace before
/// the colon (§5.1), no obs-fold (§5.2; a folded line fails as a name starting with SP).
fn field_line(line: &[u8]) -> Option<(String, Vec<u8>)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let (name, value) = (&line[..colon], trim_ows(&line[colon + 1..]));
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    if !value.iter().all(|&b| field_char(b)) {
        return None;
    }
    let name = String::from_utf8(name.to_ascii_lowercase()).ok()?;
    Some((name, value.to_vec()))
}

/// RFC 9112 §6.3, in its order, after both framing fields are checked in full.
fn framing(
    fields: &[(String, Vec<u8>)],
    minor: u8,
    status: u16,
    head_request: bool,
) -> Option<ResponseFraming> {
    let length = content_length(fields)?;
    let codings = transfer_codings(fields)?;
    if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        return Some(ResponseFraming::Empty);
    }
    if let Some(codings) = codings {
        // §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing.
        if minor == 0 {
            return None;
        }
        let chunked = codings.last().is_some_and(|c| c == b"chunked");
        return Some(if chunked {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::Eof
        });
    }
    Some(match length {
        Some(0) => ResponseFraming::Empty,
        Some(n) => ResponseFraming::Length(n),
        None => ResponseFraming::Eof,
    })
}

/// `Content-Length = 1*DIGIT` (RFC 9110 §8.6), which must fit in u64. Every field and every
/// item agree; a list of one repeated value (`5, 5`) is taken as that value, which §8.6
/// allows a recipient to do. `Some(None)`: no Content-Length.
fn content_length(fields: &[(String, Vec<u8>)]) -> Option<Option<u64>> {
    let mut length = None;
    for (_, value) in fields.iter().filter(|(name, _)| name == "content-length") {
        for item in value.split(|&b| b == b',') {
            let item = trim_ows(item);
            if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let n = std::str::from_utf8(item).ok()?.parse::<u64>().ok()?;
            if length.is_some_and(|seen| seen != n) {
                return None;
            }
            length = Some(n);
        }
    }
    Some(length)
}

/// Every transfer coding of every Transfer-Encoding field, lower-cased, in order.
/// `Some(None)`: no Transfer-Encoding field.
fn transfer_codings(fields: &[(String, Vec<u8>)]) -> Option<Option<Vec<Vec<u8>>>> {
    let mut codings: Option<Vec<Vec<u8>>> = None;
    for (_, value) in fields
        .iter()
        .filter(|(name, _)| name == "transfer-encoding")
    {
        coding_list(value, codings.get_or_insert_with(Vec::new))?;
    }
    Some(codings)
}

/// `Transfer-Encoding = #transfer-coding`, `transfer-coding = token *( OWS ";" OWS
/// transfer-parameter )`, `transfer-parameter = token BWS "=" BWS ( token / quoted-string )`
/// (RFC 9112 §6.1, §7); empty list elements are allowed (RFC 9110 §5.6.1).
fn coding_list(value: &[u8], codings: &mut Vec<Vec<u8>>) -> Option<()> {
    let mut rest = value;
    loop {
        rest = trim_ows(rest);
        if rest.is_empty() {
            return Some(());
        }
        if let Some(after) = rest.strip_prefix(b",") {
            rest = after;
            continue;
        }
        let (name, after) = token(rest)?;
        codings.push(name.to_ascii_lowercase());
        rest = parameters(after)?;
        rest = trim_ows(rest);
        if !rest.is_empty() {
            rest = rest.strip_prefix(b",")?;
        }
    }
}

/// `*( OWS ";" OWS token BWS "=" BWS ( token / quoted-string ) )`: what follows them.
fn parameters(mut rest: &[u8]) -> Option<&[u8]> {
    while let Some(after) = trim_ows(rest).strip_prefix(b";") {
        let (_, after) = token(trim_ows(after))?;
        let after = trim_ows(after).strip_prefix(b"=")?;
        rest = token_or_quoted(trim_ows(after))?;
    }
    Some(rest)
}

/// The chunked body at the front of `wire`, as [`StrictChunked`]; `None` when malformed,
/// not all there, or past the decoder's limits (a line longer than [`MAX_CHUNK_LINE`] with
/// its CRLF, trailer lines longer than [`MAX_TRAILER_BYTES`] in all).
#[derive(Debug)]
pub(super) struct StrictChunked {
    pub(super) data: Vec<u8>,
    /// Bytes taken, up to the CRLF that ends the trailer section.
    pub(super) len: usize,
}

/// `chunked-body = *chunk last-chunk trailer-section CRLF`, `chunk = chunk-size
/// [ chunk-ext ] CRLF chunk-data CRLF`, `last-chunk = 1*("0") [ chunk-ext ] CRLF`
/// (RFC 9112 §7.1).
pub(super) fn chunked(wire: &[u8]) -> Option<StrictChunked> {
    let mut data = Vec::new();
    let mut at = 0;
    loop {
        let (line, next) = bounded_line(wire, at)?;
        let size = chunk_size_line(line)?;
        at = next;
        if size == 0 {
            break;
        }
        let end = at.checked_add(usize::try_from(size).ok()?)?;
        data.extend_from_slice(wire.get(at..end)?);
        if wire.get(end..end.checked_add(2)?)? != b"\r\n" {
            return None;
        }
        at = end + 2;
    }
    // `trailer-section = *( field-line CRLF )` (§7.1.2).
    let mut trailer_bytes = 0;
    loop {
        let (line, next) = bounded_line(wire, at)?;
        if line.is_empty() {
            return Some(StrictChunked { data, len: next });
        }
        field_line(line)?;
        trailer_bytes += next - at;
        if trailer_bytes > MAX_TRAILER_BYTES {
            return None;
        }
        at = next;
    }
}

fn bounded_line(wire: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let (line, next) = crlf_line(wire, at)?;
    (next - at <= MAX_CHUNK_LINE).then_some((line, next))
}

/// `chunk-size [ chunk-ext ]`, `chunk-size = 1*HEXDIG`, `chunk-ext = *( BWS ";" BWS
/// chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`, `chunk-ext-val = token /
/// quoted-string` (§7.1, §7.1.1). The size must fit in u64.
fn chunk_size_line(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let size = u64::from_str_radix(std::str::from_utf8(&line[..digits]).ok()?, 16).ok()?;
    let mut rest = &line[digits..];
    while !rest.is_empty() {
        let after = trim_ows(rest).strip_prefix(b";")?;
        let (_, after) = token(trim_ows(after))?;
        rest = match trim_ows(after).strip_prefix(b"=") {
            Some(value) => token_or_quoted(trim_ows(value))?,
            None => after,
        };
    }
    Some(size)
}

/// `1*tchar` at the front of `bytes`, and what follows it.
fn token(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = bytes.iter().take_while(|&&b| is_tchar(b)).count();
    (n > 0).then(|| bytes.split_at(n))
}

/// A token or a `quoted-string` (RFC 9110 §5.6.4) at the front of `bytes`: what follows.
fn token_or_quoted(bytes: &[u8]) -> Option<&[u8]> {
    let Some(mut rest) = bytes.strip_prefix(b"\"") else {
        return token(bytes).map(|(_, rest)| rest);
    };
    loop {
        match rest {
            [b'"', after @ ..] => return Some(after),
            [b'\\', quoted, after @ ..] if field_char(*quoted) => rest = after,
            [b, after @ ..] if *b != b'\\' && field_char(*b) => rest = after,
            _ => return None,
        }
    }
}

/// `tchar` (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// SP, HTAB, VCHAR or obs-text: what a field value, a reason phrase or quoted text may
/// hold (RFC 9110 §5.5, RFC 9112 §4).
fn field_char(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// Without leading and trailing SP and HTAB (OWS and BWS, RFC 9110 §5.6.3).
fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

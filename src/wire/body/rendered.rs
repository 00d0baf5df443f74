//! An answer of tollgate's own whose header lines are written out already, as HTTP/1.1
//! sends them: the part that is the same for every such answer once per location, the
//! rest per request. An HTTP/1.1 connection copies the lines as they are, so a 429 costs
//! no header map; HTTP/2, whose encoder takes a map, has them put into one
//! ([`Rendered::lines_into`]).

use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Header lines (`name: value\r\n` each, never a framing or connection header) and a
/// body: `fixed` lines written beforehand, then `own`, this answer's lines (its first
/// `lines` bytes) followed by its body.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    fixed: Bytes,
    own: Bytes,
    lines: usize,
}

impl Rendered {
    /// `own` holds `lines` bytes of header lines, then the body.
    pub(crate) fn new(fixed: Bytes, own: Bytes, lines: usize) -> Rendered {
        let lines = lines.min(own.len());
        Rendered { fixed, own, lines }
    }

    /// The header lines, in order.
    pub(crate) fn lines(&self) -> [&[u8]; 2] {
        [&self.fixed, &self.own[..self.lines]]
    }

    /// The body's length.
    pub(crate) fn len(&self) -> u64 {
        (self.own.len() - self.lines) as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body, if not yet taken (the lines are let go with it).
    pub(crate) fn next_piece(&mut self) -> Option<Bytes> {
        self.own.advance(std::mem::take(&mut self.lines));
        self.fixed = Bytes::new();
        Some(std::mem::take(&mut self.own)).filter(|body| !body.is_empty())
    }

    /// Moves the header lines into `headers`. A line that does not read as a header
    /// (none does: tollgate wrote them) is left out.
    pub(crate) fn lines_into(&mut self, headers: &mut HeaderMap) {
        for part in self.lines() {
            for line in part.split(|&b| b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let Some(colon) = line.iter().position(|&b| b == b':') else {
                    continue;
                };
                let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
                let parsed = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value));
                debug_assert!(
                    parsed.0.is_ok() && parsed.1.is_ok(),
                    "a rendered line: {line:?}"
                );
                if let (Ok(name), Ok(value)) = parsed {
                    headers.append(name, value);
                }
            }
        }
        self.own.advance(std::mem::take(&mut self.lines));
        self.fixed = Bytes::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_headers_and_the_body_comes_whole() {
        let own = "retry-after: 3\r\nratelimit: \"ip\";r=0;t=3\r\n{\"a\":3}\n";
        let mut rendered = Rendered::new(
            Bytes::from_static(b"content-type: application/problem+json\r\n"),
            Bytes::from_static(own.as_bytes()),
            own.find('{').unwrap(),
        );
        assert_eq!(rendered.len(), 8);
        let mut headers = HeaderMap::new();
        rendered.lines_into(&mut headers);
        assert_eq!(headers.len(), 3);
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(headers["retry-after"], "3");
        assert_eq!(headers["ratelimit"], "\"ip\";r=0;t=3");
        assert_eq!(rendered.lines(), [&b""[..], &b""[..]]);
        assert_eq!(rendered.len(), 8);
        assert_eq!(rendered.next_piece().as_deref(), Some(&b"{\"a\":3}\n"[..]));
        assert_eq!(rendered.next_piece(), None);
        assert!(rendered.is_empty());
    }

    #[test]
    fn the_lines_are_sent_as_they_are_then_the_body() {
        let mut rendered = Rendered::new(
            Bytes::from_static(b"a: 1\r\n"),
            Bytes::from_static(b"b: 2\r\nbody"),
            6,
        );
        assert_eq!(rendered.lines(), [&b"a: 1\r\n"[..], &b"b: 2\r\n"[..]]);
        assert_eq!(rendered.next_piece().as_deref(), Some(&b"body"[..]));
        assert_eq!(rendered.next_piece(), None);
    }
}

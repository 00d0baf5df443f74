//! An answer of tollgate's own whose header lines are written out already, as HTTP/1.1
//! sends them: the part that is the same for every such answer once per location, the
//! rest per request. An HTTP/1.1 connection copies the lines as they are, so a 429 costs
//! no header map; HTTP/2, whose encoder takes a map, has them put into one
//! ([`Rendered::lines_into`]).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

/// Header lines (`name: value\r\n` each, never a framing or connection header) and a
/// body, each in two parts: the first written beforehand, the second for this answer.
#[derive(Debug, Default)]
pub struct Rendered {
    pub lines: [Bytes; 2],
    /// Taken part by part as the body is sent.
    pub body: [Bytes; 2],
}

impl Rendered {
    /// The body's length.
    pub fn len(&self) -> u64 {
        self.body.iter().map(|part| part.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next part of the body, if any is left.
    pub fn next_piece(&mut self) -> Option<Bytes> {
        self.body
            .iter_mut()
            .find(|part| !part.is_empty())
            .map(std::mem::take)
    }

    /// Moves the header lines into `headers`. A line that does not read as a header
    /// (none does: tollgate wrote them) is left out.
    pub fn lines_into(&mut self, headers: &mut HeaderMap) {
        for part in &mut self.lines {
            let part = std::mem::take(part);
            for line in part.split(|&b| b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let Some(colon) = line.iter().position(|&b| b == b':') else {
                    continue;
                };
                let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
                if let (Ok(name), Ok(value)) =
                    (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
                {
                    headers.append(name, value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_headers_and_the_body_comes_in_its_parts() {
        let mut rendered = Rendered {
            lines: [
                Bytes::from_static(b"content-type: application/problem+json\r\n"),
                Bytes::from_static(b"retry-after: 3\r\nratelimit: \"ip\";r=0;t=3\r\n"),
            ],
            body: [Bytes::from_static(b"{\"a\":"), Bytes::from_static(b"3}\n")],
        };
        assert_eq!(rendered.len(), 8);
        let mut headers = HeaderMap::new();
        rendered.lines_into(&mut headers);
        assert_eq!(headers.len(), 3);
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(headers["retry-after"], "3");
        assert_eq!(headers["ratelimit"], "\"ip\";r=0;t=3");
        assert!(rendered.lines.iter().all(Bytes::is_empty));
        assert_eq!(rendered.next_piece().as_deref(), Some(&b"{\"a\":"[..]));
        assert_eq!(rendered.next_piece().as_deref(), Some(&b"3}\n"[..]));
        assert_eq!(rendered.next_piece(), None);
        assert!(rendered.is_empty());
    }
}

//! W3C Trace Context (`traceparent`): what a request brings, read strictly (version
//! `00`, lowercase hex, ids not all zero), and what tollgate sends on. A malformed header
//! is as none: the request starts a trace of its own.

use http::HeaderValue;

/// The trace a request belongs to, as its `traceparent` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The caller sampled it (flag `01`): tollgate keeps its span too.
    pub sampled: bool,
}

impl Parent {
    /// `00-<32 hex>-<16 hex>-<2 hex>`, or `None`.
    pub(crate) fn parse(value: &HeaderValue) -> Option<Parent> {
        let bytes = value.as_bytes();
        if bytes.len() != 55 || !bytes.starts_with(b"00-") || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let mut trace_id = [0; 16];
        let mut span_id = [0; 8];
        let mut flags = [0; 1];
        hex(&bytes[3..35], &mut trace_id)?;
        hex(&bytes[36..52], &mut span_id)?;
        hex(&bytes[53..55], &mut flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Parent {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
        })
    }
}

/// The `traceparent` naming `span_id` of `trace_id`, sampled.
pub(crate) fn traceparent(trace_id: &[u8; 16], span_id: &[u8; 8]) -> HeaderValue {
    let mut text = [0u8; 55];
    text[..3].copy_from_slice(b"00-");
    write_hex(trace_id, &mut text[3..35]);
    text[35] = b'-';
    write_hex(span_id, &mut text[36..52]);
    text[52..].copy_from_slice(b"-01");
    // Only hex digits and dashes were written.
    HeaderValue::from_bytes(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Lowercase hex digits into `out` (two per byte), or `None`.
fn hex(digits: &[u8], out: &mut [u8]) -> Option<()> {
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    for (pair, byte) in digits.chunks_exact(2).zip(out.iter_mut()) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(())
}

pub(crate) fn write_hex(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (byte, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_strictly_and_written_back() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parent = Parent::parse(&HeaderValue::from_static(text)).unwrap();
        assert!(parent.sampled);
        assert_eq!(parent.trace_id[..2], [0x4b, 0xf9]);
        assert_eq!(traceparent(&parent.trace_id, &parent.span_id), text);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!Parent::parse(&HeaderValue::from_static(unsampled)).unwrap().sampled);
        for bad in [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "garbage",
        ] {
            assert_eq!(Parent::parse(&HeaderValue::from_static(bad)), None, "{bad}");
        }
    }
}

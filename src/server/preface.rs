//! HTTP/2 or HTTP/1.1, told from a connection's first bytes (prior knowledge in clear
//! text; over TLS the same, whatever ALPN said), and a broken HTTP/2 preface refused as
//! RFC 9113 §3.4 asks: a connection error of type PROTOCOL_ERROR, said with GOAWAY.
//!
//! No HTTP/1.1 request starts with `PRI * HTTP/2.0`, so those bytes open an HTTP/2
//! attempt; it must go on with the rest of the magic, then a SETTINGS frame (§3.4: the
//! client preface ends with one). hyper's h2 would take any first frame, or answer
//! garbage with a FRAME_SIZE_ERROR; a client that is not speaking HTTP/2 at all would
//! get an HTTP/1.1 400 it cannot read.

/// The client connection preface's fixed part.
pub(super) const MAGIC: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// What commits a connection to HTTP/2: the magic's request line.
const START: &[u8] = b"PRI * HTTP/2.0\r\n";
const FRAME_HEADER: usize = 9;
const SETTINGS: u8 = 0x4;
const ACK: u8 = 0x1;

/// What the first bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sniffed {
    /// Not decided yet: read more.
    More,
    Http1,
    Http2,
    /// An HTTP/2 attempt with a broken preface: answer [`GOAWAY`] and close.
    Broken,
}

/// Looks at the first bytes of a connection.
pub(super) fn sniff(buf: &[u8]) -> Sniffed {
    let n = buf.len().min(START.len());
    if buf[..n] != START[..n] {
        return Sniffed::Http1;
    }
    let m = buf.len().min(MAGIC.len());
    if buf[..m] != MAGIC[..m] {
        return Sniffed::Broken;
    }
    let Some(header) = buf.get(MAGIC.len()..MAGIC.len() + FRAME_HEADER) else {
        return Sniffed::More;
    };
    let length = u32::from_be_bytes([0, header[0], header[1], header[2]]);
    let (kind, flags) = (header[3], header[4]);
    let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
    // §6.5: a SETTINGS frame is on stream 0, a multiple of 6 bytes long, and the
    // client's first one is no acknowledgement.
    if kind == SETTINGS && flags & ACK == 0 && stream == 0 && length.is_multiple_of(6) {
        Sniffed::Http2
    } else {
        Sniffed::Broken
    }
}

/// The server's answer to a broken preface: its own preface (an empty SETTINGS frame,
/// which must come first), then GOAWAY with last stream 0 and PROTOCOL_ERROR (0x1).
pub(super) const GOAWAY: [u8; 26] = [
    0, 0, 0, SETTINGS, 0, 0, 0, 0, 0, // SETTINGS, empty
    0, 0, 8, 0x7, 0, 0, 0, 0, 0, // GOAWAY, 8 bytes, stream 0
    0, 0, 0, 0, // last stream id
    0, 0, 0, 1, // PROTOCOL_ERROR
];

#[cfg(test)]
mod tests {
    use super::*;

    fn with_first_frame(header: [u8; 9]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&header);
        bytes
    }

    #[test]
    fn http1_requests_are_told_at_their_first_differing_byte() {
        assert_eq!(sniff(b"G"), Sniffed::Http1);
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Sniffed::Http1);
        assert_eq!(sniff(b"PRI / HTTP/1.1\r\n"), Sniffed::Http1);
        assert_eq!(sniff(b"PRI * HTTP/1.1\r\n"), Sniffed::Http1);
    }

    #[test]
    fn a_preface_with_a_settings_frame_is_http2_and_needs_all_of_it() {
        let good = with_first_frame([0, 0, 6, SETTINGS, 0, 0, 0, 0, 0]);
        for end in 0..good.len() {
            assert_eq!(sniff(&good[..end]), Sniffed::More, "{end} bytes");
        }
        assert_eq!(sniff(&good), Sniffed::Http2);
        assert_eq!(
            sniff(&with_first_frame([0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])),
            Sniffed::Http2
        );
    }

    #[test]
    fn a_broken_preface_is_refused() {
        assert_eq!(sniff(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"), Sniffed::Broken);
        let ping = [0, 0, 8, 0x6, 0, 0, 0, 0, 0];
        let ack = [0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0];
        let on_a_stream = [0, 0, 0, SETTINGS, 0, 0, 0, 0, 1];
        let odd_length = [0, 0, 5, SETTINGS, 0, 0, 0, 0, 0];
        let garbage = [0xff; 9];
        for header in [ping, ack, on_a_stream, odd_length, garbage] {
            assert_eq!(
                sniff(&with_first_frame(header)),
                Sniffed::Broken,
                "{header:?}"
            );
        }
    }
}

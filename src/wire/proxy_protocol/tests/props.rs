//! The parser on arbitrary bytes: it never panics, a Complete header lies inside the
//! buffer and under [`MAX_HEADER`], and more bytes never change an answer once given;
//! and on headers written by an obviously right encoder, which it reads back exactly.

use std::net::{IpAddr, SocketAddr};

use proptest::prelude::*;

use super::super::{parse, Header, Parsed, MAX_HEADER};
use super::hex;

/// Bytes that reach every stage of the parser: plain noise, then noise after each
/// start a header can have, with the alphabet of v1 lines so their fields get parsed.
fn input() -> impl Strategy<Value = Vec<u8>> {
    let signature = hex("0d0a0d0a000d0a515549540a");
    let v1_alphabet = prop::sample::select(b"0123456789abcdef.: \r\nPROXYTCP46UNKW".to_vec());
    let v1_starts = prop::sample::select(vec![
        &b"PROXY TCP4 "[..],
        b"PROXY TCP6 ",
        b"PROXY UNKNOWN",
        b"PROXY ",
    ]);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        (
            prop::sample::select(vec![0x20u8, 0x21, 0x11, 0x22]),
            prop::sample::select(vec![0x00u8, 0x11, 0x21, 0x31, 0x12, 0x99]),
            prop::collection::vec(any::<u8>(), 0..5000),
        )
            .prop_map(move |(version_command, family, rest)| {
                let mut buf = signature.clone();
                buf.extend_from_slice(&[version_command, family]);
                buf.extend_from_slice(&rest);
                buf
            }),
        (v1_starts, prop::collection::vec(v1_alphabet, 0..130)).prop_map(|(start, rest)| {
            let mut buf = start.to_vec();
            buf.extend_from_slice(&rest);
            buf
        }),
    ]
}

/// An address of either family.
fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| (IpAddr::from(ip), port).into()),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| (IpAddr::from(ip), port).into()),
    ]
}

/// A v1 line for two addresses of the same family, as the spec writes it.
fn v1_line(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let protocol = if source.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {protocol} {} {} {} {}\r\n",
        source.ip(),
        destination.ip(),
        source.port(),
        destination.port()
    )
    .into_bytes()
}

/// A v2 PROXY header for two addresses of the same family, with `tlvs` after them.
fn v2_header(source: SocketAddr, destination: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    let family = match (source.ip(), destination.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            block.extend_from_slice(&s.octets());
            block.extend_from_slice(&d.octets());
            0x11
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            block.extend_from_slice(&s.octets());
            block.extend_from_slice(&d.octets());
            0x21
        }
        _ => unreachable!("the same family"),
    };
    block.extend_from_slice(&source.port().to_be_bytes());
    block.extend_from_slice(&destination.port().to_be_bytes());
    block.extend_from_slice(tlvs);
    let mut header = hex("0d0a0d0a000d0a515549540a 21");
    header.push(family);
    let len = u16::try_from(block.len()).expect("a short block");
    header.extend_from_slice(&len.to_be_bytes());
    header.extend_from_slice(&block);
    header
}

/// Both addresses in the family of the first.
fn pair() -> impl Strategy<Value = (SocketAddr, SocketAddr)> {
    (socket_addr(), socket_addr()).prop_map(|(source, destination)| {
        let destination = match (source.ip(), destination.ip()) {
            (IpAddr::V4(_), IpAddr::V6(ip)) => {
                let [a, b, c, d, ..] = ip.octets();
                SocketAddr::new(IpAddr::from([a, b, c, d]), destination.port())
            }
            (IpAddr::V6(_), IpAddr::V4(ip)) => {
                SocketAddr::new(IpAddr::from(ip.to_ipv6_mapped()), destination.port())
            }
            _ => destination,
        };
        (source, destination)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Never a panic; a Complete header fits the buffer and the bound, and needs nothing
    /// after it; an answer given on a prefix (Complete or Malformed) stays the answer.
    #[test]
    fn arbitrary_bytes_get_a_bounded_final_answer(buf in input(), cut in any::<prop::sample::Index>()) {
        let whole = parse(&buf);
        if let Ok(Parsed::Complete { len, .. }) = whole {
            prop_assert!(len <= buf.len());
            prop_assert!(len <= MAX_HEADER);
            prop_assert_eq!(parse(&buf[..len]), whole);
        }
        let prefix = parse(&buf[..cut.index(buf.len() + 1)]);
        if prefix != Ok(Parsed::Incomplete) {
            prop_assert_eq!(prefix, whole);
        }
    }

    /// Headers written by the encoders above read back as written, whatever follows them,
    /// and every prefix of them is Incomplete.
    #[test]
    fn encoded_headers_read_back(
        (source, destination) in pair(),
        tlvs in prop::collection::vec(any::<u8>(), 0..200),
        after in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let expected = Header { source: Some(source), destination: Some(destination) };
        for header in [v1_line(source, destination), v2_header(source, destination, &tlvs)] {
            for cut in 0..header.len() {
                prop_assert_eq!(parse(&header[..cut]), Ok(Parsed::Incomplete));
            }
            let mut buf = header.clone();
            buf.extend_from_slice(&after);
            prop_assert_eq!(
                parse(&buf),
                Ok(Parsed::Complete { header: expected, len: header.len() })
            );
        }
    }
}

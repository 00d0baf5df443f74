//! The PROXY header parser on the spec's examples, on the bytes Debian's HAProxy 2.6 sends,
//! fed whole and byte by byte, and on hostile input; `props` checks it on arbitrary bytes.

use std::net::SocketAddr;

use super::{parse, Header, Malformed, Parsed, MAX_HEADER};

mod props;

/// A request after the header, as HAProxy relayed it in the captures below.
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";

/// The bytes written as hex, spaces and line breaks ignored.
fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).expect("ASCII hex");
            u8::from_str_radix(pair, 16).expect("a hex byte")
        })
        .collect()
}

fn relayed(source: &str, destination: &str) -> Header {
    Header {
        source: Some(source.parse::<SocketAddr>().expect("a socket address")),
        destination: Some(destination.parse::<SocketAddr>().expect("a socket address")),
    }
}

const NO_CLIENT: Header = Header {
    source: None,
    destination: None,
};

/// Checks that `header` parses to `expected`, whole and byte by byte: every proper prefix
/// is Incomplete, the header alone is Complete with its own length, and bytes after it
/// are not counted.
fn assert_header(header: &[u8], expected: Header) {
    for cut in 0..header.len() {
        assert_eq!(
            parse(&header[..cut]),
            Ok(Parsed::Incomplete),
            "prefix of {cut} bytes of {header:02x?}"
        );
    }
    let complete = Ok(Parsed::Complete {
        header: expected,
        len: header.len(),
    });
    assert_eq!(parse(header), complete, "{header:02x?}");
    let mut followed = header.to_vec();
    followed.extend_from_slice(REQUEST);
    assert_eq!(parse(&followed), complete, "{header:02x?} then a request");
}

#[test]
fn spec_v1_examples_parse() {
    let cases: &[(&str, Header)] = &[
        (
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n",
            relayed("192.168.0.1:56324", "192.168.0.11:443"),
        ),
        (
            "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
            relayed("255.255.255.255:65535", "255.255.255.255:65535"),
        ),
        (
            "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
             ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
            relayed(
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
                "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535",
            ),
        ),
        ("PROXY UNKNOWN\r\n", NO_CLIENT),
        (
            "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
             ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
            NO_CLIENT,
        ),
    ];
    for (line, expected) in cases {
        assert_header(line.as_bytes(), *expected);
    }
}

#[test]
fn spec_worst_case_lengths_are_56_104_15_and_107() {
    let lengths = [
        "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
        "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
         ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
        "PROXY UNKNOWN\r\n",
        "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
         ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
    ]
    .map(|line| match parse(line.as_bytes()) {
        Ok(Parsed::Complete { len, .. }) => len,
        other => panic!("{line:?}: {other:?}"),
    });
    assert_eq!(lengths, [56, 104, 15, 107]);
}

/// What Debian bookworm's HAProxy 2.6.12 sent to a backend that dumped its first bytes:
/// a client bound to 127.0.0.1:54321 (or [::1]:54321) connecting to a `mode tcp` frontend
/// on port 8080, then sending [`REQUEST`].
mod haproxy {
    use super::*;

    #[test]
    fn send_proxy_tcp4() {
        let v1 = hex("50524f5859205443503420313237 2e302e302e31203132372e302e302e31
                      20353433323120383038300d0a");
        assert_eq!(v1, b"PROXY TCP4 127.0.0.1 127.0.0.1 54321 8080\r\n");
        assert_header(&v1, relayed("127.0.0.1:54321", "127.0.0.1:8080"));
    }

    #[test]
    fn send_proxy_tcp6() {
        let v1 = hex("50524f58592054435036203a3a31203a3a3120353433323120383038300d0a");
        assert_eq!(v1, b"PROXY TCP6 ::1 ::1 54321 8080\r\n");
        assert_header(&v1, relayed("[::1]:54321", "[::1]:8080"));
    }

    /// A client on a unix socket: nothing to relay in v1.
    #[test]
    fn send_proxy_from_a_unix_socket_is_unknown() {
        let v1 = hex("50524f585920554e4b4e4f574e0d0a");
        assert_eq!(v1, b"PROXY UNKNOWN\r\n");
        assert_header(&v1, NO_CLIENT);
    }

    /// `check check-send-proxy`: the health check relays its own connection.
    #[test]
    fn send_proxy_health_check() {
        let v1 = hex("50524f58592054435034203132372e302e302e31203132372e302e302e31
                      2034363434362031393030300d0a");
        assert_eq!(v1, b"PROXY TCP4 127.0.0.1 127.0.0.1 46446 19000\r\n");
        assert_header(&v1, relayed("127.0.0.1:46446", "127.0.0.1:19000"));
    }

    #[test]
    fn send_proxy_v2_tcp4() {
        let v2 = hex("0d0a0d0a000d0a515549540a 21 11 000c 7f000001 7f000001 d431 1f90");
        assert_header(&v2, relayed("127.0.0.1:54321", "127.0.0.1:8080"));
    }

    #[test]
    fn send_proxy_v2_tcp6() {
        let v2 = hex("0d0a0d0a000d0a515549540a 21 21 0024
                      00000000000000000000000000000001 00000000000000000000000000000001
                      d431 1f90");
        assert_header(&v2, relayed("[::1]:54321", "[::1]:8080"));
    }

    /// `proxy-v2-options authority` behind a TLS frontend, the client's SNI `example.com`:
    /// a PP2_TYPE_AUTHORITY TLV (0x02), skipped.
    #[test]
    fn send_proxy_v2_with_authority_tlv() {
        let v2 = hex("0d0a0d0a000d0a515549540a 21 11 001a 7f000001 7f000001 d431 1f90
                      02 000b 6578616d706c652e636f6d");
        assert_header(&v2, relayed("127.0.0.1:54321", "127.0.0.1:8080"));
    }

    /// `proxy-v2-options crc32c,unique-id` (`unique-id-format abc123`): PP2_TYPE_CRC32C
    /// (0x03) and PP2_TYPE_UNIQUE_ID (0x05) TLVs, skipped.
    #[test]
    fn send_proxy_v2_with_crc32c_and_unique_id_tlvs() {
        let v2 = hex("0d0a0d0a000d0a515549540a 21 11 001c 7f000001 7f000001 d431 1f90
                      03 0004 1fa295fc 05 0006 616263313233");
        assert_header(&v2, relayed("127.0.0.1:54321", "127.0.0.1:8080"));
    }

    /// `check check-send-proxy` with `send-proxy-v2`, and a client on a unix socket: both
    /// LOCAL over AF_UNSPEC with no address block.
    #[test]
    fn send_proxy_v2_health_check_is_local() {
        let v2 = hex("0d0a0d0a000d0a515549540a 20 00 0000");
        assert_header(&v2, NO_CLIENT);
    }
}

#[test]
fn bytes_that_may_still_become_a_header_are_incomplete() {
    let signature = hex("0d0a0d0a000d0a515549540a");
    let cases: &[&[u8]] = &[
        b"",
        b"P",
        b"PRO",
        b"PROXY",
        b"PROXY ",
        b"PROXY T",
        b"PROXY TCP",
        b"PROXY TCP4",
        b"PROXY TCP4 ",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r",
        b"PROXY UNK",
        b"PROXY UNKNOWN",
        b"PROXY UNKNOWN whatever",
        &signature[..1],
        &signature[..5],
        &signature,
    ];
    for case in cases {
        assert_eq!(parse(case), Ok(Parsed::Incomplete), "{case:02x?}");
    }
}

#[test]
fn other_protocols_are_not_proxy_at_once() {
    let cases: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\n",
        b"G",
        // A TLS ClientHello's record header.
        &[0x16, 0x03, 0x01, 0x02, 0x00],
        // HTTP/2's preface.
        b"PRI * HTTP/2.0\r\n",
        b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY\0",
        b"PROXY\r\n",
        b"SSH-2.0-OpenSSH\r\n",
        b"\r\n\r\n\0\r\nQUIT\r",
        b"\r\n\r\n\x01",
        b"\n",
    ];
    for case in cases {
        assert_eq!(parse(case), Err(Malformed::NotProxy), "{case:02x?}");
    }
}

/// Each hostile v1 line with the reason it gets.
#[test]
fn v1_lines_off_the_grammar_are_refused() {
    let cases: &[(&[u8], Malformed)] = &[
        (
            b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n",
            Malformed::V1Port,
        ),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 1\r\n", Malformed::V1Port),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 080 1\r\n", Malformed::V1Port),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 00\r\n", Malformed::V1Port),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2", Malformed::V1Byte(b'+')),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 -2", Malformed::V1Byte(b'-')),
        (b"PROXY TCP4 ::1 ::1 1 2\r\n", Malformed::V1Byte(b':')),
        (b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Address),
        (b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Address),
        (b"PROXY TCP4 256.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Address),
        (b"PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", Malformed::V1Address),
        (b"PROXY TCP6 ::1%eth0 ::1 1 2\r\n", Malformed::V1Byte(b'%')),
        (b"PROXY TCP6 [::1] ::1 1 2\r\n", Malformed::V1Byte(b'[')),
        (b"PROXY TCP6 1::2::3 ::1 1 2\r\n", Malformed::V1Address),
        (b"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Protocol),
        (b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Protocol),
        (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", Malformed::V1Protocol),
        (b"PROXY TCP4\r\n", Malformed::V1Protocol),
        (b"PROXY UNKNOWNX\r\n", Malformed::V1Protocol),
        (b"PROXY TCP4  1.2.3.4", Malformed::V1Fields),
        (b"PROXY TCP4 1.2.3.4  5.6.7.8", Malformed::V1Fields),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", Malformed::V1Fields),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", Malformed::V1Fields),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3", Malformed::V1Fields),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\t\r\n", Malformed::V1Byte(b'\t')),
        (b"PROXY TCP4 1.2.3.4\0", Malformed::V1Byte(0)),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", Malformed::V1LineEnd),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", Malformed::V1LineEnd),
        (b"PROXY UNKNOWN\n", Malformed::V1LineEnd),
        (b"PROXY UNKNOWN\r\r\n", Malformed::V1LineEnd),
    ];
    for (line, reason) in cases {
        assert_eq!(parse(line), Err(*reason), "{:?}", String::from_utf8_lossy(line));
    }
}

/// The longest line is 107 bytes with its CRLF: one byte more is refused, whether the
/// CRLF comes at 108 or not at all, and without waiting for more.
#[test]
fn v1_line_past_107_bytes_is_too_long() {
    let too_long = Err(Malformed::TooLong { limit: 107 });
    let fill = |n: usize| {
        let mut line = b"PROXY UNKNOWN ".to_vec();
        line.resize(n, b'f');
        line
    };
    let mut longest = fill(105);
    longest.extend_from_slice(b"\r\n");
    assert_header(&longest, NO_CLIENT);

    let mut crlf_at_108 = fill(106);
    crlf_at_108.extend_from_slice(b"\r\n");
    assert_eq!(crlf_at_108.len(), 108);
    assert_eq!(parse(&crlf_at_108), too_long);
    assert_eq!(parse(&crlf_at_108[..107]), too_long, "a CR as byte 107");
    assert_eq!(parse(&fill(106)), Ok(Parsed::Incomplete));
    assert_eq!(parse(&fill(107)), too_long);
    assert_eq!(parse(&fill(4000)), too_long);
}

/// A v2 header from its parts: version and command, family and protocol, the length
/// field, and what follows it.
fn v2(version_command: u8, family: u8, len: u16, block: &[u8]) -> Vec<u8> {
    let mut header = hex("0d0a0d0a000d0a515549540a");
    header.extend_from_slice(&[version_command, family]);
    header.extend_from_slice(&len.to_be_bytes());
    header.extend_from_slice(block);
    header
}

#[test]
fn v2_other_versions_and_commands_are_refused_at_their_byte() {
    assert_eq!(parse(&v2(0x11, 0x11, 12, &[0; 12])[..13]), Err(Malformed::V2Version(1)));
    assert_eq!(parse(&v2(0x31, 0x11, 12, &[0; 12])[..13]), Err(Malformed::V2Version(3)));
    assert_eq!(parse(&v2(0x01, 0x11, 12, &[0; 12])[..13]), Err(Malformed::V2Version(0)));
    assert_eq!(parse(&v2(0x22, 0x11, 12, &[0; 12])[..13]), Err(Malformed::V2Command(2)));
    assert_eq!(parse(&v2(0x2f, 0x11, 12, &[0; 12])), Err(Malformed::V2Command(0xf)));
}

#[test]
fn v2_datagrams_and_undefined_families_are_refused_at_their_byte() {
    for family in [0x12, 0x22, 0x32] {
        let header = v2(0x21, family, 216, &[0; 216]);
        assert_eq!(parse(&header[..14]), Err(Malformed::V2Datagram(family)));
    }
    for family in [0x01, 0x02, 0x10, 0x13, 0x20, 0x30, 0x41, 0xff] {
        let header = v2(0x21, family, 216, &[0; 216]);
        assert_eq!(parse(&header[..14]), Err(Malformed::V2Family(family)));
    }
}

/// A length field is checked as soon as it arrives: above the bound, or short of the
/// family's addresses, nothing of what it announces is waited for.
#[test]
fn v2_lengths_that_lie_are_refused_from_the_fixed_part() {
    let too_long = Err(Malformed::TooLong { limit: MAX_HEADER });
    assert_eq!(parse(&v2(0x21, 0x11, 0xffff, &[])), too_long);
    assert_eq!(parse(&v2(0x21, 0x11, 4096, &[])), too_long);
    assert_eq!(parse(&v2(0x21, 0x11, 4081, &[])), too_long);
    assert_eq!(parse(&v2(0x20, 0x00, 4081, &[])), too_long, "LOCAL too");
    assert_eq!(parse(&v2(0x21, 0x11, 4080, &[])), Ok(Parsed::Incomplete));

    let short = |family, len, need| {
        let header = v2(0x21, family, len, &[0; 64]);
        assert_eq!(
            parse(&header[..16]),
            Err(Malformed::V2Length { family, len, need })
        );
        assert_eq!(parse(&header), Err(Malformed::V2Length { family, len, need }));
    };
    short(0x11, 0, 12);
    short(0x11, 11, 12);
    short(0x21, 12, 36);
    short(0x21, 35, 36);
    short(0x31, 215, 216);
}

/// The largest header accepted: 16 bytes and 4,080 of addresses and TLVs.
#[test]
fn v2_header_of_max_header_bytes_is_complete() {
    let mut block = hex("01020304 05060708 0050 01bb");
    block.resize(4080, 0x04);
    let header = v2(0x21, 0x11, 4080, &block);
    assert_eq!(header.len(), MAX_HEADER);
    assert_header(&header, relayed("1.2.3.4:80", "5.6.7.8:443"));
}

/// LOCAL ignores the family and any addresses (spec: "discard the protocol block
/// including the family which is ignored").
#[test]
fn v2_local_relays_no_client_whatever_its_family() {
    let addresses = hex("01020304 05060708 0050 01bb");
    assert_header(&v2(0x20, 0x11, 12, &addresses), NO_CLIENT);
    assert_header(&v2(0x20, 0x12, 0, &[]), NO_CLIENT);
    assert_header(&v2(0x20, 0x99, 3, b"abc"), NO_CLIENT);
}

/// AF_UNSPEC and unix streams relay no address the gateway could use; the connection is
/// kept with its own addresses.
#[test]
fn v2_proxy_without_a_tcp_address_relays_no_client() {
    assert_header(&v2(0x21, 0x00, 0, &[]), NO_CLIENT);
    assert_header(&v2(0x21, 0x00, 5, b"\x04\x00\x02ab"), NO_CLIENT);
    let mut paths = b"/run/haproxy/client.sock".to_vec();
    paths.resize(108, 0);
    paths.extend_from_slice(b"/run/tollgate.sock");
    paths.resize(216, 0);
    assert_header(&v2(0x21, 0x31, 216, &paths), NO_CLIENT);
}

#[test]
fn v2_addresses_and_ports_are_big_endian() {
    let block = hex("c0000201 c6336401 fffe 0001");
    assert_header(
        &v2(0x21, 0x11, 12, &block),
        relayed("192.0.2.1:65534", "198.51.100.1:1"),
    );
    let block = hex("20010db8000000000000000000000001 20010db8000000000000000000000002 0000 ffff");
    assert_header(
        &v2(0x21, 0x21, 36, &block),
        relayed("[2001:db8::1]:0", "[2001:db8::2]:65535"),
    );
}

/// A TLV that claims more than the header holds is not looked at: the header's length is
/// what counts, and the rest is the connection's data.
#[test]
fn v2_tlvs_are_skipped_unread() {
    let block = hex("7f000001 7f000001 d431 1f90 02 ffff 61");
    let header = v2(0x21, 0x11, 16, &block);
    assert_header(&header, relayed("127.0.0.1:54321", "127.0.0.1:8080"));
}

#[test]
fn reasons_read_clearly() {
    assert_eq!(
        Malformed::V2Length {
            family: 0x21,
            len: 12,
            need: 36
        }
        .to_string(),
        "PROXY v2: length 12 is shorter than the 36 address bytes of family 0x21"
    );
    assert_eq!(
        Malformed::V1Byte(0).to_string(),
        "PROXY v1: byte 0x00 has no place in the line"
    );
    assert_eq!(
        Malformed::TooLong { limit: 107 }.to_string(),
        "PROXY header longer than 107 bytes"
    );
}

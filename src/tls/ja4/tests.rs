use super::*;

/// Chrome 143's ClientHello as browserleaks.com showed it (its `ja4_ro`: ciphers,
/// extensions and signature algorithms in the order sent), with the JA4 it computed.
const CHROME_CIPHERS: [u16; 15] = [
    0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d,
    0x002f, 0x0035,
];
const CHROME_EXTENSIONS: [u16; 16] = [
    0x002d, 0x0033, 0x0010, 0xfe0d, 0x0017, 0x44cd, 0x0000, 0x000b, 0x000a, 0x002b, 0xff01, 0x0023, 0x0012,
    0x0005, 0x000d, 0x001b,
];
const CHROME_SIGNATURES: [u16; 8] = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601];
const CHROME_JA4: &str = "t13d1516h2_8daaf6152771_d8a2da3f94cd";

fn vec16(data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(data);
    out
}

fn u16s(values: &[u16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

/// The data of extension `kind` in the hello the tests build.
fn data(kind: u16, alpn: &[&[u8]]) -> Vec<u8> {
    match kind {
        0x0000 => vec16(&[&[0u8][..], &vec16(b"example.com")].concat()),
        0x0010 => vec16(&alpn.iter().flat_map(|p| [&[p.len() as u8][..], p].concat()).collect::<Vec<u8>>()),
        0x002b => {
            let versions = u16s(&[0x3a3a, 0x0304, 0x0303]);
            [&[versions.len() as u8][..], &versions].concat()
        }
        0x000d => vec16(&u16s(&[&[0x0a0a][..], &CHROME_SIGNATURES].concat())),
        _ => vec![0],
    }
}

/// A ClientHello body (no handshake header) with `ciphers` and `extensions` (GREASE
/// ones first among both), ALPN `alpn`.
fn hello(ciphers: &[u16], extensions: &[u16], alpn: &[&[u8]]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(32);
    body.extend_from_slice(&[9; 32]);
    body.extend(vec16(&u16s(&[&[0xfafa][..], ciphers].concat())));
    body.extend_from_slice(&[1, 0]);
    let mut exts = Vec::new();
    for &kind in [&[0x0a0a][..], extensions].concat().iter() {
        exts.extend_from_slice(&kind.to_be_bytes());
        exts.extend(vec16(&data(kind, alpn)));
    }
    body.extend(vec16(&exts));
    body
}

/// `body` as a handshake message in records of at most `record` bytes.
fn records(body: &[u8], record: usize) -> Vec<u8> {
    let len = body.len() as u32;
    let message = [&[1u8][..], &len.to_be_bytes()[1..], body].concat();
    message
        .chunks(record)
        .flat_map(|chunk| [&[22u8, 3, 1][..], &(chunk.len() as u16).to_be_bytes(), chunk].concat())
        .collect()
}

#[test]
fn chrome_s_hello_gives_the_ja4_published_for_it() {
    let body = hello(&CHROME_CIPHERS, &CHROME_EXTENSIONS, &[b"h2", b"http/1.1"]);
    assert_eq!(ja4(&records(&body, 16384)), Read::Complete(CHROME_JA4.to_owned()));
}

#[test]
fn a_hello_over_several_records_gives_the_same_and_any_prefix_is_incomplete() {
    let body = hello(&CHROME_CIPHERS, &CHROME_EXTENSIONS, &[b"h2"]);
    let bytes = records(&body, 100);
    assert_eq!(ja4(&bytes), Read::Complete(CHROME_JA4.to_owned()));
    for cut in [0, 1, 4, 5, 50, 105, bytes.len() - 1] {
        assert_eq!(ja4(&bytes[..cut]), Read::Incomplete, "cut at {cut}");
    }
}

#[test]
fn no_sni_no_alpn_and_no_signatures_read_as_the_specification_says() {
    let extensions = [0x002b, 0x000a];
    let body = hello(&[0x1301], &extensions, &[]);
    let Read::Complete(text) = ja4(&records(&body, 16384)) else { panic!() };
    assert!(text.starts_with("t13i010200_"), "{text}");
    // Without signature algorithms, the third part hashes the extensions alone.
    let expected = truncated_hash("000a,002b", false);
    assert!(text.ends_with(&format!("_{expected}")), "{text}");
}

#[test]
fn an_alpn_value_that_is_not_alphanumeric_is_written_in_hex() {
    assert_eq!(alpn_code(Some(b"h2")), "h2");
    assert_eq!(alpn_code(Some(b"http/1.1")), "h1");
    assert_eq!(alpn_code(Some(b"\xab\xcd")), "ad");
    assert_eq!(alpn_code(Some(b"x")), "xx");
    assert_eq!(alpn_code(None), "00");
}

#[test]
fn grease_is_every_0x_a_a_pair_and_nothing_else() {
    for v in [0x0a0a, 0x1a1a, 0xfafa] {
        assert!(grease(v));
    }
    for v in [0x0a1a, 0x0000, 0x1301, 0xaaab] {
        assert!(!grease(v));
    }
}

#[test]
fn what_is_no_client_hello_has_no_fingerprint() {
    assert_eq!(ja4(b"GET / HTTP/1.1\r\n\r\n"), Read::Malformed);
    // A record of another type, a handshake other than a ClientHello.
    assert_eq!(ja4(&[21, 3, 1, 0, 2, 2, 40]), Read::Malformed);
    assert_eq!(ja4(&[22, 3, 1, 0, 4, 2, 0, 0, 0]), Read::Malformed);
    // A ClientHello claiming more than the bound, and one whose fields run past its end.
    assert_eq!(ja4(&[22, 3, 1, 0, 4, 1, 0xff, 0, 0]), Read::Malformed);
    assert_eq!(ja4(&records(&[3, 3, 7], 16384)), Read::Malformed);
}

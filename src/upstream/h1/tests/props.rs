//! Properties of the response head decoder over valid, mutated and random bytes: it never
//! panics, bytes fed in pieces decode as they do whole, and it accepts no head that the
//! strict recogniser in `strict` rejects, nor reads one's framing otherwise.

use bytes::BytesMut;
use http::Version;
use proptest::prelude::*;

use super::super::decode::{self, ResponseFraming};
use super::strict::{self, StrictHead};
use crate::props::{apply, cuts, mutations, pieces};
use crate::wire::h1::Names;

/// What decoding came to, comparable across ways of feeding the bytes.
#[derive(Debug, PartialEq)]
enum Outcome {
    Head {
        status: u16,
        version: Version,
        kind: ResponseFraming,
        keep_alive: bool,
        /// Sorted by name, each name's values in order.
        headers: Vec<(String, Vec<u8>)>,
        /// Bytes taken from the front of the input.
        taken: usize,
    },
    Incomplete,
    Error(String),
}

fn outcome(
    result: Result<Option<decode::Head>, super::Error>,
    input_len: usize,
    left: usize,
) -> Outcome {
    match result {
        Ok(Some(head)) => {
            let mut headers: Vec<_> = head
                .headers
                .iter()
                .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
                .collect();
            headers.sort_by(|a, b| a.0.cmp(&b.0));
            Outcome::Head {
                status: head.status.as_u16(),
                version: head.version,
                kind: head.framing,
                keep_alive: head.keep_alive,
                headers,
                taken: input_len - left,
            }
        }
        Ok(None) => Outcome::Incomplete,
        Err(err) => Outcome::Error(err.to_string()),
    }
}

/// Parsed twice on one connection's names: what the first parse kept must not change
/// what the second finds.
fn whole(wire: &[u8], head_request: bool) -> Outcome {
    let mut names = Names::default();
    let mut buf = BytesMut::from(wire);
    let first = decode::parse(
        &mut buf,
        head_request,
        &mut names,
        &mut http::HeaderMap::new(),
    );
    let first = outcome(first, wire.len(), buf.len());
    let mut buf = BytesMut::from(wire);
    let again = decode::parse(
        &mut buf,
        head_request,
        &mut names,
        &mut http::HeaderMap::new(),
    );
    let again = outcome(again, wire.len(), buf.len());
    assert_eq!(first, again, "parsed again with the names kept");
    first
}

/// Feeds `pieces` one at a time, as reads from a socket would, parsing after each.
fn in_pieces(pieces: &[&[u8]], head_request: bool) -> Outcome {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let mut buf = BytesMut::new();
    let mut names = Names::default();
    let mut fed = 0;
    for piece in pieces {
        buf.extend_from_slice(piece);
        fed += piece.len();
        match decode::parse(
            &mut buf,
            head_request,
            &mut names,
            &mut http::HeaderMap::new(),
        ) {
            Ok(None) => {}
            result => return outcome(result, total, buf.len() + total - fed),
        }
    }
    Outcome::Incomplete
}

/// The decoder's verdict on `wire`, checked against the strict reader and against
/// feeding the same bytes in pieces.
fn check(
    wire: &[u8],
    cuts: &[prop::sample::Index],
    head_request: bool,
) -> Result<Outcome, TestCaseError> {
    let whole = whole(wire, head_request);
    let pieces = pieces(wire, cuts);
    prop_assert_eq!(&in_pieces(&pieces, head_request), &whole, "fed in pieces");
    if let Outcome::Head { taken, .. } = &whole {
        let strict = strict::response(&wire[..*taken], head_request);
        let Some(strict) = strict else {
            return Err(TestCaseError::fail(format!(
                "accepted a head a strict reader rejects: {:?}",
                String::from_utf8_lossy(&wire[..*taken])
            )));
        };
        agrees(&whole, &strict)?;
    }
    Ok(whole)
}

/// The decoder read the head as the strict reader did.
fn agrees(decoded: &Outcome, strict: &StrictHead) -> Result<(), TestCaseError> {
    let Outcome::Head {
        status,
        version,
        kind,
        keep_alive,
        headers,
        taken,
    } = decoded
    else {
        return Err(TestCaseError::fail("no head to compare"));
    };
    let mut fields = strict.fields.clone();
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    // Both framings: the length is no part of the message and is not passed on.
    let chunked = fields.iter().any(|(n, _)| n == "transfer-encoding");
    let expected: Vec<_> = fields
        .iter()
        .filter(|(n, _)| !(chunked && n == "content-length"))
        .cloned()
        .collect();
    let strict_version = match strict.minor {
        0 => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    prop_assert_eq!(*taken, strict.len, "head length");
    prop_assert_eq!(*status, strict.status);
    prop_assert_eq!(*version, strict_version);
    prop_assert_eq!(*kind, strict.kind, "body framing");
    prop_assert_eq!(headers, &expected);
    let has = |name: &str| fields.iter().any(|(n, _)| n == name);
    if *keep_alive {
        prop_assert!(
            *kind != ResponseFraming::Eof,
            "kept alive with a body read to the close"
        );
        prop_assert!(
            !(has("transfer-encoding") && has("content-length")),
            "kept alive with both framings"
        );
    }
    Ok(())
}

fn tchar_string(most: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[-!#$%&'*+.^_`|~0-9A-Za-z]{{1,{most}}}"))
        .expect("a valid regex")
}

/// `OWS`, as senders write it.
fn ows() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", "", " ", "\t", "  ", " \t"][..])
}

/// A field value's own bytes: VCHAR, obs-text, SP and HTAB inside.
fn field_value() -> impl Strategy<Value = Vec<u8>> {
    let byte =
        prop_oneof![8 => 0x21..=0x7eu8, 1 => 0x80..=0xffu8, 1 => Just(b' '), 1 => Just(b'\t')];
    prop::collection::vec(byte, 0..24).prop_map(|mut v| {
        // Leading and trailing whitespace belongs to the OWS around the value.
        while v.first().is_some_and(|b| b.is_ascii_whitespace()) {
            v.remove(0);
        }
        while v.last().is_some_and(|b| b.is_ascii_whitespace()) {
            v.pop();
        }
        v
    })
}

fn field_line(name: String, value: &[u8], before: &str, after: &str) -> Vec<u8> {
    [
        name.as_bytes(),
        b":",
        before.as_bytes(),
        value,
        after.as_bytes(),
        b"\r\n",
    ]
    .concat()
}

/// A field other than the framing ones.
fn other_field() -> impl Strategy<Value = Vec<u8>> {
    let connection = prop::sample::select(&["close", "keep-alive", "upgrade, Close", "x"][..])
        .prop_map(|v| ("Connection".to_owned(), v.as_bytes().to_vec()));
    let any_field = (tchar_string(12), field_value());
    (prop_oneof![1 => connection, 6 => any_field], ows(), ows())
        .prop_map(|((name, value), before, after)| field_line(name, &value, before, after))
}

/// Content-Length and Transfer-Encoding fields a strict reader takes, in some mix.
fn framing_fields() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        Just(Vec::new()),
        length_fields(),
        coding_fields(),
        (length_fields(), coding_fields()).prop_map(|(a, b)| [a, b].concat()),
    ]
}

/// One to two Content-Length fields of one value, some as `n, n`, some with leading zeros.
fn length_fields() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let n = prop_oneof![0..100u64, any::<u64>()];
    let fields = prop::collection::vec((0..3usize, any::<bool>(), ows(), ows()), 1..3);
    (n, fields).prop_map(|(n, fields)| {
        let lines = fields.into_iter().map(|(zeros, twice, before, after)| {
            let one = format!("{}{n}", "0".repeat(zeros));
            let value = if twice {
                format!("{one},{after}{one}")
            } else {
                one
            };
            field_line("Content-Length".into(), value.as_bytes(), before, after)
        });
        lines.collect()
    })
}

/// One to two Transfer-Encoding fields, whose last coding may or may not be chunked.
fn coding_fields() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let coding = (
        prop::sample::select(&["chunked", "Chunked", "gzip", "deflate", "x-zip", "identity"][..]),
        prop::sample::select(&["", ";q=1", " ; level = 9"][..]),
    )
        .prop_map(|(name, params)| format!("{name}{params}"));
    let field = (prop::collection::vec(coding, 0..3), ows()).prop_map(|(list, before)| {
        let value = list.join(", ");
        field_line("Transfer-Encoding".into(), value.as_bytes(), before, "")
    });
    prop::collection::vec(field, 1..3)
}

/// `HTTP/1.x CODE reason` and its CRLF.
fn status_line(codes: impl Strategy<Value = u16>) -> impl Strategy<Value = Vec<u8>> {
    let reason = prop_oneof![Just(None), field_value().prop_map(Some),];
    (
        prop::sample::select(&["HTTP/1.1", "HTTP/1.0"][..]),
        codes,
        reason,
    )
        .prop_map(|(version, code, reason)| {
            let mut line = format!("{version} {code}").into_bytes();
            if let Some(reason) = reason {
                line.push(b' ');
                line.extend_from_slice(&reason);
            }
            line.extend_from_slice(b"\r\n");
            line
        })
}

/// A response head a strict reader takes, perhaps after interim ones, and a few bytes
/// of what follows it.
fn valid_response() -> impl Strategy<Value = Vec<u8>> {
    let interim = (
        status_line(prop::sample::select(&[100u16, 102, 103][..])),
        prop::collection::vec(other_field(), 0..3),
    )
        .prop_map(|(line, fields)| [line, fields.concat(), b"\r\n".to_vec()].concat());
    let codes = prop_oneof![
        prop::sample::select(&[101u16, 200, 204, 206, 301, 304, 404, 502][..]),
        // Not 1xx: those would be interim responses, and no final head would follow.
        200..1000u16,
    ];
    let fields = (prop::collection::vec(other_field(), 0..6), framing_fields())
        .prop_map(|(a, b)| [a, b].concat())
        .prop_shuffle();
    (
        prop::collection::vec(interim, 0..2),
        status_line(codes),
        fields,
        prop::collection::vec(any::<u8>(), 0..6),
    )
        .prop_map(|(interim, line, fields, after)| {
            [
                interim.concat(),
                line,
                fields.concat(),
                b"\r\n".to_vec(),
                after,
            ]
            .concat()
        })
}

/// Random bytes, some of them after a plausible start so the parser gets past it.
fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => any::<u8>(),
        4 => prop::sample::select(&b"\r\n\r\n\t :,;0123456789abcdefHTPchunked-"[..]),
    ];
    (
        prop::sample::select(
            &[
                "",
                "HTTP/1.1 ",
                "HTTP/1.1 200 OK\r\n",
                "HTTP/1.0 100 x\r\n\r\n",
            ][..],
        ),
        prop::collection::vec(byte, 0..96),
    )
        .prop_map(|(start, rest)| [start.as_bytes(), &rest].concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn valid_heads_decode_as_a_strict_reader_reads_them(
        wire in valid_response(),
        cuts in cuts(4),
        head_request in any::<bool>(),
    ) {
        let decoded = check(&wire, &cuts, head_request)?;
        let strict = strict::response(&wire, head_request);
        match (&decoded, &strict) {
            (Outcome::Head { .. }, Some(strict)) => agrees(&decoded, strict)?,
            // Transfer-Encoding in an HTTP/1.0 response with a body (RFC 9112 §6.1).
            (Outcome::Error(_), None) => {}
            _ => prop_assert!(false, "decoder {decoded:?}, strict reader {strict:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn mutated_heads_are_never_taken_beyond_a_strict_reader(
        mut wire in valid_response(),
        edits in mutations(4),
        cuts in cuts(6),
        head_request in any::<bool>(),
    ) {
        apply(&mut wire, &edits);
        check(&wire, &cuts, head_request)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_500))]

    #[test]
    fn random_bytes_never_panic_nor_pass_a_strict_reader(
        wire in random_bytes(),
        cuts in cuts(6),
        head_request in any::<bool>(),
    ) {
        check(&wire, &cuts, head_request)?;
    }
}

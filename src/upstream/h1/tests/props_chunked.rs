//! Properties of the chunked body decoder: it never panics, bytes fed in pieces (with
//! `skip_framing` called between) decode as they do whole, a valid body yields exactly its
//! data, and no body is taken that the strict recogniser in `strict` rejects, limits
//! included.

use bytes::BytesMut;
use proptest::prelude::*;
use proptest::sample::Index;

use super::strict;
use crate::props::{apply, cuts, mutations, pieces};
use crate::wire::h1::chunked::{Decoder, Step, MAX_CHUNK_LINE, MAX_TRAILER_BYTES};

#[derive(Debug, PartialEq)]
enum Outcome {
    /// The body ended after `taken` bytes of input, having yielded `data`.
    Done {
        data: Vec<u8>,
        taken: usize,
    },
    /// All input was read and more is wanted.
    Incomplete {
        data: Vec<u8>,
    },
    Error(String),
}

/// Feeds `pieces` one at a time, decoding until the decoder wants more; where `skips`
/// says so, calls `skip_framing` first, as the body does after a data frame.
fn drive(pieces: &[&[u8]], skips: &[bool]) -> Outcome {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut fed = 0;
    let mut unfed = pieces.iter();
    // Every round takes bytes from the buffer or feeds it; a stuck decoder fails here.
    for round in 0..=4 * total + 2 * pieces.len() + 4 {
        if skips.get(round).copied().unwrap_or(false) {
            if let Err(err) = decoder.skip_framing(&mut buf) {
                return Outcome::Error(err.to_string());
            }
        }
        match decoder.decode(&mut buf) {
            Ok(Step::Data(bytes)) => data.extend_from_slice(&bytes),
            Ok(Step::Done) => {
                let taken = total - (buf.len() + total - fed);
                return Outcome::Done { data, taken };
            }
            Ok(Step::NeedMore) => match unfed.next() {
                Some(piece) => {
                    buf.extend_from_slice(piece);
                    fed += piece.len();
                }
                None => return Outcome::Incomplete { data },
            },
            Err(err) => return Outcome::Error(err.to_string()),
        }
    }
    panic!("the decoder made no progress");
}

/// Decodes `wire` whole and in pieces, and holds a finished body to the strict reader.
fn check(wire: &[u8], cuts: &[Index], skips: &[bool]) -> Result<Outcome, TestCaseError> {
    let whole = drive(&[wire], &[]);
    prop_assert_eq!(&drive(&pieces(wire, cuts), skips), &whole, "fed in pieces");
    if let Outcome::Done { data, taken } = &whole {
        let Some(strict) = strict::chunked(wire) else {
            return Err(TestCaseError::fail(format!(
                "accepted a chunked body a strict reader rejects: {:?}",
                String::from_utf8_lossy(&wire[..*taken])
            )));
        };
        prop_assert_eq!(data, &strict.data);
        prop_assert_eq!(*taken, strict.len);
    }
    Ok(whole)
}

fn token() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[-!#$%&'*+.^_`|~0-9A-Za-z]{1,8}").expect("a valid regex")
}

fn bws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", "", " ", "\t"][..])
}

/// `quoted-string`: qdtext, and quoted pairs of anything a field may hold.
fn quoted() -> impl Strategy<Value = Vec<u8>> {
    let qdtext = prop_oneof![
        Just(b' '),
        Just(b'\t'),
        Just(b'!'),
        0x23..=0x5bu8,
        0x5d..=0x7eu8,
        0x80..=0xffu8
    ];
    let piece = prop_oneof![
        4 => qdtext.prop_map(|b| vec![b]),
        1 => prop_oneof![Just(b'"'), Just(b'\\'), 0x21..=0x7eu8].prop_map(|b| vec![b'\\', b]),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|p| [&b"\""[..], &p.concat(), b"\""].concat())
}

/// `chunk-ext`: zero to two `BWS ";" BWS name [ BWS "=" BWS value ]`.
fn chunk_ext() -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![token().prop_map(String::into_bytes), quoted()];
    let eq = prop::option::of((bws(), bws(), value));
    let one = (bws(), bws(), token(), eq).prop_map(|(a, b, name, eq)| {
        let mut ext = [a.as_bytes(), b";", b.as_bytes(), name.as_bytes()].concat();
        if let Some((c, d, value)) = eq {
            ext.extend_from_slice(&[c.as_bytes(), b"=", d.as_bytes(), &value].concat());
        }
        ext
    });
    prop_oneof![
        2 => Just(Vec::new()),
        1 => prop::collection::vec(one, 1..3).prop_map(|e| e.concat()),
    ]
}

/// A size line: the size in hex of either case, with leading zeros, and extensions.
fn size_line(size: usize, zeros: usize, upper: bool, ext: &[u8]) -> Vec<u8> {
    let hex = if upper {
        format!("{size:X}")
    } else {
        format!("{size:x}")
    };
    [
        &"0".repeat(zeros).into_bytes(),
        hex.as_bytes(),
        ext,
        b"\r\n",
    ]
    .concat()
}

fn trailer() -> impl Strategy<Value = Vec<u8>> {
    let value = proptest::string::string_regex("[ -~]{0,16}").expect("a valid regex");
    (token(), bws(), value).prop_map(|(name, ows, value)| {
        format!("{name}:{ows}{}\r\n", value.trim_matches(' ')).into_bytes()
    })
}

/// A valid chunked body as `(wire, data, what follows it)`.
fn valid_body() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, Vec<u8>)> {
    let style = (0..3usize, any::<bool>(), chunk_ext());
    (
        prop::collection::vec(any::<u8>(), 0..200),
        cuts(6),
        prop::collection::vec(style, 1..4),
        (0..3usize, chunk_ext()),
        prop::collection::vec(trailer(), 0..3),
        prop::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(|(data, cuts, styles, (zeros, last_ext), trailers, after)| {
            let mut wire = Vec::new();
            let chunks = pieces(&data, &cuts).into_iter().filter(|c| !c.is_empty());
            for (chunk, (zeros, upper, ext)) in chunks.zip(styles.iter().cycle()) {
                wire.extend_from_slice(&size_line(chunk.len(), *zeros, *upper, ext));
                wire.extend_from_slice(chunk);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(&size_line(0, zeros, false, &last_ext));
            wire.extend_from_slice(&trailers.concat());
            wire.extend_from_slice(b"\r\n");
            wire.extend_from_slice(&after);
            (wire, data, after)
        })
}

fn skips() -> impl Strategy<Value = Vec<bool>> {
    prop::collection::vec(any::<bool>(), 0..16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn valid_bodies_in_any_pieces_yield_exactly_their_data(
        (wire, data, after) in valid_body(),
        cuts in cuts(8),
        skips in skips(),
    ) {
        let taken = wire.len() - after.len();
        prop_assert_eq!(check(&wire, &cuts, &skips)?, Outcome::Done { data, taken });
    }

    #[test]
    fn chunk_sizes_that_overflow_are_errors_and_others_are_not(
        zeros in 0..4usize,
        digits in "[1-9a-fA-F][0-9a-fA-F]{0,20}",
    ) {
        let wire = format!("{}{digits}\r\n", "0".repeat(zeros));
        let fits = u64::from_str_radix(&digits, 16).is_ok();
        match drive(&[wire.as_bytes()], &[]) {
            Outcome::Error(_) => prop_assert!(!fits, "{wire:?} fits in u64"),
            Outcome::Incomplete { data } => prop_assert!(fits && data.is_empty()),
            Outcome::Done { .. } => prop_assert!(false, "a chunk without data ended the body"),
        }
    }

    #[test]
    fn chunk_data_not_followed_by_crlf_is_an_error(
        data in prop::collection::vec(any::<u8>(), 1..40),
        end in prop::array::uniform2(any::<u8>()).prop_filter("not CRLF", |e| e != b"\r\n"),
        cuts in cuts(4),
    ) {
        let wire = [&size_line(data.len(), 0, false, b""), &data[..], &end, b"0\r\n\r\n"].concat();
        let outcome = check(&wire, &cuts, &[])?;
        prop_assert!(matches!(outcome, Outcome::Error(_)), "{outcome:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn mutated_bodies_are_never_taken_beyond_a_strict_reader(
        (mut wire, _, _) in valid_body(),
        edits in mutations(4),
        cuts in cuts(8),
        skips in skips(),
    ) {
        apply(&mut wire, &edits);
        check(&wire, &cuts, &skips)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_500))]

    #[test]
    fn random_bytes_never_panic_nor_pass_a_strict_reader(
        wire in prop::collection::vec(
            prop_oneof![
                1 => any::<u8>(),
                2 => prop::sample::select(&b"\r\n\r\n0123456789abcdefABCDEF;= \t\"x:"[..]),
            ],
            0..64,
        ),
        cuts in cuts(6),
        skips in skips(),
    ) {
        check(&wire, &cuts, &skips)?;
    }
}

proptest! {
    // Each case is up to 64 KiB of trailers, so fewer of them.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn lines_and_trailers_are_taken_up_to_their_limits_and_no_further(
        ext_len in MAX_CHUNK_LINE - 8..=MAX_CHUNK_LINE,
        trailer_len in 8..300usize,
        trailer_total in MAX_TRAILER_BYTES - 400..MAX_TRAILER_BYTES + 400,
        cuts in cuts(6),
    ) {
        // "1;eee…e\r\n": the extension makes the line `ext_len + 4` bytes long.
        let mut wire = format!("1;{}\r\nx\r\n0\r\n", "e".repeat(ext_len)).into_bytes();
        let line = format!("x-t: {}\r\n", "v".repeat(trailer_len));
        for _ in 0..trailer_total / line.len() {
            wire.extend_from_slice(line.as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        let outcome = check(&wire, &cuts, &[])?;
        let strict = strict::chunked(&wire);
        prop_assert_eq!(matches!(outcome, Outcome::Done { .. }), strict.is_some(), "{:?}", outcome);
    }
}

//! Properties of the request head parser and the body decoder over valid, mutated and
//! random bytes: they never panic, bytes fed in pieces come out as they do whole, a head
//! taken keeps within its limits, and a body's pieces add up to the bytes sent.

use bytes::BytesMut;
use http::HeaderMap;
use proptest::prelude::*;

use super::head::{self, Framing, HeadLimits};
use super::upload::Upload;
use crate::props::{apply, cuts, mutations, pieces};
use crate::wire::h1::Names;

const LIMITS: HeadLimits = HeadLimits {
    max_line: 64,
    max_bytes: 256,
    max_headers: 8,
};

/// What parsing came to, comparable across ways of feeding the bytes.
#[derive(Debug, PartialEq)]
enum Outcome {
    Head {
        request_line: String,
        headers: Vec<(String, Vec<u8>)>,
        framing: Framing,
        keep_alive: bool,
        taken: usize,
    },
    Incomplete,
    Refused(head::Malformed),
}

fn parse(buf: &mut BytesMut, names: &mut Names) -> Result<Option<head::Head>, head::Malformed> {
    head::parse(buf, LIMITS, &mut HeaderMap::new(), names)
}

fn outcome(
    result: Result<Option<head::Head>, head::Malformed>,
    total: usize,
    left: usize,
) -> Outcome {
    match result {
        Ok(Some(head)) => Outcome::Head {
            request_line: format!("{} {} {:?}", head.method, head.uri, head.version),
            headers: head
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            framing: head.framing,
            keep_alive: head.keep_alive,
            taken: total - left,
        },
        Ok(None) => Outcome::Incomplete,
        Err(malformed) => Outcome::Refused(malformed),
    }
}

/// Parsed whole, twice on one connection's names (what the first kept must not change
/// the second), and in pieces: all three agree.
fn check(wire: &[u8], cuts: &[prop::sample::Index]) -> Result<Outcome, TestCaseError> {
    let mut names = Names::default();
    let mut buf = BytesMut::from(wire);
    let first = outcome(parse(&mut buf, &mut names), wire.len(), buf.len());
    let mut buf = BytesMut::from(wire);
    let again = outcome(parse(&mut buf, &mut names), wire.len(), buf.len());
    prop_assert_eq!(&first, &again, "parsed again with the names kept");
    let mut buf = BytesMut::new();
    let mut names = Names::default();
    let mut fed = 0;
    let mut in_pieces = Outcome::Incomplete;
    for piece in pieces(wire, cuts) {
        buf.extend_from_slice(piece);
        fed += piece.len();
        match parse(&mut buf, &mut names) {
            Ok(None) => {}
            result => {
                in_pieces = outcome(result, wire.len(), buf.len() + wire.len() - fed);
                break;
            }
        }
    }
    // A refused head is refused in pieces too, though maybe for another of its faults
    // (a too-long line of garbage: 414 whole, 400 when its start comes alone).
    match (&first, &in_pieces) {
        (Outcome::Refused(_), Outcome::Refused(_)) => {}
        _ => prop_assert_eq!(&in_pieces, &first, "fed in pieces"),
    }
    if let Outcome::Head { taken, headers, .. } = &first {
        prop_assert!(*taken <= LIMITS.max_bytes, "head of {taken} bytes taken");
        prop_assert!(headers.len() <= LIMITS.max_headers);
    }
    Ok(first)
}

fn field() -> impl Strategy<Value = Vec<u8>> {
    let name = prop::sample::select(
        &[
            "Host",
            "X-A",
            "Connection",
            "Content-Length",
            "Transfer-Encoding",
            "Expect",
            "Upgrade",
        ][..],
    );
    let value = prop::sample::select(
        &[
            "t",
            "3",
            "0",
            "close",
            "keep-alive",
            "chunked",
            "100-continue",
            "websocket",
            "a, b",
        ][..],
    );
    (name, value).prop_map(|(n, v)| format!("{n}: {v}\r\n").into_bytes())
}

/// A request head, perhaps valid, and a few bytes after it.
fn request() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(
            &[
                "GET / HTTP/1.1\r\n",
                "POST /a?b HTTP/1.1\r\n",
                "HEAD / HTTP/1.0\r\n",
            ][..],
        ),
        prop::collection::vec(field(), 0..6),
        prop::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(|(line, fields, after)| {
            [line.as_bytes(), &fields.concat(), b"\r\n", &after].concat()
        })
}

/// `chunks` in the chunked coding, with its last chunk.
fn chunked(chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = Vec::new();
    for chunk in chunks {
        wire.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        wire.extend_from_slice(chunk);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    wire
}

/// The bytes a decoded body hands out, fed in `cuts` pieces; `None` if it failed.
fn body(framing: Framing, wire: &[u8], cuts: &[prop::sample::Index]) -> Option<Vec<u8>> {
    let (_body, mut upload) = Upload::new(framing, false);
    let mut read = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(wire, cuts) {
        read.extend_from_slice(piece);
        while let Some(piece) = upload.decode_for_test(&mut read) {
            out.extend_from_slice(&piece.ok()?);
        }
    }
    upload.is_done().then_some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_500))]

    #[test]
    fn heads_parse_alike_whole_and_in_pieces(wire in request(), cuts in cuts(4)) {
        check(&wire, &cuts)?;
    }

    #[test]
    fn mutated_heads_parse_alike_whole_and_in_pieces(
        mut wire in request(),
        edits in mutations(4),
        cuts in cuts(4),
    ) {
        apply(&mut wire, &edits);
        check(&wire, &cuts)?;
    }

    #[test]
    fn random_bytes_never_panic(wire in prop::collection::vec(any::<u8>(), 0..300), cuts in cuts(4)) {
        check(&wire, &cuts)?;
    }

    #[test]
    fn a_chunked_body_comes_out_as_its_chunks_however_it_is_cut(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 0..12),
        cuts in cuts(6),
    ) {
        let wire = chunked(&chunks);
        prop_assert_eq!(body(Framing::Chunked, &wire, &cuts), Some(chunks.concat()));
    }

    #[test]
    fn mutated_chunked_bodies_never_panic(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..20), 0..6),
        edits in mutations(3),
        cuts in cuts(4),
    ) {
        let mut wire = chunked(&chunks);
        apply(&mut wire, &edits);
        let _ = body(Framing::Chunked, &wire, &cuts);
    }
}

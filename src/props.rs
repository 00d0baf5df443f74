//! What the parser property tests share: byte-level mutations of valid input, and split
//! points for feeding bytes in pieces. Mutating a valid message reaches far deeper into
//! a parser than random bytes, which mostly fail on their first byte.

use proptest::prelude::*;
use proptest::sample::Index;

/// One edit of a byte string. Positions are [`Index`]es, so they fit any length.
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    /// Flip one bit.
    Flip(Index, u8),
    /// Replace a byte with one that parsers treat specially.
    Set(Index, u8),
    /// Insert bytes that parsers treat specially.
    Insert(Index, Vec<u8>),
    /// Delete up to this many bytes.
    Delete(Index, usize),
    /// Copy a run of bytes to another place (a repeated header line, a doubled CRLF).
    Duplicate(Index, usize, Index),
}

/// Bytes that sit on the edges of HTTP and TOML grammars.
const SPECIAL: &[u8] = b"\r\n\t :;,=\"\\'#[]{}$0149aAfFgzZ-_.+\x00\x0b\x0c\x7f\x80\xff";

/// Snippets that move a parser into another state, inserted whole.
const SNIPPETS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\r\n",
    b" \t",
    b"chunked",
    b", chunked",
    b"content-length: 1\r\n",
    b"transfer-encoding: chunked\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"0\r\n\r\n",
    b"ffffffffffffffff",
    b"=\"",
    b"[[",
    b"\xc3\xa9",
];

fn special_byte() -> impl Strategy<Value = u8> {
    prop_oneof![prop::sample::select(SPECIAL), any::<u8>()]
}

fn insertion() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(SNIPPETS).prop_map(<[u8]>::to_vec),
        prop::collection::vec(special_byte(), 1..4),
    ]
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0..8u8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<Index>(), special_byte()).prop_map(|(at, b)| Mutation::Set(at, b)),
        (any::<Index>(), insertion()).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<Index>(), 1..16usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (any::<Index>(), 1..24usize, any::<Index>())
            .prop_map(|(from, n, to)| Mutation::Duplicate(from, n, to)),
    ]
}

/// Between one and `most` mutations.
pub(crate) fn mutations(most: usize) -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..=most)
}

/// Applies `edits` in order; an edit of an empty string that needs a byte does nothing.
pub(crate) fn apply(bytes: &mut Vec<u8>, edits: &[Mutation]) {
    for edit in edits {
        let len = bytes.len();
        match edit {
            Mutation::Flip(at, bit) if len > 0 => bytes[at.index(len)] ^= 1 << bit,
            Mutation::Set(at, b) if len > 0 => bytes[at.index(len)] = *b,
            Mutation::Insert(at, new) => {
                let at = at.index(len + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            Mutation::Delete(at, n) if len > 0 => {
                let at = at.index(len);
                bytes.drain(at..(at + n).min(len));
            }
            Mutation::Duplicate(from, n, to) if len > 0 => {
                let from = from.index(len);
                let run = bytes[from..(from + n).min(len)].to_vec();
                let to = to.index(len + 1);
                bytes.splice(to..to, run);
            }
            _ => {}
        }
    }
}

/// `bytes` cut at the given points (sorted, repeats and ends allowed), in order.
pub(crate) fn pieces<'a>(bytes: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::with_capacity(at.len() + 1);
    let mut start = 0;
    for cut in at {
        pieces.push(&bytes[start..cut]);
        start = cut;
    }
    pieces.push(&bytes[start..]);
    pieces
}

/// Up to `most` cut points.
pub(crate) fn cuts(most: usize) -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..=most)
}

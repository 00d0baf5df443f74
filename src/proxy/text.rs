//! Short texts tollgate writes into every limited response — rate-limit header values and
//! the problem+json body — put together on the stack. `format!` and a growing `String` cost
//! more than these few bytes are worth (callgrind: a rejection took 16.4k instructions with
//! them, 14.2k without). What a response keeps of them is a slice of the worker's
//! [`ARENA`]: the texts of many requests share one allocation.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};
use http::HeaderValue;

/// Bytes per arena: a worker writes its responses' texts into the current arena back to
/// back and hands each out as a slice of it (a reference count), so there is one
/// allocation per arena rather than one per text. An arena is freed when its last text is
/// dropped; a response that a slow client holds keeps at most this much alive.
const ARENA: usize = 4096;

thread_local! {
    static CURRENT: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// `parts`, one after another, as a slice of the worker's arena (or, if longer than a
/// quarter of one, a copy of their own).
pub(super) fn shared(parts: &[&[u8]]) -> Bytes {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    if len > ARENA / 4 {
        return Bytes::from(parts.concat());
    }
    CURRENT.with(|current| {
        let mut arena = current.borrow_mut();
        if arena.capacity() - arena.len() < len {
            *arena = BytesMut::with_capacity(ARENA);
        }
        for part in parts {
            arena.extend_from_slice(part);
        }
        arena.split().freeze()
    })
}

/// Text written on the stack while it fits in `N` bytes, and on the heap beyond (only
/// very long zone names get there).
pub(super) struct Text<const N: usize> {
    stack: [u8; N],
    len: usize,
    /// Everything written, once the text has outgrown `stack`.
    heap: Vec<u8>,
}

impl<const N: usize> Text<N> {
    pub(super) fn new() -> Self {
        Text {
            stack: [0; N],
            len: 0,
            heap: Vec::new(),
        }
    }

    #[inline]
    pub(super) fn push(&mut self, text: &str) -> &mut Self {
        self.push_bytes(text.as_bytes());
        self
    }

    /// Appends the decimal digits of `value`.
    #[inline]
    pub(super) fn push_u64(&mut self, value: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let at = write_digits(&mut digits, value);
        self.push_bytes(&digits[at..]);
        self
    }

    #[inline]
    pub(super) fn push_bytes(&mut self, bytes: &[u8]) {
        if self.heap.is_empty() {
            if let Some(room) = self.stack.get_mut(self.len..self.len + bytes.len()) {
                room.copy_from_slice(bytes);
                self.len += bytes.len();
                return;
            }
            self.spill();
        }
        self.heap.extend_from_slice(bytes);
    }

    /// Moves the text to the heap, where it goes on.
    #[cold]
    fn spill(&mut self) {
        self.heap.reserve(2 * N);
        self.heap.extend_from_slice(&self.stack[..self.len]);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        if self.heap.is_empty() {
            &self.stack[..self.len]
        } else {
            &self.heap
        }
    }

    /// The text as a header value; `None` if it holds a byte no header value may.
    pub(super) fn to_value(&self) -> Option<HeaderValue> {
        HeaderValue::from_bytes(self.as_bytes()).ok()
    }

    /// An exact-size copy, for a text kept as long as a location is (prewritten texts).
    pub(super) fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }

    /// For one response: a slice of the worker's arena ([`shared`]).
    pub(super) fn to_shared_bytes(&self) -> Bytes {
        shared(&[self.as_bytes()])
    }

    /// For one response's header: a slice of the worker's arena; `None` if it holds a byte
    /// no header value may.
    pub(super) fn to_shared_value(&self) -> Option<HeaderValue> {
        HeaderValue::from_maybe_shared(self.to_shared_bytes()).ok()
    }
}

/// Writes the decimal digits of `value` at the end of `buf`, two at a time (a division
/// per digit would cost more than the rest of a header); returns where they start.
fn write_digits(buf: &mut [u8; 20], mut value: u64) -> usize {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut at = buf.len();
    while value >= 100 {
        let pair = (value % 100) as usize * 2;
        value /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if value >= 10 {
        let pair = value as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + value as u8;
    }
    at
}

/// A number as a header value. A single digit, the usual `Retry-After` and reset, is a
/// static value: no allocation.
pub(super) fn number_value(value: u64) -> HeaderValue {
    const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    match usize::try_from(value).ok().and_then(|i| DIGITS.get(i)) {
        Some(digit) => HeaderValue::from_static(digit),
        None => Text::<20>::new()
            .push_u64(value)
            .to_shared_value()
            .unwrap_or_else(|| HeaderValue::from(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_texts_are_their_bytes_whether_in_an_arena_or_not() {
        let mut kept = Vec::new();
        for i in 0..2_000u64 {
            let mut text = Text::<32>::new();
            text.push("n=").push_u64(i);
            kept.push((i, text.to_shared_bytes()));
        }
        for (i, bytes) in &kept {
            assert_eq!(&bytes[..], format!("n={i}").as_bytes());
        }
        let long = vec![b'x'; ARENA];
        assert_eq!(shared(&[&long, b"y"]).len(), ARENA + 1);
        assert_eq!(&shared(&[b"a", b"", b"bc"])[..], b"abc");
    }

    #[test]
    fn numbers_are_written_like_display() {
        let powers = (0..20).flat_map(|e| {
            let p = 10u64.pow(e);
            [p - 1, p, p + 1]
        });
        for value in (0..1_000).chain(powers).chain([u64::MAX - 1, u64::MAX]) {
            let mut text = Text::<32>::new();
            text.push("n=").push_u64(value);
            assert_eq!(text.as_bytes(), format!("n={value}").as_bytes());
            assert_eq!(number_value(value), HeaderValue::from(value));
        }
    }

    #[test]
    fn text_longer_than_the_stack_moves_to_the_heap_whole() {
        let mut text = Text::<8>::new();
        assert!(text.is_empty());
        text.push("\"zone\"").push(";q=").push_u64(1234567890);
        assert_eq!(text.as_bytes(), b"\"zone\";q=1234567890");
        text.push(", ").push("\"a-much-longer-zone-name\"");
        let expected = "\"zone\";q=1234567890, \"a-much-longer-zone-name\"";
        assert_eq!(text.to_bytes(), expected.as_bytes());
        assert_eq!(
            text.to_value().as_ref().map(HeaderValue::as_bytes),
            Some(expected.as_bytes())
        );
    }

    #[test]
    fn a_byte_no_header_value_may_hold_gives_none() {
        let mut text = Text::<8>::new();
        text.push("a\nb");
        assert!(text.to_value().is_none());
    }
}

//! `$request_id`: 128 random bits per request, written as 32 hex digits, as nginx's.
//!
//! Drawn from a per-thread wyrand generator seeded from the standard library's per-process
//! random hash keys: unique in practice and unguessable enough for tracing, not for secrets.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x9e37_79b9_7f4a_7c15);
    hasher.finish()
}

/// wyrand: one 64-bit draw (`$request_id`'s, and trace ids').
pub(super) fn next() -> u64 {
    STATE.with(|state| {
        let s = state.get().wrapping_add(0xa076_1d64_78bd_642f);
        state.set(s);
        let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    })
}

/// A request id: 32 hex digits.
#[derive(Clone, Copy)]
pub(super) struct RequestId([u8; 32]);

impl RequestId {
    pub(super) fn new() -> RequestId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 32];
        let bits = (u128::from(next()) << 64) | u128::from(next());
        for (i, digit) in text.iter_mut().enumerate() {
            *digit = HEX[((bits >> (124 - 4 * i)) & 0xf) as usize];
        }
        RequestId(text)
    }

    /// The id as its digits (for the access log).
    pub(super) fn into_bytes(self) -> [u8; 32] {
        self.0
    }

    /// An id made by [`RequestId::new`], back from [`RequestId::into_bytes`].
    pub(super) fn from_bytes(digits: [u8; 32]) -> RequestId {
        RequestId(digits)
    }

    pub(super) fn as_str(&self) -> &str {
        // Hex digits only.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let ids: Vec<String> = (0..1000)
            .map(|_| RequestId::new().as_str().to_owned())
            .collect();
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
    }
}

//! The boundary of a `multipart/byteranges` answer: 20 digits, as nginx prints
//! `ngx_next_temp_number(0)`, from a counter that starts at a random point, so that a
//! client cannot tell in advance which boundary its ranges will be cut by.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use http::HeaderValue;

static START: OnceLock<u64> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A new boundary, 20 digits.
pub(super) fn boundary() -> String {
    let start = *START.get_or_init(|| RandomState::new().hash_one(0x006e_6769_6e78_u64));
    let n = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed));
    format!("{n:020}")
}

/// `multipart/byteranges; boundary=B`.
pub(super) fn content_type(boundary: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}"))
        .unwrap_or(HeaderValue::from_static("multipart/byteranges"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_twenty_digits_and_differ() {
        let (a, b) = (boundary(), boundary());
        assert_eq!(a.len(), 20);
        assert!(a.bytes().all(|b| b.is_ascii_digit()));
        assert_ne!(a, b);
        assert_eq!(
            content_type("00000000000000000001"),
            "multipart/byteranges; boundary=00000000000000000001"
        );
    }
}

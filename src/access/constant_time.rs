//! Comparing secrets (tokens, password digests) in a time that tells an attacker nothing.

use sha2::{Digest, Sha256};

/// Equal, in a time that depends on neither where they differ nor their lengths: their
/// SHA-256 digests are compared, every byte. The admin token and the htpasswd formats
/// tollgate computes itself (apr1, `{SHA}`, `{SSHA}`, `{PLAIN}`) are compared with it; the
/// bcrypt and SHA-crypt crates compare in constant time on their own.
pub(crate) fn same(given: &[u8], expected: &[u8]) -> bool {
    let (given, expected) = (Sha256::digest(given), Sha256::digest(expected));
    let differs = given
        .iter()
        .zip(expected.iter())
        .fold(0u8, |differs, (a, b)| differs | (a ^ b));
    differs == 0
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn equal_bytes_are_the_same_and_any_difference_is_not() {
        assert!(same(b"", b""));
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret\0"));
        assert!(!same(b"", b"secret"));
    }
}

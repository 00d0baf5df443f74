//! md5-crypt, Poul-Henning Kamp's FreeBSD password hash: glibc's `$1$` and, with the magic
//! `$apr1$`, Apache's, which `htpasswd` writes by default (and with `-m`). No maintained crate
//! implements apr1, and the algorithm is short: RustCrypto's MD5, 1,000 rounds, crypt's base64.

use md5::{Digest, Md5};

/// crypt's base64 alphabet: not RFC 4648's (`.` and `/` come first) and never padded.
pub(super) const CRYPT64: &[u8; 64] =
    b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The 22 characters after the salt's `$` that `password` hashes to under `magic` (`$1$` or
/// `$apr1$`) and `salt` (as stored: at most 8 bytes, without its `$`).
pub(super) fn md5_crypt(password: &[u8], magic: &[u8], salt: &[u8]) -> [u8; 22] {
    let alternate = Md5::new()
        .chain_update(password)
        .chain_update(salt)
        .chain_update(password)
        .finalize();
    let mut first = Md5::new()
        .chain_update(password)
        .chain_update(magic)
        .chain_update(salt);
    // As many bytes of the alternate sum as the password has, repeating it.
    for chunk in password.chunks(16) {
        first.update(&alternate[..chunk.len()]);
    }
    // For each bit of the length, low bit first: a NUL for a one, the password's first byte
    // for a zero (PHK's original, kept for compatibility).
    let lead = password.first().copied().unwrap_or(0);
    let mut bits = password.len();
    while bits != 0 {
        first.update([if bits & 1 == 1 { 0 } else { lead }]);
        bits >>= 1;
    }
    let mut sum: [u8; 16] = first.finalize().into();
    // The 1,000 rounds that make each guess cost (little, by today's measure).
    for round in 0..1000 {
        let mut next = Md5::new();
        if round % 2 == 1 {
            next.update(password);
        } else {
            next.update(sum);
        }
        if round % 3 != 0 {
            next.update(salt);
        }
        if round % 7 != 0 {
            next.update(password);
        }
        if round % 2 == 1 {
            next.update(sum);
        } else {
            next.update(password);
        }
        sum = next.finalize().into();
    }
    encode(&sum)
}

/// The sum in crypt's base64, its bytes taken in md5-crypt's order: three at a time, six bits
/// at a time from the low end, the last byte alone.
fn encode(sum: &[u8; 16]) -> [u8; 22] {
    const GROUPS: [[usize; 3]; 5] = [[0, 6, 12], [1, 7, 13], [2, 8, 14], [3, 9, 15], [4, 10, 5]];
    let mut out = [0u8; 22];
    let mut chars = out.iter_mut();
    let mut put = |mut value: u32, count: usize| {
        for slot in chars.by_ref().take(count) {
            *slot = CRYPT64[(value & 63) as usize];
            value >>= 6;
        }
    };
    for [a, b, c] in GROUPS {
        put(
            u32::from(sum[a]) << 16 | u32::from(sum[b]) << 8 | u32::from(sum[c]),
            4,
        );
    }
    put(u32::from(sum[11]), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::md5_crypt;

    /// `openssl passwd -1 -salt 5pZSV9va password` and `-apr1 -salt v.PeWTmm secret`.
    #[test]
    fn matches_glibc_and_apache_outputs() {
        assert_eq!(
            &md5_crypt(b"password", b"$1$", b"5pZSV9va"),
            b"azfrPr6af3Fc7dLblQXVa0"
        );
        assert_eq!(
            &md5_crypt(b"secret", b"$apr1$", b"v.PeWTmm"),
            b"UaeMNTwzGyrJ1n60LqHrk/"
        );
    }

    /// Passwords longer than one MD5 block of the alternate sum, and the empty one, take the
    /// other branches of the length folding (`openssl passwd -apr1 -salt abc`).
    #[test]
    fn long_and_empty_passwords_hash_as_openssl_does() {
        assert_eq!(
            &md5_crypt(b"a password of more than sixteen bytes", b"$apr1$", b"abc"),
            b"SsQgl.SdOUdcfX3IZNT5K."
        );
        assert_eq!(&md5_crypt(b"", b"$apr1$", b"abc"), b"BfqKdn9xFDWJPa3kcp/PH0");
    }
}

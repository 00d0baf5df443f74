//! Numbers in a head or a chunk-size line, written without `fmt`'s machinery.

/// Appends `n` in decimal (a `Content-Length`).
pub(crate) fn push_decimal(out: &mut Vec<u8>, n: u64) {
    // One digit (a `Retry-After: 1`, a `r=0`) takes no loop.
    if n < 10 {
        out.push(b'0' + n as u8);
        return;
    }
    let mut digits = [0u8; 20];
    let len = write_decimal(&mut digits, n);
    out.extend_from_slice(&digits[..len]);
}

/// Writes `n` in decimal at the start of `into` (which has room for 20 digits);
/// how many digits it took.
pub(crate) fn write_decimal(into: &mut [u8], mut n: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    if let Some(room) = into.get_mut(..len) {
        room.copy_from_slice(&digits[i..]);
    }
    len
}

/// Appends `n` in lower-case hex (a chunk size).
pub(crate) fn push_hex(out: &mut Vec<u8>, mut n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = HEX[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_without_formatting_machinery() {
        let mut out = Vec::new();
        for (n, dec, hex) in [
            (0u64, "0", "0"),
            (9, "9", "9"),
            (10, "10", "a"),
            (4096, "4096", "1000"),
            (u64::MAX, "18446744073709551615", "ffffffffffffffff"),
        ] {
            out.clear();
            push_decimal(&mut out, n);
            assert_eq!(out, dec.as_bytes());
            out.clear();
            push_hex(&mut out, n);
            assert_eq!(out, hex.as_bytes());
        }
    }
}

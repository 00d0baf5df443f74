//! The `Date` of tollgate's HTTP/1.1 answers (RFC 9110 §6.6.1: an origin with a clock
//! sends one), written once a second per worker thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// `Sun, 06 Nov 1994 08:49:37 GMT`
const LEN: usize = 29;

struct Cached {
    second: u64,
    text: [u8; LEN],
}

thread_local! {
    static CACHED: RefCell<Cached> = const { RefCell::new(Cached { second: u64::MAX, text: [b' '; LEN] }) };
}

/// Appends `date: <now>\r\n`.
pub fn write_header(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.second != second {
            let text = httpdate::fmt_http_date(now);
            if text.len() == LEN {
                cached.text.copy_from_slice(text.as_bytes());
                cached.second = second;
            }
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(&cached.text);
        out.extend_from_slice(b"\r\n");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_is_an_imf_fixdate_of_now() {
        let mut out = Vec::new();
        write_header(&mut out);
        let text = std::str::from_utf8(&out).unwrap();
        let value = text
            .strip_prefix("date: ")
            .unwrap()
            .strip_suffix("\r\n")
            .unwrap();
        let parsed = httpdate::parse_http_date(value).unwrap();
        let age = SystemTime::now().duration_since(parsed).unwrap();
        assert!(age.as_secs() < 5, "{value}");
    }
}

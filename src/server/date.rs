//! The `Date` of tollgate's HTTP/1.1 answers (RFC 9110 §6.6.1: an origin with a clock
//! sends one), written once a second per worker thread.

use std::cell::RefCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::clock;

/// `Sun, 06 Nov 1994 08:49:37 GMT`
const LEN: usize = 29;
/// `date: `, the date and CRLF.
const LINE: usize = 6 + LEN + 2;

/// The line before a date is known: `date: `, blanks and CRLF.
const BLANK: [u8; LINE] = {
    let mut line = [b' '; LINE];
    let name = b"date:";
    let mut i = 0;
    while i < name.len() {
        line[i] = name[i];
        i += 1;
    }
    line[LINE - 2] = b'\r';
    line[LINE - 1] = b'\n';
    line
};

struct Cached {
    /// When the second `line` names is over, on the monotonic clock (the poll's time
    /// tells it without a read of the wall clock).
    until: Option<Instant>,
    /// The whole header line, copied at once.
    line: [u8; LINE],
}

thread_local! {
    static CACHED: RefCell<Cached> = const { RefCell::new(Cached { until: None, line: BLANK }) };
}

/// Appends `date: <now>\r\n`.
pub(in crate::server) fn write_header(out: &mut Vec<u8>) {
    write_header_at(out, clock::now(), SystemTime::now);
}

/// The `Date` value of now, from the same cache (HTTP/3's answers; hyper writes HTTP/2's).
pub(in crate::server) fn value() -> Option<http::HeaderValue> {
    let mut line = Vec::with_capacity(LINE);
    write_header(&mut line);
    let line = bytes::Bytes::from(line);
    http::HeaderValue::from_maybe_shared(line.slice(6..6 + LEN)).ok()
}

/// [`write_header`] at `now`, with the wall clock read from `wall` only when the cached
/// second is over: a test moves on to the next second without waiting for it.
fn write_header_at(out: &mut Vec<u8>, now: Instant, wall: impl FnOnce() -> SystemTime) {
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.until.is_none_or(|until| now >= until) {
            let wall = wall();
            let text = httpdate::fmt_http_date(wall);
            if text.len() == LEN {
                let into = wall
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let left = Duration::from_nanos(u64::from(1_000_000_000 - into));
                cached.line[6..6 + LEN].copy_from_slice(text.as_bytes());
                cached.until = Some(now + left);
            }
        }
        out.extend_from_slice(&cached.line);
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

    #[test]
    fn the_cached_date_moves_on_with_the_second() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut first = Vec::new();
        write_header_at(&mut first, now, || wall);
        let later = Duration::from_millis(1100);
        let mut second = Vec::new();
        write_header_at(&mut second, now + later, || wall + later);
        assert_ne!(first, second);
    }
}

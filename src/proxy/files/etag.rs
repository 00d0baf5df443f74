//! A file's validators as nginx writes them: `ETag` `"MTIME-SIZE"` in lower-case hex
//! (`ngx_http_set_etag`), and `Last-Modified` (and `Expires`) as HTTP dates.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

/// The last second an HTTP date can show (9999-12-31 23:59:59).
const LAST_DATE: i64 = 253_402_300_799;

/// `"5f5e1000-400"`: the mtime in whole seconds and the size, as `"%xT-%xO"` prints
/// them (a time before 1970 with a minus sign).
pub(super) fn strong(mtime: i64, size: u64) -> HeaderValue {
    let mut text = Vec::with_capacity(37); // quotes, sign, dash and two u64 in hex
    text.push(b'"');
    if mtime < 0 {
        text.push(b'-');
    }
    push_hex(&mut text, mtime.unsigned_abs());
    text.push(b'-');
    push_hex(&mut text, size);
    text.push(b'"');
    HeaderValue::from_maybe_shared(bytes::Bytes::from(text))
        .unwrap_or(HeaderValue::from_static("\"0-0\""))
}

/// `value` in lower-case hex, without leading zeros (`0` for zero).
fn push_hex(text: &mut Vec<u8>, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - value.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        text.push(DIGITS[(value >> (i * 4) & 0xf) as usize]);
    }
}

thread_local! {
    /// The last date [`http_date`] wrote on this thread: the files of a site share a
    /// handful of mtimes, and writing one costs a thousand instructions.
    static LAST_DATE_WRITTEN: RefCell<Option<(i64, HeaderValue)>> = const { RefCell::new(None) };
}

/// `secs` since 1970 as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`), held within the
/// dates the format can show.
pub(super) fn http_date(secs: i64) -> HeaderValue {
    let secs = secs.clamp(0, LAST_DATE);
    LAST_DATE_WRITTEN.with_borrow_mut(|last| match last {
        Some((written, value)) if *written == secs => value.clone(),
        _ => {
            let time = UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs());
            let value = HeaderValue::from_str(&httpdate::fmt_http_date(time))
                .unwrap_or(HeaderValue::from_static(""));
            *last = Some((secs, value.clone()));
            value
        }
    })
}

/// An HTTP date's seconds since 1970 (any of the three forms RFC 9110 §5.6.7 accepts),
/// or `None` when it is not one (nginx's `ngx_parse_http_time` giving -1).
pub(super) fn parse_date(value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let time = httpdate::parse_http_date(text.trim()).ok()?;
    seconds(time)
}

/// `time` in whole seconds since 1970 (negative before).
pub(super) fn seconds(time: SystemTime) -> Option<i64> {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).ok(),
        Err(before) => i64::try_from(before.duration().as_secs())
            .ok()
            .map(|s| -s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_nginx_hex_of_mtime_and_size() {
        assert_eq!(strong(0x5f5e1000, 0x400), "\"5f5e1000-400\"");
        assert_eq!(strong(1_700_000_000, 0), "\"6553f100-0\"");
        assert_eq!(strong(-1, 10), "\"-1-a\"");
        assert_eq!(strong(i64::MIN, u64::MAX), "\"-8000000000000000-ffffffffffffffff\"");
        assert_eq!(strong(0xf, 0x10), "\"f-10\"");
    }

    #[test]
    fn http_dates_are_written_and_read_in_every_form() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(784_111_778), "Sun, 06 Nov 1994 08:49:38 GMT");
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_date(form.as_bytes()), Some(784_111_777), "{form}");
        }
        assert_eq!(parse_date(b"yesterday"), None);
        assert_eq!(parse_date(b"\xff"), None);
    }

    #[test]
    fn dates_out_of_the_formats_range_are_held_within_it() {
        assert_eq!(http_date(-5), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(i64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
    }
}

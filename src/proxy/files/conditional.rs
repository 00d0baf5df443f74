//! Conditional requests on a file (RFC 9110 §13) in nginx's order and with its rules
//! (`ngx_http_not_modified_filter_module.c`): `If-Unmodified-Since`, then `If-Match`
//! (either failing: 412); then, when `If-Modified-Since` and/or `If-None-Match` are
//! present, every one present must say "not modified" for a 304 (unlike RFC 9110
//! §13.2.2, `If-None-Match` does not override `If-Modified-Since`). A date matches only
//! when it equals the mtime (nginx's `if_modified_since exact`); an unreadable date
//! never does. `If-Range` is read here too.

use http::header::{IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};
use http::HeaderMap;

use super::etag::parse_date;

/// What the request's conditions make of a 200.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Proceed,
    NotModified,
    PreconditionFailed,
}

/// The verdict for a file whose `ETag` is `etag` and mtime `mtime` (seconds). A header
/// sent twice counts by its first line.
pub(super) fn check(headers: &HeaderMap, etag: &[u8], mtime: i64) -> Verdict {
    if let Some(since) = headers.get(IF_UNMODIFIED_SINCE) {
        // An unreadable date is -1: older than any file, so the condition fails.
        if parse_date(since.as_bytes()).unwrap_or(-1) < mtime {
            return Verdict::PreconditionFailed;
        }
    }
    if let Some(list) = headers.get(IF_MATCH) {
        if !matches(list.as_bytes(), etag, false) {
            return Verdict::PreconditionFailed;
        }
    }
    let since = headers.get(IF_MODIFIED_SINCE);
    let none_match = headers.get(IF_NONE_MATCH);
    if since.is_none() && none_match.is_none() {
        return Verdict::Proceed;
    }
    if since.is_some_and(|since| parse_date(since.as_bytes()) != Some(mtime)) {
        return Verdict::Proceed;
    }
    if none_match.is_some_and(|list| !matches(list.as_bytes(), etag, true)) {
        return Verdict::Proceed;
    }
    Verdict::NotModified
}

/// `If-Range`: a value ending `"` must be the `ETag` byte for byte; any other, a date
/// equal to the mtime. `false`: the whole file is sent.
pub(super) fn if_range(value: &[u8], etag: &[u8], mtime: i64) -> bool {
    if value.len() >= 2 && value.last() == Some(&b'"') {
        return value == etag;
    }
    parse_date(value) == Some(mtime)
}

/// nginx's `ngx_http_test_if_match`: `*`, or a comma-separated list holding `etag`;
/// `weak` (If-None-Match) strips a `W/` from either side first.
fn matches(list: &[u8], etag: &[u8], weak: bool) -> bool {
    if list == b"*" {
        return true;
    }
    let etag = match etag.strip_prefix(b"W/") {
        Some(stripped) if weak && etag.len() > 2 => stripped,
        _ => etag,
    };
    let mut rest = list;
    while !rest.is_empty() {
        if weak && rest.len() > 2 && rest.starts_with(b"W/") {
            rest = &rest[2..];
        }
        if etag.len() > rest.len() {
            return false;
        }
        if rest.starts_with(etag) {
            let after = &rest[etag.len()..];
            let after = trim_start(after, b" \t");
            if after.is_empty() || after[0] == b',' {
                return true;
            }
        }
        let next = rest.iter().position(|&b| b == b',').unwrap_or(rest.len());
        rest = trim_start(&rest[next..], b" \t,");
    }
    false
}

fn trim_start<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    let skip = bytes.iter().take_while(|b| set.contains(b)).count();
    &bytes[skip..]
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use Verdict::{NotModified, PreconditionFailed, Proceed};

    const ETAG: &[u8] = b"\"5f5e1000-400\"";
    const MTIME: i64 = 0x5f5e_1000;
    const DATE: &str = "Sun, 13 Sep 2020 12:26:40 GMT";
    const EARLIER: &str = "Sun, 13 Sep 2020 12:26:39 GMT";
    const LATER: &str = "Sun, 13 Sep 2020 12:26:41 GMT";

    fn verdict(lines: &[(&'static str, &str)]) -> Verdict {
        let mut headers = HeaderMap::new();
        for (name, value) in lines {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        check(&headers, ETAG, MTIME)
    }

    #[test]
    fn the_date_is_the_mtime() {
        assert_eq!(super::super::etag::http_date(MTIME), DATE);
    }

    #[test]
    fn if_unmodified_since_fails_for_an_earlier_or_unreadable_date() {
        assert_eq!(verdict(&[("if-unmodified-since", DATE)]), Proceed);
        assert_eq!(verdict(&[("if-unmodified-since", LATER)]), Proceed);
        assert_eq!(verdict(&[("if-unmodified-since", EARLIER)]), PreconditionFailed);
        assert_eq!(verdict(&[("if-unmodified-since", "soon")]), PreconditionFailed);
    }

    #[test]
    fn if_match_is_strong_and_takes_star_and_lists() {
        assert_eq!(verdict(&[("if-match", "*")]), Proceed);
        assert_eq!(verdict(&[("if-match", "\"5f5e1000-400\"")]), Proceed);
        assert_eq!(verdict(&[("if-match", "\"x\", \"5f5e1000-400\"")]), Proceed);
        assert_eq!(verdict(&[("if-match", "W/\"5f5e1000-400\"")]), PreconditionFailed);
        assert_eq!(verdict(&[("if-match", "\"other\"")]), PreconditionFailed);
    }

    #[test]
    fn the_412s_come_before_any_304() {
        let lines = [("if-match", "\"other\""), ("if-none-match", "*")];
        assert_eq!(verdict(&lines), PreconditionFailed);
        let lines = [("if-unmodified-since", EARLIER), ("if-modified-since", DATE)];
        assert_eq!(verdict(&lines), PreconditionFailed);
    }

    #[test]
    fn if_none_match_is_weak_and_takes_star_and_lists() {
        for list in [
            "*",
            "\"5f5e1000-400\"",
            "W/\"5f5e1000-400\"",
            "\"a\", W/\"5f5e1000-400\"",
            "\"a\",\"5f5e1000-400\" ",
            "\"a\" ,\t\"5f5e1000-400\"",
        ] {
            assert_eq!(verdict(&[("if-none-match", list)]), NotModified, "{list}");
        }
        for list in ["\"a\"", "\"5f5e1000-400\"x", "\"5f5e1000-40\"", ""] {
            assert_eq!(verdict(&[("if-none-match", list)]), Proceed, "{list}");
        }
    }

    #[test]
    fn if_modified_since_matches_only_the_exact_date() {
        assert_eq!(verdict(&[("if-modified-since", DATE)]), NotModified);
        assert_eq!(verdict(&[("if-modified-since", LATER)]), Proceed);
        assert_eq!(verdict(&[("if-modified-since", EARLIER)]), Proceed);
        assert_eq!(verdict(&[("if-modified-since", "garbage")]), Proceed);
    }

    #[test]
    fn every_condition_present_must_say_not_modified() {
        let both = |date, tag| verdict(&[("if-modified-since", date), ("if-none-match", tag)]);
        assert_eq!(both(DATE, "\"5f5e1000-400\""), NotModified);
        assert_eq!(both(LATER, "\"5f5e1000-400\""), Proceed, "INM does not override IMS");
        assert_eq!(both(DATE, "\"a\""), Proceed);
    }

    #[test]
    fn if_range_is_the_exact_etag_or_the_exact_date() {
        assert!(if_range(ETAG, ETAG, MTIME));
        assert!(!if_range(b"W/\"5f5e1000-400\"", ETAG, MTIME));
        assert!(!if_range(b"\"a\"", ETAG, MTIME));
        assert!(if_range(DATE.as_bytes(), ETAG, MTIME));
        assert!(!if_range(LATER.as_bytes(), ETAG, MTIME));
        assert!(!if_range(b"nonsense", ETAG, MTIME));
    }
}

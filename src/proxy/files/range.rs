//! `Range: bytes=…` (RFC 9110 §14.2) as nginx 1.31's range filter reads it
//! (`ngx_http_range_parse`): bad syntax or a number past `i64` is unsatisfiable (416),
//! not ignored; ranges are kept in the order asked, never merged; several ranges that
//! add up to more than the file, or whose parts' headers would (`size + 256·n > len +
//! 4096`), get the whole file instead, the one defence against overlapping ranges.

/// One range: bytes `start..end` (`end` exclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub start: u64,
    pub end: u64,
}

/// What a `Range` header asks of a file of a given length.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ranges {
    /// The whole file: no usable `Range`, or one nginx answers with a 200.
    Full,
    Single(Span),
    Multi(Vec<Span>),
    /// 416, with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

/// What `header` asks of a file `len` bytes long. A header that does not start
/// `bytes=` (in any case), or is shorter than 7 bytes, is ignored.
pub(super) fn parse(header: &[u8], len: u64) -> Ranges {
    if header.len() < 7 || !header[..6].eq_ignore_ascii_case(b"bytes=") {
        return Ranges::Full;
    }
    let Ok(len) = i64::try_from(len) else {
        return Ranges::Full;
    };
    match spans(&header[6..], len) {
        Err(verdict) => verdict,
        Ok((spans, _)) if spans.is_empty() => Ranges::Unsatisfiable,
        Ok((mut spans, _)) if spans.len() == 1 => match spans.pop() {
            Some(span) => Ranges::Single(span),
            None => Ranges::Unsatisfiable,
        },
        Ok((spans, size)) => {
            let count = i64::try_from(spans.len()).unwrap_or(i64::MAX);
            let headers = count.saturating_mul(256);
            if size > len || size.saturating_add(headers) > len.saturating_add(4096) {
                Ranges::Full
            } else {
                Ranges::Multi(spans)
            }
        }
    }
}

/// The byte at `at`, or 0 past the end (nginx reads the header's terminating NUL).
fn at(text: &[u8], i: usize) -> u8 {
    text.get(i).copied().unwrap_or(0)
}

fn skip_spaces(text: &[u8], i: &mut usize) {
    while at(text, *i) == b' ' {
        *i += 1;
    }
}

/// Digits at `i` as an `i64`: `None` on an overflow.
fn number(text: &[u8], i: &mut usize) -> Option<i64> {
    let mut value: i64 = 0;
    while at(text, *i).is_ascii_digit() {
        let digit = i64::from(at(text, *i) - b'0');
        value = value.checked_mul(10)?.checked_add(digit)?;
        *i += 1;
    }
    Some(value)
}

/// The ranges kept and their total size; `Err` with the verdict that ends the parse.
fn spans(text: &[u8], len: i64) -> Result<(Vec<Span>, i64), Ranges> {
    let mut i = 0;
    let mut spans = Vec::new();
    let mut size: i64 = 0;
    loop {
        skip_spaces(text, &mut i);
        let (start, end) = one(text, &mut i, len)?;
        if start < end {
            let span = Span {
                start: start.unsigned_abs(),
                end: end.unsigned_abs(),
            };
            spans.push(span);
            size = size.checked_add(end - start).ok_or(Ranges::Unsatisfiable)?;
        } else if start == 0 {
            // An empty file's `0-`: nginx answers with the whole (empty) file.
            return Err(Ranges::Full);
        }
        let separator = at(text, i);
        i += 1;
        if separator != b',' {
            return Ok((spans, size));
        }
    }
}

/// One range spec at `i` as `(start, end)` with `end` exclusive and clamped to `len`.
fn one(text: &[u8], i: &mut usize, len: i64) -> Result<(i64, i64), Ranges> {
    const BAD: Ranges = Ranges::Unsatisfiable;
    let suffix = at(text, *i) == b'-';
    let mut start = 0;
    if suffix {
        *i += 1;
    } else {
        if !at(text, *i).is_ascii_digit() {
            return Err(BAD);
        }
        start = number(text, i).ok_or(BAD)?;
        skip_spaces(text, i);
        if at(text, *i) != b'-' {
            return Err(BAD);
        }
        *i += 1;
        skip_spaces(text, i);
        if matches!(at(text, *i), b',' | 0) {
            return Ok((start, len));
        }
    }
    if !at(text, *i).is_ascii_digit() {
        return Err(BAD);
    }
    let mut end = number(text, i).ok_or(BAD)?;
    skip_spaces(text, i);
    if !matches!(at(text, *i), b',' | 0) {
        return Err(BAD);
    }
    if suffix {
        start = if end < len { len - end } else { 0 };
        end = len - 1;
    }
    let end = if end >= len { len } else { end + 1 };
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ranges::{Full, Multi, Single, Unsatisfiable};

    fn span(start: u64, end: u64) -> Span {
        Span { start, end }
    }

    fn parsed(header: &str, len: u64) -> Ranges {
        parse(header.as_bytes(), len)
    }

    #[test]
    fn a_header_not_starting_bytes_is_ignored() {
        assert_eq!(parsed("items=0-1", 10), Full);
        assert_eq!(parsed("bytes=", 10), Full, "shorter than 7 bytes");
        assert_eq!(parsed("BYTES=0-1", 10), Single(span(0, 2)));
    }

    #[test]
    fn single_ranges_clamp_their_end_and_read_suffixes() {
        assert_eq!(parsed("bytes=0-0", 10), Single(span(0, 1)));
        assert_eq!(parsed("bytes=2-", 10), Single(span(2, 10)));
        assert_eq!(parsed("bytes=2-1000", 10), Single(span(2, 10)));
        assert_eq!(parsed("bytes=-3", 10), Single(span(7, 10)));
        assert_eq!(parsed("bytes=-30", 10), Single(span(0, 10)));
        assert_eq!(parsed("bytes= 1 - 2 ", 10), Single(span(1, 3)), "spaces");
    }

    #[test]
    fn bad_syntax_and_overflow_are_unsatisfiable_not_ignored() {
        for header in [
            "bytes=abc",
            "bytes=1-2x",
            "bytes=1",
            "bytes=--1",
            "bytes=1-2,",
            "bytes=1-2;3-4",
            "bytes=99999999999999999999-",
            "bytes=0-99999999999999999999",
            "bytes=-99999999999999999999",
            "bytes=\t1-2",
        ] {
            assert_eq!(parsed(header, 10), Unsatisfiable, "{header}");
        }
        assert_eq!(
            parsed("bytes=9223372036854775807-", 10),
            Unsatisfiable,
            "i64::MAX parses, starts past the end"
        );
    }

    #[test]
    fn ranges_past_the_end_are_dropped_and_none_left_is_unsatisfiable() {
        assert_eq!(parsed("bytes=10-", 10), Unsatisfiable);
        assert_eq!(parsed("bytes=5-2", 10), Unsatisfiable);
        assert_eq!(parsed("bytes=-0", 10), Unsatisfiable);
        assert_eq!(parsed("bytes=20-30,2-3", 10), Single(span(2, 4)));
    }

    #[test]
    fn an_empty_files_ranges_give_the_whole_empty_file() {
        assert_eq!(parsed("bytes=0-", 0), Full);
        assert_eq!(parsed("bytes=0-5", 0), Full);
        assert_eq!(parsed("bytes=-5", 0), Full);
        assert_eq!(parsed("bytes=1-", 0), Unsatisfiable);
    }

    #[test]
    fn several_ranges_stay_in_order_unmerged() {
        assert_eq!(
            parsed("bytes=5-6,0-1", 10_000),
            Multi(vec![span(5, 7), span(0, 2)])
        );
        assert_eq!(
            parsed("bytes=0-1,0-1", 10_000),
            Multi(vec![span(0, 2), span(0, 2)])
        );
    }

    #[test]
    fn overlapping_ranges_beyond_the_length_get_the_whole_file() {
        assert_eq!(parsed("bytes=0-7,2-9", 10), Full, "16 bytes of 10");
        // 1.31's rule: 3 bytes + 256·3 > 100 + 4096 is false; 20 ranges of 1 byte of a
        // 100-byte file: 20 + 5120 > 4196.
        assert_eq!(
            parsed("bytes=0-0,1-1,2-2", 100),
            Multi(vec![span(0, 1), span(1, 2), span(2, 3)])
        );
        let many: Vec<String> = (0..20).map(|i| format!("{i}-{i}")).collect();
        assert_eq!(parsed(&format!("bytes={}", many.join(",")), 100), Full);
    }
}

//! nginx's normalization of a request path before matching: percent-decoding, merged
//! slashes, `.` and `..` resolved, and the paths refused on the way (400).

use std::borrow::Cow;
use std::fmt;

/// Why a request path was refused (answered with 400, as nginx does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadPath {
    /// The path does not start with `/` (e.g. `*` or empty).
    NotAbsolute,
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// A NUL byte, literal or decoded from `%00`.
    Nul,
    /// A `..` segment that would climb above `/`.
    AboveRoot,
}

impl fmt::Display for BadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadPath::NotAbsolute => "path does not start with '/'",
            BadPath::BadEscape => "invalid percent escape in path",
            BadPath::Nul => "NUL byte in path",
            BadPath::AboveRoot => "'..' above the root in path",
        })
    }
}

impl std::error::Error for BadPath {}

/// nginx's URI normalization of the path part (no query): percent-decoding, then merging repeated
/// slashes and resolving `.` and `..` segments on the decoded bytes (so `%2e%2e` and `%2F` count,
/// as in nginx). Returns the input borrowed when nothing changes, the common case, without
/// allocating. Used only for matching; the original path is what goes upstream. The result is
/// bytes, not text: `/%ff%fe` decodes to no UTF-8 and is routed all the same, as nginx does.
pub fn normalize_path(raw_path: &str) -> Result<Cow<'_, [u8]>, BadPath> {
    let bytes = raw_path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(BadPath::NotAbsolute);
    }
    if is_normal(bytes)? {
        return Ok(Cow::Borrowed(bytes));
    }
    let decoded = percent_decode(bytes)?;
    resolve_segments(&decoded).map(Cow::Owned)
}

/// True when normalizing would change nothing: no `%`, no `//`, no `.` or `..` segment.
fn is_normal(bytes: &[u8]) -> Result<bool, BadPath> {
    let mut normal = true;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            0 => return Err(BadPath::Nul),
            b'%' => normal = false,
            b'/' => {
                let rest = &bytes[i + 1..];
                if rest.first() == Some(&b'/') || dot_segment_len(rest) > 0 {
                    normal = false;
                }
            }
            _ => {}
        }
    }
    Ok(normal)
}

/// 1 if `rest` starts with a `.` segment, 2 for `..`, else 0. Looks at three bytes at most.
#[inline]
fn dot_segment_len(rest: &[u8]) -> usize {
    match rest {
        [b'.'] | [b'.', b'/', ..] => 1,
        [b'.', b'.'] | [b'.', b'.', b'/', ..] => 2,
        _ => 0,
    }
}

/// `%XX` escapes decoded; a bad escape or a NUL (literal or decoded) is refused. The admin
/// API decodes its query values with it too.
pub(crate) fn percent_decode(bytes: &[u8]) -> Result<Vec<u8>, BadPath> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let decoded = if b == b'%' {
            let hi = bytes.get(i + 1).and_then(|&h| hex(h));
            let lo = bytes.get(i + 2).and_then(|&l| hex(l));
            match (hi, lo) {
                (Some(hi), Some(lo)) => {
                    i += 3;
                    (hi << 4) | lo
                }
                _ => return Err(BadPath::BadEscape),
            }
        } else {
            i += 1;
            b
        };
        if decoded == 0 {
            return Err(BadPath::Nul);
        }
        out.push(decoded);
    }
    Ok(out)
}

#[inline]
fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// RFC 3986 remove_dot_segments plus slash merging. `decoded` starts with `/`. The output always
/// ends with `/` after a non-final segment, so a trailing `/`, `/.` or `/..` leaves a trailing `/`.
fn resolve_segments(decoded: &[u8]) -> Result<Vec<u8>, BadPath> {
    let mut out = Vec::with_capacity(decoded.len());
    out.push(b'/');
    let mut segments = decoded[1..].split(|&b| b == b'/').peekable();
    while let Some(seg) = segments.next() {
        match seg {
            b"" | b"." => {}
            b".." => {
                if out.len() == 1 {
                    return Err(BadPath::AboveRoot);
                }
                out.pop();
                let parent_end = out.iter().rposition(|&b| b == b'/').map_or(1, |p| p + 1);
                out.truncate(parent_end);
            }
            _ => {
                out.extend_from_slice(seg);
                if segments.peek().is_some() {
                    out.push(b'/');
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_paths_are_borrowed_unchanged() {
        for p in [
            "/",
            "/a/b",
            "/a/b/",
            "/a.b/..c/...",
            "/.well-known/x",
            "/a/.b",
        ] {
            let n = normalize_path(p);
            assert!(
                matches!(n, Ok(Cow::Borrowed(b)) if b == p.as_bytes()),
                "{p}"
            );
        }
    }

    #[test]
    fn normalize_decodes_merges_and_resolves_dots() {
        for (raw, want) in [
            ("//a///b", "/a/b"),
            ("/a/./b/.", "/a/b/"),
            ("/a/b/../c", "/a/c"),
            ("/a/b/..", "/a/"),
            ("/a/..", "/"),
            ("/%41%62c", "/Abc"),
            ("/a%2Fb", "/a/b"),
            ("/a/%2e%2E/b", "/b"),
            ("/a%2F..%2Fb", "/b"),
            ("/caf%C3%A9", "/café"),
            ("/%25", "/%"),
        ] {
            assert_eq!(normalize_path(raw).as_deref(), Ok(want.as_bytes()), "{raw}");
        }
    }

    #[test]
    fn normalize_rejects_bad_paths() {
        use BadPath::*;
        for (raw, why) in [
            ("", NotAbsolute),
            ("a/b", NotAbsolute),
            ("*", NotAbsolute),
            ("/%", BadEscape),
            ("/%4", BadEscape),
            ("/%zz", BadEscape),
            ("/a%00b", Nul),
            ("/a\0b", Nul),
            ("/..", AboveRoot),
            ("/a/../..", AboveRoot),
            ("/%2e%2e/etc", AboveRoot),
        ] {
            assert_eq!(normalize_path(raw), Err(why), "{raw:?}");
        }
    }
}

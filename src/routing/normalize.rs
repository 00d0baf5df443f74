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
    resolve_segments(&decoded, |b| b).map(Cow::Owned)
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
    decode_with(bytes, |byte, _| byte)
}

/// A byte of a normalized path, and whether it arrived percent-encoded. Only a rewrite
/// needs to know: a reserved byte such as `?` that arrived as `%3F` must go upstream
/// encoded, or it would end the path there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathByte {
    pub byte: u8,
    pub escaped: bool,
}

/// [`normalize_path`]'s result byte for byte (the same bytes, in the same places), each
/// marked with whether it arrived percent-encoded.
pub(crate) fn normalize_marked(raw_path: &str) -> Result<Vec<PathByte>, BadPath> {
    let bytes = raw_path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(BadPath::NotAbsolute);
    }
    let decoded = decode_with(bytes, |byte, escaped| PathByte { byte, escaped })?;
    resolve_segments(&decoded, |b| b.byte)
}

/// Decodes `%XX` escapes, making each byte with `make(byte, arrived_escaped)`.
fn decode_with<T>(bytes: &[u8], make: impl Fn(u8, bool) -> T) -> Result<Vec<T>, BadPath> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escaped = b == b'%';
        let decoded = if escaped {
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
        out.push(make(decoded, escaped));
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

/// RFC 3986 remove_dot_segments plus slash merging, over bytes that `byte` reads (a `/`
/// that arrived as `%2F` separates segments too, as in nginx). `decoded` starts with `/`.
/// The output always ends with `/` after a non-final segment, so a trailing `/`, `/.` or
/// `/..` leaves a trailing `/`.
fn resolve_segments<T: Copy>(decoded: &[T], byte: impl Fn(T) -> u8) -> Result<Vec<T>, BadPath> {
    let mut out = Vec::with_capacity(decoded.len());
    out.push(decoded[0]);
    let mut start = 1;
    while start <= decoded.len() {
        let end = decoded[start..]
            .iter()
            .position(|&t| byte(t) == b'/')
            .map_or(decoded.len(), |at| start + at);
        let segment = &decoded[start..end];
        match (segment.len(), segment.iter().all(|&t| byte(t) == b'.')) {
            (0, _) | (1, true) => {}
            (2, true) => {
                if out.len() == 1 {
                    return Err(BadPath::AboveRoot);
                }
                out.pop();
                let parent_end = out
                    .iter()
                    .rposition(|&t| byte(t) == b'/')
                    .map_or(1, |p| p + 1);
                out.truncate(parent_end);
            }
            _ => {
                out.extend_from_slice(segment);
                if let Some(&separator) = decoded.get(end) {
                    out.push(separator);
                }
            }
        }
        start = end + 1;
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

    #[test]
    fn marked_normalization_is_the_same_bytes_and_tells_which_arrived_escaped() {
        for raw in [
            "/",
            "//a///b",
            "/a/./b/.",
            "/a/b/..",
            "/a%2Fb",
            "/a%2F..%2Fb",
            "/a/%2e%2E/b",
            "/x%3fy=1%26z",
            "/caf%C3%A9/",
        ] {
            let marked = normalize_marked(raw).expect("valid");
            let bytes: Vec<u8> = marked.iter().map(|b| b.byte).collect();
            assert_eq!(Ok(&bytes[..]), normalize_path(raw).as_deref(), "{raw}");
        }
        let marked = normalize_marked("/a%2Fb%3F/c?").expect("valid");
        let escaped: Vec<bool> = marked.iter().map(|b| b.escaped).collect();
        assert_eq!(
            escaped,
            [false, false, true, false, true, false, false, false]
        );
        assert_eq!(normalize_marked("/a/../.."), Err(BadPath::AboveRoot));
        assert_eq!(normalize_marked("/%zz"), Err(BadPath::BadEscape));
    }
}

//! Path normalization and routing on arbitrary request paths: never a panic, and the
//! normalized path agrees with a slow model of nginx's rules (decode every `%XX`, then
//! resolve `.`, `..` and repeated slashes segment by segment). Thousands of cases per
//! run; the generator mixes the characters that matter (`/`, `.`, `%`, hex digits) with
//! arbitrary bytes, percent-encoded.

use crate::support;

use proptest::prelude::*;
use tollgate::routing::{normalize_path, BadPath, Pattern, Router};

/// The model: decode first, then walk the segments with a stack.
fn model(raw: &str) -> Result<Vec<u8>, BadPath> {
    let raw = raw.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(BadPath::NotAbsolute);
    }
    let mut decoded = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let byte = if raw[i] == b'%' {
            let hex = raw
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            i += 3;
            hex.ok_or(BadPath::BadEscape)?
        } else {
            i += 1;
            raw[i - 1]
        };
        if byte == 0 {
            return Err(BadPath::Nul);
        }
        decoded.push(byte);
    }
    let segments: Vec<&[u8]> = decoded[1..].split(|&b| b == b'/').collect();
    let mut stack: Vec<&[u8]> = Vec::new();
    for segment in &segments {
        match *segment {
            b"" | b"." => {}
            b".." => {
                stack.pop().ok_or(BadPath::AboveRoot)?;
            }
            other => stack.push(other),
        }
    }
    // The path ends in a slash when its last segment named no file: `/a/`, `/a/.`,
    // `/a/b/..`.
    let ends_in_a_name = !matches!(segments.last(), Some(&(b"" | b"." | b"..")));
    let mut out = vec![b'/'];
    out.extend(stack.join(&b'/'));
    if !stack.is_empty() && !ends_in_a_name {
        out.push(b'/');
    }
    Ok(out)
}

/// Paths built from the pieces that matter, plus percent-encoded arbitrary bytes.
fn raw_path() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => Just("/".to_owned()),
        3 => Just(".".to_owned()),
        2 => Just("..".to_owned()),
        2 => "[a-zA-Z0-9_~-]{1,4}",
        2 => any::<u8>().prop_map(|b| format!("%{b:02x}")),
        1 => any::<u8>().prop_map(|b| format!("%{b:02X}")),
        1 => Just("%2e".to_owned()),
        1 => Just("%2F".to_owned()),
        1 => Just("%".to_owned()),
        1 => "%[0-9a-zA-Z]{0,2}",
        1 => any::<char>().prop_map(String::from),
    ];
    (
        prop::bool::weighted(0.95),
        prop::collection::vec(piece, 0..24),
    )
        .prop_map(|(slash, pieces)| {
            let start = if slash { "/" } else { "" };
            format!("{start}{}", pieces.concat())
        })
}

/// A router with every kind of location, built once.
fn router() -> &'static Router {
    static ROUTER: std::sync::OnceLock<Router> = std::sync::OnceLock::new();
    ROUTER.get_or_init(|| {
        Router::new(vec![
            Pattern::Exact("/".to_owned()),
            Pattern::Prefix("/a".to_owned()),
            Pattern::PriorityPrefix("/static/".to_owned()),
            Pattern::Prefix("/αβγ/long/prefix/".to_owned()),
            Pattern::regex(r"(?i)\.(php|cgi)$", false).unwrap(),
            Pattern::regex(r"^/u/.+/edit$", false).unwrap(),
        ])
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn normalizing_agrees_with_the_model(raw in raw_path()) {
        let _shared = support::shared();
        // Which error comes first does not matter (each is a 400); the path does.
        let got = normalize_path(&raw).map(|p| p.into_owned()).ok();
        prop_assert_eq!(got, model(&raw).ok(), "{:?}", raw);
    }

    #[test]
    fn a_normalized_path_is_absolute_and_has_no_dot_or_empty_segments(raw in raw_path()) {
        let _shared = support::shared();
        if let Ok(path) = normalize_path(&raw) {
            prop_assert!(path.starts_with(b"/"));
            prop_assert!(!path.contains(&0));
            let inner = &path[1..];
            let segments: Vec<&[u8]> = inner.split(|&b| b == b'/').collect();
            for (n, segment) in segments.iter().enumerate() {
                let last = n + 1 == segments.len();
                prop_assert!(!segment.is_empty() || last, "empty segment in {:?}", path);
                prop_assert!(*segment != b"." && *segment != b"..", "dot segment in {:?}", path);
            }
        }
    }

    #[test]
    fn a_normalized_path_without_escapes_normalizes_to_itself(raw in raw_path()) {
        let _shared = support::shared();
        if let Ok(path) = normalize_path(&raw) {
            if let Ok(text) = std::str::from_utf8(&path) {
                if !text.contains('%') {
                    let again = normalize_path(text).map(|p| p.into_owned());
                    prop_assert_eq!(again, Ok(path.into_owned()));
                }
            }
        }
    }

    #[test]
    fn routing_never_panics_on_any_bytes(path in prop::collection::vec(any::<u8>(), 0..64)) {
        let _shared = support::shared();
        let _ = router().find(&path);
    }
}

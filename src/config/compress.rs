//! `compress` and `precompressed` (DESIGN §17, nginx `gzip`, `gzip_static`; Caddy
//! `encode`): the codings and which answers are compressed.
// The run-time side (proxy/files, proxy/compress) reads these; until it does, issue 36
// wires them in.

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::RawCompress;
use super::suggest::closest;
use super::values;

/// A content coding tollgate compresses with or serves precompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Encoding {
    Gzip,
    Br,
    Zstd,
}

impl Encoding {
    /// The token of `Accept-Encoding` and `Content-Encoding` (`gzip`, `br`, `zstd`).
    pub(crate) fn token(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Br => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// The extension of a precompressed sidecar (`.gz`, `.br`, `.zst`).
    pub(crate) fn extension(self) -> &'static str {
        match self {
            Encoding::Gzip => ".gz",
            Encoding::Br => ".br",
            Encoding::Zstd => ".zst",
        }
    }
}

/// `compress`: on-the-fly compression of a location's answers (files and upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compress {
    /// In order of preference on a tie of the client's q-values.
    pub encodings: Vec<Encoding>,
    /// The media types compressed (`types`).
    pub types: Vec<MediaRange>,
    /// Answers whose known length is below this are sent as they are.
    pub min_length: u64,
}

/// One item of `compress.types`: `"application/json"`, or a family `"text/*"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MediaRange {
    /// A whole type, lower case.
    Exact(String),
    /// `TYPE/*`: the top-level type, lower case, without `/*`.
    Family(String),
}

impl Compress {
    /// Whether an answer of `content_type` (parameters such as `; charset=` ignored,
    /// any case) is compressed.
    pub(crate) fn covers(&self, content_type: &str) -> bool {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        let (top, _) = essence.split_once('/').unwrap_or((essence, ""));
        self.types.iter().any(|range| match range {
            MediaRange::Exact(exact) => essence.eq_ignore_ascii_case(exact),
            MediaRange::Family(family) => top.eq_ignore_ascii_case(family),
        })
    }
}

/// `compress.encodings` when left out: the best first (a tie of q-values goes to it).
const ENCODINGS: [Encoding; 3] = [Encoding::Zstd, Encoding::Br, Encoding::Gzip];
/// `compress.types` when left out: text, and the text-like types of the web. No
/// `text/html` is implied beyond `text/*` (ours: nginx always adds `text/html`).
const TYPES: [&str; 5] = [
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "image/svg+xml",
];
/// `compress.min_length` when left out: shorter answers gain too little.
const MIN_LENGTH: u64 = 1 << 10;

impl Encoding {
    /// The coding spelt `word` in the file (`"gzip"`, `"br"`, `"zstd"`).
    pub(crate) fn parse(word: &str) -> Result<Encoding, String> {
        let all = [Encoding::Gzip, Encoding::Br, Encoding::Zstd];
        if let Some(found) = all.into_iter().find(|e| e.token() == word) {
            return Ok(found);
        }
        let tokens = all.map(Encoding::token);
        Err(match closest(word, tokens) {
            Some(meant) => format!(r#"unknown encoding "{word}": did you mean "{meant}"?"#),
            None => format!(r#"unknown encoding "{word}", expected "gzip", "br" or "zstd""#),
        })
    }
}

/// A list of codings (`compress.encodings`, `precompressed`), none twice; `key` names it
/// in messages.
pub(super) fn encodings(
    list: &Spanned<Vec<Spanned<String>>>,
    key: &str,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Encoding>> {
    let mut found = Vec::new();
    let mut valid = true;
    for word in list.get_ref() {
        match diag.check(word.span(), Encoding::parse(word.get_ref())) {
            Some(encoding) if found.contains(&encoding) => {
                let message = format!(r#""{}" is listed twice in `{key}`"#, word.get_ref());
                diag.error(word.span(), message);
                valid = false;
            }
            Some(encoding) => found.push(encoding),
            None => valid = false,
        }
    }
    valid.then_some(found)
}

/// `compress`, its left-out keys at their defaults.
pub(super) fn compress(
    written: &Spanned<RawCompress>,
    diag: &mut Diagnostics<'_>,
) -> Option<Compress> {
    let raw = written.get_ref();
    let encodings = match &raw.encodings {
        None => Some(ENCODINGS.to_vec()),
        Some(list) if list.get_ref().is_empty() => {
            let message = "`compress.encodings` is empty: leave `compress` out to compress nothing";
            diag.error(list.span(), message);
            None
        }
        Some(list) => encodings(list, "compress.encodings", diag),
    };
    let types = match &raw.types {
        None => Some(TYPES.iter().filter_map(|t| media_range(t).ok()).collect()),
        Some(list) if list.get_ref().is_empty() => {
            let message = "`compress.types` is empty: leave `compress` out to compress nothing";
            diag.error(list.span(), message);
            None
        }
        Some(list) => {
            let mut valid = true;
            let mut types = Vec::new();
            for item in list.get_ref() {
                match diag.check(item.span(), media_range(item.get_ref())) {
                    Some(range) => types.push(range),
                    None => valid = false,
                }
            }
            valid.then_some(types)
        }
    };
    let min_length = match &raw.min_length {
        None => Some(MIN_LENGTH),
        Some(value) => diag.check(value.span(), values::size(value.get_ref())),
    };
    Some(Compress {
        encodings: encodings?,
        types: types?,
        min_length: min_length?,
    })
}

/// `"type/subtype"` or `"type/*"`, lower-cased.
fn media_range(written: &str) -> Result<MediaRange, String> {
    let lower = written.trim().to_ascii_lowercase();
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match lower.split_once('/') {
        Some((top, "*")) if token(top) => Ok(MediaRange::Family(top.to_owned())),
        Some((top, sub)) if token(top) && token(sub) => Ok(MediaRange::Exact(lower)),
        _ => Err(format!(
            r#"invalid media type "{written}": expected "type/subtype" or "type/*", e.g. "text/css""#
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_match_the_essence_in_any_case() {
        let compress = Compress {
            encodings: vec![Encoding::Gzip],
            types: vec![
                MediaRange::Exact("application/json".into()),
                MediaRange::Family("text".into()),
            ],
            min_length: 0,
        };
        assert!(compress.covers("application/JSON; charset=utf-8"));
        assert!(compress.covers("text/css"));
        assert!(!compress.covers("image/png"));
        assert!(!compress.covers("application/jsonx"));
        assert!(!compress.covers(""));
    }

    #[test]
    fn media_ranges_are_exact_or_a_family_in_lower_case() {
        assert_eq!(media_range("Text/*"), Ok(MediaRange::Family("text".into())));
        assert_eq!(
            media_range("image/SVG+xml"),
            Ok(MediaRange::Exact("image/svg+xml".into()))
        );
        for bad in ["text", "*/*", "text/", "/html", "text/html; charset=utf-8"] {
            assert!(media_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_misspelt_encoding_gets_a_guess() {
        assert_eq!(Encoding::parse("zstd"), Ok(Encoding::Zstd));
        assert_eq!(
            Encoding::parse("gzp").unwrap_err(),
            r#"unknown encoding "gzp": did you mean "gzip"?"#
        );
        assert!(Encoding::parse("deflate").unwrap_err().contains(r#"expected "gzip""#));
    }
}

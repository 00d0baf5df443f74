//! `compress` and `precompressed` (DESIGN §17, nginx `gzip`, `gzip_static`; Caddy
//! `encode`): the codings and which answers are compressed.
// Interfaces only until issue 36 wires them in.
#![allow(dead_code)]

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
}

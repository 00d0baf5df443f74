//! nginx location matching: which `[[location]]` a request path belongs to, as data plus an ordering.
//!
//! The precedence is nginx's (`location` directive docs): an exact `=` match wins at once; otherwise
//! the longest matching prefix is remembered; if that one is `^~` it wins; otherwise regexes are
//! tried in file order and the first match wins; otherwise the remembered prefix wins.
//! [`Precedence`] writes that down as an ordering over the candidates that survive the
//! longest-prefix step, so "best match = max"; the tests check the fast [`Router::find`] against a
//! model that collects every candidate and takes the max.
//!
//! The path matched is normalized first, as nginx does ([`normalize_path`], in `normalize`).

use std::cmp::Reverse;
use std::fmt;

mod normalize;
pub mod sites;
mod slash;

pub use normalize::normalize_path;
pub use slash::{escaped_target, slashed_target};
pub(crate) use normalize::{normalize_marked, percent_decode, PathByte};
// Only the tests name the error (tests/it/path_properties.rs).
#[cfg(feature = "testing")]
pub use normalize::BadPath;

/// One location's `match`: the config layer parses it straight into this, and the
/// router and the metrics labels both read it.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// `= /x`: the path must equal `/x`.
    Exact(String),
    /// `^~ /x`: a prefix that, when it is the longest matching one, stops the regex search.
    PriorityPrefix(String),
    /// `/x`: a plain prefix.
    Prefix(String),
    /// `~ re` or `~* re`. The caller compiled it, case-insensitive for `~*`; the flag is
    /// kept only to write the pattern back out (the compiled source does not show it). It
    /// matches bytes: a decoded path need not be UTF-8 (`/%ff`), as in nginx.
    Regex {
        regex: regex::bytes::Regex,
        case_insensitive: bool,
    },
}

impl Pattern {
    /// `~ source` (or `~* source` when `case_insensitive`), compiled.
    pub fn regex(source: &str, case_insensitive: bool) -> Result<Pattern, regex::Error> {
        let regex = regex::bytes::RegexBuilder::new(source)
            .case_insensitive(case_insensitive)
            .build()?;
        Ok(Pattern::Regex {
            regex,
            case_insensitive,
        })
    }
}

/// The pattern as nginx writes it (`= /login`, `^~ /static/`, `/api/`, `~* \.php$`): the
/// `location` label of metrics and logs.
impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(path) => write!(f, "= {path}"),
            Pattern::PriorityPrefix(path) => write!(f, "^~ {path}"),
            Pattern::Prefix(path) => f.write_str(path),
            Pattern::Regex {
                regex,
                case_insensitive: false,
            } => write!(f, "~ {}", regex.as_str()),
            // A leading `(?i)` is dropped: `~*` already says it.
            Pattern::Regex {
                regex,
                case_insensitive: true,
            } => write!(f, "~* {}", regex.as_str().trim_start_matches("(?i)")),
        }
    }
}

/// How strongly a location matched. Derived `Ord` follows the variant order, so `Exact` beats
/// everything, a winning `^~` beats regexes, and a regex beats a plain prefix. Only the longest
/// matching prefix is ever a candidate: nginx picks it before comparing kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Precedence {
    /// The longest matching prefix was a plain one; it wins only if no regex matches.
    Prefix,
    /// A regex matched (among regexes the earlier in the file wins: see [`Match`]).
    Regex,
    /// The longest matching prefix was `^~`.
    PriorityPrefix,
    /// `=` matched.
    Exact,
}

/// The summary of one match: what kind it was and which location it names. Ordered by
/// precedence, then earlier location first (the first matching regex; the first of duplicates),
/// so the best candidate is the max.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Match {
    pub precedence: Precedence,
    pub location: usize,
}

impl Ord for Match {
    fn cmp(&self, other: &Match) -> std::cmp::Ordering {
        (self.precedence, Reverse(self.location)).cmp(&(other.precedence, Reverse(other.location)))
    }
}

impl PartialOrd for Match {
    fn partial_cmp(&self, other: &Match) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One prefix location. `head`/`mask` hold its first 8 bytes as a word, so most non-matching
/// prefixes are ruled out by one AND and compare instead of a `memcmp` call.
#[derive(Debug)]
struct PrefixEntry {
    head: u64,
    mask: u64,
    prefix: Box<str>,
    summary: Match,
}

impl PrefixEntry {
    fn new(prefix: String, summary: Match) -> PrefixEntry {
        let len = prefix.len().min(8);
        PrefixEntry {
            head: head_word(prefix.as_bytes()),
            mask: u64::MAX.checked_shr(64 - 8 * len as u32).unwrap_or(0),
            prefix: prefix.into_boxed_str(),
            summary,
        }
    }

    /// Whether `path` (whose `head_word` is `path_head`, and which is at least as long as the
    /// prefix) starts with this prefix.
    #[inline]
    fn matches(&self, path: &[u8], path_head: u64) -> bool {
        let prefix = self.prefix.as_bytes();
        path_head & self.mask == self.head
            && (prefix.len() <= 8 || path.get(8..prefix.len()) == prefix.get(8..))
    }
}

/// The first 8 bytes of `bytes` as a little-endian word, zero-padded.
#[inline]
fn head_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let len = bytes.len().min(8);
    word[..len].copy_from_slice(&bytes[..len]);
    u64::from_le_bytes(word)
}

/// A compiled set of locations. Built once per config snapshot; `find` runs per request and does
/// not allocate.
#[derive(Debug)]
pub struct Router {
    /// `=` locations sorted by path (first in file kept on duplicates), binary-searched: a few
    /// memcmps, cheaper than hashing the path for the handful of `=` locations a config has.
    exact: Vec<(Box<[u8]>, usize)>,
    /// Prefix locations, longest first (ties: file order), so the first hit is the longest match.
    prefixes: Vec<PrefixEntry>,
    /// Regex locations in file order.
    regexes: Vec<(regex::bytes::Regex, usize)>,
    /// Paths answered with nginx's trailing-slash 301, sorted, with the location that
    /// answers (`slash.rs`); empty unless [`Router::redirect_slashless`] filled it.
    slashless: Vec<(Box<[u8]>, usize)>,
}

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// The location at this index answers.
    Location(usize),
    /// nginx's 301 to the path with `/` added ([`slashed_target`]), answered in the
    /// name of the location at this index.
    AddSlash(usize),
}

impl Router {
    /// Builds a router; `patterns[i]` is location `i` in file order. Duplicates (which the config
    /// layer should reject) resolve to the first in file order.
    pub fn new(patterns: Vec<Pattern>) -> Router {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        let mut regexes = Vec::new();
        for (location, pattern) in patterns.into_iter().enumerate() {
            let summary = |precedence| Match {
                precedence,
                location,
            };
            match pattern {
                Pattern::Exact(p) => exact.push((p.into_bytes().into_boxed_slice(), location)),
                Pattern::PriorityPrefix(p) => {
                    prefixes.push(PrefixEntry::new(p, summary(Precedence::PriorityPrefix)))
                }
                Pattern::Prefix(p) => {
                    prefixes.push(PrefixEntry::new(p, summary(Precedence::Prefix)))
                }
                Pattern::Regex { regex, .. } => regexes.push((regex, location)),
            }
        }
        // Stable sorts keep file order among equals; dedup keeps the first.
        exact.sort_by(|a, b| a.0.cmp(&b.0));
        exact.dedup_by(|later, first| later.0 == first.0);
        prefixes.sort_by_key(|e| Reverse(e.prefix.len()));
        Router {
            exact,
            prefixes,
            regexes,
            slashless: Vec::new(),
        }
    }

    /// Where a request for an already-normalized path goes: [`find`](Self::find), with
    /// nginx's trailing-slash redirect before the prefixes and regexes are looked at.
    #[inline]
    pub fn route(&self, path: &[u8]) -> Option<Routed> {
        if let Some(m) = self.exact_match(path) {
            return Some(Routed::Location(m.location));
        }
        if let Some(location) = self.slashless(path) {
            return Some(Routed::AddSlash(location));
        }
        self.inexact_match(path).map(|m| Routed::Location(m.location))
    }

    /// The location for an already-normalized path (see [`normalize_path`]), or `None`
    /// (404), by nginx's precedence alone: no trailing-slash redirect. The tests' and
    /// benches' view; requests are routed by [`route`](Self::route).
    #[cfg(any(test, feature = "testing"))]
    #[inline]
    pub fn find(&self, path: &[u8]) -> Option<usize> {
        self.exact_match(path)
            .or_else(|| self.inexact_match(path))
            .map(|m| m.location)
    }

    #[inline]
    fn exact_match(&self, path: &[u8]) -> Option<Match> {
        let i = self.exact.binary_search_by(|(p, _)| (**p).cmp(path)).ok()?;
        Some(Match {
            precedence: Precedence::Exact,
            location: self.exact[i].1,
        })
    }

    /// The best match among prefixes and regexes.
    #[inline]
    fn inexact_match(&self, path: &[u8]) -> Option<Match> {
        let prefix = self.longest_prefix(path);
        if let Some(m) = prefix {
            if m.precedence == Precedence::PriorityPrefix {
                return prefix;
            }
        }
        for (re, location) in &self.regexes {
            if re.is_match(path) {
                return Some(Match {
                    precedence: Precedence::Regex,
                    location: *location,
                });
            }
        }
        prefix
    }

    /// The longest matching prefix. Entries longer than the path cannot match, so the scan starts
    /// at the first entry that fits (binary search on the descending lengths) and stops at the
    /// first hit: a word compare per shorter prefix at worst.
    fn longest_prefix(&self, path: &[u8]) -> Option<Match> {
        let path_head = head_word(path);
        let start = self
            .prefixes
            .partition_point(|e| e.prefix.len() > path.len());
        self.prefixes[start..]
            .iter()
            .find(|e| e.matches(path, path_head))
            .map(|e| e.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A location written as in the config file: `= /x`, `^~ /x`, `/x`, `~ re`, `~* re`.
    fn loc(text: &str) -> Pattern {
        let regex = |re: &str, ci| Pattern::regex(re, ci).expect("test regex");
        match text.split_once(' ') {
            Some(("=", p)) => Pattern::Exact(p.into()),
            Some(("^~", p)) => Pattern::PriorityPrefix(p.into()),
            Some(("~", re)) => regex(re, false),
            Some(("~*", re)) => regex(re, true),
            _ => Pattern::Prefix(text.into()),
        }
    }

    /// "No location" in the tables.
    const NONE: usize = usize::MAX;

    /// The obviously-right model: the longest prefix (first in file on ties) plus every exact
    /// and regex match are the candidates; best = max.
    fn model(patterns: &[Pattern], path: &str) -> Option<usize> {
        let summary = |precedence, location| Match {
            precedence,
            location,
        };
        let longest = patterns
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Pattern::Prefix(s) if path.as_bytes().starts_with(s.as_bytes()) => {
                    Some((s.len(), Reverse(i), Precedence::Prefix))
                }
                Pattern::PriorityPrefix(s) if path.as_bytes().starts_with(s.as_bytes()) => {
                    Some((s.len(), Reverse(i), Precedence::PriorityPrefix))
                }
                _ => None,
            })
            .max()
            .map(|(_, Reverse(i), kind)| summary(kind, i));
        let others = patterns.iter().enumerate().filter_map(|(i, p)| match p {
            Pattern::Exact(s) if s == path => Some(summary(Precedence::Exact, i)),
            Pattern::Regex { regex, .. } if regex.is_match(path.as_bytes()) => {
                Some(summary(Precedence::Regex, i))
            }
            _ => None,
        });
        others.chain(longest).max().map(|m| m.location)
    }

    /// Checks (path, expected location) rows against both the router and the model.
    fn check(locations: &[&str], table: &[(&str, usize)]) {
        let patterns: Vec<Pattern> = locations.iter().map(|l| loc(l)).collect();
        let router = Router::new(patterns.clone());
        for &(path, want) in table {
            let want = (want != NONE).then_some(want);
            assert_eq!(router.find(path.as_bytes()), want, "router, path {path}");
            assert_eq!(model(&patterns, path), want, "model, path {path}");
        }
    }

    #[test]
    fn nginx_documented_example_resolves_like_nginx() {
        let (a, b, c, d, e) = (0, 1, 2, 3, 4);
        let locations = [
            "= /",
            "/",
            "/documents/",
            "^~ /images/",
            r"~* \.(gif|jpg|jpeg)$",
        ];
        let table = [
            ("/", a),
            ("/index.html", b),
            ("/documents/document.html", c),
            ("/images/1.gif", d),
            ("/documents/1.jpg", e),
        ];
        check(&locations, &table);
    }

    #[test]
    fn longest_prefix_wins_regardless_of_file_order() {
        let table = [("/api/v1/x", 0), ("/api/v2", 1), ("/x", 2)];
        check(&["/api/v1/", "/api/", "/"], &table);
        let table = [("/api/v1/x", 2), ("/api/v2", 1), ("/x", 0)];
        check(&["/", "/api/", "/api/v1/"], &table);
    }

    #[test]
    fn first_matching_regex_in_file_order_wins() {
        check(&["~ ^/a", "~ ^/a/b"], &[("/a/b", 0), ("/c", NONE)]);
        check(&["~ ^/a/b", "~ ^/a"], &[("/a/b", 0), ("/a/c", 1)]);
    }

    #[test]
    fn regex_beats_plain_prefix_even_when_the_prefix_is_long() {
        let table = [("/static/images/a.png", 1), ("/static/images/a", 0)];
        check(&["/static/images/", r"~ \.png$"], &table);
    }

    #[test]
    fn case_insensitive_regex_matches_any_case() {
        let table = [("/a.jpg", 1), ("/a.JpG", 1), ("/a.GIF", 2), ("/a.gif", 0)];
        check(&["/", r"~* \.JPG$", r"~ \.GIF$"], &table);
    }

    #[test]
    fn priority_prefix_that_is_not_longest_does_not_block_regexes() {
        let table = [("/img/a.gif", 0), ("/img/raw/a.gif", 2), ("/img/raw/a", 1)];
        check(&["^~ /img/", "/img/raw/", r"~ \.gif$"], &table);
    }

    #[test]
    fn exact_match_does_not_match_sub_paths() {
        let table = [("/login", 0), ("/login/", 1), ("/login2", 1)];
        check(&["= /login", "/"], &table);
    }

    #[test]
    fn exact_match_beats_a_matching_regex() {
        check(&["~ ^/", "= /x"], &[("/x", 1), ("/y", 0)]);
    }

    #[test]
    fn no_match_is_none() {
        check(
            &["= /a", "/b/", "~ ^/c"],
            &[("/d", NONE), ("/", NONE), ("/b", NONE)],
        );
        assert_eq!(Router::new(Vec::new()).find(b"/"), None);
    }

    #[test]
    fn duplicate_locations_resolve_to_the_first_in_file() {
        check(
            &["/a/", "^~ /a/", "= /e", "= /e"],
            &[("/a/x", 0), ("/e", 2)],
        );
    }

    #[test]
    fn router_agrees_with_the_model_on_generated_paths() {
        let locations = [
            "",
            "/a",
            "^~ /a/bb/",
            "/a/bb/ccc/dddd",
            "/a/bb/ccc/ddd",
            "^~ /a/bb/ccc/",
            "= /a/bb",
            "~ c/d",
            "~* B/$",
            "/a/bb/ccc/dddd",
        ];
        let parts = [
            "", "/", "a", "/a", "/bb", "/B", "/ccc", "/dddd", "/ddd", "x",
        ];
        let mut table = Vec::new();
        for a in parts {
            for b in parts {
                for c in parts {
                    for d in parts {
                        table.push(format!("{a}{b}{c}{d}"));
                    }
                }
            }
        }
        let patterns: Vec<Pattern> = locations.iter().map(|l| loc(l)).collect();
        let router = Router::new(patterns.clone());
        for path in &table {
            assert_eq!(
                router.find(path.as_bytes()),
                model(&patterns, path),
                "{path}"
            );
        }
    }

    #[test]
    fn match_order_is_exact_then_priority_then_regex_then_prefix() {
        let m = |precedence, location| Match {
            precedence,
            location,
        };
        assert!(m(Precedence::Exact, 9) > m(Precedence::PriorityPrefix, 0));
        assert!(m(Precedence::PriorityPrefix, 9) > m(Precedence::Regex, 0));
        assert!(m(Precedence::Regex, 9) > m(Precedence::Prefix, 0));
        assert!(m(Precedence::Regex, 1) > m(Precedence::Regex, 2));
    }

    #[test]
    fn paths_that_decode_to_no_utf8_are_routed_on_their_bytes() {
        let path = normalize_path("/a/%ff%fe").expect("valid");
        assert_eq!(&*path, b"/a/\xff\xfe");
        let router = Router::new(vec![loc("/"), loc("^~ /a/"), loc("~ ^/b/.+$")]);
        assert_eq!(router.find(&path), Some(1));
        // `.` matches characters, and a byte that is none matches no `.`, as in PCRE.
        let b = normalize_path("/b/%ff").expect("valid");
        assert_eq!(router.find(&b), Some(0));
        assert_eq!(router.find(b"/b/x"), Some(2));
    }

    #[test]
    fn router_matches_on_the_normalized_path() {
        let router = Router::new(vec![loc("^~ /admin/"), loc("/")]);
        let path = normalize_path("/public/..//admin/x").expect("valid");
        assert_eq!(router.find(&path), Some(0));
    }
}

//! Configuration problems: what is wrong, where (`file:line:col`), and what is expected.
//!
//! While a file is checked, problems are collected in [`Diagnostics`] with byte offsets;
//! they become 1-based lines and character columns only when the check ends, sorted by
//! position so the operator reads them top to bottom.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem. `line` and `col` are 1-based (`col` counts characters, not bytes);
/// both are 0 when the problem has no position (an unreadable file, a missing section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Every problem found in one file, sorted by position.
#[derive(Debug, Clone)]
pub struct ConfigErrors {
    pub(crate) origin: PathBuf,
    pub(crate) errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// The file at `path` could not be read.
    pub(crate) fn io(path: &Path, err: &io::Error) -> Self {
        Self {
            origin: path.to_path_buf(),
            errors: vec![ConfigError {
                line: 0,
                col: 0,
                message: format!("cannot read the configuration file: {err}"),
            }],
        }
    }
}

/// One line per problem: `FILE:LINE:COL: message`, or `FILE: message` without a position.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = self.origin.display();
        for (i, err) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            if err.line == 0 {
                write!(f, "{origin}: {}", err.message)?;
            } else {
                write!(f, "{origin}:{}:{}: {}", err.line, err.col, err.message)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A problem before its offset is turned into a line and column.
struct Found {
    offset: Option<usize>,
    message: String,
    syntax: bool,
}

/// Collects problems while one text is checked.
pub(crate) struct Diagnostics<'t> {
    text: &'t str,
    found: Vec<Found>,
    /// Keys left out of a table because a problem with them is already reported: the
    /// span of the table, the key.
    left_out: Vec<(Range<usize>, String)>,
    /// What is worth telling but not wrong: byte offset, message.
    warnings: Vec<(usize, String)>,
    /// Zones defined with a problem already reported: a reference to one is no further
    /// problem.
    invalid_zones: Vec<String>,
    /// Where each address to listen on is written: byte offset, address.
    addresses: Vec<(usize, SocketAddr)>,
    /// Where each `root` and `alias` is written: byte offset, directory.
    directories: Vec<(usize, std::path::PathBuf)>,
}

impl<'t> Diagnostics<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Self {
            text,
            found: Vec::new(),
            left_out: Vec::new(),
            warnings: Vec::new(),
            invalid_zones: Vec::new(),
            addresses: Vec::new(),
            directories: Vec::new(),
        }
    }

    /// `addr`, to be listened on, is written at `span`: a failure to listen on it later
    /// names the place ([`Config::place_of`](super::Config::place_of)).
    pub(crate) fn listed(&mut self, span: &Range<usize>, addr: SocketAddr) {
        self.addresses.push((span.start, addr));
    }

    /// Each address [`listed`](Self::listed), with its place `FILE:LINE:COL`.
    pub(crate) fn places(&self, origin: &Path) -> Vec<(SocketAddr, String)> {
        let origin = origin.display();
        let place = |&(offset, addr): &(usize, SocketAddr)| {
            let (line, col) = line_col(self.text, offset);
            (addr, format!("{origin}:{line}:{col}"))
        };
        self.addresses.iter().map(place).collect()
    }

    /// `dir`, to serve files from, is written at `span`: `tollgate -t` names the place
    /// when it is not a readable directory.
    pub(crate) fn directory(&mut self, span: &Range<usize>, dir: std::path::PathBuf) {
        self.directories.push((span.start, dir));
    }

    /// Each directory [`noted`](Self::directory), with its place `FILE:LINE:COL`.
    pub(crate) fn directories(&self, origin: &Path) -> Vec<(std::path::PathBuf, String)> {
        let origin = origin.display();
        let place = |(offset, dir): &(usize, std::path::PathBuf)| {
            let (line, col) = line_col(self.text, *offset);
            (dir.clone(), format!("{origin}:{line}:{col}"))
        };
        self.directories.iter().map(place).collect()
    }

    /// The zone `name` is defined, with a problem reported.
    pub(crate) fn zone_invalid(&mut self, name: &str) {
        self.invalid_zones.push(name.to_owned());
    }

    /// Whether the zone `name` is defined with a problem reported ([`Self::zone_invalid`]).
    pub(crate) fn is_invalid_zone(&self, name: &str) -> bool {
        self.invalid_zones.iter().any(|zone| zone == name)
    }

    /// A problem with the value or key at `span` (byte offsets into the text).
    pub(crate) fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.push(Some(span.start), message.into(), false);
    }

    /// A problem at byte `at` of `value`, the string written at `span`: reported there when
    /// the file writes the string as it is (no escapes before `at`), else at the string.
    pub(crate) fn error_in_string(
        &mut self,
        span: Range<usize>,
        value: &str,
        at: usize,
        message: impl Into<String>,
    ) {
        let inside = span.start + 1;
        let written = self.text.get(inside..inside + at);
        let offset = if written == value.get(..at) {
            inside + at
        } else {
            span.start
        };
        self.push(Some(offset), message.into(), false);
    }

    /// Something worth telling about the value at `span` that is not wrong: the file
    /// loads, and `tollgate -t` and the start print it.
    pub(crate) fn warn(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.warnings.push((span.start, message.into()));
    }

    /// The warnings, sorted by position, each `FILE:LINE:COL: message`.
    pub(crate) fn warnings(&self, origin: &Path) -> Vec<String> {
        let mut positioned: Vec<(usize, usize, &str)> = self
            .warnings
            .iter()
            .map(|(offset, message)| {
                let (line, col) = line_col(self.text, *offset);
                (line, col, message.as_str())
            })
            .collect();
        positioned.sort();
        positioned.dedup();
        let origin = origin.display();
        positioned
            .into_iter()
            .map(|(line, col, message)| format!("{origin}:{line}:{col}: {message}"))
            .collect()
    }

    /// A problem that belongs to no place in the file (e.g. a missing section).
    pub(crate) fn error_nowhere(&mut self, message: impl Into<String>) {
        self.push(None, message.into(), false);
    }

    /// A TOML syntax error. The parser recovers and goes on, but a value it had to make
    /// up may cause follow-on errors; [`Self::finish`] drops other errors on its line.
    pub(crate) fn syntax(&mut self, err: &toml::de::Error) {
        let offset = err.span().map_or(0, |span| span.start);
        self.push(Some(offset), err.message().to_owned(), true);
    }

    /// A serde error from deserializing the value at `fallback` (used when serde did
    /// not say where). serde says "field"; a TOML user writes keys. An unknown key that
    /// is an nginx directive says what does its job here (`nginx_names`); one that looks
    /// like a misspelt known key says which, and that key is returned: the caller
    /// counts it as given, so that its absence is no further problem.
    pub(crate) fn serde(&mut self, err: &toml::de::Error, fallback: Range<usize>) -> Option<String> {
        let offset = err.span().map_or(fallback.start, |span| span.start);
        let message = err
            .message()
            .replacen("unknown field ", "unknown key ", 1)
            .replacen("missing field ", "missing key ", 1);
        if let Some(hint) = unknown_key(&message).and_then(super::nginx_names::unknown_key) {
            self.push(Some(offset), hint, false);
            return None;
        }
        if let Some(value) = unknown_variant(&message) {
            if let Some(meant) = closest_expected(value, &message) {
                let message = format!("unknown value `{value}`: did you mean `{meant}`?");
                self.push(Some(offset), message, false);
                return None;
            }
        }
        let meant = unknown_key(&message).and_then(|key| {
            let meant = closest_expected(key, &message)?;
            Some((key.to_owned(), meant.to_owned()))
        });
        match meant {
            Some((key, meant)) => {
                let message = format!("unknown key `{key}`: did you mean `{meant}`?");
                self.push(Some(offset), message, false);
                Some(meant)
            }
            None => {
                self.push(Some(offset), message, false);
                None
            }
        }
    }

    /// `result`'s value, or its message reported at `span`.
    pub(crate) fn check<T>(&mut self, span: Range<usize>, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.error(span, message)).ok()
    }

    /// `key` was taken out of the table at `table` after a problem with it was reported,
    /// so that the rest of the table could be read.
    pub(crate) fn leave_out(&mut self, table: Range<usize>, key: String) {
        self.left_out.push((table, key));
    }

    /// Whether `key` was taken out of the table at `table` (see [`Self::leave_out`]):
    /// its absence is then no further problem.
    pub(crate) fn was_left_out(&self, table: &Range<usize>, key: &str) -> bool {
        self.left_out.iter().any(|(t, k)| t == table && k == key)
    }

    /// `value`, or `None` after reporting the required `key` missing from the table at
    /// `table`, unless it was left out for a problem already reported.
    pub(crate) fn required<T>(
        &mut self,
        value: Option<T>,
        table: &Range<usize>,
        key: &str,
    ) -> Option<T> {
        if value.is_none() && !self.was_left_out(table, key) {
            self.error(table.clone(), format!("missing key `{key}`"));
        }
        value
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.found.is_empty()
    }

    /// The 1-based line of a byte offset.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        line_col(self.text, offset).0
    }

    /// Every problem, positioned and sorted; problems found on a line with a syntax
    /// error are left out unless they are syntax errors themselves.
    pub(crate) fn finish(self, origin: &Path) -> ConfigErrors {
        let positioned: Vec<(ConfigError, bool)> = self
            .found
            .into_iter()
            .map(|found| {
                let (line, col) = found.offset.map_or((0, 0), |o| line_col(self.text, o));
                let message = found.message;
                (ConfigError { line, col, message }, found.syntax)
            })
            .collect();
        let syntax_lines: BTreeSet<usize> = positioned
            .iter()
            .filter(|(_, syntax)| *syntax)
            .map(|(err, _)| err.line)
            .collect();
        let mut errors: Vec<ConfigError> = positioned
            .into_iter()
            .filter(|(err, syntax)| *syntax || !syntax_lines.contains(&err.line))
            .map(|(err, _)| err)
            .collect();
        errors.sort_by_key(|err| (err.line, err.col));
        errors.dedup();
        ConfigErrors {
            origin: origin.to_path_buf(),
            errors,
        }
    }

    fn push(&mut self, offset: Option<usize>, message: String, syntax: bool) {
        self.found.push(Found {
            offset,
            message,
            syntax,
        });
    }
}

/// The value an "unknown variant `VALUE`, expected …" message is about.
fn unknown_variant(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown variant `")?;
    rest.split('`').next()
}

/// Of the words an "…, expected `A`, `B` …" message lists, the one `word` likely meant.
fn closest_expected<'m>(word: &str, message: &'m str) -> Option<&'m str> {
    let (_, expected) = message.split_once(", expected ")?;
    super::suggest::closest(word, expected.split('`').skip(1).step_by(2))
}

/// The key an "unknown key `NAME`, expected …" message is about.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown key `")?;
    rest.split('`').next()
}

/// 1-based line and character column of a byte offset (clamped to the text).
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "a = 1\nké = \"x\"\n";
        let offset = text.find('=').unwrap();
        assert_eq!(line_col(text, offset), (1, 3));
        let offset = text.rfind('=').unwrap();
        assert_eq!(line_col(text, offset), (2, 4));
    }

    #[test]
    fn offset_at_end_of_text_is_past_the_last_character() {
        assert_eq!(line_col("ab\n", 3), (2, 1));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn display_prints_one_line_per_error_with_and_without_position() {
        let errors = ConfigErrors {
            origin: PathBuf::from("/etc/tollgate/gateway.toml"),
            errors: vec![
                ConfigError {
                    line: 0,
                    col: 0,
                    message: "first".into(),
                },
                ConfigError {
                    line: 3,
                    col: 7,
                    message: "second".into(),
                },
            ],
        };
        assert_eq!(
            errors.to_string(),
            "/etc/tollgate/gateway.toml: first\n/etc/tollgate/gateway.toml:3:7: second"
        );
    }

    #[test]
    fn io_error_has_no_position() {
        let err = io::Error::new(io::ErrorKind::NotFound, "no such file");
        let errors = ConfigErrors::io(Path::new("x.toml"), &err);
        assert_eq!((errors.errors[0].line, errors.errors[0].col), (0, 0));
        assert!(errors.to_string().starts_with("x.toml: cannot read"));
    }

    #[test]
    fn errors_are_sorted_by_position_and_those_on_a_syntax_error_line_dropped() {
        let text = "a = 1\nb =\nc = 3\n";
        let mut diag = Diagnostics::new(text);
        diag.error(12..13, "on c");
        diag.error(0..1, "on a");
        diag.error_nowhere("nowhere");
        let (_, syntax) = toml::de::DeTable::parse_recoverable(text);
        diag.syntax(&syntax[0]);
        diag.error(6..7, "follow-on on b");
        let errors = diag.finish(Path::new("f")).errors;
        let lines: Vec<_> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [0, 1, 2, 3]);
        assert_eq!(errors[0].message, "nowhere");
        assert_eq!(errors[1].message, "on a");
        assert_ne!(errors[2].message, "follow-on on b");
        assert_eq!(errors[3].message, "on c");
    }
}

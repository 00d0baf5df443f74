//! nginx's configuration language, read as nginx reads it, for `tollgate import`: the
//! words and blocks of `nginx.conf` (`lex`, nginx's own tokenizer rules), the tree of
//! directives with the file and line of each (`tree`), and `include` with globs
//! (`include`, `glob`), read through [`Files`] so that tests read from memory.
//!
//! What a directive means is not known here: `server_name` and `gzip` are the same to
//! this crate, a name and its words. Pure: no runtime, no clock; the only way out is the
//! [`Files`] the caller hands in.
//!
//! Relative `include` paths are resolved against the main file's directory, which is
//! nginx's `--conf-prefix` when it is started with `-c FILE` (nginx reads them against
//! its prefix, not against the including file).

#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods)]

mod files;
mod glob;
mod include;
mod lex;
mod tree;

use std::fmt;
use std::path::PathBuf;

pub use files::{Disk, Files, Memory};
pub use include::{read, Include};

/// One word of a directive, escapes resolved, quotes taken off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// The line it starts on.
    pub line: usize,
}

/// Where a directive is: an index into [`Config::files`] and the line of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub file: usize,
    pub line: usize,
}

/// One directive: `name args…;` or `name args… { block }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    /// `Some` for a block directive (`server { … }`), also when empty.
    pub block: Option<Vec<Directive>>,
    pub place: Place,
}

impl Directive {
    /// The directive as written on one line, its block left out: `listen 443 ssl`.
    pub fn text(&self) -> String {
        let mut text = self.name.clone();
        for arg in &self.args {
            text.push(' ');
            if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == ';') {
                text.push('"');
                text.push_str(&arg.escape_default().to_string());
                text.push('"');
            } else {
                text.push_str(arg);
            }
        }
        text
    }
}

/// A file that was read: the main one first, then each included one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    /// The `include` that read it; `None` for the main file.
    pub included_at: Option<Place>,
}

/// A whole configuration, includes expanded: each `include` directive stays in its
/// block, followed by the directives of the files it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub files: Vec<SourceFile>,
    pub directives: Vec<Directive>,
    /// What each `include` did, in the order they were met.
    pub includes: Vec<Include>,
}

impl Config {
    /// The path of the file a place is in.
    pub fn path(&self, place: Place) -> &std::path::Path {
        self.files
            .get(place.file)
            .map_or(std::path::Path::new(""), |f| f.path.as_path())
    }
}

/// A text nginx would refuse too: `FILE:LINE: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.file.display(), self.message),
            line => write!(f, "{}:{line}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests;

//! `include`: each file (or each match of a glob, in sorted order) read and parsed where
//! the directive stands, as nginx does. A file that cannot be read, a file that
//! includes itself, includes nested too deep and too many files are not errors here but
//! problems kept on the [`Include`], for the caller to report at the directive: the rest
//! of the configuration is still read. A text nginx would refuse, in any file, is an
//! [`Error`] at that file's line.

use std::io;
use std::path::{Path, PathBuf};

use crate::{glob, tree, Config, Directive, Error, Files, Place, SourceFile};

/// Includes within includes deeper than this are not read (a loop through `..` or a
/// symbolic link ends here).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Files read in all: includes that fan out (a file included twice by a file included
/// twice…) stop here instead of growing without bound.
pub const MAX_FILES: usize = 1024;

/// What one `include` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    pub at: Place,
    /// The files it read, as indices into [`Config::files`].
    pub files: Vec<usize>,
    /// What it could not read, and why.
    pub problems: Vec<String>,
}

/// Reads the configuration whose main file is `main`, includes expanded; relative
/// include paths are taken from `main`'s directory.
pub fn read(files: &dyn Files, main: &Path) -> Result<Config, Error> {
    let bytes = files.read(main).map_err(|err| Error {
        file: main.to_path_buf(),
        line: 0,
        message: format!("cannot read the file: {err}"),
    })?;
    let mut reader = Reader {
        files,
        prefix: main.parent().map(Path::to_path_buf).unwrap_or_default(),
        config: Config {
            files: vec![SourceFile {
                path: main.to_path_buf(),
                included_at: None,
            }],
            directives: Vec::new(),
            includes: Vec::new(),
        },
    };
    let directives = tree::parse(&bytes, 0).map_err(|err| Error {
        file: main.to_path_buf(),
        line: err.line,
        message: err.message,
    })?;
    let mut stack = vec![normal(main)];
    let directives = reader.expand(directives, &mut stack)?;
    reader.config.directives = directives;
    Ok(reader.config)
}

struct Reader<'a> {
    files: &'a dyn Files,
    prefix: PathBuf,
    config: Config,
}

impl Reader<'_> {
    /// `directives` with every `include` followed by what it read, in blocks too.
    fn expand(
        &mut self,
        directives: Vec<Directive>,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Vec<Directive>, Error> {
        let mut out = Vec::with_capacity(directives.len());
        for mut directive in directives {
            if let Some(block) = directive.block.take() {
                directive.block = Some(self.expand(block, stack)?);
                out.push(directive);
                continue;
            }
            let arg = match (directive.name.as_str(), directive.args.as_slice()) {
                ("include", [arg]) => arg.clone(),
                _ => {
                    out.push(directive);
                    continue;
                }
            };
            let at = directive.place;
            out.push(directive);
            out.extend(self.include(at, &arg, stack)?);
        }
        Ok(out)
    }

    fn include(
        &mut self,
        at: Place,
        arg: &str,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Vec<Directive>, Error> {
        let mut record = Include {
            at,
            files: Vec::new(),
            problems: Vec::new(),
        };
        let pattern = glob::is_pattern(arg);
        let path = self.prefix.join(arg);
        let paths = match pattern {
            true => glob::expand(self.files, &path),
            false => vec![path],
        };
        let mut out = Vec::new();
        for path in paths {
            let path = normal(&path);
            if stack.contains(&path) {
                let message = format!("{} is being read already: an include loop", path.display());
                record.problems.push(message);
                continue;
            }
            if stack.len() > MAX_INCLUDE_DEPTH {
                let message = format!(
                    "{}: includes nested more than {MAX_INCLUDE_DEPTH} deep",
                    path.display()
                );
                record.problems.push(message);
                continue;
            }
            if self.config.files.len() >= MAX_FILES {
                let message = format!("{}: more than {MAX_FILES} files read", path.display());
                record.problems.push(message);
                break;
            }
            let bytes = match self.files.read(&path) {
                Ok(bytes) => bytes,
                Err(err) if pattern && err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    let message = format!("cannot read {}: {err}", path.display());
                    record.problems.push(message);
                    continue;
                }
            };
            let index = self.config.files.len();
            self.config.files.push(SourceFile {
                path: path.clone(),
                included_at: Some(at),
            });
            record.files.push(index);
            let directives = tree::parse(&bytes, index).map_err(|err| Error {
                file: path.clone(),
                line: err.line,
                message: err.message,
            })?;
            stack.push(path);
            let expanded = self.expand(directives, stack);
            stack.pop();
            out.extend(expanded?);
        }
        self.config.includes.push(record);
        Ok(out)
    }
}

/// The path with `.` components and repeated separators gone, so that one file is one
/// path for the loop check.
fn normal(path: &Path) -> PathBuf {
    path.components().collect()
}

//! `tollgate import NGINX.conf`: an nginx configuration as a gateway.toml, and a report
//! of every directive (`exact`, `approx: the difference`, `unsupported: what to do
//! instead`). The nginx text is read by `tollgate_nginx` (crates/nginx); the walk over
//! its blocks is `walk`, each family of directives a file of its own; the gateway.toml
//! is the config's raw model, written by `config::raw::write_noted` with each block's
//! source as a comment.
//!
//! Faithful first: where nginx has a default tollgate lacks, the import writes it
//! (`Host: $proxy_host`, `limit_status = 503`, no rate-limit headers, a 60 s connect
//! timeout, `X-Real-IP` as the realip header), and where tollgate answers otherwise,
//! the report says how.

mod access;
mod auth;
mod auth_request;
mod auth_settings;
mod build;
mod conditions;
mod file_settings;
mod files;
mod headers;
mod level;
mod limits;
mod listen;
mod location;
mod logs;
mod maps;
mod other;
mod pattern;
mod proxy;
mod redirects;
mod report;
mod rewrite;
mod server_wide;
mod state;
mod tls;
mod upstream;
mod values;
mod walk;

use std::fmt;
use std::path::Path;

pub use report::{Line, Report, Status};
pub use tollgate_nginx::{Disk, Files};

use crate::config::raw::write_noted;

/// A gateway.toml and the report of how it was made.
#[derive(Debug, Clone)]
pub struct Imported {
    pub toml: String,
    pub report: Report,
}

/// Why there is no gateway.toml.
#[derive(Debug)]
pub enum ImportError {
    /// nginx would refuse the text too: `file:line: what is wrong`.
    Nginx(tollgate_nginx::Error),
    /// The model could not be written (a bug: every value of the model is writable).
    Write(String),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Nginx(err) => write!(f, "{err}"),
            ImportError::Write(err) => write!(f, "cannot write the gateway.toml: {err}"),
        }
    }
}

impl std::error::Error for ImportError {}

/// Imports the nginx configuration whose main file is `path`, from the disk.
pub fn import(path: &Path) -> Result<Imported, ImportError> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    import_from(&Disk, &path)
}

/// [`import`] with the files read from `files` (tests read them from memory).
pub fn import_from(files: &dyn Files, path: &Path) -> Result<Imported, ImportError> {
    let config = tollgate_nginx::read(files, path).map_err(ImportError::Nginx)?;
    let mut walk = state::Walk::new(&config);
    walk::main(&mut walk, &config.directives);
    let mut report = Report {
        lines: std::mem::take(&mut walk.report),
    };
    report.sort();
    let (raw, mut notes) = walk.build.finish();
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    notes.head = vec![
        format!("Written by `tollgate import {name}`: each block names the nginx lines it comes from."),
        format!(
            "{} directives: {} exact, {} approx, {} unsupported (the report on stderr says each one's difference).",
            report.lines.len(),
            report.exact(),
            report.approx(),
            report.unsupported()
        ),
    ];
    if !notes.tail.is_empty() {
        notes.tail.insert(0, "Not translated (see the report):".to_owned());
    }
    let toml = write_noted(&raw, &notes).map_err(|e| ImportError::Write(e.to_string()))?;
    Ok(Imported { toml, report })
}

#[cfg(test)]
mod tests;

//! The walk's state: the configuration read, the gateway.toml being built, and the
//! report, with [`Walk::record`], which gives each directive its one line.

use std::path::PathBuf;

use tollgate_nginx::{Config, Directive, Place};

use super::build::Build;
use super::report::{Line, Status};

/// The walk's state: the configuration read, what is built, what is reported.
pub(super) struct Walk<'c> {
    pub config: &'c Config,
    /// The main file's directory: paths are shown relative to it, and nginx reads
    /// relative paths (certificates) from it.
    pub dir: PathBuf,
    pub build: Build,
    pub report: Vec<Line>,
    /// The named locations (`location @name`) of the server being walked, by name.
    pub named: Vec<(String, Directive)>,
    /// The locations of the server being walked (`auth_request` asks one of them).
    pub locations: Vec<Directive>,
    /// Those a `try_files` translated as `"@upstream"`.
    pub named_used: Vec<String>,
    /// The location whose directives are being walked: its pattern's kind, and whether
    /// its block has a `proxy_pass` or `return` (files are then not served there).
    pub location: Option<(super::pattern::Kind, bool)>,
}

impl<'c> Walk<'c> {
    pub(super) fn new(config: &'c Config) -> Walk<'c> {
        let dir = config
            .files
            .first()
            .and_then(|f| f.path.parent())
            .map(PathBuf::from)
            .unwrap_or_default();
        Walk {
            config,
            dir,
            build: Build::default(),
            report: Vec::new(),
            named: Vec::new(),
            locations: Vec::new(),
            named_used: Vec::new(),
            location: None,
        }
    }

    /// `nginx.conf:41`: the file relative to the main file's directory.
    pub(super) fn source(&self, place: Place) -> String {
        format!("{}:{}", self.shown(place), place.line)
    }

    fn shown(&self, place: Place) -> String {
        let path = self.config.path(place);
        path.strip_prefix(&self.dir)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// Reports `d`; an unsupported one is also kept in `sink` as a comment of the
    /// block it was in.
    pub(super) fn record(&mut self, d: &Directive, status: Status, sink: &mut Vec<String>) {
        if let Status::Unsupported(why) = &status {
            let mut text = d.text();
            if d.block.is_some() {
                text.push_str(" { … }");
            }
            sink.push(format!("{}: {text}; (unsupported: {why})", self.source(d.place)));
        }
        let order = (d.place.file, d.place.line, self.report.len());
        self.report.push(Line {
            file: self.shown(d.place),
            line: d.place.line,
            name: d.name.clone(),
            status,
            order,
        });
    }

    /// Reports every directive inside `d`'s block, with `status` (a block that is not
    /// translated: nothing in it is either).
    pub(super) fn record_inside(&mut self, d: &Directive, status: &Status) {
        for inner in d.block.iter().flatten() {
            let mut ignored = Vec::new();
            self.record(inner, status.clone(), &mut ignored);
            self.record_inside(inner, status);
        }
    }

    /// `include`: what it read, or why not.
    pub(super) fn include(&mut self, d: &Directive, sink: &mut Vec<String>) {
        let found = self.config.includes.iter().find(|i| i.at == d.place);
        let status = match found {
            Some(include) if !include.problems.is_empty() => {
                Status::Unsupported(format!("{} (copy the file beside the main one, or leave the include out)", include.problems.join("; ")))
            }
            Some(include) => Status::Exact(Some(format!("{} file(s) read", include.files.len()))),
            None => Status::Unsupported("`include` takes one file or pattern".to_owned()),
        };
        self.record(d, status, sink);
    }
}

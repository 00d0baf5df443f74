//! The walk over nginx's blocks: main → http → server → location (nested ones
//! flattened), each directive handed to its family and reported exactly once.

use std::path::PathBuf;

use tollgate_nginx::{Config, Directive, Place};

use super::build::{Build, Site};
use super::level::{Context, Level};
use super::location::{self, Content};
use super::report::{Line, Status};
use super::{access, headers, limits, listen, other, proxy, rewrite, server_wide, tls, upstream};

/// The walk's state: the configuration read, what is built, what is reported.
pub(super) struct Walk<'c> {
    pub config: &'c Config,
    /// The main file's directory: paths are shown relative to it, and nginx reads
    /// relative paths (certificates) from it.
    pub dir: PathBuf,
    pub build: Build,
    pub report: Vec<Line>,
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
    fn include(&mut self, d: &Directive, sink: &mut Vec<String>) {
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

/// The whole configuration.
pub(super) fn main(w: &mut Walk<'_>, directives: &[Directive]) {
    let mut tail = Vec::new();
    for d in directives {
        match d.name.as_str() {
            "http" => {
                w.record(d, Status::Exact(None), &mut tail);
                http(w, d.block.as_deref().unwrap_or_default(), &mut tail);
            }
            "include" => w.include(d, &mut tail),
            _ => unknown(w, d, &mut tail),
        }
    }
    w.build.notes.tail.extend(tail);
}

/// A directive no family took: [`other::status`] says what it is.
fn unknown(w: &mut Walk<'_>, d: &Directive, sink: &mut Vec<String>) {
    let status = other::status(d);
    w.record(d, status.clone(), sink);
    for inner in d.block.iter().flatten() {
        let status = other::inside(d, inner);
        w.record(inner, status, &mut Vec::new());
        w.record_inside(inner, &other::inside(d, inner));
    }
}

fn http(w: &mut Walk<'_>, block: &[Directive], tail: &mut Vec<String>) {
    // Groups and zones first: servers may name them before they are defined.
    for d in block {
        match d.name.as_str() {
            "upstream" => upstream::block(w, d, tail),
            "limit_req_zone" | "limit_conn_zone" => {
                let status = limits::zone(w, d);
                w.record(d, status, tail);
            }
            _ => {}
        }
    }
    let mut own = Level::default();
    let mut servers = Vec::new();
    for d in block {
        match d.name.as_str() {
            "upstream" | "limit_req_zone" | "limit_conn_zone" => {}
            "server" => servers.push(d),
            "include" => w.include(d, tail),
            _ => setting(w, d, &mut own, Context::Http, tail),
        }
    }
    for d in servers {
        server(w, d, &own);
    }
}

/// A directive that sets something a level passes down, or one of the gateway's.
pub(super) fn setting(
    w: &mut Walk<'_>,
    d: &Directive,
    own: &mut Level,
    context: Context,
    sink: &mut Vec<String>,
) {
    let status = proxy::setting(w, d, own, context)
        .or_else(|| headers::setting(d, own))
        .or_else(|| access::setting(w, d, own, context))
        .or_else(|| limits::setting(w, d, own))
        .or_else(|| server_wide::setting(w, d, own, context))
        .or_else(|| tls::setting(w, d, context));
    match status {
        Some(status) => w.record(d, status, sink),
        None => unknown(w, d, sink),
    }
}

fn server(w: &mut Walk<'_>, d: &Directive, http: &Level) {
    let mut site = Site {
        note: vec![w.source(d.place)],
        ..Site::default()
    };
    let mut own = Level::default();
    let mut locations = Vec::new();
    let mut answers_all = None;
    let mut listens = 0;
    let mut server_names = Vec::new();
    for c in d.block.iter().flatten() {
        let mut sink = std::mem::take(&mut site.note);
        match c.name.as_str() {
            "listen" => {
                listens += 1;
                let was_default = site.default;
                let status = listen::listen(w, c, &mut site);
                if site.default && !was_default {
                    site.default_line = Some(w.report.len());
                }
                w.record(c, status, &mut sink);
            }
            "server_name" => server_names.push(c),
            "location" => locations.push(c),
            "return" | "rewrite" => {
                let mut content = Content::default();
                let status = rewrite::at_server(w, c, &mut content);
                if content.ret.is_some() && answers_all.is_none() {
                    answers_all = Some((content, c.place));
                }
                w.record(c, status, &mut sink);
            }
            "include" => w.include(c, &mut sink),
            _ => setting(w, c, &mut own, Context::Server, &mut sink),
        }
        site.note = sink;
    }
    let level = own.under(http);
    listen::default_once(w, &mut site);
    if listens == 0 {
        listen::default_listen(w, &mut site);
    }
    listen::server_names(w, &server_names, &mut site);
    let mut status = Status::Exact(None);
    if let Some((content, at)) = answers_all {
        // The server's `return` answers in its rewrite phase, before any location.
        let line = at.line;
        let why = Status::Exact(Some(format!(
            "never reached: the server's `return` (line {line}) answers every request first"
        )));
        for loc in locations {
            w.record(loc, why.clone(), &mut Vec::new());
            w.record_inside(loc, &why);
        }
        let pattern = location::Pattern::parse(&["/".to_owned()]).ok();
        if let Some(pattern) = pattern {
            let (raw, _) = location::assemble(w, &pattern, &level, &content);
            site.locations.push((raw, vec![w.source(at)]));
        }
    } else {
        for loc in locations {
            location::location(w, loc, &level, &mut site, None);
        }
        if !site.locations.iter().any(|(l, _)| location::is_root(l)) {
            status = Status::Approx(
                "requests no location matches get 404 (nginx would serve files from `root`)"
                    .to_owned(),
            );
        }
        if site.locations.is_empty() {
            location::add_root_404(&mut site);
        }
    }
    let mut ignored = Vec::new();
    w.record(d, status, &mut ignored);
    w.build.sites.push(site);
}

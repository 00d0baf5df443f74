//! The walk over nginx's blocks: main → http → server → location (nested ones
//! flattened), each directive handed to its family and reported exactly once.

use tollgate_nginx::{Directive, Place};

use super::build::Site;
use super::level::{Context, Level};
use super::location;
use super::pattern::{Content, Pattern};
use super::report::Status;
use super::state::Walk;
use super::{access, auth, auth_request, conditions, files, headers, limits, listen, maps, other, proxy, rewrite};
use super::{logs, server_wide, tls};
use super::{upstream, values};

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
            "pid" => {
                // Not nginx's own path: while both run side by side, `nginx -s stop` would
                // signal tollgate.
                let note = "not written: nginx's pid file stays nginx's (`nginx -s` reads it); \
                            set `[server] pid_file` to another path for `tollgate reload` and `tollgate stop`";
                w.record(d, Status::Approx(note.to_owned()), &mut tail);
            }
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
    let _maps = values::MapsInScope::set(maps::names(block));
    // Groups, zones and maps first: servers may name them before they are defined.
    for d in block {
        match d.name.as_str() {
            "upstream" => upstream::block(w, d, tail),
            "map" => maps::block(w, d, tail),
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
            "upstream" | "limit_req_zone" | "limit_conn_zone" | "map" => {}
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
        .or_else(|| auth::setting(d, own))
        .or_else(|| auth_request::setting(w, d, own))
        .or_else(|| limits::setting(w, d, own))
        .or_else(|| server_wide::setting(w, d, own, context))
        .or_else(|| tls::setting(w, d, own, context))
        .or_else(|| files::setting(w, d, own, context))
        .or_else(|| logs::setting(w, d, own, context));
    match status {
        Some(status) => w.record(d, status, sink),
        None => unknown(w, d, sink),
    }
}

/// What a `server {}` block holds, its directives read: its own settings, its locations
/// (translated once the whole block is read, for they inherit its settings) and its
/// server-level `return` or `rewrite`.
#[derive(Default)]
struct ServerBlock<'d> {
    own: Level,
    locations: Vec<&'d Directive>,
    named: Vec<&'d Directive>,
    server_names: Vec<&'d Directive>,
    content: Content<'d>,
    /// The first server-level `return` that answers every request.
    answers_all: Option<Place>,
    listens: usize,
}

fn server(w: &mut Walk<'_>, d: &Directive, http: &Level) {
    let mut site = Site {
        note: vec![w.source(d.place)],
        ..Site::default()
    };
    let block = d.block.as_deref().unwrap_or_default();
    let mut server = read_server(w, block, &mut site);
    let level = std::mem::take(&mut server.own).under(http);
    site.client_certificates = tls::client_certificates(&level);
    site.log = level.log.clone();
    // Before the locations: their `try_files` may end with one.
    w.named = server
        .named
        .iter()
        .map(|d| (d.args[0].trim_start_matches('@').to_owned(), (*d).clone()))
        .collect();
    w.named_used.clear();
    listen::default_once(w, &mut site);
    if server.listens == 0 {
        listen::default_listen(w, &mut site);
    }
    listen::server_names(w, &server.server_names, &mut site);
    listen::http2_directive(w, &site);
    let status = match server.answers_all {
        Some(at) => answered_first(w, at, &server, &level, &mut site),
        None => locations(w, &server, &level, &mut site),
    };
    named_locations(w, &server.named, &mut site.note);
    let mut ignored = Vec::new();
    w.record(d, status, &mut ignored);
    w.build.sites.push(site);
}

/// Reads a `server {}` block's directives: settings and listens are recorded as they
/// come, locations kept for later.
fn read_server<'d>(w: &mut Walk<'_>, block: &'d [Directive], site: &mut Site) -> ServerBlock<'d> {
    let mut server = ServerBlock::default();
    // Before any directive: an `auth_request` names one of them.
    w.locations = block.iter().filter(|c| c.name == "location").cloned().collect();
    for (i, c) in block.iter().enumerate() {
        let mut sink = std::mem::take(&mut site.note);
        match c.name.as_str() {
            "listen" => {
                server.listens += 1;
                let was_default = site.default;
                let status = listen::listen(w, c, site);
                if site.default && !was_default {
                    site.default_line = Some(w.report.len());
                }
                w.record(c, status, &mut sink);
            }
            "server_name" => server.server_names.push(c),
            "location" if c.args.first().is_some_and(|a| a.starts_with('@')) => server.named.push(c),
            "location" => server.locations.push(c),
            "return" | "rewrite" => {
                let status = rewrite::at_server(w, c, &mut server.content);
                if server.content.ret.is_some() && server.answers_all.is_none() {
                    server.answers_all = Some(c.place);
                }
                w.record(c, status, &mut sink);
            }
            "if" => {
                conditions::at_if(w, c, &block[i + 1..], &mut server.content, &mut sink);
                if server.content.ret.is_some() && server.answers_all.is_none() {
                    server.answers_all = Some(c.place);
                }
            }
            "include" => w.include(c, &mut sink),
            _ => setting(w, c, &mut server.own, Context::Server, &mut sink),
        }
        site.note = sink;
    }
    server
}

/// A server whose `return` (at `at`) answers in its rewrite phase, before any location:
/// one location `/` answers so, and each written location is reported never reached.
fn answered_first(w: &mut Walk<'_>, at: Place, server: &ServerBlock<'_>, level: &Level, site: &mut Site) -> Status {
    let line = at.line;
    let why = Status::Exact(Some(format!(
        "never reached: the server's `return` (line {line}) answers every request first"
    )));
    for loc in &server.locations {
        w.record(loc, why.clone(), &mut Vec::new());
        w.record_inside(loc, &why);
    }
    if let Ok(pattern) = Pattern::parse(&["/".to_owned()]) {
        let (raw, _) = location::assemble(w, &pattern, level, &server.content);
        site.locations.push((raw, vec![w.source(at)]));
    }
    Status::Exact(None)
}

/// The server's locations translated; the server's own verdict (approx when requests no
/// location matches would be served from `root` by nginx and get 404 here).
fn locations(w: &mut Walk<'_>, server: &ServerBlock<'_>, level: &Level, site: &mut Site) -> Status {
    for loc in &server.locations {
        location(w, loc, level, site, None);
    }
    let mut status = Status::Exact(None);
    let rooted = site.locations.iter().any(|(l, _)| location::is_root(l));
    if !rooted && files::serves(level) {
        // nginx serves what no location matches from the server's `root`.
        if let Ok(pattern) = Pattern::parse(&["/".to_owned()]) {
            let (raw, _) = location::assemble(w, &pattern, level, &Content::default());
            let note = "no location / in nginx: what no location matches is served from `root`";
            site.locations.push((raw, vec![note.to_owned()]));
        }
    } else if !rooted {
        status = Status::Approx("requests no location matches get 404 (nginx would serve files from `root`)".to_owned());
    }
    if site.locations.is_empty() {
        location::add_root_404(site);
    }
    status
}

/// A named location is translated only as the `"@upstream"` of a `try_files` (when it
/// holds one `proxy_pass`); the others are reported unsupported.
fn named_locations(w: &mut Walk<'_>, named: &[&Directive], sink: &mut Vec<String>) {
    for d in named {
        let name = d.args[0].trim_start_matches('@');
        let used = w.named_used.iter().any(|n| n == name);
        if used {
            let status = Status::Exact(Some("its proxy_pass is the `upstream` of the locations whose `try_files` ends with it (`\"@upstream\"`)".to_owned()));
            w.record(d, status.clone(), sink);
            w.record_inside(d, &status);
        } else {
            let status = Status::Unsupported("a named location is translated only as the last item of a `try_files`, holding one `proxy_pass`: write it as a location of its own".to_owned());
            w.record(d, status, sink);
            let inside = Status::Unsupported(format!("inside the location at line {}, which is not translated", d.place.line));
            w.record_inside(d, &inside);
        }
    }
}

/// A `location` and, after it, its nested ones (flattened into the site).
pub(super) fn location(
    w: &mut Walk<'_>,
    d: &Directive,
    parent: &Level,
    site: &mut Site,
    outer: Option<&Pattern>,
) {
    let pattern = match Pattern::parse(&d.args) {
        Ok(pattern) => pattern,
        Err(why) => {
            let status = Status::Unsupported(why);
            w.record(d, status, &mut site.note);
            let inside = Status::Unsupported(format!("inside the location at line {}, which is not translated", d.place.line));
            w.record_inside(d, &inside);
            return;
        }
    };
    let mut note = vec![w.source(d.place)];
    let mut own = Level::default();
    let mut content = Content::default();
    let mut nested = Vec::new();
    let block = d.block.as_deref().unwrap_or_default();
    let answers = block.iter().any(|c| c.name == "proxy_pass" || c.name == "return");
    w.location = Some((pattern.kind, answers));
    for (i, c) in block.iter().enumerate() {
        match c.name.as_str() {
            "location" => nested.push(c),
            "include" => w.include(c, &mut note),
            "proxy_pass" if content.proxy.is_some() => {
                let status = Status::Unsupported("a second proxy_pass (nginx refuses it)".to_owned());
                w.record(c, status, &mut note);
            }
            "proxy_pass" => match proxy::pass(w, c) {
                Ok(target) => content.proxy = Some((target, c)),
                Err(status) => w.record(c, status, &mut note),
            },
            "return" | "rewrite" => {
                let status = rewrite::at_location(w, c, &pattern, &mut content);
                w.record(c, status, &mut note);
            }
            "if" => conditions::at_if(w, c, &block[i + 1..], &mut content, &mut note),
            _ => setting(w, c, &mut own, Context::Location, &mut note),
        }
    }
    w.location = None;
    let level = own.under(parent);
    let (raw, proxy_status) = location::assemble(w, &pattern, &level, &content);
    if let Some((_, pass)) = &content.proxy {
        let status = proxy_status.unwrap_or_else(|| {
            Status::Exact(Some("never reached: the location's return answers first".to_owned()))
        });
        w.record(pass, status, &mut note);
    }
    let status = location::location_status(&pattern, outer, &content, site, &raw);
    let keep = !matches!(status, Status::Approx(ref why) if why.starts_with("left out"));
    w.record(d, status, &mut note);
    if keep {
        site.locations.push((raw, note));
    }
    for inner in nested {
        location(w, inner, &level, site, Some(&pattern));
    }
}

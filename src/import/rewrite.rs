//! `return` and the `rewrite`s that map: a redirect of every path (`rewrite ^(.*)$
//! https://$host$1 permanent`) is a `return`; `rewrite ^/prefix/(.*)$ /new/$1 break`
//! in `location /prefix/` is its `upstream_path`. Other rewrites are reported.

use tollgate_nginx::Directive;

use super::pattern::{Content, Kind, Pattern, Ret};
use super::report::Status;
use super::values;
use super::state::Walk;

/// `return` or `rewrite` in a server block, before any location.
pub(super) fn at_server(w: &mut Walk<'_>, d: &Directive, content: &mut Content<'_>) -> Status {
    let _ = w;
    if let Some(status) = folded(d, content) {
        return status;
    }
    if content.ret.is_some() {
        return Status::Exact(Some("never reached: a return above answers first".to_owned()));
    }
    match d.name.as_str() {
        "return" => ret(d, content),
        _ => match redirect(d, content) {
            Some(status) => status,
            None => Status::Unsupported("a rewrite in the server block: write the new path as `upstream_path` on the locations it leads to".to_owned()),
        },
    }
}

pub(super) fn at_location(
    w: &mut Walk<'_>,
    d: &Directive,
    pattern: &Pattern,
    content: &mut Content<'_>,
) -> Status {
    let _ = w;
    if let Some(status) = folded(d, content) {
        return status;
    }
    if content.ret.is_some() {
        return Status::Exact(Some("never reached: a return above answers first".to_owned()));
    }
    if d.name == "return" {
        return ret(d, content);
    }
    if let Some(status) = redirect(d, content) {
        return status;
    }
    match prefix_break(d, pattern) {
        Some(path) => {
            content.upstream_path = Some(path);
            Status::Exact(Some("written as the location's `upstream_path`".to_owned()))
        }
        None => Status::Unsupported("an internal rewrite: write the new path as the location's `upstream_path` (a regex location with captures for its parts)".to_owned()),
    }
}

/// The `return` an `if` above was folded into.
fn folded(d: &Directive, content: &Content<'_>) -> Option<Status> {
    let (_, first) = content.folded.iter().find(|(p, _)| *p == d.place)?;
    Some(Status::Exact(Some(format!("with the `if` at line {first}: one `return` whose status a map chooses"))))
}

/// `return CODE [TEXT|URL]` or `return URL`.
pub(super) fn ret(d: &Directive, content: &mut Content<'_>) -> Status {
    let (status, text) = match d.args.as_slice() {
        [url] if url.starts_with("http://") || url.starts_with("https://") || url.starts_with("$scheme") => (302, Some(url.clone())),
        [code] => match code.parse::<i64>() {
            Ok(code) => (code, None),
            Err(_) => return Status::Unsupported(format!("`{code}` is not a status")),
        },
        [code, text] => match code.parse::<i64>() {
            Ok(code) => (code, Some(text.clone())),
            Err(_) => return Status::Unsupported(format!("`{code}` is not a status")),
        },
        _ => return Status::Unsupported("`return` takes a status and a text or URL".to_owned()),
    };
    if status != 444 && !(200..=599).contains(&status) {
        return Status::Unsupported(format!("status {status}: tollgate returns 200 to 599, or 444"));
    }
    if let Some(Err(why)) = text.as_deref().map(values::vars) {
        return Status::Unsupported(why);
    }
    let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
    let mut differences = Vec::new();
    let (body, location) = match (redirect, text) {
        (true, Some(url)) => {
            if !(url.starts_with("http") || url.starts_with("$scheme")) {
                differences.push("`Location` is sent as written (nginx makes a relative one absolute, with the server's name and port)".to_owned());
            }
            (None, Some(url))
        }
        (_, text) if status == 444 => {
            if text.is_some() {
                differences.push("444 closes the connection: its text left out".to_owned());
            }
            (None, None)
        }
        (_, text) => (text, None),
    };
    content.ret = Some(Ret { status, status_map: None, body, location });
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}

/// Regexes every path matches, and what their first capture holds.
const EVERY_PATH: [(&str, Capture); 8] = [
    ("^", Capture::None),
    ("^.*$", Capture::None),
    (".*", Capture::None),
    ("^(.*)$", Capture::Whole),
    ("^(.*)", Capture::Whole),
    ("(.*)", Capture::Whole),
    ("^/(.*)$", Capture::AfterSlash),
    ("^/(.*)", Capture::AfterSlash),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Capture {
    None,
    /// `$1` is the path.
    Whole,
    /// `$1` is the path without its first `/`.
    AfterSlash,
}

/// `rewrite EVERY_PATH URL redirect|permanent` (or to an absolute URL): a `return`.
fn redirect(d: &Directive, content: &mut Content<'_>) -> Option<Status> {
    let (regex, replacement, flag) = match d.args.as_slice() {
        [r, p] => (r, p, ""),
        [r, p, f] => (r, p, f.as_str()),
        _ => return Some(Status::Unsupported("`rewrite` takes a regex, a replacement and a flag".to_owned())),
    };
    let absolute = replacement.starts_with("http://") || replacement.starts_with("https://") || replacement.starts_with("$scheme");
    if !(absolute || matches!(flag, "redirect" | "permanent")) {
        return None;
    }
    let Some((_, capture)) = EVERY_PATH.iter().find(|(r, _)| r == regex) else {
        return Some(Status::Unsupported("a redirect of some paths: write a `~ regex` location with `return = { status = 301, location = \"…$1\" }`".to_owned()));
    };
    let status = if flag == "permanent" { 301 } else { 302 };
    let (location, difference) = match (capture, replacement.contains("$1")) {
        (Capture::Whole, true) => (replacement.replace("$1", "$request_uri"), "written with $request_uri: the path as the client sent it, with its query (nginx writes the decoded path, encoded again, then the query)"),
        (Capture::AfterSlash, true) if replacement.contains("/$1") => (replacement.replace("/$1", "$request_uri"), "written with $request_uri: the path as the client sent it, with its query (nginx writes the decoded path, encoded again, then the query)"),
        (_, true) => return Some(Status::Unsupported("the capture cannot be written: use `$request_uri` in a `return`".to_owned())),
        (_, false) if replacement.ends_with('?') => (replacement.trim_end_matches('?').to_owned(), ""),
        (_, false) => (replacement.clone(), "the client's query is not appended (nginx appends ?ARGS unless the replacement ends with `?`)"),
    };
    if let Err(why) = values::vars(&location) {
        return Some(Status::Unsupported(why));
    }
    content.ret = Some(Ret { status, status_map: None, body: None, location: Some(location) });
    let mut differences: Vec<&str> = vec![difference];
    if !absolute {
        differences.push("`Location` is sent as written (nginx makes a relative one absolute, with the server's name and port)");
    }
    differences.retain(|d| !d.is_empty());
    Some(match differences.is_empty() {
        true => Status::Exact(Some(format!("a `return` {status}"))),
        false => Status::Approx(format!("a `return` {status}, {}", differences.join("; "))),
    })
}

/// `rewrite ^/prefix/(.*)$ /new/$1 break` in `location /prefix/`: `/new/` as the
/// upstream path (the location's prefix replaced, as `upstream_path` does).
fn prefix_break(d: &Directive, pattern: &Pattern) -> Option<String> {
    let [regex, replacement, flag] = d.args.as_slice() else {
        return None;
    };
    if flag != "break" || !matches!(pattern.kind, Kind::Prefix | Kind::PrefixStop) {
        return None;
    }
    let inner = regex.strip_prefix('^')?;
    let inner = inner.strip_suffix("(.*)$").or_else(|| inner.strip_suffix("(.*)"))?;
    let literal = !inner.contains(['\\', '.', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '$', '^']);
    let new = replacement.strip_suffix("$1")?;
    let fits = literal && inner == pattern.path && new.starts_with('/') && !new.contains('$');
    fits.then(|| new.to_owned())
}

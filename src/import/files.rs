//! Files and compression: `root`, `alias`, `index`, `try_files`, `error_page`,
//! `expires`, `gzip*`, `gzip_static`, ngx_brotli's `brotli*`, `disable_symlinks` and
//! `sendfile`, as DESIGN §17's keys. Each level's settings are inherited as nginx
//! inherits them (`FileSettings::under`, in `file_settings.rs`) and written whole on each location
//! ([`write`]); a location with neither `proxy_pass` nor `return` but a `root` in effect
//! serves files ([`serve`]).
//!
//! Where tollgate answers otherwise on purpose, the report says so: dotfiles are not
//! served and symlinks leading out of the root are refused (unless `dotfiles` /
//! `follow_symlinks`), `.js` is `text/javascript`, `Vary: Accept-Encoding` is always sent
//! on compressible answers.

use std::collections::BTreeMap;

use tollgate_nginx::Directive;

use super::build::{loose, sp};
pub(super) use super::file_settings::FileSettings;
use super::level::{Context, Level};
use super::pattern::Kind;
use super::report::Status;
use super::state::Walk;
use super::values;
use crate::config::raw::{RawCompress, RawLocation};

/// What tollgate does otherwise than nginx wherever it serves files (ours).
const OURS: &str = "ours: dotfiles (`/.env`) are not served and symlinks leading out of the root are refused (`dotfiles = true`, `follow_symlinks = true` for nginx's way); `.js` is sent as text/javascript";

/// The directive `d` of this family, translated into `own`; `None` when it is not one.
pub(super) fn setting(
    w: &mut Walk<'_>,
    d: &Directive,
    own: &mut Level,
    context: Context,
) -> Option<Status> {
    let args = d.args.as_slice();
    let files = &mut own.files;
    Some(match (d.name.as_str(), args) {
        ("root", [path]) => {
            files.root = Some(path.clone());
            root_status(path)
        }
        ("alias", [path]) if context == Context::Location => {
            if matches!(w.location, Some((Kind::Regex | Kind::Exact, _))) {
                return Some(Status::Unsupported("`alias` on a regex or exact location: tollgate's replaces a prefix; write `root` (the whole URI is appended to it)".to_owned()));
            }
            files.alias = Some(path.clone());
            root_status(path)
        }
        ("index", names) if !names.is_empty() => index(files, names),
        ("try_files", items) if items.len() >= 2 => match context {
            Context::Location if matches!(w.location, Some((_, true))) => {
                Status::Unsupported("beside `proxy_pass` or `return`: tollgate tests files only in a location that serves them (`root`, and `try_files = [\"$uri\", \"@upstream\"]` with `upstream` to forward the rest)".to_owned())
            }
            Context::Location => try_files(w, files, items),
            _ => Status::Unsupported("`try_files` outside a location applies only where no location matches: write it on `location /`".to_owned()),
        },
        ("error_page", [_, _, ..]) => error_page(files, args),
        ("expires", _) => expires(files, args),
        ("proxy_intercept_errors", [flag]) if values::flag(flag).is_some() => {
            files.intercept_errors = values::flag(flag);
            Status::Exact(None)
        }
        ("disable_symlinks", [flag, ..]) => {
            files.follow_symlinks = Some(flag == "off");
            match flag.as_str() {
                "off" => Status::Exact(Some("written `follow_symlinks = true`".to_owned())),
                _ => Status::Approx("tollgate refuses only the symlinks that lead out of the root (and follows those inside it)".to_owned()),
            }
        }
        ("sendfile", [flag]) if values::flag(flag).is_some() => sendfile(w, flag == "on", context),
        (name, _) if name.starts_with("gzip") || name.starts_with("brotli") => compression(files, name, args),
        _ => return None,
    })
}

fn root_status(path: &str) -> Status {
    if path.contains('$') {
        return Status::Unsupported("a root with variables: tollgate's `root` is one directory".to_owned());
    }
    match path.starts_with('/') {
        true => Status::Approx(OURS.to_owned()),
        false => Status::Approx(format!("relative: nginx reads it from its prefix (`nginx -V`), tollgate from the gateway.toml's directory, so write it absolute; {OURS}")),
    }
}

fn index(files: &mut FileSettings, names: &[String]) -> Status {
    if names.iter().any(|n| n.contains(['/', '$'])) {
        return Status::Unsupported("an index with `/` or variables: tollgate's are file names".to_owned());
    }
    files.index = Some(names.to_vec());
    Status::Exact(None)
}

/// `try_files`: items as tollgate writes them; a last `@name` whose named location is a
/// single `proxy_pass` becomes `"@upstream"` (the location then forwards there).
fn try_files(w: &mut Walk<'_>, files: &mut FileSettings, items: &[String]) -> Status {
    let (last, tested) = items.split_last().unwrap_or((&items[0], &[]));
    for item in tested {
        if let Err(why) = values::vars(item) {
            return Status::Unsupported(why);
        }
    }
    let last = if let Some(name) = last.strip_prefix('@') {
        if single_pass(w, name).is_none() {
            return Status::Unsupported(format!("`@{name}` is translated only when the named location holds one `proxy_pass` (it becomes `\"@upstream\"`): write the fallback as a location of its own"));
        }
        w.named_used.push(name.to_owned());
        files.named = Some(name.to_owned());
        "@upstream".to_owned()
    } else if let Some(code) = last.strip_prefix('=') {
        match code.parse::<u16>() {
            Ok(200..=599) => last.clone(),
            _ => return Status::Unsupported(format!("`{last}`: tollgate's `try_files` ends with =200 to =599")),
        }
    } else {
        match values::vars(last) {
            Ok(_) if last.starts_with('/') || last.starts_with('$') => last.clone(),
            Ok(_) => return Status::Unsupported(format!("`{last}`: the last item is a URI starting with `/`")),
            Err(why) => return Status::Unsupported(why),
        }
    };
    let mut written: Vec<String> = tested.to_vec();
    written.push(last);
    files.try_files = Some(written);
    Status::Exact(None)
}

/// The `proxy_pass` of the server's named location `name`, when it holds that alone.
pub(super) fn single_pass(w: &Walk<'_>, name: &str) -> Option<Directive> {
    let (_, named) = w.named.iter().find(|(n, _)| n == name)?;
    match named.block.as_deref() {
        Some([only]) if only.name == "proxy_pass" => Some(only.clone()),
        _ => None,
    }
}

/// `error_page CODE… [=[CODE]] TARGET`; the level's lines add up.
fn error_page(files: &mut FileSettings, args: &[String]) -> Status {
    let Some((target, rest)) = args.split_last() else {
        return Status::Unsupported("`error_page` takes statuses and a page".to_owned());
    };
    let (codes, set) = match rest.split_last() {
        Some((last, codes)) if last.starts_with('=') => (codes, Some(last.as_str())),
        _ => (rest, None),
    };
    if target.starts_with('@') {
        return Status::Unsupported("a named location as the page: point it at a URI (`/50x.html`) served by a location".to_owned());
    }
    if codes.is_empty() || codes.iter().any(|c| !matches!(c.parse::<u16>(), Ok(300..=599))) {
        return Status::Unsupported("statuses are 300 to 599".to_owned());
    }
    let value = match set {
        Some(set) => format!("{set} {target}"),
        None => target.clone(),
    };
    if let Err(why) = crate::config::error_pages::page(&value) {
        return Status::Unsupported(why);
    }
    let pages = files.error_pages.get_or_insert_with(Vec::new);
    let listed = |code: &String| pages.iter().any(|(key, _)| key.split(' ').any(|k| k == code));
    let fresh: Vec<String> = codes.iter().filter(|c| !listed(c)).cloned().collect();
    if fresh.len() < codes.len() {
        if fresh.is_empty() {
            return Status::Approx("every status has a page already at this level: nginx uses the first".to_owned());
        }
        pages.push((fresh.join(" "), value));
        return Status::Approx("some statuses have a page already at this level: nginx uses the first".to_owned());
    }
    pages.push((fresh.join(" "), value));
    Status::Exact(None)
}

fn expires(files: &mut FileSettings, args: &[String]) -> Status {
    let text = args.join(" ");
    if args.first().is_some_and(|a| a == "modified") || text.contains('@') {
        return Status::Unsupported("`modified` and `@time` have no equivalent: a time from now (`30d`), `epoch` or `max`".to_owned());
    }
    let value = sp(toml::Value::String(text.clone()));
    match crate::config::files::expires(&value) {
        Ok(parsed) => {
            files.expires = Some(parsed.map(|_| text));
            Status::Exact(None)
        }
        Err(why) => Status::Unsupported(why),
    }
}

fn sendfile(w: &mut Walk<'_>, on: bool, context: Context) -> Status {
    let first = *w.build.sendfile.get_or_insert(on);
    if first != on {
        return Status::Approx(format!("tollgate has one `sendfile` for the whole gateway ([server]): {}, the first one met", if first { "on" } else { "off" }));
    }
    match context {
        Context::Http => Status::Exact(None),
        _ => Status::Approx("tollgate has one `sendfile` for the whole gateway ([server])".to_owned()),
    }
}

/// `gzip*` and ngx_brotli's `brotli*`.
fn compression(files: &mut FileSettings, name: &str, args: &[String]) -> Status {
    let flag = args.first().and_then(|a| values::flag(a));
    let types = || args.iter().filter(|t| t.as_str() != "*").cloned().collect::<Vec<_>>();
    match (name, flag) {
        ("gzip", Some(on)) => {
            files.gzip = Some(on);
            match on {
                true => Status::Approx("`Vary: Accept-Encoding` is always sent on compressible answers (nginx's `gzip_vary` is off by default); requests with `Via` are compressed too (`gzip_proxied`); level 1, nginx's default".to_owned()),
                false => Status::Exact(None),
            }
        }
        ("brotli", Some(on)) => {
            files.brotli = Some(on);
            if !on {
                return Status::Exact(None);
            }
            Status::Approx("`br` added to `compress.encodings`, at tollgate's fixed quality 4 (ngx_brotli's default is 6)".to_owned())
        }
        ("gzip_static", _) | ("brotli_static", _) => {
            let on = args.first().is_some_and(|a| a == "on" || a == "always");
            match name {
                "gzip_static" => files.gzip_static = Some(on),
                _ => files.brotli_static = Some(on),
            }
            match args.first().map(String::as_str) {
                Some("always") => Status::Approx("`always`: tollgate serves the compressed file only to clients that accept it".to_owned()),
                _ => Status::Exact(None),
            }
        }
        ("gzip_types" | "brotli_types", _) => {
            let star = args.iter().any(|t| t == "*");
            match name {
                "gzip_types" => files.gzip_types = Some(types()),
                _ => files.brotli_types = Some(types()),
            }
            match star {
                true => Status::Approx("`*`: tollgate lists the types it compresses; text/html and the others given are written".to_owned()),
                false => Status::Exact(Some("text/html is written too, as nginx always includes it".to_owned())),
            }
        }
        ("gzip_min_length" | "brotli_min_length", _) => {
            let size = args.first().map(String::as_str).unwrap_or_default();
            match values::size(size) {
                Some(size) if args.len() == 1 => {
                    files.gzip_min_length = Some(size);
                    Status::Exact(None)
                }
                _ => Status::Unsupported(format!("`{size}` is not a size")),
            }
        }
        ("gzip_vary", Some(true)) => Status::Exact(None),
        ("gzip_vary", _) => Status::Approx("tollgate always sends `Vary: Accept-Encoding` on compressible answers".to_owned()),
        ("gzip_proxied", _) if args.iter().any(|a| a == "any") => Status::Exact(None),
        ("gzip_proxied", _) => Status::Approx("tollgate compresses answers to requests with `Via` too".to_owned()),
        ("gzip_comp_level" | "brotli_comp_level", _) => Status::Approx("levels are fixed: gzip 1 (nginx's default), brotli 4, zstd 3".to_owned()),
        ("gzip_http_version", _) if args == ["1.1"] => Status::Exact(None),
        ("gzip_http_version", _) => Status::Approx("tollgate compresses for HTTP/1.1 clients and later only (nginx's default, `1.1`)".to_owned()),
        ("gzip_buffers" | "brotli_buffers" | "brotli_window", _) => Status::Approx("tollgate's own buffers and window".to_owned()),
        ("gzip_disable", _) => Status::Unsupported("no per-User-Agent switch: compression follows `Accept-Encoding` alone".to_owned()),
        _ => Status::Unsupported(format!("`{name}` does not take these arguments")),
    }
}

/// Whether `level` has a directory to serve files from.
pub(super) fn serves(level: &Level) -> bool {
    level.files.root.is_some() || level.files.alias.is_some()
}

/// The files keys of a location with neither `proxy_pass` nor `return`, whose `level`
/// has a `root` or `alias`. Returns the named location's `proxy_pass` when `try_files`
/// ends with it (the location then forwards there too).
pub(super) fn serve(w: &Walk<'_>, raw: &mut RawLocation, level: &Level) -> Option<Directive> {
    let files = &level.files;
    match &files.alias {
        Some(alias) => raw.alias = Some(sp(alias.clone())),
        None => raw.root = files.root.clone().map(sp),
    }
    let list = |items: &Vec<String>| sp(items.iter().cloned().map(sp).collect());
    raw.index = files.index.as_ref().map(list);
    raw.try_files = files.try_files.as_ref().map(list);
    let mut precompressed = Vec::new();
    if files.brotli_static == Some(true) {
        precompressed.push("br".to_owned());
    }
    if files.gzip_static == Some(true) {
        precompressed.push("gzip".to_owned());
    }
    raw.precompressed = (!precompressed.is_empty()).then(|| list(&precompressed));
    raw.follow_symlinks = files.follow_symlinks.filter(|on| *on).map(sp);
    files.named.as_ref().and_then(|name| single_pass(w, name))
}

/// What every location gets from `level`: `error_pages`, `expires`, `compress`, and
/// `intercept_errors` where it forwards.
pub(super) fn write(raw: &mut RawLocation, level: &Level, forwards: bool) {
    let files = &level.files;
    if let Some(pages) = &files.error_pages {
        let table: BTreeMap<_, _> = pages
            .iter()
            .map(|(key, value)| (sp(key.clone()), sp(value.clone())))
            .collect();
        raw.error_pages = Some(sp(table));
    }
    raw.expires = files.expires.clone().flatten().map(|e| loose(&e));
    if forwards && files.intercept_errors == Some(true) && files.error_pages.is_some() {
        raw.intercept_errors = Some(sp(true));
    }
    raw.compress = compress(files).map(sp);
}

/// `compress` from `gzip on` / `brotli on`: nginx's types (text/html always among
/// them) and `gzip_min_length` (20 by default).
fn compress(files: &FileSettings) -> Option<RawCompress> {
    let mut encodings = Vec::new();
    if files.brotli == Some(true) {
        encodings.push("br".to_owned());
    }
    if files.gzip == Some(true) {
        encodings.push("gzip".to_owned());
    }
    if encodings.is_empty() {
        return None;
    }
    let mut types = vec!["text/html".to_owned()];
    let listed = files.gzip_types.iter().chain(files.brotli_types.iter()).flatten();
    for t in listed {
        let t = t.to_ascii_lowercase();
        if !types.contains(&t) {
            types.push(t);
        }
    }
    let list = |items: Vec<String>| Some(sp(items.into_iter().map(sp).collect()));
    Some(RawCompress {
        encodings: list(encodings),
        types: list(types),
        min_length: Some(loose(files.gzip_min_length.as_deref().unwrap_or("20"))),
    })
}

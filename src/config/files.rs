//! Locations that serve files (DESIGN §17, nginx `root`, `alias`, `index`, `try_files`,
//! `error_page`, `expires`, `gzip_static`): the validated model.
//!
//! The checks (`files`, `expires`) turn a location's keys into these: `root` and `alias`
//! exclude each other, `alias` needs a prefix location, the keys that say how files are
//! served need one of them, and `try_files` ends with what happens when nothing exists.
//! `error_pages` are read in `error_pages.rs`.
// The run-time side (proxy/files, proxy/compress) reads these; until it does, issue 36
// wires them in.

use std::path::{Path, PathBuf};

use http::{HeaderValue, StatusCode};
use serde_spanned::Spanned;

use super::compress::{self, Encoding};
use super::diag::Diagnostics;
use super::maps::Maps;
use super::raw::{Loose, RawLocation};
use super::var_text::var_text;
use super::{Pattern, VarText};

/// What a location with `root` or `alias` serves, and how.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub base: Base,
    /// `index`: the names tried, in order, for a URI ending `/` (default `index.html`).
    pub index: Vec<String>,
    pub try_files: Option<TryFiles>,
    /// `precompressed`: the sidecars (`FILE.br`, `.zst`, `.gz`) looked for, in the order
    /// that breaks a tie between codings the client accepts equally.
    pub precompressed: Vec<Encoding>,
    /// `dotfiles = true`: a path with a segment starting `.` may be served.
    pub dotfiles: bool,
    /// `follow_symlinks = true`: a symlink leading out of the root is followed.
    pub follow_symlinks: bool,
}

/// Where a URI's file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Base {
    /// `root`: the directory the whole URI is appended to.
    Root(PathBuf),
    /// `alias` on a prefix location: `prefix` (the location's) is replaced by `dir`.
    Alias { prefix: String, dir: PathBuf },
}

/// `try_files`: the items tested in order, then what happens when none exists.
#[derive(Debug, Clone)]
pub(crate) struct TryFiles {
    pub tries: Vec<Try>,
    pub last: Last,
}

/// One tested item of `try_files` (`"$uri"`, `"$uri/"`).
#[derive(Debug, Clone)]
pub(crate) struct Try {
    /// The URI tested, without the trailing `/` of a directory test.
    pub text: VarText,
    /// Written with a trailing `/`: only a directory matches.
    pub dir: bool,
}

/// The last item of `try_files`, used when no tested item exists.
#[derive(Debug, Clone)]
pub(crate) enum Last {
    /// A URI: the request is redirected internally (the location is chosen again).
    Uri(VarText),
    /// `"=404"`: answered with this status (its `error_pages` apply).
    Status(StatusCode),
    /// `"@upstream"`: forwarded to the location's `upstream`.
    Upstream,
}

/// `expires`: what `Expires` and `Cache-Control` say on the location's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expires {
    /// This many seconds from now; negative: `Cache-Control: no-cache`.
    After(i64),
    /// `"epoch"`: already expired (`no-cache`).
    Epoch,
    /// `"max"`: the year 2037, ten years of `max-age`.
    Max,
}

/// `error_pages`: which answers are replaced by a page, by status.
#[derive(Debug, Clone, Default)]
pub(crate) struct ErrorPages {
    /// One entry per status, by status.
    pub pages: Vec<(StatusCode, ErrorPage)>,
}

impl ErrorPages {
    /// The page for an answer with `status`, if one is configured.
    pub(crate) fn get(&self, status: StatusCode) -> Option<&ErrorPage> {
        self.pages
            .iter()
            .find(|(listed, _)| *listed == status)
            .map(|(_, page)| page)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
}

/// One `error_pages` value: `"/404.html"`, `"=200 /index.html"`, `"= /x"` or a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorPage {
    pub target: PageTarget,
    pub status: PageStatus,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PageTarget {
    /// A URI (with an optional `?query`) the request is redirected to internally.
    Uri(String),
    /// An absolute URL: the client is redirected (302 unless `=301`… says otherwise).
    Url(HeaderValue),
}

/// The status the page is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageStatus {
    /// The answer's own status (`"/404.html"`).
    Keep,
    /// `"=200 /x"`.
    Set(StatusCode),
    /// `"= /x"`: whatever the page's own answer has.
    Target,
}

/// `index` when left out (nginx's).
const INDEX: &str = "index.html";

/// The keys that say how files are served: written without `root` or `alias`, they
/// would do nothing.
const FILE_KEYS: [&str; 5] = [
    "index",
    "try_files",
    "precompressed",
    "follow_symlinks",
    "dotfiles",
];

/// The location's `root` or `alias` and the keys that go with them; `None` inside when
/// it has neither (then none of those keys may be written). `pattern` is the location's
/// (`None` when it is itself wrong); `base` is the directory relative paths start from;
/// `upstream` whether the location names one (a `try_files` ending `"@upstream"` needs it).
pub(super) fn files(
    location: &RawLocation,
    pattern: Option<&Pattern>,
    base: &Path,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Files>> {
    let base = match (&location.root, &location.alias) {
        (None, None) => return no_file_keys(location, diag).then_some(None),
        (Some(_), Some(alias)) => {
            diag.error(alias.span(), "a location takes `root` or `alias`, not both");
            None
        }
        (Some(root), None) => directory(root, "root", base, diag).map(Base::Root),
        (None, Some(alias)) => aliased(alias, pattern, base, diag),
    };
    let index = match &location.index {
        None => Some(vec![INDEX.to_owned()]),
        Some(list) => index(list, diag),
    };
    let try_files = match &location.try_files {
        None => Some(None),
        Some(list) => {
            let upstream = location.upstream.is_some();
            try_files(list, pattern, upstream, maps, diag).map(Some)
        }
    };
    let precompressed = match &location.precompressed {
        None => Some(Vec::new()),
        Some(list) => compress::encodings(list, "precompressed", diag),
    };
    let flag = |key: &Option<Spanned<bool>>| key.as_ref().is_some_and(|b| *b.get_ref());
    Some(Some(Files {
        base: base?,
        index: index?,
        try_files: try_files?,
        precompressed: precompressed?,
        dotfiles: flag(&location.dotfiles),
        follow_symlinks: flag(&location.follow_symlinks),
    }))
}

/// Without `root` or `alias`: whether none of [`FILE_KEYS`] is written (each one is
/// reported).
fn no_file_keys(location: &RawLocation, diag: &mut Diagnostics<'_>) -> bool {
    let spans = [
        location.index.as_ref().map(Spanned::span),
        location.try_files.as_ref().map(Spanned::span),
        location.precompressed.as_ref().map(Spanned::span),
        location.follow_symlinks.as_ref().map(Spanned::span),
        location.dotfiles.as_ref().map(Spanned::span),
    ];
    let mut none = true;
    for (key, span) in FILE_KEYS.iter().zip(spans) {
        if let Some(span) = span {
            diag.error(span, format!("`{key}` needs `root` or `alias` on this location"));
            none = false;
        }
    }
    none
}

/// A `root` or `alias` directory, relative to `base` unless absolute. Noted for
/// `tollgate -t`, which warns when it is not a readable directory.
fn directory(
    written: &Spanned<String>,
    key: &str,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<PathBuf> {
    let text = written.get_ref();
    if text.is_empty() {
        diag.error(written.span(), format!("`{key}` must name a directory"));
        return None;
    }
    if text.contains('\0') {
        diag.error(written.span(), format!("`{key}` must not contain a NUL byte"));
        return None;
    }
    let path = base.join(text);
    diag.directory(&written.span(), path.clone());
    Some(path)
}

/// `alias`: only on a prefix location (plain or `^~`), whose prefix it replaces.
fn aliased(
    alias: &Spanned<String>,
    pattern: Option<&Pattern>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Base> {
    let prefix = match pattern? {
        Pattern::Prefix(prefix) | Pattern::PriorityPrefix(prefix) => prefix.clone(),
        Pattern::Exact(_) | Pattern::Regex { .. } => {
            let message = "`alias` replaces a location's prefix: it needs a prefix location \
                           (\"/path/\" or \"^~ /path/\"); use `root` here";
            diag.error(alias.span(), message);
            return None;
        }
    };
    let dir = directory(alias, "alias", base, diag)?;
    Some(Base::Alias { prefix, dir })
}

/// `index`: file names, tried in order.
fn index(list: &Spanned<Vec<Spanned<String>>>, diag: &mut Diagnostics<'_>) -> Option<Vec<String>> {
    let mut valid = true;
    let mut names = Vec::new();
    for name in list.get_ref() {
        let text = name.get_ref();
        if text.is_empty() || text.contains(['/', '\0']) || text == "." || text == ".." {
            let message = format!(r#"invalid index "{text}": expected a file name without "/""#);
            diag.error(name.span(), message);
            valid = false;
        } else {
            names.push(text.clone());
        }
    }
    valid.then_some(names)
}

/// `try_files`: at least one item tested, then the last (never tested): a URI, `"=CODE"`
/// or `"@upstream"`.
fn try_files(
    list: &Spanned<Vec<Spanned<String>>>,
    pattern: Option<&Pattern>,
    upstream: bool,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<TryFiles> {
    let Some((last, tested)) = list.get_ref().split_last().filter(|(_, t)| !t.is_empty()) else {
        let message = "`try_files` needs at least two items: the files to test, then what answers when none exists (a URI, \"=404\" or \"@upstream\")";
        diag.error(list.span(), message);
        return None;
    };
    let mut valid = true;
    let mut tries = Vec::new();
    for item in tested {
        match tried(item, pattern, maps, diag) {
            Some(one) => tries.push(one),
            None => valid = false,
        }
    }
    let last = last_item(last, pattern, upstream, maps, diag);
    let last = last?;
    valid.then_some(TryFiles { tries, last })
}

/// A tested item: a URI with variables; a trailing `/` tests for a directory.
fn tried(
    item: &Spanned<String>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Try> {
    let text = item.get_ref();
    if text.starts_with(['=', '@']) {
        let message = format!(r#""{text}" can only be the last item of `try_files`"#);
        diag.error(item.span(), message);
        return None;
    }
    let (text, dir) = match text.strip_suffix('/') {
        Some(stripped) if !stripped.is_empty() => (stripped, true),
        _ => (text.as_str(), false),
    };
    let stripped = Spanned::new(item.span(), text.to_owned());
    let text = var_text(&stripped, pattern, maps, diag)?;
    Some(Try { text, dir })
}

fn last_item(
    item: &Spanned<String>,
    pattern: Option<&Pattern>,
    upstream: bool,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Last> {
    let text = item.get_ref();
    if let Some(code) = text.strip_prefix('=') {
        let status = code
            .parse::<u16>()
            .ok()
            .filter(|code| (200..=599).contains(code))
            .and_then(|code| StatusCode::from_u16(code).ok());
        if status.is_none() {
            let message = format!(r#"invalid status "{text}" in `try_files`: expected "=200" to "=599""#);
            diag.error(item.span(), message);
        }
        return status.map(Last::Status);
    }
    if text == "@upstream" {
        if !upstream {
            let message = r#""@upstream" forwards to this location's `upstream`: it has none"#;
            diag.error(item.span(), message);
            return None;
        }
        return Some(Last::Upstream);
    }
    if text.starts_with('@') {
        let message = format!(
            r#"unknown target "{text}": the last item of `try_files` may be "@upstream" (this location's upstream), a URI or "=404""#
        );
        diag.error(item.span(), message);
        return None;
    }
    if !text.starts_with('/') && !text.starts_with('$') {
        let message = format!(
            r#"invalid last item "{text}" of `try_files`: expected a URI starting with "/", "=404" or "@upstream""#
        );
        diag.error(item.span(), message);
        return None;
    }
    var_text(item, pattern, maps, diag).map(Last::Uri)
}

const EXPIRES_HINT: &str = r#"expected a time such as "30d" or "1h 30m" (y, M, w, d, h, m, s), "-1", "epoch", "max" or "off""#;

/// `expires`: `None` for `"off"`.
pub(crate) fn expires(value: &Loose) -> Result<Option<Expires>, String> {
    let invalid = || format!("invalid expires {}: {EXPIRES_HINT}", value.get_ref());
    let text = value.get_ref().as_str().ok_or_else(invalid)?.trim();
    match text {
        "off" => return Ok(None),
        "epoch" => return Ok(Some(Expires::Epoch)),
        "max" => return Ok(Some(Expires::Max)),
        _ => {}
    }
    if text.starts_with("modified") || text.starts_with('@') {
        let message = format!(
            r#"invalid expires "{text}": "modified" and "@time" (nginx) are not supported; {EXPIRES_HINT}"#
        );
        return Err(message);
    }
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let secs = nginx_seconds(rest).ok_or_else(invalid)?;
    Ok(Some(Expires::After(if negative { -secs } else { secs })))
}

/// nginx's time syntax in seconds (`ngx_parse_time`): numbers with units from the largest
/// down, each unit once, spaces between allowed; a bare number is seconds and comes last.
fn nginx_seconds(text: &str) -> Option<i64> {
    const UNITS: [(char, i64); 7] = [
        ('y', 365 * 86_400),
        ('M', 30 * 86_400),
        ('w', 7 * 86_400),
        ('d', 86_400),
        ('h', 3_600),
        ('m', 60),
        ('s', 1),
    ];
    let mut total: i64 = 0;
    let mut next_unit = 0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 || next_unit > UNITS.len() {
            return None;
        }
        let number: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.chars().next().filter(|c| !c.is_whitespace());
        let scale = match unit {
            None => {
                next_unit = UNITS.len() + 1;
                1
            }
            Some(unit) => {
                let at = UNITS.iter().position(|(u, _)| *u == unit)?;
                if at < next_unit {
                    return None;
                }
                next_unit = at + 1;
                rest = &rest[unit.len_utf8()..];
                UNITS[at].1
            }
        };
        total = total.checked_add(number.checked_mul(scale)?)?;
        rest = rest.trim_start();
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loose(text: &str) -> Loose {
        Spanned::new(0..0, toml::Value::String(text.to_owned()))
    }

    #[test]
    fn expires_reads_nginx_times_and_words() {
        let after = |text: &str| expires(&loose(text)).unwrap();
        assert_eq!(after("30d"), Some(Expires::After(30 * 86_400)));
        assert_eq!(after("1h 30m"), Some(Expires::After(5_400)));
        assert_eq!(after("1h30m"), Some(Expires::After(5_400)));
        assert_eq!(after("90"), Some(Expires::After(90)));
        assert_eq!(after("-1"), Some(Expires::After(-1)));
        assert_eq!(after("0"), Some(Expires::After(0)));
        assert_eq!(after("1y"), Some(Expires::After(365 * 86_400)));
        assert_eq!(after("2M"), Some(Expires::After(60 * 86_400)));
        assert_eq!(after("epoch"), Some(Expires::Epoch));
        assert_eq!(after("max"), Some(Expires::Max));
        assert_eq!(after("off"), None);
    }

    #[test]
    fn expires_refuses_what_nginx_refuses() {
        for bad in ["", "30x", "1m 1h", "1d 1d", "5 1s", "d", "1ms", "soon", "- 1"] {
            let err = expires(&loose(bad)).unwrap_err();
            assert!(err.contains(EXPIRES_HINT), "{bad}: {err}");
        }
        let err = expires(&loose("modified 1h")).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
        let number = Spanned::new(0..0, toml::Value::Integer(30));
        assert!(expires(&number).is_err());
    }
}

//! Locations that serve files (DESIGN §17, nginx `root`, `alias`, `index`, `try_files`,
//! `error_page`, `expires`, `gzip_static`): the validated model.
// Interfaces only until issue 36 wires them in.
#![allow(dead_code)]

use std::path::PathBuf;

use http::{HeaderValue, StatusCode};

use super::compress::Encoding;
use super::VarText;

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
    /// One entry per status, in file order.
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

//! Serving files (`root`, `alias`, `index`, `try_files`, `precompressed`; DESIGN §17): a
//! request's URI to a file under the location's directory, never outside it, answered
//! as nginx's try_files, index, gzip_static and static modules answer, in that order.
//!
//! Layout: `resolve` (URI → relative path, pure), `open` (the kernel keeps it beneath
//! the directory), `tries` (`try_files` and `index`), `precompressed`, `answer` (the
//! validators, `conditional`, `range`, `multipart` and the body), `mime`, `etag`,
//! `expires`. Everything runs synchronously on the worker, as nginx without `aio`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{HOST, LOCATION, VARY};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Version};

use super::{response, upstream_urls};
use crate::config;
use crate::routing;
use crate::upstream::ResponseBody;
use crate::vars;
use crate::wire::body::file::Permit;

mod answer;
mod conditional;
mod etag;
mod expires;
mod mime;
mod multipart;
mod open;
mod precompressed;
mod range;
mod resolve;
mod tries;

use open::{Directory, Failure, Kind, Root};
use resolve::Refused;

/// A location's files, ready to serve.
pub(crate) struct Files {
    config: config::Files,
    open: OpenFiles,
    /// The directory of `root` or `alias`, its handle kept a second.
    dir: Directory,
}

impl Files {
    /// `open` bounds the files open at once across every location.
    pub(crate) fn new(config: &config::Files, open: OpenFiles) -> Files {
        Files {
            config: config.clone(),
            open,
            dir: Directory::default(),
        }
    }
}

/// The bound on files held open by answers under way, shared by every location of every
/// generation (the snapshot keeps it across reloads). A file counts from the answer
/// being made until its body is dropped (sent, or the client gone); past the limit the
/// answer is a 503, so a flood of slow readers cannot take every descriptor.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenFiles {
    limit: usize,
    open: Arc<AtomicUsize>,
}

impl OpenFiles {
    pub(crate) fn new(limit: usize) -> OpenFiles {
        OpenFiles {
            limit,
            open: Arc::default(),
        }
    }

    /// A slot for one more open file, if the bound allows it.
    fn take(&self) -> Option<Permit> {
        Permit::take(&self.open, self.limit)
    }

    /// The files answers hold open now.
    pub(crate) fn count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// The request, as serving a file reads it.
pub(crate) struct Ask<'a> {
    pub method: &'a Method,
    pub version: Version,
    pub headers: &'a HeaderMap,
    /// `$uri`: the normalized path (after an internal redirect, the new one).
    pub path: &'a [u8],
    /// The target's path as the client sent it; `None` after an internal redirect.
    pub sent: Option<&'a str>,
    /// `$args`: the query (after an internal redirect, the new one).
    pub query: Option<&'a str>,
    /// The location's `compress`: an answer it will compress is sent whole, its `Range`
    /// ignored (nginx's gzip filter runs before its range filter).
    pub compress: Option<&'a crate::config::Compress>,
    /// The variables `try_files` items are filled in from; its scheme, host and port
    /// also make the `Location` of a directory's 301 absolute.
    pub vars: &'a vars::Request<'a>,
}

/// What serving a request came to.
pub(crate) enum Served {
    /// The answer: the file, a 304, 206, 301 to the directory, or an error status
    /// (which `error_pages` may replace).
    Answer(Response<ResponseBody>),
    /// An internal redirect (`index`, the last item of `try_files`): the location is
    /// chosen again for `path`, with `query` as the new `$args`.
    Redirect { path: Vec<u8>, query: Option<String> },
    /// `try_files` ended with `"@upstream"`: forward to the location's upstream.
    Upstream,
}

/// Serves `ask` from `files`. A path sent with a disguised separator (`%2F`, `%5C`)
/// names no file: a 404, or with `try_files` its last item (an app's route still
/// reaches its `index.html`).
pub(crate) fn serve(files: &Files, ask: &Ask<'_>) -> Served {
    let config = &files.config;
    let sent = ask.sent.map_or(Ok(()), resolve::check_sent);
    match (sent, &config.try_files) {
        (Ok(()), _) => {}
        (Err(Refused::Hidden), Some(try_files)) => return tries::last(ask, &try_files.last),
        (Err(refused), _) => return error(refused.status()),
    }
    let root = (files.dir).open(base_dir(&config.base), config.follow_symlinks, crate::clock::now());
    let mut uri = Cow::Borrowed(ask.path);
    if let Some(try_files) = &config.try_files {
        match tries::first(config, ask, &root, try_files) {
            Some(hit) => uri = Cow::Owned(hit),
            None => return tries::last(ask, &try_files.last),
        }
    }
    if !matches!(*ask.method, Method::GET | Method::HEAD | Method::POST) {
        return not_allowed();
    }
    if uri.ends_with(b"/") {
        return tries::index(config, ask, &root, &uri);
    }
    static_file(files, ask, &root, &uri)
}

/// A URI not ending `/`: its precompressed sidecar, the file, or the 301 to the
/// directory.
fn static_file(files: &Files, ask: &Ask<'_>, root: &Result<Root, Failure>, uri: &[u8]) -> Served {
    let config = &files.config;
    let rel = match resolve::relative(&config.base, uri, config.dotfiles) {
        Ok(rel) => rel,
        Err(refused) => return error(refused.status()),
    };
    let root = match root {
        Ok(root) => root,
        Err(failure) => return error(failure.status()),
    };
    let head_or_get = matches!(*ask.method, Method::GET | Method::HEAD);
    let mut vary = false;
    if head_or_get && !config.precompressed.is_empty() {
        let sidecars = precompressed::find(root, rel, &config.precompressed, ask);
        vary = sidecars.any;
        if let Some((coding, opened)) = sidecars.chosen {
            return varied(answer::file(&files.open, ask, uri, opened, Some(coding)), vary);
        }
    }
    let answer = match root.open_file(rel) {
        Err(failure) => response::error(failure.status()),
        Ok(opened) => match opened.meta.kind {
            Kind::Dir => slash_redirect(ask, uri),
            Kind::Other => response::error(StatusCode::NOT_FOUND),
            Kind::File if !head_or_get => not_allowed_answer(),
            Kind::File => answer::file(&files.open, ask, uri, opened, None),
        },
    };
    varied(answer, vary)
}

/// The directory a base's URIs are under.
fn base_dir(base: &config::files::Base) -> &std::path::Path {
    match base {
        config::files::Base::Root(dir) | config::files::Base::Alias { dir, .. } => dir,
    }
}

/// nginx's 301 for a directory asked without its `/`: to `uri/` with the query,
/// absolute (scheme, host, and a port unless the scheme's own).
fn slash_redirect(ask: &Ask<'_>, uri: &[u8]) -> Response<ResponseBody> {
    let vars = ask.vars;
    let host = vars.host.or_else(|| ask.headers.get(HOST).and_then(|h| h.to_str().ok()));
    let mut target = upstream_urls::origin(vars.https, host, vars.server_name, vars.server_port);
    target.push_str(&routing::slashed_target(uri, ask.query));
    let mut answer = response::error(StatusCode::MOVED_PERMANENTLY);
    if let Ok(target) = HeaderValue::from_str(&target) {
        answer.headers_mut().insert(LOCATION, target);
    }
    answer
}

/// `Vary: Accept-Encoding` on every answer for a file that has a sidecar.
fn varied(mut answer: Response<ResponseBody>, vary: bool) -> Served {
    if vary {
        (answer.headers_mut()).append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    Served::Answer(answer)
}

fn error(status: StatusCode) -> Served {
    Served::Answer(response::error(status))
}

fn not_allowed() -> Served {
    Served::Answer(not_allowed_answer())
}

/// 405, naming the methods a file takes (RFC 9110 §15.5.6; nginx names none).
fn not_allowed_answer() -> Response<ResponseBody> {
    let mut answer = response::error(StatusCode::METHOD_NOT_ALLOWED);
    (answer.headers_mut()).insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    answer
}

/// `expires` on an answer with `status` made at `now`: `Expires` and `Cache-Control`,
/// on the statuses nginx calls safe (200, 201, 204, 206, 301, 302, 303, 304, 307, 308).
pub(crate) fn expires(
    expires: config::Expires,
    status: StatusCode,
    headers: &mut HeaderMap,
    now: SystemTime,
) {
    expires::apply(expires, status, headers, now);
}

#[cfg(test)]
mod tests;

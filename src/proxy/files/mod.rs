//! Serving files (`root`, `alias`, `index`, `try_files`; DESIGN §17): a request's URI to
//! a file under the root, never outside it, answered as nginx's static module answers.
// Interfaces only: issue 36's file serving fills this in.
#![allow(dead_code)]

use std::time::SystemTime;

use http::{HeaderMap, Method, Response, StatusCode, Version};

use super::response;
use crate::config;
use crate::upstream::ResponseBody;
use crate::vars;

/// A location's files, ready to serve.
pub(crate) struct Files {
    config: config::Files,
    open: OpenFiles,
}

impl Files {
    /// `open` bounds the files open at once across every location.
    pub(crate) fn new(config: &config::Files, open: OpenFiles) -> Files {
        Files {
            config: config.clone(),
            open,
        }
    }
}

/// The bound on files held open by answers under way, shared by every location of every
/// generation (the snapshot keeps it across reloads).
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenFiles {
    limit: usize,
}

impl OpenFiles {
    pub(crate) fn new(limit: usize) -> OpenFiles {
        OpenFiles { limit }
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
    /// The variables `try_files` items are filled in from.
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

/// Serves `ask` from `files`.
pub(crate) fn serve(files: &Files, ask: &Ask<'_>) -> Served {
    let _ = (files, ask);
    Served::Answer(response::error(StatusCode::NOT_FOUND))
}

/// `expires` on an answer with `status` made at `now`: `Expires` and `Cache-Control`,
/// on the statuses nginx calls safe (200, 201, 204, 206, 301, 302, 303, 304, 307, 308).
pub(crate) fn expires(
    expires: config::Expires,
    status: StatusCode,
    headers: &mut HeaderMap,
    now: SystemTime,
) {
    let _ = (expires, status, headers, now);
}
